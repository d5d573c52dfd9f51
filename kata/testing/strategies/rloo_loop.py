"""8. rloo_loop: the strategies its tests draw from (the loop's clause tests: relabelled EOS and PAD ids, every
NumPy/tensor mixture), and its probes (the sampler with other ids and no generator, the loss and one iteration on
small seeded policies)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, Edge, in_float_dtypes
from kata.testing.drawing import PROBES_PER_FUNCTION, draw, drawn
from kata.testing.strategies import (
    IGNORED_VALUES,
    UPDATE_PROBES,
    Probes,
    clip_epsilons,
    float_arrays,
    float_dtypes,
    floats,
    seeds,
)

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def sequence_batches(
    draw, max_rows: int = 5, max_prompt_length: int = 3, max_response_length: int = 5, min_rows: int = 1
) -> dict:
    """Rows ``[BOS, prompt symbols | answer symbols, EOS?, PAD...]`` of the sequence task's vocabulary.

    Returns ``input_ids`` (int64 ``[B, T]``), ``prompt_lengths`` (int64 ``[B]``) and ``response_lengths`` (int64
    ``[B]``: response tokens, EOS included, so the response's label columns are ``P - 1 .. P - 2 + n``). Every row
    has at least one response token; some end with EOS, some are cut without one; padding lengths differ. The
    lengths are drawn (and shrunk) by Hypothesis; which symbols fill them comes from one drawn seed, which keeps
    each example cheap to generate.
    """
    from kata.rl.sequence_task import ANSWER_TOKEN_IDS, BOS_ID, EOS_ID, PAD_ID, PROMPT_TOKEN_IDS

    rows = draw(st.integers(min_rows, max_rows))
    prompt_lengths = np.array(draw(st.lists(st.integers(1, max_prompt_length), min_size=rows, max_size=rows)))
    symbols = np.array(draw(st.lists(st.integers(0, max_response_length - 1), min_size=rows, max_size=rows)))
    ended = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows))) | (symbols == 0)
    response_lengths = symbols + ended
    width = int((prompt_lengths + response_lengths).max()) + draw(st.integers(0, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    input_ids = np.full((rows, width), PAD_ID, dtype=np.int64)
    for i in range(rows):
        prompt = [BOS_ID, *rng.choice(PROMPT_TOKEN_IDS, size=prompt_lengths[i] - 1)]
        response = [*rng.choice(ANSWER_TOKEN_IDS, size=symbols[i])] + ([EOS_ID] if ended[i] else [])
        input_ids[i, : len(prompt) + len(response)] = prompt + response
    return dict(
        input_ids=input_ids,
        prompt_lengths=prompt_lengths.astype(np.int64),
        response_lengths=response_lengths.astype(np.int64),
    )


@st.composite
def prompt_major_rewards(draw, max_prompts: int = 4, max_group_size: int = 6, verifier_values: bool | None = None):
    """``(rewards [prompts * G], G)``: prompt-major groups, verifier-like values (k/3) or bounded floats."""
    prompts = draw(st.integers(1, max_prompts))
    group_size = draw(st.integers(2, max_group_size))
    discrete = draw(st.booleans()) if verifier_values is None else verifier_values
    elements = st.sampled_from([0.0, 1 / 3, 2 / 3, 1.0]) if discrete else floats(-10.0, 10.0)
    return draw(hnp.arrays(np.float64, (prompts * group_size,), elements=elements)), group_size


sampling_cases = st.fixed_dictionaries(
    dict(
        seed=st.integers(0, 2**16),
        rows=st.integers(1, 8),
        prompt_length=st.integers(1, 3),
        max_new_tokens=st.integers(1, 6),
        eos_bias=floats(-2.0, 3.0),
    )
)


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


@st.composite
def sequence_loss_cases(draw) -> dict:
    """Keyword arguments for sequence_policy_loss: a sequence batch, seeded logits ``[B, T, V]`` in [-3, 3], old
    log-probs ``[B, T - 1]`` in [-3, 0], advantages in [-2, 2], a clip range and a reduction."""
    from kata.rl.sequence_task import VOCAB_SIZE

    batch = draw(sequence_batches())
    rows, width = batch["input_ids"].shape
    random = np.random.default_rng(draw(seeds))
    return dict(
        logits=random.uniform(-3.0, 3.0, size=(rows, width, VOCAB_SIZE)),
        input_ids=batch["input_ids"],
        prompt_lengths=batch["prompt_lengths"],
        old_log_probs=random.uniform(-3.0, 0.0, size=(rows, width - 1)),
        advantages=random.uniform(-2.0, 2.0, size=rows),
        clip_epsilon=draw(clip_epsilons),
        reduction=draw(st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_mean"])),
    )


@st.composite
def iteration_cases(draw) -> dict:
    """One rloo_iteration on a seeded policy: prompt-major groups (1-2 prompts, G = 2 or 3) of sequence rows,
    rewards in [0, 1], 2 or 3 epochs, a reduction."""
    prompts, group_size = draw(st.integers(1, 2)), draw(st.integers(2, 3))
    batch = draw(sequence_batches(min_rows=prompts * group_size, max_rows=prompts * group_size))
    return dict(
        seed=draw(st.integers(0, 2**16)),
        input_ids=batch["input_ids"],
        prompt_lengths=batch["prompt_lengths"],
        rewards=draw(float_arrays((prompts * group_size,), 0.0, 1.0)),
        group_size=group_size,
        ppo_epochs=draw(st.integers(2, 3)),
        clip_epsilon=draw(clip_epsilons),
        reduction=draw(st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_mean"])),
    )

# ---- probes -------------------------------------------------------------------------------------------------------

def _sampling_cases() -> list[Any]:
    drawn = draw(sampling_cases, PROBES_PER_FUNCTION, "sampling_cases")
    cases = [{**case, "deterministic": index % 2 == 0} for index, case in enumerate(drawn)]
    # Other EOS and PAD ids (an answer token as EOS; PAD a prompt token, or EOS itself), and no generator at all.
    for index, (eos, pad) in enumerate(((6, 3), (7, 7), (9, 1), (8, 0))):
        cases.append({**drawn[index], "rows": 6, "max_new_tokens": 5, "deterministic": index % 2 == 0,
                      "eos_token_id": eos, "pad_token_id": pad})
    cases += [{**drawn[index], "rows": 16, "max_new_tokens": 4, "deterministic": False, "global_generator": True}
              for index in range(2)]
    return cases


def _group_rloo_cases() -> list[Any]:
    drawn = draw(prompt_major_rewards(), PROBES_PER_FUNCTION, "prompt_major_rewards")
    return [dict(rewards=rewards, group_size=group_size) for rewards, group_size in drawn]


def _relabelled_loss_cases() -> list[Any]:
    """sequence_policy_loss with other EOS and PAD ids, and inf, NaN or huge old log-probs outside the response."""
    from kata.rl.sequence_task import VOCAB_SIZE

    cases = []
    for index, case in enumerate(draw(loss_cases(), 12, "loss_cases")):
        batch, random = case["batch"], np.random.default_rng(index)
        ids, lengths = batch["input_ids"], batch["prompt_lengths"]
        rows, width = ids.shape
        outside = np.ones((rows, width - 1), dtype=bool)
        for i, prompt in enumerate(lengths):
            tail = ids[i, prompt:].tolist()
            eos, pad = batch["eos_token_id"], batch["pad_token_id"]
            end = prompt + (tail.index(eos) + 1 if eos in tail else
                            max([j + 1 for j, token in enumerate(tail) if token != pad], default=0))
            outside[i, prompt - 1:end - 1] = False
        old = np.where(outside, random.choice(np.array(IGNORED_VALUES), size=outside.shape),
                       random.uniform(-3.0, 0.0, outside.shape))
        cases.append(dict(logits=random.uniform(-3.0, 3.0, (rows, width, VOCAB_SIZE)), input_ids=ids,
                          prompt_lengths=lengths, old_log_probs=old, advantages=random.uniform(-2.0, 2.0, rows),
                          clip_epsilon=case["clip_epsilon"], reduction=case["reduction"],
                          pad_token_id=batch["pad_token_id"], eos_token_id=batch["eos_token_id"]))
    return cases


def _relabelled_iteration_cases() -> list[Any]:
    """rloo_iteration with other EOS and PAD ids and float32 or float64, NumPy or tensor rewards; three of them
    with gradients left on the parameters before the call."""
    import torch

    cases = []
    for case in draw(iteration_settings(), 6, "iteration_settings"):
        batch = case["batch"]
        rewards = torch.from_numpy(case["rewards"]) if case["rewards_as_tensor"] else case["rewards"]
        cases.append(dict(seed=case["seed"], input_ids=batch["input_ids"], prompt_lengths=batch["prompt_lengths"],
                          rewards=rewards, group_size=case["group_size"], ppo_epochs=case["ppo_epochs"],
                          clip_epsilon=case["clip_epsilon"], reduction=case["reduction"],
                          pad_token_id=batch["pad_token_id"], eos_token_id=batch["eos_token_id"]))
    return cases + [{**case, "leftover_grads": True} for case in cases[:3]]


PROBES = (
    Probes("sample_responses", _sampling_cases, "sampled_responses"),
    Probes("group_rloo_advantages", _group_rloo_cases),
    Probes("sequence_policy_loss", drawn(sequence_loss_cases, "sequence_loss_cases", extra=_relabelled_loss_cases)),
    Probes("rloo_iteration",
           drawn(iteration_cases, "iteration_cases", count=UPDATE_PROBES, extra=_relabelled_iteration_cases),
           "iterated_policy", training=True),
)
UNPROBED = {
    "train_tiny_sequence_policy": "trains a policy; its parts are probed instead",
    "evaluate_sequence_policy": "evaluates a trained policy by sampling; sample_responses is probed instead",
}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

def _large_groups() -> list[Edge]:
    """Groups of 64: each row's advantage is its reward less the mean of the other 63 rows of its prompt."""
    random = np.random.default_rng(31)
    rewards = random.integers(0, 2, 3 * 64).astype(np.float64)

    def leave_one_out(function, arguments):
        groups = arguments["rewards"].reshape(-1, 64)
        return [(groups - (groups.sum(axis=1, keepdims=True) - groups) / 63).reshape(-1)]

    return [Edge("G = 64", dict(rewards=rewards, group_size=64), leave_one_out)]


CONTRACTS = (
    Contract("group_rloo_advantages",
             lambda: prompt_major_rewards().map(lambda pair: dict(rewards=pair[0], group_size=pair[1])).flatmap(
                 lambda case: in_float_dtypes(st.just(case), ("rewards",))), edges=_large_groups),
    Contract("sequence_policy_loss",
             lambda: in_float_dtypes(sequence_loss_cases(), ("logits", "old_log_probs", "advantages")),
             differentiable=("logits",), data=("old_log_probs", "advantages")),
)
