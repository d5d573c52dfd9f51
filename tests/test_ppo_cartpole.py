"""The ppo_cartpole tests: complete PPO on CartPole.

The masks and bootstrap values are checked against their definitions for every flag combination; the update is
watched from outside: a spy actor sees which samples each epoch uses, a spy optimizer sees the gradient it is asked
to apply, and the batch it was given is compared before and after. The integration test (marked `slow`) trains
the smoke profile on the lab's two seeds, each with up to two retries on other seeds (kata/testing/training.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given

from kata.rl.speedups import Adam
from kata.lab.plan import plan_for
from kata.rl.networks import Actor, Critic, action_log_probs
from kata.rl.networks import SGD
from kata.rl.ppo import RolloutBatch, profile_config
from kata.testing.training import ppo_smoke_verdict
from kata.testing.strategies import bootstrap_cases, minibatch_layouts, rollout_flags

pytestmark = pytest.mark.ppo_cartpole


# ---- the two masks ---------------------------------------------------------------------------------------------


@given(flags=rollout_flags())
def test_masks_for_every_flag_combination(impl, flags):
    terminated, truncated = flags["terminated"], flags["truncated"]
    bootstrap_mask, trace_cuts = impl.gae_masks(terminated, truncated)
    assert isinstance(trace_cuts, np.ndarray), "NumPy in must give NumPy out"
    np.testing.assert_array_equal(bootstrap_mask, terminated,
                                  err_msg="only a real terminal forbids bootstrapping: truncation by the time "
                                  "limit is not termination")
    buffer_end = np.zeros_like(terminated)
    buffer_end[-1] = True
    np.testing.assert_array_equal(trace_cuts, terminated | truncated | buffer_end,
                                  err_msg="the trace is cut by termination, by truncation and by the rollout "
                                  "buffer's last step, and nowhere else")


def test_masks_keep_tensors_and_do_not_touch_inputs(impl):
    terminated = torch.tensor([[False, True], [False, False], [False, False]])
    truncated = torch.tensor([[False, False], [True, False], [False, False]])
    saved = (terminated.clone(), truncated.clone())
    bootstrap_mask, trace_cuts = impl.gae_masks(terminated, truncated)
    assert isinstance(trace_cuts, torch.Tensor), "a tensor in must give a tensor out"
    assert trace_cuts.tolist() == [[False, True], [True, False], [True, True]], (
        f"trace_cuts is {trace_cuts.tolist()}: a cut wherever an episode terminated or was truncated, and at the "
        "buffer's last step")
    assert bootstrap_mask.tolist() == terminated.tolist(), (
        f"bootstrap_mask is {bootstrap_mask.tolist()}: only termination stops the bootstrap (truncation does not)")
    assert torch.equal(terminated, saved[0]) and torch.equal(truncated, saved[1]), "inputs must not change"
    with pytest.raises(ValueError, match="truncated"):
        impl.gae_masks(terminated, truncated[:2])
    with pytest.raises(ValueError, match="terminated"):
        impl.gae_masks(np.array([0, 2, 0]), np.zeros(3))


# ---- bootstrap values ------------------------------------------------------------------------------------------


def expected_next_values(values, final_values, last_values, terminated, truncated):
    """One record at a time, one environment (column) at a time."""
    if values.ndim == 2:
        return np.stack([expected_next_values(values[:, n], final_values[:, n], last_values[n], terminated[:, n],
                                              truncated[:, n]) for n in range(values.shape[1])], axis=1)
    expected = np.empty_like(values)
    for t in range(len(values)):
        if terminated[t] or truncated[t]:
            expected[t] = final_values[t]  # the observation the step produced, not the reset that followed
        elif t + 1 < len(values):
            expected[t] = values[t + 1]
        else:
            expected[t] = last_values
    return expected


@given(case=bootstrap_cases())
def test_bootstrap_values(impl, case):
    next_values = impl.bootstrap_values(**case)
    expected = expected_next_values(**case)
    done = case["terminated"] | case["truncated"]
    np.testing.assert_array_equal(next_values[done], expected[done],
                                  err_msg="where an episode ended, V(s_{t+1}) is V(final observation): the "
                                  "stored next observation is already the next episode's reset observation")
    np.testing.assert_array_equal(next_values[~done], expected[~done],
                                  err_msg="inside an episode V(s_{t+1}) is the next record's value, and after "
                                  "the buffer's last step it is last_values")


def test_a_truncated_step_bootstraps_from_its_final_observation(impl):
    values = np.array([1.0, 2.0, 3.0])
    next_values = impl.bootstrap_values(values, np.array([0.0, 9.0, 0.0]), np.array(4.0),
                                        np.zeros(3, dtype=bool), np.array([False, True, False]))
    np.testing.assert_array_equal(next_values, [2.0, 9.0, 4.0],
                                  err_msg="record 1 was truncated: it bootstraps from V(final observation) = 9, "
                                  "not from V(reset observation) = values[2] = 3")
    with pytest.raises(ValueError, match="last_values"):
        impl.bootstrap_values(values, values, np.zeros(2), np.zeros(3, dtype=bool), np.zeros(3, dtype=bool))


# ---- minibatches -----------------------------------------------------------------------------------------------


@given(layout=minibatch_layouts)
def test_each_sample_once_per_epoch(impl, layout):
    batch_size, minibatch_size, seed = layout
    generator = torch.Generator().manual_seed(seed)
    minibatches = impl.minibatch_indices(batch_size, minibatch_size, generator)
    sizes = [len(m) for m in minibatches]
    assert sorted(torch.cat(minibatches).tolist()) == list(range(batch_size)), (
        "one epoch must use every sample exactly once: a permutation cut into minibatches, not draws with "
        "replacement")
    assert all(size == minibatch_size for size in sizes[:-1]) and 1 <= sizes[-1] <= minibatch_size, (
        f"minibatch sizes {sizes} for minibatch_size {minibatch_size}: every minibatch full but the last, which "
        "holds the remainder")
    again = impl.minibatch_indices(batch_size, minibatch_size, torch.Generator().manual_seed(seed))
    assert all(torch.equal(a, b) for a, b in zip(minibatches, again)), "the generator must fix the shuffle"


def test_epochs_are_shuffled_differently(impl):
    generator = torch.Generator().manual_seed(0)
    first = torch.cat(impl.minibatch_indices(64, 16, generator))
    second = torch.cat(impl.minibatch_indices(64, 16, generator))
    assert not torch.equal(first, second), "each epoch draws a new permutation"
    with pytest.raises(ValueError, match="minibatch_size"):
        impl.minibatch_indices(10, 0, generator)


# ---- the update ------------------------------------------------------------------------------------------------

UPDATE = dict(epochs=3, minibatch_size=8, clip_epsilon=0.2, value_clip_epsilon=1.0, value_coefficient=0.5,
              entropy_coefficient=0.0, max_grad_norm=0.5)


def networks(seed=0, hidden=(16,)):
    generator = torch.Generator().manual_seed(seed)
    return Actor(4, 2, hidden, generator), Critic(4, hidden, generator)


def make_batch(actor, critic, size=20, seed=0, observations=None, actions=None, advantages=None):
    rng = torch.Generator().manual_seed(seed)
    if observations is None:
        observations = torch.randn(size, 4, generator=rng) * 0.5
    if actions is None:
        actions = torch.randint(0, 2, (size,), generator=rng)
    if advantages is None:
        advantages = torch.randn(size, generator=rng)
    with torch.no_grad():
        old_log_probs = action_log_probs(actor(observations), actions)
        old_values = critic(observations)
    return RolloutBatch(observations, actions, old_log_probs, old_values, advantages,
                        old_values + advantages + torch.randn(size, generator=rng))


class SpyActor(torch.nn.Module):
    """Records, for every forward pass with gradient, which samples it saw (observation column 0 holds the index)."""

    def __init__(self, actor):
        super().__init__()
        self.actor = actor
        self.seen: list[list[int]] = []

    def forward(self, observations):
        if torch.is_grad_enabled():
            self.seen.append(observations[:, 0].round().long().tolist())
        return self.actor(observations)


class SpySGD(SGD):
    """Records the total gradient norm each step is asked to apply."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.norms: list[float] = []

    def step(self):
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        self.norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))
        return super().step()


def test_every_sample_once_per_epoch_inside_the_update(impl):
    actor, critic = networks()
    size, epochs, minibatch = 21, 4, 5
    observations = torch.zeros(size, 4)
    observations[:, 0] = torch.arange(size, dtype=torch.float32)
    batch = make_batch(actor, critic, size, observations=observations)
    spy = SpyActor(actor)
    optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
    impl.ppo_update(spy, critic, optimizer, batch, generator=torch.Generator().manual_seed(0),
                    **{**UPDATE, "epochs": epochs, "minibatch_size": minibatch})
    per_epoch = math.ceil(size / minibatch)
    assert len(spy.seen) == epochs * per_epoch, (
        f"{epochs} epochs of {per_epoch} minibatches must call the actor {epochs * per_epoch} times with gradient")
    for epoch in range(epochs):
        used = sorted(i for call in spy.seen[epoch * per_epoch:(epoch + 1) * per_epoch] for i in call)
        assert used == list(range(size)), f"epoch {epoch} repeated or skipped samples: {used}"


def test_old_log_probs_and_values_stay_frozen(impl):
    actor, critic = networks(1)
    batch = make_batch(actor, critic, 32, seed=1)
    saved = RolloutBatch(*(t.clone() for t in batch))
    optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=3e-2)
    diagnostics = impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator().manual_seed(1),
                                  **{**UPDATE, "epochs": 4})
    for name, before, after in zip(RolloutBatch._fields, saved, batch):
        assert torch.equal(before, after), f"batch.{name} changed: the update must treat the rollout as data"
    assert diagnostics["approx_kl"] > 0.0, "after four epochs the policy must have moved away from the old one"


def test_the_clip_stops_the_policy_where_the_ratio_leaves_the_interval(impl):
    # Every sample is the same state and action with a positive advantage: once r > 1 + eps the clipped branch
    # binds for all of them, the policy gradient is zero and the policy stops. Recomputing the "old" log-probs
    # inside the update keeps the ratio at 1, so nothing ever stops it.
    actor, critic = networks(2)
    size, epsilon = 16, 0.2
    batch = make_batch(actor, critic, size, observations=torch.full((size, 4), 0.1),
                       actions=torch.ones(size, dtype=torch.long), advantages=torch.ones(size))
    optimizer = SGD(actor.parameters(), lr=0.5)
    critic_optimizer_free = dict(UPDATE, epochs=60, minibatch_size=size, clip_epsilon=epsilon,
                                 max_grad_norm=1e6, value_coefficient=0.0)
    impl.ppo_update(actor, critic, optimizer, batch, normalize_advantages=False,
                    generator=torch.Generator().manual_seed(0), **critic_optimizer_free)
    with torch.no_grad():
        ratio = float(torch.exp(action_log_probs(actor(batch.observations), batch.actions) - batch.old_log_probs)[0])
    assert 1.0 + epsilon <= ratio < 1.0 + 2 * epsilon, (
        f"the ratio ended at {ratio:.3f}: it must pass 1 + eps (the policy learns) and then stop (the clip binds "
        "against the frozen old log-probs, which must not be recomputed inside the update)")


def test_the_gradient_norm_is_clipped_before_each_step(impl):
    actor, critic = networks(3)
    batch = make_batch(actor, critic, 24, seed=3)
    bound = 1e-3
    optimizer = SpySGD([*actor.parameters(), *critic.parameters()], lr=1e-2)
    diagnostics = impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator().manual_seed(3),
                                  **{**UPDATE, "max_grad_norm": bound})
    assert len(optimizer.norms) == 3 * 3, (
        f"{len(optimizer.norms)} optimizer steps where 3 epochs x 3 minibatches make 9: one step per minibatch")
    assert max(optimizer.norms) <= bound * (1 + 1e-4), (
        f"a step applied a gradient of norm {max(optimizer.norms):.3g} > max_grad_norm = {bound}: clip after "
        "backward() and before step()")
    assert diagnostics["grad_norm"] > bound, "grad_norm reports the norm before clipping"


def test_the_entropy_bonus_raises_entropy(impl):
    # No advantage, no value loss: only the entropy bonus drives the actor, so its entropy must go up.
    actor, critic = networks(4)
    with torch.no_grad():
        actor.net[-1].bias.copy_(torch.tensor([2.0, -2.0]))  # a confident policy, far from uniform
    batch = make_batch(actor, critic, 32, seed=4, advantages=torch.zeros(32))

    def entropy():
        with torch.no_grad():
            log_p = torch.log_softmax(actor(batch.observations), -1)
            return float(-(log_p.exp() * log_p).sum(-1).mean())

    before = entropy()
    optimizer = SGD(actor.parameters(), lr=0.1)
    impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator().manual_seed(4),
                    **{**UPDATE, "entropy_coefficient": 0.5, "value_coefficient": 0.0, "max_grad_norm": 10.0})
    assert entropy() > before + 1e-3, (
        "with zero advantages the entropy bonus alone must raise the policy's entropy: the loss subtracts "
        "c_e * entropy")


def test_diagnostics_are_in_range(impl):
    actor, critic = networks(5)
    batch = make_batch(actor, critic, 40, seed=5)
    optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=5e-2)
    d = impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator().manual_seed(5), **UPDATE)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "active_clip_fraction",
                "ratio_outside_fraction", "grad_norm", "epochs_completed"):
        assert isinstance(d[key], float) and math.isfinite(d[key]), f"{key} must be a finite float"
    assert d["approx_kl"] >= 0.0, "the approximate KL must be the non-negative estimator"
    assert 0.0 <= d["active_clip_fraction"] <= d["ratio_outside_fraction"] <= 1.0, (
        "an active clip needs a ratio outside the interval: 0 <= active <= outside <= 1")
    assert 0.0 <= d["entropy"] <= math.log(2) + 1e-6, (
        f"entropy {d['entropy']:.4g}: two actions give an entropy between 0 and log 2")
    assert d["value_loss"] >= 0.0, f"value_loss {d['value_loss']:.4g}: a squared error is never negative"
    assert d["epochs_completed"] == UPDATE["epochs"], (
        f"epochs_completed is {d['epochs_completed']} with no target_kl: all {UPDATE['epochs']} epochs run")


def test_target_kl_stops_early(impl):
    actor, critic = networks(6)
    batch = make_batch(actor, critic, 40, seed=6)
    optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=5e-2)
    d = impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator().manual_seed(6),
                        **{**UPDATE, "epochs": 10}, target_kl=1e-9)
    assert d["epochs_completed"] == 1, "an epoch whose approximate KL exceeds target_kl must be the last"
    with pytest.raises(ValueError, match="max_grad_norm"):
        impl.ppo_update(actor, critic, optimizer, batch, generator=torch.Generator(), **{**UPDATE,
                        "max_grad_norm": 0.0})
    with pytest.raises(ValueError, match="batch"):
        impl.ppo_update(actor, critic, optimizer, batch._replace(returns=batch.returns[:3]),
                        generator=torch.Generator(), **UPDATE)


# ---- the loop --------------------------------------------------------------------------------------------------

TINY = dict(total_steps=256, num_envs=4, rollout_steps=32, epochs=2, minibatch_size=64, evaluation_every=1,
            evaluation_episodes=2, max_episode_steps=60, hidden_sizes=(16,))


def test_a_seed_reproduces_the_history(impl):
    config = dataclasses.replace(profile_config("smoke", seed=3), **TINY)
    first, second = impl.train_ppo(config), impl.train_ppo(config)
    assert first["history"]["update"] == [1, 2], (
        f"history['update'] is {first['history']['update']}: 256 steps of 4 x 32 make updates 1 and 2")
    assert first["history"]["environment_steps"] == [128, 256], (
        f"history['environment_steps'] is {first['history']['environment_steps']}: 128 steps per update")
    for key, values in first["history"].items():
        if key != "wall_time":
            np.testing.assert_array_equal(values, second["history"][key], err_msg=f"history[{key!r}] differs")
    other = impl.train_ppo(dataclasses.replace(config, seed=4))
    assert other["history"]["policy_loss"] != first["history"]["policy_loss"], "the seed must matter"


@pytest.mark.slow
@pytest.mark.parametrize("seed", plan_for("smoke").ppo_seeds)  # the lab's seeds, 11 and 37
def test_the_smoke_profile_solves_cartpole(impl, seed):
    # A valid implementation's run fails now and then whatever its random stream: up to two more runs with
    # other seeds keep the chance of rejecting valid code below 1 % (kata/testing/training.py, measured by
    # benchmarks/training_robustness.py).
    verdict = ppo_smoke_verdict(impl.train_ppo, seed)
    assert verdict.passed, (
        "the smoke profile did not solve CartPole and hold it (final greedy evaluation >= 475 and every "
        f"evaluation in the last fifth >= 475) in any of three runs (the seed and two retries): "
        f"{verdict.explanation()}")
