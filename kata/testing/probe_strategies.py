"""The strategies only the diagnosis's probes draw (kata/catalogue/probes.py draws each once, with a fixed seed),
for functions whose tests build their inputs inline; beside kata.testing.strategies, whose building blocks they use."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from kata.testing.strategies import clip_epsilons, entropy_batches, float_arrays, floats, seeds, sequence_batches


ppo_loss_cases = st.fixed_dictionaries(
    dict(policy_loss=floats(-10.0, 10.0), value_loss=floats(0.0, 10.0), entropy=entropy_batches(),
         value_coefficient=floats(0.0, 2.0), entropy_coefficient=floats(0.001, 0.1))
)

simulation_cases = st.fixed_dictionaries(dict(group_size=st.integers(2, 6), groups=st.integers(2, 64), seed=seeds))

# Batches of at least 8 samples: drawn with replacement, 8 indices form a permutation with probability 8!/8^8 < 0.3 %.
probe_minibatch_layouts = st.tuples(st.integers(8, 70), st.integers(1, 80), st.integers(0, 2**31 - 1))

# ppo_update on seeded networks and batch (CartPole sizes): entropy bonus on or off, the gradient-norm clip binding
# or not. At least 16 samples: a uniform shuffle repeats one of 3 epochs' orders with probability at most 3/16! < 2e-13,
# so "every epoch's order differs" holds for every valid shuffle, whatever its random stream.
update_cases = st.fixed_dictionaries(
    dict(seed=st.integers(0, 2**16), size=st.integers(16, 24), epochs=st.integers(2, 3),
         entropy_coefficient=st.sampled_from([0.05, 0.0]), max_grad_norm=st.sampled_from([0.05, 100.0]))
)

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
