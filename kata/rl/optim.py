"""What the loops need of an optimizer (:class:`Optimizer`), and plain SGD for the tests.

The interface is the part of ``torch.optim.Optimizer`` the loops use: ``param_groups`` (one group, whose ``"lr"``
may be changed between steps to anneal it), ``zero_grad()`` and ``step()``. A ``torch.optim`` optimizer fits it, and
so does the loops' Adam, :class:`kata.rl.speedups.Adam` (``torch.optim.Adam(fused=True)``'s update without the class's
start-up cost).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import torch

from kata.concepts.arrays import check_positive


class Optimizer(Protocol):
    """What an update needs of an optimizer: its parameters (``param_groups``), ``zero_grad`` and ``step``."""

    param_groups: list[dict[str, Any]]

    def zero_grad(self) -> None: ...

    def step(self) -> None: ...


def trainable_parameters(parameters: Iterable[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    params = [parameter for parameter in parameters if parameter.requires_grad]
    if not params:
        raise ValueError("parameters must hold at least one tensor that requires grad")
    return params


class SGD:
    """Plain gradient descent: ``θ ← θ - lr · ∇θ`` (``torch.optim.SGD`` without momentum)."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float) -> None:
        self.param_groups = [{"params": trainable_parameters(parameters), "lr": check_positive("lr", lr)}]

    def zero_grad(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            if parameter.grad is not None:
                parameter.add_(parameter.grad, alpha=-self.param_groups[0]["lr"])
