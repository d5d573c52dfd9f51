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

import numpy as np
import torch
from torch import nn

from kata.arrays import check_integer

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


def _run_mlp(net: nn.Sequential, observations: torch.Tensor) -> torch.Tensor:
    """``net(observations)``, calling each layer's ``forward`` directly: the same arithmetic without
    ``nn.Module.__call__``'s hook dispatch per layer, about 75 of the 170 microseconds of a forward pass on a
    128-row minibatch, which PPO runs thousands of times."""
    hidden = observations
    for layer in net:
        hidden = layer.forward(hidden)
    return hidden


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
        return _run_mlp(self.net, observations)

    def snapshot(self) -> "PolicySnapshot":
        """A NumPy copy of the current weights, for acting and evaluation (fast, no autograd)."""
        return PolicySnapshot(self)


class Critic(nn.Module):
    """Value network: observations float32 ``[B, obs]`` -> state values float32 ``[B]``."""

    def __init__(self, observation_size: int, hidden_sizes: Sequence[int], generator: torch.Generator) -> None:
        super().__init__()
        self.net = _mlp(_sizes(observation_size, hidden_sizes, 1), VALUE_HEAD_GAIN, generator)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return _run_mlp(self.net, observations).squeeze(-1)


class PolicySnapshot:
    """A frozen NumPy copy of an :class:`Actor`'s weights.

    ``policy(observations [B, obs]) -> actions int64 [B]`` is greedy: argmax of the logits (ties go to the lower
    action), so evaluation is deterministic. ``policy.probabilities(observations)`` gives float64 ``[B, actions]``
    for sampling. Running the network in NumPy skips torch's per-call overhead, which dominates for a batch of a
    few observations; the weights cannot change during a rollout anyway.
    """

    def __init__(self, actor: Actor) -> None:
        self.layers = [
            (module.weight.detach().cpu().numpy().astype(np.float32).T.copy(),
             module.bias.detach().cpu().numpy().astype(np.float32).copy())
            for module in actor.net if isinstance(module, nn.Linear)
        ]

    @classmethod
    def stack(cls, snapshots: Sequence["PolicySnapshot"]) -> "PolicySnapshot":
        """P snapshots of one architecture as one policy over ``[P, B, obs]`` observations: policy p acts on
        ``observations[p]``, and its logits equal its own snapshot's bit for bit (NumPy's stacked matmul multiplies
        each slice with the same kernel)."""
        if not snapshots or len({len(snapshot.layers) for snapshot in snapshots}) != 1:
            raise ValueError("snapshots must be one or more PolicySnapshots of the same architecture")
        stacked = cls.__new__(cls)
        stacked.layers = [
            (np.stack([snapshot.layers[i][0] for snapshot in snapshots]),
             np.stack([snapshot.layers[i][1] for snapshot in snapshots])[:, None, :])
            for i in range(len(snapshots[0].layers))
        ]
        return stacked

    def logits(self, observations: np.ndarray) -> np.ndarray:
        hidden = np.asarray(observations, dtype=np.float32)
        for i, (weight, bias) in enumerate(self.layers):
            hidden = hidden @ weight + bias
            if i < len(self.layers) - 1:
                hidden = np.tanh(hidden)
        return hidden

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        logits = self.logits(observations).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=-1, keepdims=True)

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(observations), axis=-1)


def action_log_probs(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a | s) for each row: logits ``[B, A]``, actions integer ``[B]`` -> ``[B]`` (keeps gradients)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
