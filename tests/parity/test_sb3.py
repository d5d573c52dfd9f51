"""The reference against Stable-Baselines3 2.9.2: its rollout buffer's GAE, its own ``collect_rollouts`` on a real
vectorised CartPole-v1 with time-limit truncations, and the losses and diagnostics of ``PPO.train`` (GUIDE.md §3,
§4 and §5).

``PPO.train`` computes its losses inline, so the tests run ``PPO.train`` itself on a stand-in ``self``: a policy
whose ``evaluate_actions`` returns leaf tensors of the case's values and log-probabilities, a one-minibatch buffer,
a logger that keeps what ``train`` records and an optimizer whose ``step`` keeps the gradients ``train`` produced.
"""

from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnvWrapper

from .cases import cases, close, largest_difference, log_prob_pair, tensor

pytestmark = pytest.mark.parity


# ---- RolloutBuffer.compute_returns_and_advantage -------------------------------------------------------------


def _buffer(rewards, values, episode_starts, gamma, gae_lambda) -> RolloutBuffer:
    """SB3's buffer holding these float64 arrays (its own are float32; the method computes in the arrays' dtype)."""
    steps, envs = rewards.shape
    buffer = RolloutBuffer(steps, spaces.Box(-1.0, 1.0, (1,)), spaces.Discrete(2), device="cpu",
                           gae_lambda=gae_lambda, gamma=gamma, n_envs=envs)
    buffer.rewards, buffer.values, buffer.episode_starts = rewards.copy(), values.copy(), episode_starts.copy()
    buffer.advantages = np.zeros_like(rewards)
    return buffer


def test_rollout_buffer_gae_is_the_reference_with_every_done_terminal(reference, ledger):
    """SB3 keeps one mask: ``episode_starts[t + 1]`` (``dones`` at the buffer's end) both forbids the bootstrap and
    cuts the trace, so a done is a termination there; the reference with ``terminated = done`` is the same number."""
    worst = 0.0
    for label, rng in cases("sb3 buffer gae"):
        steps, envs = int(rng.integers(1, 40)), int(rng.integers(1, 5))
        gamma, gae_lambda = float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 1.0))
        rewards, values = rng.normal(size=(steps, envs)), rng.normal(0.0, 3.0, size=(steps, envs))
        done = rng.random((steps, envs)) < 0.15
        last_values = rng.normal(0.0, 3.0, size=envs)
        episode_starts = np.zeros((steps, envs))
        episode_starts[1:] = done[:-1]
        buffer = _buffer(rewards, values, episode_starts, gamma, gae_lambda)
        buffer.compute_returns_and_advantage(torch.tensor(last_values), done[-1])

        terminated, trace_cuts = reference.gae_masks(done, np.zeros_like(done))
        next_values = reference.bootstrap_values(values, np.zeros_like(values), last_values, terminated, done)
        expected = reference.gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
        worst = max(worst, largest_difference(buffer.advantages, expected))
        assert close(buffer.advantages, expected), (
            f"{label}: SB3's advantages differ from the reference's with every done terminal by "
            f"{largest_difference(buffer.advantages, expected):.3g}")
        assert close(buffer.returns, expected + values), f"{label}: SB3's returns are not advantages + values"
    ledger.add("SB3 RolloutBuffer.compute_returns_and_advantage vs gae_masks/bootstrap_values/gae_advantages",
               300, worst, "equal")


class _Recorder(VecEnvWrapper):
    """Keeps a copy of what the vectorised environment returned at each step, before SB3 changes its rewards."""

    def __init__(self, venv):
        super().__init__(venv)
        self.steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]] = []

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        observations, rewards, dones, infos = self.venv.step_wait()
        self.steps.append((observations.copy(), rewards.copy(), dones.copy(), [dict(info) for info in infos]))
        return observations, rewards, dones, infos


def _collect(seed: int, gamma: float, gae_lambda: float, time_limit: int, envs: int, steps: int):
    """SB3's own ``collect_rollouts`` of a fresh PPO on CartPole-v1 cut at ``time_limit`` steps."""
    venv = _Recorder(make_vec_env("CartPole-v1", n_envs=envs, seed=seed, env_kwargs={"max_episode_steps": time_limit}))
    model = PPO("MlpPolicy", venv, n_steps=steps, gamma=gamma, gae_lambda=gae_lambda, seed=seed, device="cpu")
    with torch.no_grad():  # values of the size of the returns, so that a wrong bootstrap cannot hide in rounding
        model.policy.value_net.weight.mul_(40.0)
        model.policy.value_net.bias.fill_(10.0)
    _, callback = model._setup_learn(steps * envs, callback=None)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=steps), (
        "SB3's collect_rollouts stopped early: no callback should stop it")
    return model, venv.steps


def test_collect_rollouts_on_cartpole_is_gae_masks_bootstrap_values_and_gae(reference, ledger):
    """SB3 adds γ·V(terminal observation) to the reward of a step whose info says ``TimeLimit.truncated``; with its
    one-mask GAE that is the reference's two masks with ``bootstrap_values`` taking V(final observation)."""
    worst, records, truncations, terminations = 0.0, 0, 0, 0
    for index, (gamma, gae_lambda) in enumerate([(0.99, 0.95), (0.9, 1.0), (0.5, 0.0), (0.97, 0.8), (1.0, 0.9)]):
        seed = 100 + index
        model, steps = _collect(seed, gamma, gae_lambda, time_limit=12 + 3 * index, envs=4, steps=96)
        policy, buffer = model.policy, model.rollout_buffer
        rewards = np.stack([step[1] for step in steps])
        dones = np.stack([step[2] for step in steps])
        truncated = np.array([[info.get("TimeLimit.truncated", False) for info in step[3]] for step in steps])
        terminated = dones & ~truncated
        final_values = np.zeros_like(rewards)
        with torch.no_grad():
            for t, (_, _, done, infos) in enumerate(steps):
                for env in np.flatnonzero(done):  # V(final observation), one at a time as SB3 values it
                    observation = policy.obs_to_tensor(infos[env]["terminal_observation"])[0]
                    final_values[t, env] = policy.predict_values(observation)[0].item()
            last_values = policy.predict_values(obs_as_tensor(steps[-1][0], "cpu")).flatten().numpy()
        # float32 on both sides: SB3's buffer is float32 (common/buffers.py), so the reference gets float32 too.
        values = buffer.values
        masks = reference.gae_masks(terminated, truncated)
        next_values = reference.bootstrap_values(values, final_values.astype(np.float32),
                                                 last_values.astype(np.float32), terminated, truncated)
        expected = reference.gae_advantages(rewards.astype(np.float32), values, next_values, *masks,
                                            gamma=gamma, gae_lambda=gae_lambda)
        scale = float(np.max(np.abs(expected)))
        worst = max(worst, largest_difference(buffer.advantages, expected) / scale)
        assert close(buffer.advantages, expected, rtol=0.0, atol=1e-6 * scale), (
            f"seed {seed}: SB3's collect_rollouts advantages differ from the reference's by "
            f"{largest_difference(buffer.advantages, expected):.3g} (relative to the largest, {scale:.3g})")
        records += rewards.size
        truncations += int(truncated.sum())
        terminations += int(terminated.sum())
    assert truncations >= 20 and terminations >= 20, (
        f"the rollouts must hold both kinds of episode end; they held {truncations} truncations and "
        f"{terminations} terminations")
    ledger.add(f"SB3 collect_rollouts (CartPole-v1, {truncations} truncations, {terminations} terminations) vs "
               "reference (float32, largest difference relative to max |A|)", records, worst, "equal")


def test_rollout_buffer_alone_treats_a_truncation_as_a_termination(reference, ledger):
    """Without collect_rollouts' reward fix the buffer does not bootstrap a truncated record: with λ = 0 it differs
    from the reference exactly at the truncated records whose γ·V(final observation) is not 0, by that amount."""
    differing = 0
    for label, rng in cases("sb3 buffer truncation"):
        steps, envs, gamma = int(rng.integers(2, 30)), int(rng.integers(1, 4)), float(rng.uniform(0.1, 1.0))
        rewards, values = rng.normal(size=(steps, envs)), rng.normal(size=(steps, envs))
        done = rng.random((steps, envs)) < 0.2
        truncated = done & (rng.random((steps, envs)) < 0.5)
        final_values = np.where(rng.random((steps, envs)) < 0.1, 0.0, rng.normal(0.0, 5.0, size=(steps, envs)))
        last_values = rng.normal(size=envs)
        episode_starts = np.zeros((steps, envs))
        episode_starts[1:] = done[:-1]
        buffer = _buffer(rewards, values, episode_starts, gamma, 0.0)
        buffer.compute_returns_and_advantage(torch.tensor(last_values), done[-1])
        terminated = done & ~truncated
        masks = reference.gae_masks(terminated, truncated)
        next_values = reference.bootstrap_values(values, final_values, last_values, terminated, truncated)
        expected = reference.gae_advantages(rewards, values, next_values, *masks, gamma=gamma, gae_lambda=0.0)
        where = truncated & (final_values != 0.0)
        same = np.isclose(buffer.advantages, expected, rtol=1e-9, atol=1e-12)
        assert np.array_equal(~same, where), (
            f"{label}: the buffer should differ from the reference at the truncated records with V(final) != 0 "
            f"only; differs at {np.argwhere(~same).tolist()}, expected {np.argwhere(where).tolist()}")
        assert close((expected - buffer.advantages)[where], gamma * final_values[where]), (
            f"{label}: at a truncated record the difference is the missing bootstrap γ·V(final observation)")
        differing += int(where.sum())
    ledger.add(f"SB3 RolloutBuffer alone on truncations, λ = 0 ({differing} truncated records)", 300, 0.0,
               "convention: differs exactly at truncated records, by γ·V(final)")


# ---- PPO.train -----------------------------------------------------------------------------------------------


class _Optimizer:
    """Stands in for the policy's optimizer: ``step`` keeps the gradients and changes nothing."""

    def __init__(self, parameters: list[torch.Tensor]):
        self.parameters, self.gradients = parameters, None

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    def step(self) -> None:
        self.gradients = [parameter.grad.clone() for parameter in self.parameters]


class _Policy:
    """``evaluate_actions`` returns the case's current values and log-probabilities, as leaf tensors."""

    def __init__(self, values: torch.Tensor, log_probs: torch.Tensor, entropy: torch.Tensor):
        self.values, self.log_probs, self.entropy = values, log_probs, entropy
        self.optimizer = _Optimizer([values, log_probs])

    def set_training_mode(self, mode: bool) -> None:
        pass

    def evaluate_actions(self, observations, actions):
        return self.values, self.log_probs, self.entropy

    def parameters(self) -> list[torch.Tensor]:
        return [self.values, self.log_probs]


class _Logger:
    def __init__(self):
        self.values: dict[str, float] = {}

    def record(self, key: str, value, exclude=None) -> None:
        self.values[key] = value


def run_train(new_log_probs, old_log_probs, advantages, values, old_values, returns, *, clip_range: float,
              clip_range_vf: float | None = None, entropy=None, vf_coef: float = 1.0, ent_coef: float = 0.0,
              normalize_advantage: bool = False, n_epochs: int = 1, target_kl: float | None = None,
              steps: list | None = None):
    """``PPO.train`` on ``n_epochs`` epochs of one minibatch holding the case; returns what it logged and the
    gradients of its loss with respect to the current log-probabilities and values (None if it never stepped).
    ``steps``, if given, receives one entry per optimizer step."""
    n = len(advantages)
    new, current = tensor(new_log_probs, grad=True), tensor(values, grad=True)
    entropy = torch.zeros(n, dtype=torch.float64) if entropy is None else tensor(entropy)
    samples = RolloutBufferSamples(observations=torch.zeros(n, 1), actions=torch.zeros(n, 1),
                                   old_values=tensor(old_values), old_log_prob=tensor(old_log_probs),
                                   advantages=tensor(advantages), returns=tensor(returns))
    policy, logger = _Policy(current, new, entropy), _Logger()
    stand_in = SimpleNamespace(
        policy=policy, logger=logger, _update_learning_rate=lambda optimizer: None, _current_progress_remaining=1.0,
        clip_range=lambda progress: clip_range,
        clip_range_vf=None if clip_range_vf is None else (lambda progress: clip_range_vf),
        n_epochs=n_epochs, batch_size=n, action_space=spaces.Discrete(2), normalize_advantage=normalize_advantage,
        ent_coef=ent_coef, vf_coef=vf_coef, target_kl=target_kl, verbose=0, max_grad_norm=math.inf, _n_updates=0,
        rollout_buffer=SimpleNamespace(get=lambda batch_size: iter([samples]), values=np.asarray(old_values),
                                       returns=np.asarray(returns)))
    if steps is not None:
        record = policy.optimizer.step
        policy.optimizer.step = lambda: (record(), steps.append(stand_in._n_updates))
    with np.errstate(all="ignore"):  # explained_variance of a one-sample case divides 0 by 0; it is not compared
        PPO.train(stand_in)
    value_gradient, log_prob_gradient = policy.optimizer.gradients or (None, None)
    return logger.values, log_prob_gradient, value_gradient


def _ppo_case(rng: np.random.Generator, n: int | None = None):
    n = int(rng.integers(1, 65)) if n is None else n
    new, old = log_prob_pair(rng, (n,), spread=0.3)
    advantages = rng.normal(size=n) * rng.choice([0.0, 1.0], size=n, p=[0.05, 0.95])
    old_values = rng.normal(0.0, 2.0, size=n)
    values = old_values + rng.normal(0.0, 0.5, size=n)
    returns = old_values + rng.normal(0.0, 1.0, size=n)
    return new, old, advantages, values, old_values, returns, float(rng.uniform(0.05, 0.4))


def _grad(function, argument: np.ndarray, *others) -> tuple[float, torch.Tensor]:
    """``function(argument, *others)`` with ``argument`` as a float64 leaf: its value and its gradient."""
    leaf = tensor(argument, grad=True)
    value = function(leaf, *(tensor(other) if isinstance(other, np.ndarray) else other for other in others))
    value.backward()
    return float(value.detach()), leaf.grad


def test_train_policy_loss_approx_kl_and_clip_fraction_are_the_reference(reference, ledger):
    """SB3's policy loss is minus the mean of the min, the reference's ``clipped_policy_loss`` (value and gradient);
    ``approx_kl_div`` is the reference's ``approximate_kl`` (k3); ``clip_fraction`` counts ``|r - 1| > ε``, the
    reference's ``ratio_outside_fraction``."""
    worst = {"loss": 0.0, "gradient": 0.0, "kl": 0.0, "fraction": 0.0}
    for label, rng in cases("sb3 train policy"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        logged, log_prob_gradient, _ = run_train(new, old, advantages, values, old_values, returns,
                                                 clip_range=epsilon)
        loss, gradient = _grad(reference.clipped_policy_loss, new, old, advantages, epsilon)
        kl = float(reference.approximate_kl(new, old))
        fraction = float(reference.ratio_outside_fraction(new, old, epsilon))
        worst["loss"] = max(worst["loss"], abs(logged["train/policy_gradient_loss"] - loss))
        worst["gradient"] = max(worst["gradient"], largest_difference(log_prob_gradient, gradient))
        worst["kl"] = max(worst["kl"], abs(logged["train/approx_kl"] - kl))
        worst["fraction"] = max(worst["fraction"], abs(logged["train/clip_fraction"] - fraction))
        assert close(logged["train/policy_gradient_loss"], loss), (
            f"{label}: SB3's policy loss {logged['train/policy_gradient_loss']!r} is not the reference's {loss!r}")
        assert close(log_prob_gradient, gradient), (
            f"{label}: the gradient of SB3's policy loss differs from the reference's by "
            f"{largest_difference(log_prob_gradient, gradient):.3g}")
        assert close(logged["train/approx_kl"], kl, atol=1e-15), (
            f"{label}: SB3's approx_kl {logged['train/approx_kl']!r} is not approximate_kl {kl!r}")
        # SB3 takes the fraction's mean in float32 ((...).float().mean()): a count k/N in float32 is within 2^-24
        # of k/N, and two counts differ by at least 1/64 here, so 1e-7 separates a rounding from another count.
        assert close(logged["train/clip_fraction"], fraction, rtol=0.0, atol=1e-7), (
            f"{label}: SB3's clip_fraction {logged['train/clip_fraction']!r} is not ratio_outside_fraction "
            f"{fraction!r}")
    ledger.add("SB3 PPO.train policy loss vs clipped_policy_loss", 300, worst["loss"], "equal")
    ledger.add("SB3 PPO.train policy-loss gradient vs clipped_policy_loss gradient", 300, worst["gradient"], "equal")
    ledger.add("SB3 PPO.train approx_kl_div vs approximate_kl (k3)", 300, worst["kl"], "equal")
    ledger.add("SB3 PPO.train clip_fraction vs ratio_outside_fraction (float32 mean in SB3)", 300,
               worst["fraction"], "equal")


def test_train_clip_fraction_is_not_the_active_clip_fraction(reference, ledger):
    """``clip_fraction`` also counts ratios outside the interval on the side the clip ignores (A > 0 and r < 1 - ε,
    A < 0 and r > 1 + ε): it exceeds ``active_clip_fraction`` exactly when such a sample is in the batch, by their
    share."""
    differing = 0
    for label, rng in cases("sb3 train clipfrac"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        logged, _, _ = run_train(new, old, advantages, values, old_values, returns, clip_range=epsilon)
        ratio = np.exp(new - old)
        ignored = ((advantages > 0) & (ratio < 1 - epsilon)) | ((advantages < 0) & (ratio > 1 + epsilon)) | (
            (advantages == 0) & (np.abs(ratio - 1) > epsilon))
        active = float(reference.active_clip_fraction(new, old, advantages, epsilon))
        gap = logged["train/clip_fraction"] - active
        assert close(gap, ignored.mean(), rtol=0.0, atol=1e-7), (
            f"{label}: clip_fraction - active_clip_fraction is {gap!r}; the share of samples outside on the "
            f"ignored side is {ignored.mean()!r}")
        differing += bool(ignored.any())
    assert differing > 100, f"the cases should often hold a sample outside on the ignored side; {differing} did"
    ledger.add(f"SB3 clip_fraction vs active_clip_fraction ({differing} cases differ)", 300, 0.0,
               "convention: differs exactly by the share outside on the ignored side")


def test_train_value_loss_without_clip_range_vf_is_twice_the_reference(reference, ledger):
    """By default (``clip_range_vf=None``) SB3's value loss is ``mean((R - V)²)``: the reference's loss with no clip
    (ε = ∞) without its ½, so exactly twice it, and twice its gradient."""
    worst = 0.0
    for label, rng in cases("sb3 train value"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        logged, _, value_gradient = run_train(new, old, advantages, values, old_values, returns, clip_range=epsilon)
        loss, gradient = _grad(reference.clipped_value_loss, values, old_values, returns, math.inf)
        worst = max(worst, abs(logged["train/value_loss"] - 2 * loss))
        assert close(logged["train/value_loss"], 2 * loss), (
            f"{label}: SB3's value loss {logged['train/value_loss']!r} is not twice the reference's {loss!r}")
        assert close(value_gradient, 2 * gradient), f"{label}: SB3's value-loss gradient is not twice the reference's"
    ledger.add("SB3 value loss, clip_range_vf=None, vs 2 x clipped_value_loss(eps=inf)", 300, worst,
               "convention: no 1/2 (exactly 2x)")


def test_train_clipped_value_loss_differs_exactly_where_the_unclipped_error_is_larger(reference, ledger):
    """With ``clip_range_vf`` SB3 takes the squared error of the clipped prediction alone; the reference takes the
    larger of the two squared errors. One sample per case: SB3's loss is twice the reference's exactly where the
    unclipped error is not the larger, and smaller than twice it exactly where it is."""
    worst, differing = 0.0, 0
    for label, rng in cases("sb3 train clipped value"):
        new, old, advantages, values, old_values, returns, _ = _ppo_case(rng, n=1)
        epsilon = float(rng.uniform(0.05, 1.0))
        logged, _, value_gradient = run_train(new, old, advantages, values, old_values, returns, clip_range=0.2,
                                              clip_range_vf=epsilon)
        loss, gradient = _grad(reference.clipped_value_loss, values, old_values, returns, epsilon)
        clipped = old_values + np.clip(values - old_values, -epsilon, epsilon)
        unclipped_larger = bool(((values - returns) ** 2 > (clipped - returns) ** 2)[0])
        if unclipped_larger:
            differing += 1
            assert logged["train/value_loss"] < 2 * loss and not close(logged["train/value_loss"], 2 * loss), (
                f"{label}: where the unclipped error is the larger, SB3's loss should be below twice the "
                f"reference's; got {logged['train/value_loss']!r} and {2 * loss!r}")
        else:
            worst = max(worst, abs(logged["train/value_loss"] - 2 * loss))
            assert close(logged["train/value_loss"], 2 * loss), (
                f"{label}: where the unclipped error is not the larger, SB3's loss {logged['train/value_loss']!r} "
                f"should be twice the reference's {loss!r}")
            assert close(value_gradient, 2 * gradient), f"{label}: the gradients should be in the ratio 2"
    assert 50 < differing < 250, f"the cases should hold both situations; the unclipped error was larger {differing}x"
    ledger.add(f"SB3 value loss with clip_range_vf vs 2 x clipped_value_loss ({differing} of 300 differ)", 300,
               worst, "convention: differs exactly where the unclipped error is larger")


def test_train_clipped_value_gradient_differs_exactly_where_the_unclipped_error_is_larger(reference, ledger):
    """Per sample, in batches: SB3's value gradient is twice the reference's except exactly where the unclipped
    error is the larger, where SB3's is 0 (its prediction is clipped) and the reference's is not."""
    differing = 0
    for label, rng in cases("sb3 train clipped value gradient"):
        new, old, advantages, values, old_values, returns, _ = _ppo_case(rng)
        epsilon = float(rng.uniform(0.05, 1.0))
        _, _, value_gradient = run_train(new, old, advantages, values, old_values, returns, clip_range=0.2,
                                         clip_range_vf=epsilon)
        _, gradient = _grad(reference.clipped_value_loss, values, old_values, returns, epsilon)
        clipped = old_values + np.clip(values - old_values, -epsilon, epsilon)
        where = (values - returns) ** 2 > (clipped - returns) ** 2
        same = np.isclose(value_gradient.numpy(), 2 * gradient.numpy(), rtol=1e-9, atol=1e-15)
        assert np.array_equal(~same, where), (
            f"{label}: the value gradients should differ exactly where the unclipped error is larger "
            f"({np.flatnonzero(where).tolist()}); they differ at {np.flatnonzero(~same).tolist()}")
        assert np.all(value_gradient.numpy()[where] == 0.0), f"{label}: SB3's gradient is 0 where its clip acts"
        differing += int(where.sum())
    ledger.add(f"SB3 value-loss gradient with clip_range_vf, per sample ({differing} samples differ)", 300, 0.0,
               "convention: differs exactly where the unclipped error is larger")


def test_train_total_loss_weighs_a_value_loss_without_the_half(reference, ledger):
    """SB3's loss is ``policy + ent_coef · (-mean entropy) + vf_coef · value``, with a value loss that has no ½:
    the reference's ``ppo_loss`` with ``value_coefficient = 2 · vf_coef``."""
    worst = 0.0
    for label, rng in cases("sb3 train total"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        entropy = rng.uniform(0.0, 0.7, size=len(advantages))
        vf_coef, ent_coef = float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 0.1))
        logged, _, _ = run_train(new, old, advantages, values, old_values, returns, clip_range=epsilon,
                                 entropy=entropy, vf_coef=vf_coef, ent_coef=ent_coef)
        total = float(reference.ppo_loss(reference.clipped_policy_loss(new, old, advantages, epsilon),
                                         reference.clipped_value_loss(values, old_values, returns, math.inf),
                                         entropy, 2 * vf_coef, ent_coef))
        worst = max(worst, abs(logged["train/loss"] - total))
        assert close(logged["train/loss"], total), (
            f"{label}: SB3's total loss {logged['train/loss']!r} is not ppo_loss with value_coefficient = "
            f"2 vf_coef ({total!r})")
    ledger.add("SB3 total loss vs ppo_loss(value_coefficient = 2 vf_coef)", 300, worst, "equal")


def test_train_standardises_the_advantages_of_each_minibatch(reference, ledger):
    """With ``normalize_advantage`` (SB3's default) the policy loss is the reference's ``clipped_policy_loss`` of the
    minibatch's advantages standardised: (A - mean) / (std + 1e-8), Bessel's std; a minibatch of one is left as
    it is."""
    worst = 0.0
    for label, rng in cases("sb3 train normalize"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        logged, log_prob_gradient, _ = run_train(new, old, advantages, values, old_values, returns,
                                                 clip_range=epsilon, normalize_advantage=True)
        standardised = advantages if advantages.size == 1 else (
            (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8))
        loss, gradient = _grad(reference.clipped_policy_loss, new, old, standardised, epsilon)
        worst = max(worst, abs(logged["train/policy_gradient_loss"] - loss))
        assert close(logged["train/policy_gradient_loss"], loss) and close(log_prob_gradient, gradient), (
            f"{label}: SB3's policy loss with normalize_advantage is not the reference's on standardised advantages "
            f"({logged['train/policy_gradient_loss']!r}, {loss!r})")
    ledger.add("SB3 PPO.train normalize_advantage=True vs clipped_policy_loss(standardised A)", 300, worst, "equal")


def test_train_stops_its_epochs_when_approx_kl_exceeds_one_and_a_half_target_kl(reference, ledger):
    """SB3 stops before a minibatch's step when its ``approx_kl_div`` exceeds ``1.5 · target_kl``: here (the stand-in
    never changes the policy) no step at all exactly when the reference's ``approximate_kl`` exceeds it, every
    epoch's step otherwise."""
    stopped = 0
    for label, rng in cases("sb3 train target_kl"):
        new, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        kl = float(reference.approximate_kl(new, old))
        target_kl = kl / 1.5 * float(rng.choice([0.5, 0.9, 1.1, 2.0]))
        steps: list = []
        run_train(new, old, advantages, values, old_values, returns, clip_range=epsilon, n_epochs=3,
                  target_kl=target_kl, steps=steps)
        expected = 0 if kl > 1.5 * target_kl else 3
        assert len(steps) == expected, (
            f"{label}: approximate_kl {kl:.4g} against 1.5 x target_kl {1.5 * target_kl:.4g}: SB3 should take "
            f"{expected} steps, took {len(steps)}")
        stopped += expected == 0
    assert 100 < stopped < 200, f"the cases should stop about half the time; {stopped} of 300 stopped"
    ledger.add(f"SB3 PPO.train target_kl early stop vs 1.5 x target_kl on approximate_kl ({stopped} stopped)", 300,
               0.0, "equal")


def test_sb3_categorical_entropy_is_the_reference_even_at_minus_infinity(reference, ledger):
    """SB3's ``CategoricalDistribution.entropy`` (``torch.distributions.Categorical``, which clamps the normalised
    logits to the lowest finite number) is the reference's ``categorical_entropy``, finite at a logit of -∞. So is
    its gradient, except on a row with a -∞ logit whose entropy carries an upstream gradient larger than 1 in size:
    there the clamped logit (-1.8e308) times that gradient overflows, and the row's gradient is NaN where the
    reference's stays finite (in SB3's own loss, ``ent_coef`` / batch size, it is far below 1)."""
    worst, infinite, overflowing = 0.0, 0, 0
    for label, rng in cases("sb3 entropy"):
        rows, actions = int(rng.integers(1, 8)), int(rng.integers(2, 12))
        logits = rng.normal(0.0, rng.choice([0.1, 1.0, 10.0]), size=(rows, actions))
        logits[rng.random((rows, actions)) < 0.1] = -math.inf
        logits[:, 0] = np.where(np.isinf(logits).all(axis=1), 0.0, logits[:, 0])
        infinite += int(np.isinf(logits).any(axis=1).sum())
        weights = tensor(rng.normal(size=rows))
        leaf, expected_leaf = tensor(logits, grad=True), tensor(logits, grad=True)
        sb3 = CategoricalDistribution(actions).proba_distribution(leaf).entropy()
        expected = reference.categorical_entropy(expected_leaf)
        (sb3 * weights).sum().backward()
        (expected * weights).sum().backward()
        worst = max(worst, largest_difference(sb3, expected))
        assert close(sb3, expected), f"{label}: SB3's entropy differs by {largest_difference(sb3, expected):.3g}"
        overflow = np.isinf(logits).any(axis=1) & (np.abs(weights.numpy()) > 1.0)
        overflowing += int(overflow.sum())
        assert np.array_equal(np.isnan(leaf.grad.numpy()).any(axis=1), overflow), (
            f"{label}: SB3's entropy gradient should be NaN exactly on the rows with -inf and an upstream gradient "
            f"above 1 ({np.flatnonzero(overflow).tolist()})")
        assert np.all(np.isfinite(expected_leaf.grad.numpy())), f"{label}: the reference's gradient is finite"
        assert close(leaf.grad[~overflow], expected_leaf.grad[~overflow]), f"{label}: the entropy gradients differ"
    ledger.add(f"SB3 CategoricalDistribution.entropy vs categorical_entropy ({infinite} rows with -inf)", 300, worst,
               f"equal in value; gradient NaN exactly on the {overflowing} rows with -inf and |upstream| > 1")


def test_at_ratio_1_the_policy_loss_has_the_reinforce_gradient(reference, ledger):
    """GUIDE §1: at ratio 1 (new = old) the gradient of SB3's policy loss is the gradient of the reference's
    ``reinforce_surrogate_loss``."""
    worst = 0.0
    for label, rng in cases("sb3 ratio one"):
        _, old, advantages, values, old_values, returns, epsilon = _ppo_case(rng)
        _, log_prob_gradient, _ = run_train(old, old, advantages, values, old_values, returns, clip_range=epsilon)
        _, gradient = _grad(reference.reinforce_surrogate_loss, old, advantages)
        worst = max(worst, largest_difference(log_prob_gradient, gradient))
        assert close(log_prob_gradient, gradient), f"{label}: at ratio 1 SB3's gradient is not the REINFORCE one"
    ledger.add("SB3 policy-loss gradient at ratio 1 vs reinforce_surrogate_loss gradient", 300, worst, "equal")


def test_ppos_defaults_are_the_guides():
    """GUIDE §4 and §5: ``clip_range_vf`` defaults to None (no value clip), ``vf_coef`` to 0.5,
    ``normalize_advantage`` to True."""
    parameters = inspect.signature(PPO.__init__).parameters
    defaults = {name: parameters[name].default for name in ("clip_range_vf", "vf_coef", "normalize_advantage")}
    assert defaults == {"clip_range_vf": None, "vf_coef": 0.5, "normalize_advantage": True}, f"got {defaults}"


def test_the_guides_value_loss_example(reference):
    """GUIDE §4: V = 1, V_old = 0, R = 0, ε = 0.2 gives 0.5 in the reference, 0.04 in SB3 with the clip, 1.0 with its
    default."""
    one, zero = np.array([1.0]), np.array([0.0])
    clipped, _, _ = run_train(zero, zero, one, one, zero, zero, clip_range=0.2, clip_range_vf=0.2)
    default, _, _ = run_train(zero, zero, one, one, zero, zero, clip_range=0.2)
    assert close(float(reference.clipped_value_loss(one, zero, zero, 0.2)), 0.5), "the reference gives 0.5"
    assert close(clipped["train/value_loss"], 0.04), f"SB3 with the clip gives {clipped['train/value_loss']!r}"
    assert close(default["train/value_loss"], 1.0), f"SB3 by default gives {default['train/value_loss']!r}"


def test_cartpole_v1_is_the_environment_the_rollouts_use():
    """The collect_rollouts test runs Gymnasium's own CartPole-v1, only with a shorter time limit."""
    env = gym.make("CartPole-v1", max_episode_steps=12)
    assert env.spec.id == "CartPole-v1" and env.spec.max_episode_steps == 12, f"got {env.spec}"
    assert type(env.unwrapped).__name__ == "CartPoleEnv", f"got {type(env.unwrapped)}"
