"""The actor and the critic (two separate small MLPs with orthogonal initialisation), what steps them, and the
thread count torch runs them on.

Separate networks keep the value loss from pulling on the policy's features, which on CartPole is both simpler to
reason about and faster to learn. Orthogonal weights with gain sqrt(2) in the hidden layers, a tiny gain (0.01) on
the policy head (so the first policy is nearly uniform, hence high entropy) and gain 1 on the value head, zero
biases: the usual PPO initialisation. A ``torch.Generator`` makes the initialisation independent of torch's global
random state.

:class:`Optimizer` is what the loops need of an optimizer; a ``torch.optim`` optimizer fits it, and so do the loops'
:class:`Adam` and :class:`SGD`, plain gradient descent for the tests and the diagnosis's probes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import torch
from torch import nn
from torch.optim.adam import adam as adam_update  # documented: torch.optim.adam.adam, Adam's functional form

from kata.arrays import check_integer, check_positive

HIDDEN_GAIN = math.sqrt(2.0)
POLICY_HEAD_GAIN = 0.01
VALUE_HEAD_GAIN = 1.0


def _mlp(sizes: Sequence[int], head_gain: float, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(fan_in, fan_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, gain=head_gain if last else HIDDEN_GAIN, generator=generator)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def _sizes(observation_size: int, hidden_sizes: Sequence[int], output_size: int) -> list[int]:
    check_integer("observation_size", observation_size, 1)
    for size in hidden_sizes:
        check_integer("hidden_sizes", size, 1)
    return [observation_size, *hidden_sizes, output_size]


class Actor(nn.Module):
    """Policy network: observations float32 ``[B, obs]`` -> action logits float32 ``[B, actions]``."""

    def __init__(self, observation_size: int, action_count: int, hidden_sizes: Sequence[int],
                 generator: torch.Generator) -> None:
        super().__init__()
        check_integer("action_count", action_count, 2)
        self.net = _mlp(_sizes(observation_size, hidden_sizes, action_count), POLICY_HEAD_GAIN, generator)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations)


class Critic(nn.Module):
    """Value network: observations float32 ``[B, obs]`` -> state values float32 ``[B]``."""

    def __init__(self, observation_size: int, hidden_sizes: Sequence[int], generator: torch.Generator) -> None:
        super().__init__()
        self.net = _mlp(_sizes(observation_size, hidden_sizes, 1), VALUE_HEAD_GAIN, generator)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations).squeeze(-1)


def action_log_probs(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a | s) for each row: logits ``[B, A]``, actions integer ``[B]`` -> ``[B]`` (keeps gradients)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


# ---- what steps them --------------------------------------------------------------------------------------------


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
