"""The actor and the critic: two separate small MLPs with orthogonal initialisation.

Separate networks keep the value loss from pulling on the policy's features, which on CartPole is both simpler to
reason about and faster to learn. Orthogonal weights with gain sqrt(2) in the hidden layers, a tiny gain (0.01) on
the policy head (so the first policy is nearly uniform, hence high entropy) and gain 1 on the value head, zero
biases: the usual PPO initialisation. A ``torch.Generator`` makes the initialisation independent of torch's global
random state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from kata.concepts.arrays import check_integer

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
