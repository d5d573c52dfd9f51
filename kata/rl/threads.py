"""How the loops run torch: one intra-op thread while they train."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` intra-op threads (``None``: leave torch's setting), then restore the previous.

    The networks are tiny: a second thread costs more in hand-offs than it saves, and a fixed count keeps every float
    sum in the same order, so a seed reproduces a run bit for bit.
    """
    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
