"""The strategies of the two loops' clause tests (ppo_update step by step; the RLOO loop with other EOS and PAD
ids), beside kata.testing.strategies, whose building blocks they use. Bounded like those: small batches, seeded
contents."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from kata.testing.strategies import (
    IGNORED_VALUES,
    clip_epsilons,
    float_arrays,
    float_dtypes,
    floats,
    seeds,
    sequence_batches,
)

# ---- 5. ppo_cartpole -------------------------------------------------------------------------------------------------

@st.composite
def update_settings(draw, max_size: int = 24) -> tuple:
    """``(seed, batch size, ppo_update's keyword arguments but generator)``: every hyperparameter over its valid
    range (clip ranges from 0.01 to 10, coefficients 0 drawn often, a gradient-norm bound that binds hard or never,
    target_kl absent or small enough to stop early), batches of 1 to ``max_size`` samples and minibatches of one
    sample up to more than the batch."""
    size = draw(st.integers(1, max_size))
    settings = dict(
        epochs=draw(st.integers(1, 3)),
        minibatch_size=draw(st.integers(1, size + 4)),
        clip_epsilon=draw(st.one_of(clip_epsilons, floats(0.5, 3.0))),
        value_clip_epsilon=draw(st.one_of(clip_epsilons, floats(0.5, 10.0))),
        value_coefficient=draw(st.one_of(st.just(0.0), floats(0.0, 2.0))),
        entropy_coefficient=draw(st.one_of(st.just(0.0), floats(0.0, 0.5))),
        max_grad_norm=draw(st.one_of(st.sampled_from([1e-3, 1e6]), floats(0.01, 10.0))),
        normalize_advantages=draw(st.booleans()),
        target_kl=draw(st.one_of(st.none(), floats(1e-4, 0.05))),
    )
    return draw(st.integers(0, 2**16)), size, settings

# ---- 8. rloo_loop ----------------------------------------------------------------------------------------------------

@st.composite
def token_id_pairs(draw) -> tuple[int, int]:
    """``(eos_token_id, pad_token_id)`` other than the task's defaults now and then: EOS any token the policy can
    propose, PAD a token it never proposes or EOS itself (pad equal to eos)."""
    from kata.rl.sequence_task import EOS_ID, GENERABLE_TOKEN_IDS, PAD_ID, VOCAB_SIZE

    eos = draw(st.sampled_from(GENERABLE_TOKEN_IDS))
    never = [token for token in range(VOCAB_SIZE) if token not in GENERABLE_TOKEN_IDS]
    pad = draw(st.sampled_from([eos, *never]))
    return draw(st.one_of(st.just((EOS_ID, PAD_ID)), st.just((eos, pad))))


@st.composite
def relabelled_batches(draw, **sizes) -> dict:
    """A :func:`sequence_batches` batch (without ``response_lengths``) whose EOS and PAD ids are a drawn pair
    (:func:`token_id_pairs`): the task's EOS swaps places with the new EOS id and its PAD with the new PAD id
    wherever they stand, so a response ends at the new EOS and is padded with the new PAD, and a token that was
    the new EOS becomes an ordinary one. With pad equal to eos, every PAD becomes that id: a response cut without
    an EOS then ends at its first padding token, read as its EOS."""
    from kata.rl.sequence_task import EOS_ID, PAD_ID, VOCAB_SIZE

    batch = draw(sequence_batches(**sizes))
    eos, pad = draw(token_id_pairs())
    table = np.arange(VOCAB_SIZE)
    table[[EOS_ID, eos]] = table[[eos, EOS_ID]]
    if pad != eos:
        table[[PAD_ID, pad]] = table[[pad, PAD_ID]]
    else:
        table[PAD_ID] = eos
    return dict(input_ids=table[batch["input_ids"]], prompt_lengths=batch["prompt_lengths"], eos_token_id=int(eos),
                pad_token_id=int(pad))


@st.composite
def loss_cases(draw) -> dict:
    """sequence_policy_loss over its domain: a relabelled batch, seeded logits in [-3, 3] (float32 or float64),
    old log-probs off the current ones by up to 1 in log space inside the response and any of IGNORED_VALUES
    outside it, advantages in [-2, 2], clip_epsilon from 0.01 to 3, any reduction, and every NumPy/tensor mixture
    of the arguments other than the logits (which carry the gradient)."""
    batch = draw(relabelled_batches())
    return dict(batch=batch, seed=draw(seeds), dtype=draw(float_dtypes),
                clip_epsilon=draw(st.one_of(clip_epsilons, floats(0.5, 3.0))),
                reduction=draw(st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_mean"])),
                tensors=draw(st.fixed_dictionaries({name: st.booleans() for name in (
                    "input_ids", "prompt_lengths", "old_log_probs", "advantages")})))


@st.composite
def iteration_settings(draw) -> dict:
    """One rloo_iteration over its domain: prompt-major groups (1-2 prompts, G = 2 or 3) of a relabelled batch,
    rewards in [0, 1] as float32 or float64, NumPy or tensor, 1 to 3 epochs, clip_epsilon from 0.01 to 3, any
    reduction, a seeded policy."""
    prompts, group_size = draw(st.integers(1, 2)), draw(st.integers(2, 3))
    batch = draw(relabelled_batches(min_rows=prompts * group_size, max_rows=prompts * group_size))
    return dict(batch=batch, seed=draw(st.integers(0, 2**16)), group_size=group_size,
                rewards=draw(float_arrays((prompts * group_size,), 0.0, 1.0)).astype(draw(float_dtypes)),
                rewards_as_tensor=draw(st.booleans()), ppo_epochs=draw(st.integers(1, 3)),
                clip_epsilon=draw(st.one_of(clip_epsilons, floats(0.5, 3.0))),
                reduction=draw(st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_mean"])))
