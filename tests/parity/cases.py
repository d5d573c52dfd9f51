"""Seeded random inputs for the parity comparisons: every case is reproducible from its test's name and index.

Each comparison draws hundreds of cases from ``numpy.random.default_rng`` seeded with the test's name and the case's
index, so a failing case is named by ``(name, index)`` in its message and comes back identical on every run and
every machine. Everything is float64 unless a library computes in float32 by design (then the test says so).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import torch

CASES = 300  # per comparison, unless a test says otherwise


def cases(name: str, count: int = CASES) -> Iterator[tuple[str, np.random.Generator]]:
    """``count`` generators, each seeded from ``name`` and its index; yields ``(label, generator)``."""
    base = zlib.crc32(name.encode())
    for index in range(count):
        yield f"{name} case {index}", np.random.default_rng([base, index])


def tensor(values: np.ndarray, grad: bool = False) -> torch.Tensor:
    """A float64 leaf tensor of ``values`` (a fresh copy), tracking its gradient if asked."""
    return torch.tensor(np.asarray(values, dtype=np.float64), dtype=torch.float64, requires_grad=grad)


def log_prob_pair(rng: np.random.Generator, shape: tuple[int, ...], spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Old and new log-probabilities whose log-ratios spread by ``spread``: mostly inside a clip range, some far out."""
    old = np.log(rng.uniform(0.02, 1.0, size=shape))
    new = old + rng.normal(0.0, spread, size=shape) * rng.choice([0.2, 1.0, 3.0], size=shape)
    return new, old


def prefix_mask(rng: np.random.Generator, rows: int, columns: int, empty: float = 0.0) -> np.ndarray:
    """A right-padded 0/1 response mask ``[rows, columns]``: each row a run of ones from column 0, a fraction
    ``empty`` of them (on average) with no token at all."""
    lengths = rng.integers(1, columns + 1, size=rows)
    lengths[rng.random(rows) < empty] = 0
    return (np.arange(columns)[None, :] < lengths[:, None]).astype(np.float64)


def close(actual: float | np.ndarray | torch.Tensor, expected: float | np.ndarray | torch.Tensor,
          rtol: float = 1e-9, atol: float = 1e-12) -> bool:
    """Whether the two agree elementwise within ``rtol`` (relative) and ``atol``; NaN equals only NaN."""
    a = np.asarray(actual.detach() if isinstance(actual, torch.Tensor) else actual, dtype=np.float64)
    e = np.asarray(expected.detach() if isinstance(expected, torch.Tensor) else expected, dtype=np.float64)
    return bool(np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True))


def largest_difference(actual, expected) -> float:
    """The largest absolute elementwise difference, for the messages."""
    a = np.asarray(actual.detach() if isinstance(actual, torch.Tensor) else actual, dtype=np.float64)
    e = np.asarray(expected.detach() if isinstance(expected, torch.Tensor) else expected, dtype=np.float64)
    return float(np.max(np.abs(a - e), initial=0.0))


def reference_loss(reference, new, old, advantages, mask, epsilon, reduction: str) -> tuple[float, torch.Tensor]:
    """The reference's token-level PPO loss (minus its objective) on these arrays, and its gradient in ``new``."""
    leaf = tensor(new, grad=True)
    loss = -reference.masked_token_ppo_objective(leaf, tensor(old), tensor(advantages), tensor(mask), epsilon,
                                                 reduction)
    loss.backward()
    return float(loss.detach()), leaf.grad
