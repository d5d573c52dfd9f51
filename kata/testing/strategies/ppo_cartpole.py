"""5. ppo_cartpole: the strategies its tests draw from (ppo_update's clause tests: every hyperparameter over
its valid range), and its probes (ppo_update on small seeded networks; minibatch layouts of at least 8 samples)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, in_float_dtypes
from kata.testing.drawing import drawn
from kata.testing.strategies import (
    IGNORED_VALUES,
    UPDATE_PROBES,
    Probes,
    bool_arrays,
    clip_epsilons,
    float_arrays,
    floats,
)

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def rollout_flags(draw, max_steps: int = 8, max_envs: int = 3) -> dict:
    """``terminated`` and ``truncated`` flags of one rollout, ``[T]`` or time-major ``[T, N]``, every combination
    (both True included: the pole falls on the time limit's last step)."""
    steps = draw(st.integers(1, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if draw(st.booleans()) else (steps,)
    return dict(terminated=draw(bool_arrays(shape)), truncated=draw(bool_arrays(shape)))


@st.composite
def bootstrap_cases(draw, max_steps: int = 8, max_envs: int = 3) -> dict:
    """Keyword arguments for bootstrap_values: values and final values in [-100, 100] of the flags' shape,
    last values of the shape without its time axis. Where no episode ended, ``final_values`` is "any value": it
    holds one of IGNORED_VALUES (inf and NaN included) half of the time."""
    flags = draw(rollout_flags(max_steps, max_envs))
    shape = flags["terminated"].shape
    final_values = draw(float_arrays(shape))
    if draw(st.booleans()):
        ignored = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from(IGNORED_VALUES)))
        final_values = np.where(flags["terminated"] | flags["truncated"], final_values, ignored)
    return dict(values=draw(float_arrays(shape)), final_values=final_values,
                last_values=draw(float_arrays(shape[1:])), **flags)


minibatch_layouts = st.tuples(st.integers(1, 70), st.integers(1, 80), st.integers(0, 2**31 - 1))  # batch, mb, seed


cartpole_states = hnp.arrays(  # inside the termination bounds, velocities as large as a falling pole reaches
    np.float64, 4, elements=floats(-1.0, 1.0)
).map(lambda u: u * np.array([2.3, 3.0, 0.2, 3.0]))


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


# Batches of at least 8 samples: drawn with replacement, 8 indices form a permutation with probability 8!/8^8 < 0.3 %.
probe_minibatch_layouts = st.tuples(st.integers(8, 70), st.integers(1, 80), st.integers(0, 2**31 - 1))


# ppo_update on seeded networks and batch (CartPole sizes): entropy bonus on or off, the gradient-norm clip binding
# or not. At least 16 samples: a uniform shuffle repeats one of 3 epochs' orders with probability at most 3/16! < 2e-13,
# so "every epoch's order differs" holds for every valid shuffle, whatever its random stream.
update_cases = st.fixed_dictionaries(
    dict(seed=st.integers(0, 2**16), size=st.integers(16, 24), epochs=st.integers(2, 3),
         entropy_coefficient=st.sampled_from([0.05, 0.0]), max_grad_norm=st.sampled_from([0.05, 100.0]))
)

# ---- probes -------------------------------------------------------------------------------------------------------

def _minibatch_cases() -> list[Any]:
    return drawn(probe_minibatch_layouts, "probe_minibatch_layouts")() + [(8, 8, 0), (64, 16, 1), (70, 3, 2)]


def _update_cases() -> list[Any]:
    examples = drawn(update_cases, "update_cases", count=UPDATE_PROBES)()
    # Minibatches smaller than the batch, observed only through what every valid shuffle shares.
    return examples + [{**case, "kind": kind} for case in examples[:3] for kind in (
        "one_sample", "target_kl", "leftover_grads", "actor_optimizer", "kl_after_step")]


PROBES = (
    Probes("gae_masks", drawn(rollout_flags, "rollout_flags")),
    Probes("bootstrap_values", drawn(bootstrap_cases, "bootstrap_cases")),
    Probes("minibatch_indices", _minibatch_cases, "minibatch_partition"),
    Probes("ppo_update", _update_cases, "updated_networks", training=True),
)
UNPROBED = {"train_ppo": "trains an agent for minutes; its parts are probed instead"}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

CONTRACTS = (
    Contract("gae_masks", rollout_flags),
    Contract("bootstrap_values", lambda: in_float_dtypes(bootstrap_cases(), ("values", "final_values", "last_values"))),
)
