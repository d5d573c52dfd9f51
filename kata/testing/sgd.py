"""Plain gradient descent: an optimizer whose step depends on nothing but the gradient, for the update tests and the
diagnosis's probes (the loops step with kata.rl.Adam)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from kata.arrays import check_positive
from kata.rl import trainable_parameters


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
