"""The RL parts the loops run on; they import only kata.arrays (never a tool, never solutions/).

    cartpole.py       CartPole-v1 written out: N self-resetting environments with Gymnasium's API, and the actor and
                      critic that play it
    ppo.py            the PPO loop top to bottom, its configuration and profiles
    runs.py           reading training runs: evaluation curves, their median and quartiles
    rloo.py           the RLOO loop: profiles, what an iteration reports, the loop
    sequence_task.py  the tiny sequence task: vocabulary, prompts, verifier, the GRU policy, its evaluation

Here, what both loops share: :class:`Optimizer`, what an update needs of an optimizer (a ``torch.optim`` optimizer
fits it), the loops' :class:`Adam`, and :func:`torch_threads`, the thread count torch runs them on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import torch
from torch.optim.adam import adam as adam_update  # documented: torch.optim.adam.adam, Adam's functional form

from kata.arrays import check_positive


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


class Adam:
    """``torch.optim.Adam(params, lr, betas, eps, fused=True)``'s update over one group of parameters (no weight
    decay, no amsgrad), called through torch's public functional form ``torch.optim.adam.adam``.

    Constructing the class ``torch.optim.Adam`` imports ``torch._dynamo``, about 1.3 s of CPU that every process
    pays once; the functional form does not. The arithmetic is the same bit for bit (tests/frame/test_optim.py), so
    a run learns exactly what it would with torch's class, only sooner (docs/benchmarks.md). ``"lr"`` in its one
    parameter group may be changed between steps to anneal it.
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
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


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` intra-op threads (``None``: leave torch's setting), then restore the previous.

    The kata's tensors are tiny: a second thread costs more in hand-offs than it saves, and a fixed count keeps every
    float sum in the same order, so a seed reproduces a run bit for bit.
    """
    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
