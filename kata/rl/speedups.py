"""The loops' one speed mechanism, behind the switch ``speedups`` (``PPOConfig.speedups``, ``run_rloo(speedups=)``).

:class:`Adam` is ``torch.optim.Adam(params, lr, betas, eps, fused=True)``'s update, called through torch's public
functional form ``torch.optim.adam.adam``: constructing the class ``torch.optim.Adam`` imports ``torch._dynamo`` (its
``add_param_group`` is wrapped to disable the compiler), a cost every process pays once, that the functional form on
the CPU does not. The arithmetic is the same bit for bit (tests/frame/test_optim.py), so the switch changes how soon
a run starts, never what it learns; benchmarks/ppo_cartpole.py --speedups measures it (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adam import adam as adam_update  # documented: torch.optim.adam.adam, Adam's functional form

from kata.concepts.arrays import check_positive
from kata.rl.networks import trainable_parameters


class Adam:
    """Adam over one group of parameters, no weight decay, no amsgrad: what the loops need of an optimizer
    (:class:`kata.rl.networks.Optimizer`): ``param_groups`` (one group, whose ``"lr"`` may be changed between steps to
    anneal it), ``zero_grad()`` and ``step()``. The fused kernel runs on the CPU from torch 2.4 on."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, fused: bool = True) -> None:
        if fused is not True:
            raise ValueError("fused must be True: this is torch.optim.Adam(fused=True)'s update")
        params = trainable_parameters(parameters)
        self.param_groups = [{"params": params, "lr": check_positive("lr", lr)}]
        self.betas = betas
        self.eps = check_positive("eps", eps)
        # torch.optim.Adam's state: both moments, and a float32 step count per parameter.
        self.first_moments = [torch.zeros_like(parameter) for parameter in params]
        self.second_moments = [torch.zeros_like(parameter) for parameter in params]
        self.step_counts = [torch.zeros((), dtype=torch.float32) for _ in params]

    def zero_grad(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient (the others keep their state, as in torch)."""
        params = self.param_groups[0]["params"]
        live = [i for i, parameter in enumerate(params) if parameter.grad is not None]
        adam_update(
            [params[i] for i in live], [params[i].grad for i in live], [self.first_moments[i] for i in live],
            [self.second_moments[i] for i in live], [], [self.step_counts[i] for i in live], fused=True,
            amsgrad=False, beta1=self.betas[0], beta2=self.betas[1], lr=self.param_groups[0]["lr"], weight_decay=0.0,
            eps=self.eps, maximize=False,
        )
