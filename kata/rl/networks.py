"""The actor and the critic (two separate small MLPs with orthogonal initialisation), and what steps them.

Separate networks keep the value loss from pulling on the policy's features, which on CartPole is both simpler to
reason about and faster to learn. Orthogonal weights with gain sqrt(2) in the hidden layers, a tiny gain (0.01) on
the policy head (so the first policy is nearly uniform, hence high entropy) and gain 1 on the value head, zero
biases: the usual PPO initialisation. A ``torch.Generator`` makes the initialisation independent of torch's global
random state.

:class:`Optimizer` is what the loops need of an optimizer; a ``torch.optim`` optimizer fits it, and so do the loops'
Adam (kata.rl.speedups) and :class:`SGD`, plain gradient descent for the tests and the diagnosis's probes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from kata.concepts.arrays import check_integer, check_positive

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
