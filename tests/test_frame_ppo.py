"""The PPO frame (kata/ppo_frame.py, kata/networks.py): configuration, rollout storage, evaluation, aggregation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from kata.cartpole import CartPoleBatch
from kata.networks import Actor, Critic
from kata.ppo_frame import (
    HISTORY_KEYS,
    UPDATE_DIAGNOSTICS,
    PPOConfig,
    aggregate_training_runs,
    collect_rollout,
    evaluate_greedy,
    evaluate_policies,
    late_evaluation_minimum,
    profile_config,
    run_ppo,
    value_rollout,
)

pytestmark = pytest.mark.frame


@pytest.mark.parametrize("mode, budget", [("smoke", 30_000), ("full", 50_000)])
def test_profiles(mode, budget):
    config = profile_config(mode, seed=11)
    assert isinstance(config, PPOConfig) and config.seed == 11
    assert config.num_updates * config.batch_size <= budget, f"the {mode} profile must stay within {budget} steps"
    assert config.evaluation_episodes == 10 and config.max_episode_steps == 500
    quick = dataclasses.replace(config, evaluation_every=2)
    assert quick.evaluation_every == 2 and quick.seed == 11


def test_profile_and_config_checks():
    with pytest.raises(ValueError, match="mode"):
        profile_config("medium", seed=1)
    config = profile_config("smoke", seed=1)
    for field, value in [("evaluation_every", 0), ("gamma", 1.5), ("learning_rate", 0.0), ("seed", -1),
                         ("num_envs", 2.5), ("total_steps", 10), ("target_kl", -1.0)]:
        with pytest.raises(ValueError, match=field):
            dataclasses.replace(config, **{field: value})


def _run(steps, means):
    return {"environment_steps": steps[-1], "history": {"environment_steps": list(steps), "evaluation_mean": means}}


def test_aggregate_puts_nan_where_a_run_was_not_evaluated():
    nan = math.nan
    runs = [_run([100, 200, 300], [10.0, nan, 30.0]), _run([100, 200, 300], [20.0, 40.0, nan]),
            _run([100, 200, 300, 400], [30.0, nan, nan, 50.0])]
    curve = aggregate_training_runs(runs)
    np.testing.assert_array_equal(curve["environment_steps"], [100, 200, 300, 400])
    np.testing.assert_array_equal(curve["all_curves"], [[10, nan, 30, nan], [20, 40, nan, nan],
                                                        [30, nan, nan, 50]])
    np.testing.assert_array_equal(curve["median"], [20, 40, 30, 50])
    np.testing.assert_array_equal(curve["q25"], [15, 40, 30, 50])
    np.testing.assert_array_equal(curve["q75"], [25, 40, 30, 50])
    with pytest.raises(ValueError, match="runs"):
        aggregate_training_runs([])
    with pytest.raises(ValueError, match="runs"):
        aggregate_training_runs([{"final_evaluation_mean": 1.0}])


def test_late_evaluation_minimum_reads_the_last_fifth():
    run = _run([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000],
               [1.0, 500.0, 2.0, math.nan, 3.0, 500.0, 4.0, 480.0, math.nan, 490.0])
    assert late_evaluation_minimum(run) == 480.0


def test_networks_are_orthogonal_and_seeded():
    actor = Actor(4, 2, (64, 64), torch.Generator().manual_seed(0))
    hidden = actor.net[2].weight.detach()
    np.testing.assert_allclose((hidden @ hidden.T).numpy(), 2.0 * np.eye(64), atol=1e-4,
                               err_msg="hidden layers: orthogonal with gain sqrt(2)")
    head = actor.net[-1].weight.detach()
    np.testing.assert_allclose((head @ head.T).numpy(), 1e-4 * np.eye(2), atol=1e-8,
                               err_msg="policy head: orthogonal with gain 0.01 (a near-uniform first policy)")
    assert all(float(layer.bias.detach().abs().max()) == 0.0 for layer in actor.net if hasattr(layer, "bias"))
    again = Actor(4, 2, (64, 64), torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(actor.parameters(), again.parameters()))
    critic = Critic(4, (8,), torch.Generator().manual_seed(0))
    assert critic(torch.zeros(5, 4)).shape == (5,)


def test_numpy_snapshot_matches_the_actor():
    actor = Actor(4, 2, (16, 16), torch.Generator().manual_seed(1))
    observations = np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
    snapshot = actor.snapshot()
    with torch.no_grad():
        expected = torch.softmax(actor(torch.from_numpy(observations)), -1).numpy()
    np.testing.assert_allclose(snapshot.probabilities(observations), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(snapshot(observations), expected.argmax(-1))


def test_rollout_storage_keeps_final_observations_and_flags_apart():
    env = CartPoleBatch(3, max_episode_steps=7)
    observations, _ = env.reset(seed=5)
    actor = Actor(4, 2, (8,), torch.Generator().manual_seed(0))
    critic = Critic(4, (8,), torch.Generator().manual_seed(1))
    timer = {"environment": 0.0, "acting": 0.0}
    rollout = collect_rollout(env, observations, actor.snapshot(), 20, np.random.default_rng(0), timer)
    done = rollout.terminated | rollout.truncated
    assert rollout.truncated.any(), "the 7-step limit must truncate some episodes"
    assert not np.array_equal(rollout.terminated, done), "truncation must stay distinct from termination"
    for t, n in zip(*np.nonzero(done[:-1])):
        assert np.all(np.abs(rollout.observations[t + 1, n]) <= 0.05), "after an end comes a reset observation"
        assert not np.array_equal(rollout.final_observations[t, n], rollout.observations[t + 1, n])
    assert np.all(rollout.final_observations[~done] == 0)
    valued = value_rollout(rollout, actor, critic)
    with torch.no_grad():
        finals = critic(torch.from_numpy(rollout.final_observations[done]))
        last = critic(torch.from_numpy(rollout.last_observations))
    np.testing.assert_allclose(valued["final_values"][torch.from_numpy(done)].numpy(), finals.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(valued["last_values"].numpy(), last.numpy(), rtol=1e-4, atol=1e-6)
    assert valued["log_probs"].shape == (20, 3) and float(valued["log_probs"].max()) <= 0.0


def test_greedy_evaluation_is_deterministic_and_capped():
    actor = Actor(4, 2, (8,), torch.Generator().manual_seed(3))
    first = evaluate_greedy(actor, episodes=4, seed=9, max_episode_steps=50)
    np.testing.assert_array_equal(first, evaluate_greedy(actor, episodes=4, seed=9, max_episode_steps=50))
    assert first.shape == (4,) and np.all((first >= 1) & (first <= 50))


def _actors(count: int) -> list[Actor]:
    actors = []
    for i in range(count):
        actor = Actor(4, 2, (16, 16), torch.Generator().manual_seed(i))
        with torch.no_grad():
            for parameter in actor.parameters():
                parameter.mul_(1.0 + 2.0 * i)  # from nearly uniform to sharp policies: episodes of many lengths
        actors.append(actor)
    return actors


def test_policies_evaluated_together_score_as_each_alone():
    actors = _actors(7)
    together = evaluate_policies([actor.snapshot() for actor in actors], episodes=3, seed=4, max_episode_steps=80)
    alone = np.stack([evaluate_greedy(actor, episodes=3, seed=4, max_episode_steps=80) for actor in actors])
    np.testing.assert_array_equal(together, alone)
    assert together.shape == (7, 3) and len(np.unique(together)) > 3, "the test needs policies that differ"
    with pytest.raises(ValueError, match="policies"):
        evaluate_policies([], episodes=3, seed=4)


def _jitter_update(actor, critic, optimizer, batch, *, generator, **settings):
    # Moves the policy a different random way every update, so every evaluated snapshot differs.
    with torch.no_grad():
        for parameter in actor.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    return dict.fromkeys(UPDATE_DIAGNOSTICS, 0.0)


JITTER_LOOP = dict(
    gae_masks=lambda terminated, truncated: (terminated, terminated | truncated),
    bootstrap_values=lambda values, *rest: values,
    gae_advantages=lambda rewards, values, *rest: torch.zeros_like(values),
    ppo_update=_jitter_update,
)


@pytest.mark.parametrize("per_batch", [1, 2, 4])
def test_evaluations_batched_or_not_give_the_same_history(per_batch):
    config = PPOConfig(seed=5, total_steps=7 * 64, num_envs=2, rollout_steps=32, evaluation_every=2,
                       evaluation_episodes=3, max_episode_steps=60, hidden_sizes=(16,))
    one_by_one = run_ppo(dataclasses.replace(config, evaluations_per_batch=1), **JITTER_LOOP)
    rows = []
    batched = run_ppo(dataclasses.replace(config, evaluations_per_batch=per_batch), progress=rows.append,
                      **JITTER_LOOP)
    for key in HISTORY_KEYS:
        if key != "wall_time":
            np.testing.assert_array_equal(batched["history"][key], one_by_one["history"][key], err_msg=key)
    np.testing.assert_array_equal(batched["final_evaluation_returns"], one_by_one["final_evaluation_returns"])
    evaluated = np.isfinite(batched["history"]["evaluation_mean"])
    assert list(np.flatnonzero(evaluated) + 1) == [2, 4, 6, 7], "every second update, and the last"
    # progress sees every row once, in order, and only complete: an evaluated row arrives with its evaluation.
    assert [row["update"] for row in rows] == list(range(1, 8))
    assert [math.isfinite(row["evaluation_mean"]) for row in rows] == list(evaluated)
