"""Adam and plain SGD, in a few lines, for the two training loops and their tests.

The first ``torch.optim`` step of a process imports torch's compiler stack (``torch._dynamo``): several seconds of
start-up that a student would wait through on every test run of the loops. The loops need only Adam's update rule,
so it is written out here with ``torch.optim.Adam``'s defaults and arithmetic (no weight decay, no amsgrad);
``tests/test_frame_optim.py`` checks it against ``torch.optim.Adam(fused=True)``, whose kernel it calls, step for
step (and the unfused path against the textbook update).

The interface is the part of ``torch.optim.Optimizer`` the loops use (:class:`Optimizer`): ``param_groups`` (one
group, whose ``"lr"`` may be changed between steps to anneal it), ``zero_grad()`` and ``step()``. A
``torch.optim`` optimizer fits it too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

import torch

from kata.arrays import check_positive


class Optimizer(Protocol):
    """What an update needs of an optimizer: its parameters (``param_groups``), ``zero_grad`` and ``step``."""

    param_groups: list[dict[str, Any]]

    def zero_grad(self) -> None: ...

    def step(self) -> None: ...


def _trainable(parameters: Iterable[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    params = [parameter for parameter in parameters if parameter.requires_grad]
    if not params:
        raise ValueError("parameters must hold at least one tensor that requires grad")
    return params


class SGD:
    """Plain gradient descent: ``θ ← θ - lr · ∇θ`` (``torch.optim.SGD`` without momentum)."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float) -> None:
        self.param_groups = [{"params": _trainable(parameters), "lr": check_positive("lr", lr)}]

    def zero_grad(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            if parameter.grad is not None:
                parameter.add_(parameter.grad, alpha=-self.param_groups[0]["lr"])


class Adam:
    """Adam over one group of parameters: the update of ``torch.optim.Adam(params, lr, betas, eps, fused=True)``
    (``fused`` False: of the unfused ``torch.optim.Adam``, for devices or dtypes the fused kernel does not take)."""

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        params = _trainable(parameters)
        self.param_groups = [{"params": params, "lr": check_positive("lr", lr)}]
        self.betas = betas
        self.eps = check_positive("eps", eps)
        self.steps = 0
        self.first_moments = [torch.zeros_like(parameter) for parameter in params]
        self.second_moments = [torch.zeros_like(parameter) for parameter in params]
        # torch.optim.Adam(fused=True)'s kernel, called directly: one call for all parameters instead of seven
        # batched ops (0.1 ms instead of 0.5 ms a step here, and 1,280 steps in a smoke run of PPO).
        self.fused = hasattr(torch, "_fused_adam_") and all(
            parameter.device.type == "cpu" and parameter.dtype in (torch.float32, torch.float64) for parameter in params
        )
        self.step_counts = [torch.zeros((), dtype=torch.float32) for _ in params]

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        return self.param_groups[0]["params"]

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient."""
        live = [i for i, parameter in enumerate(self.parameters) if parameter.grad is not None]
        if not live:
            return
        self.steps += 1
        beta1, beta2 = self.betas
        lr = self.param_groups[0]["lr"]
        params = [self.parameters[i] for i in live]
        grads = [parameter.grad for parameter in params]
        firsts = [self.first_moments[i] for i in live]
        seconds = [self.second_moments[i] for i in live]
        if self.fused:
            counts = [self.step_counts[i] for i in live]
            torch._foreach_add_(counts, 1.0)
            torch._fused_adam_(params, grads, firsts, seconds, [], counts, lr=lr, beta1=beta1, beta2=beta2,
                               weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False)
            return
        # The same element-wise arithmetic as torch.optim.Adam's single-tensor path, batched over the parameters.
        torch._foreach_lerp_(firsts, grads, 1 - beta1)
        torch._foreach_mul_(seconds, beta2)
        torch._foreach_addcmul_(seconds, grads, grads, value=1 - beta2)
        denominators = torch._foreach_sqrt(seconds)
        torch._foreach_div_(denominators, math.sqrt(1 - beta2**self.steps))
        torch._foreach_add_(denominators, self.eps)
        torch._foreach_addcdiv_(params, firsts, denominators, value=-lr / (1 - beta1**self.steps))
