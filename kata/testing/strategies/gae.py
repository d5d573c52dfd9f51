"""3. gae: the strategies its tests draw from, and its probes (drawn batches, and rollouts where every kind of
record meets, with extreme values where the contract ignores them)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, Edge, in_float_dtypes, piecewise
from kata.testing.drawing import drawn
from kata.testing.strategies import IGNORED_VALUES, Probes, bool_arrays, float_arrays, unit_interval

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def gae_batches(
    draw, time_major: bool | None = None, min_steps: int = 1, max_steps: int = 10, max_envs: int = 3
) -> dict:
    """Keyword arguments for gae_advantages: [T] records, or time-major [T, N] when time_major (either if None).

    Cuts are frequent and every terminated record is cut, as the contract requires; gamma and lambda cover [0, 1]
    with the endpoints drawn often.
    """
    batched = draw(st.booleans()) if time_major is None else time_major
    steps = draw(st.integers(min_steps, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if batched else (steps,)
    terminated = draw(bool_arrays(shape))
    trace_cuts = terminated | draw(bool_arrays(shape))
    return dict(
        rewards=draw(float_arrays(shape, -10.0, 10.0)),
        values=draw(float_arrays(shape, -10.0, 10.0)),
        next_values=draw(float_arrays(shape, -10.0, 10.0)),
        terminated=terminated,
        trace_cuts=trace_cuts,
        gamma=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
        gae_lambda=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
    )


GAE_VALUE_ARRAYS, GAE_MASKS = ("rewards", "values", "next_values"), ("terminated", "trace_cuts")


def ignored_values(shape) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``shape`` whose every element is one of :data:`IGNORED_VALUES` (NaN and ±inf drawn often)."""
    return hnp.arrays(np.float64, shape, elements=st.sampled_from(IGNORED_VALUES))

# ---- probes -------------------------------------------------------------------------------------------------------

def _mixed_cuts() -> list[Any]:
    """Rollouts where every kind of record meets: terminated, cut without termination (a time limit, the buffer
    end), and carried on; gamma and lambda strictly between 0 and 1 so that each of them shows."""
    random = np.random.default_rng(3)
    cases = []
    for shape in ((8,), (10,), (7, 3), (9, 2)):
        terminated = random.random(shape) < 0.2
        trace_cuts = terminated | (random.random(shape) < 0.25)
        trace_cuts[-1] = True
        cases.append(dict(rewards=random.uniform(-1.0, 1.0, shape), values=random.uniform(-5.0, 5.0, shape),
                          next_values=random.uniform(-5.0, 5.0, shape), terminated=terminated,
                          trace_cuts=trace_cuts, gamma=0.9, gae_lambda=0.7))
    return cases


def _gae_cases() -> list[Any]:
    """Drawn batches, then the mixed rollouts three times: as they are, with NaN and ±inf in next_values at
    terminated records, and with NaN, ±inf and huge values in every record after a cut (the records before it must
    not see them)."""
    examples = drawn(gae_batches, "gae_batches")()
    extremes = np.array(IGNORED_VALUES)
    mixed = _mixed_cuts()
    terminal, after_a_cut = [], []
    for index, case in enumerate(mixed):
        random = np.random.default_rng(index)
        junk = random.choice(extremes, size=case["rewards"].shape)
        terminal.append(dict(case, next_values=np.where(case["terminated"], junk, case["next_values"])))
        cut = len(case["rewards"]) // 2 - 1  # a cut across every column, with records after it
        case = {**case, "trace_cuts": case["trace_cuts"].copy()}
        case["trace_cuts"][cut] = True
        changed = {key: value.copy() if isinstance(value, np.ndarray) else value for key, value in case.items()}
        for key in ("rewards", "values", "next_values"):
            changed[key][cut + 1:] = junk[cut + 1:]
        after_a_cut.append(changed)
    return examples + mixed + terminal + after_a_cut


PROBES = (
    # Values only: a loop through NumPy (no autograd, the container of one argument) is common, and the diagnosis
    # should still name its misconception; the tests name the container and gradient clauses themselves.
    Probes("gae_advantages", _gae_cases),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

@st.composite
def _gae_samples(draw) -> dict:
    """gae_batches in float32 and float64, with NaN, ±inf and huge values in next_values at terminated records
    (ignored there) half the time."""
    batch = draw(in_float_dtypes(gae_batches(), GAE_VALUE_ARRAYS))
    if draw(st.booleans()):
        junk = draw(ignored_values(batch["next_values"].shape)).astype(batch["next_values"].dtype)
        batch["next_values"] = np.where(batch["terminated"], junk, batch["next_values"])
    return batch


def _long_rollouts() -> list[Edge]:
    """3000 records cut every 10 (each piece computed on its own must give the same), and a time-major batch with
    fewer steps than environments (each column on its own)."""
    random = np.random.default_rng(13)
    steps = 3000
    terminated = random.random(steps) < 0.05
    cuts = terminated.copy()
    cuts[9::10] = True
    long = dict(rewards=random.uniform(-1.0, 1.0, steps), values=random.uniform(-1.0, 1.0, steps),
                next_values=random.uniform(-1.0, 1.0, steps), terminated=terminated, trace_cuts=cuts,
                gamma=0.999, gae_lambda=0.95)
    shape = (3, 50)
    wide_terminated = random.random(shape) < 0.2
    wide = dict(rewards=random.uniform(-1.0, 1.0, shape), values=random.uniform(-1.0, 1.0, shape),
                next_values=random.uniform(-1.0, 1.0, shape), terminated=wide_terminated,
                trace_cuts=wide_terminated | (random.random(shape) < 0.2), gamma=0.9, gae_lambda=0.8)
    arrays = (*GAE_VALUE_ARRAYS, *GAE_MASKS)
    return [
        Edge("3000 records cut every 10", long,
             lambda f, a: piecewise(f, a, [slice(t, t + 10) for t in range(0, steps, 10)], arrays=arrays)),
        Edge("[T, N] with T = 3 < N = 50", wide,
             lambda f, a: piecewise(f, a, [slice(n, n + 1) for n in range(50)], axis=1, arrays=arrays)),
    ]


CONTRACTS = (
    Contract("gae_advantages", _gae_samples, differentiable=GAE_VALUE_ARRAYS, edges=_long_rollouts),
)
