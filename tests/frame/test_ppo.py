"""The PPO loop's frame (kata/rl/ppo.py, the networks of kata/rl/cartpole.py): configuration, rollout storage,
greedy evaluation, progress reports, and the runs' aggregation (kata/rl/runs.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from kata.rl.cartpole import Actor, Critic, action_log_probs
from kata.rl.ppo import (
    HISTORY_KEYS,
    UPDATE_DIAGNOSTICS,
    PPOConfig,
    evaluate_greedy,
    profile_config,
    run_ppo,
)
from kata.rl.runs import aggregate_training_runs
from kata.testing.training import late_evaluation_minimum

pytestmark = pytest.mark.frame


@pytest.mark.parametrize("mode, budget", [("smoke", 30_000), ("full", 50_000)])
def test_profiles(mode, budget):
    config = profile_config(mode, seed=11)
    assert isinstance(config, PPOConfig) and config.seed == 11, (
        f"profile_config gives a PPOConfig with the seed asked for: {config!r}")
    assert config.num_updates * config.batch_size <= budget, f"the {mode} profile must stay within {budget} steps"
    assert config.evaluation_episodes == 10 and config.max_episode_steps == 500, (
        f"10 evaluation episodes of at most 500 steps: {config.evaluation_episodes}, {config.max_episode_steps}")
    quick = dataclasses.replace(config, evaluation_every=2)
    assert quick.evaluation_every == 2 and quick.seed == 11, (
        f"dataclasses.replace changes only the field named: {quick.evaluation_every}, {quick.seed}")


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
    np.testing.assert_array_equal(curve["environment_steps"], [100, 200, 300, 400],
                                  err_msg="the learning curve's x axis is the evaluated environment steps")
    np.testing.assert_array_equal(curve["all_curves"], [[10, nan, 30, nan], [20, 40, nan, nan],
                                                        [30, nan, nan, 50]],
                                  err_msg="each run's row is NaN at the steps it was not evaluated at")
    np.testing.assert_array_equal(curve["median"], [20, 40, 30, 50], err_msg="the median over seeds at each step")
    np.testing.assert_array_equal(curve["q25"], [15, 40, 30, 50],
                                  err_msg="the 25th percentile over seeds at each step")
    np.testing.assert_array_equal(curve["q75"], [25, 40, 30, 50],
                                  err_msg="the 75th percentile over seeds at each step")
    with pytest.raises(ValueError, match="runs"):
        aggregate_training_runs([])
    with pytest.raises(ValueError, match="runs"):
        aggregate_training_runs([{"final_evaluation_mean": 1.0}])


def test_late_evaluation_minimum_reads_the_last_fifth():
    run = _run([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000],
               [1.0, 500.0, 2.0, math.nan, 3.0, 500.0, 4.0, 480.0, math.nan, 490.0])
    assert late_evaluation_minimum(run) == 480.0, (
        f"the minimum of the evaluations in the last fifth, NaNs skipped: {late_evaluation_minimum(run)}")


def test_networks_are_orthogonal_and_seeded():
    actor = Actor(4, 2, (64, 64), torch.Generator().manual_seed(0))
    hidden = actor.net[2].weight.detach()
    np.testing.assert_allclose((hidden @ hidden.T).numpy(), 2.0 * np.eye(64), atol=1e-4,
                               err_msg="hidden layers: orthogonal with gain sqrt(2)")
    head = actor.net[-1].weight.detach()
    np.testing.assert_allclose((head @ head.T).numpy(), 1e-4 * np.eye(2), atol=1e-8,
                               err_msg="policy head: orthogonal with gain 0.01 (a near-uniform first policy)")
    assert all(float(layer.bias.detach().abs().max()) == 0.0 for layer in actor.net if hasattr(layer, "bias")), (
        "every bias starts at zero")
    again = Actor(4, 2, (64, 64), torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(actor.parameters(), again.parameters())), (
        "the same generator seed gives the same actor")
    critic = Critic(4, (8,), torch.Generator().manual_seed(0))
    assert critic(torch.zeros(5, 4)).shape == (5,), (
        f"the critic gives one value per observation: {tuple(critic(torch.zeros(5, 4)).shape)}")


def test_rollout_storage_keeps_final_observations_and_flags_apart():
    # The loop seen through the functions it calls: what GAE's functions and the update receive from one rollout.
    seen = {}

    def spy_masks(terminated, truncated):
        seen["terminated"], seen["truncated"] = terminated.clone(), truncated.clone()
        return terminated, terminated | truncated

    def spy_bootstrap(values, final_values, last_values, terminated, truncated):
        seen["values"], seen["final_values"], seen["last_values"] = values, final_values, last_values
        return values

    def spy_update(actor, critic, optimizer, batch, **settings):
        seen["batch"], seen["actor"], seen["critic"] = batch, actor, critic
        return dict.fromkeys(UPDATE_DIAGNOSTICS, 0.0)

    config = PPOConfig(seed=5, total_steps=60, num_envs=3, rollout_steps=20, max_episode_steps=7, hidden_sizes=(8,),
                       evaluation_episodes=2)
    run_ppo(config, gae_masks=spy_masks, bootstrap_values=spy_bootstrap,
            gae_advantages=lambda rewards, values, *rest: torch.zeros_like(values), ppo_update=spy_update)
    terminated, truncated = seen["terminated"].numpy(), seen["truncated"].numpy()
    done = terminated | truncated
    assert terminated.shape == (20, 3), "flags are time-major [rollout_steps, num_envs]"
    assert truncated.any(), "the 7-step limit must truncate some episodes"
    assert not np.array_equal(terminated, done), "truncation must stay distinct from termination"
    batch = seen["batch"]
    observations = batch.observations.reshape(20, 3, 4)
    for t, n in zip(*np.nonzero(done[:-1])):
        assert np.all(np.abs(observations[t + 1, n].numpy()) <= 0.05), "after an end comes a reset observation"
        assert seen["final_values"][t, n] != seen["values"][t + 1, n], \
            "where an episode ended, V(final observation) is not V(the next episode's first observation)"
    assert np.all(seen["final_values"].numpy()[~done] == 0), "final_values are 0 where no episode ended"
    with torch.no_grad():
        values = seen["critic"](batch.observations).reshape(20, 3)
        log_probs = action_log_probs(seen["actor"](batch.observations), batch.actions)
    # The networks are the ones the update received, unchanged since the valuing pass (the spy update is a no-op).
    np.testing.assert_allclose(seen["values"].numpy(), values.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="values are V(s_t) of the stored observations")
    np.testing.assert_allclose(batch.old_log_probs.numpy(), log_probs.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="old_log_probs are log pi(a_t|s_t) of the policy that acted")
    assert seen["last_values"].shape == (3,), "one V(last observation) per environment"
    assert float(batch.old_log_probs.max()) <= 0.0, (
        f"old_log_probs are log-probabilities (<= 0): max {float(batch.old_log_probs.max())}")


def test_greedy_evaluation_is_deterministic_and_capped():
    actor = Actor(4, 2, (8,), torch.Generator().manual_seed(3))
    first = evaluate_greedy(actor, episodes=4, seed=9, max_episode_steps=50)
    np.testing.assert_array_equal(first, evaluate_greedy(actor, episodes=4, seed=9, max_episode_steps=50),
                                  err_msg="the same policy, episodes and seed give the same returns")
    assert first.shape == (4,) and np.all((first >= 1) & (first <= 50)), (
        f"one return per episode, each in [1, 50]: {first}")


def test_greedy_evaluation_plays_each_episode_once_with_the_most_probable_action():
    actor = Actor(4, 2, (16,), torch.Generator().manual_seed(1))
    with torch.no_grad():
        for parameter in actor.parameters():
            parameter.mul_(5.0)  # a sharp policy: some episodes long, some short
    returns = evaluate_greedy(actor, episodes=3, seed=4, max_episode_steps=80)
    from kata.rl.cartpole import CartPoleBatch

    for episode, expected in enumerate(returns):
        env = CartPoleBatch(1, max_episode_steps=80)  # one environment, played until its first episode ends
        observations, _ = env.reset(seed=4 + episode)
        played, done = 0, False
        while not done:
            with torch.no_grad():
                actions = actor(torch.from_numpy(observations)).argmax(dim=-1).numpy()
            observations, rewards, terminated, truncated, _ = env.step(actions)
            played += rewards[0]
            done = terminated[0] or truncated[0]
        assert played == expected, (
            f"episode {episode} returns {expected} in the evaluation and {played} played alone, greedily")


def test_progress_sees_every_row_once_in_order_and_complete():
    config = PPOConfig(seed=5, total_steps=7 * 64, num_envs=2, rollout_steps=32, evaluation_every=2,
                       evaluation_episodes=3, max_episode_steps=60, hidden_sizes=(16,), epochs=2, minibatch_size=32)
    from solutions import gae_advantages, ppo_update
    from solutions.ppo_cartpole import bootstrap_values, gae_masks

    rows = []
    run = run_ppo(config, progress=rows.append, gae_masks=gae_masks, bootstrap_values=bootstrap_values,
                  gae_advantages=gae_advantages, ppo_update=ppo_update)
    assert set(run["history"]) == set(HISTORY_KEYS), f"the history has one list per key: {sorted(run['history'])}"
    evaluated = np.isfinite(run["history"]["evaluation_mean"])
    assert list(np.flatnonzero(evaluated) + 1) == [2, 4, 6, 7], "every second update, and the last"
    # progress sees every row once, in order, and only complete: an evaluated row arrives with its evaluation.
    assert [row["update"] for row in rows] == list(range(1, 8)), (
        f"progress sees every update once, in order: {[row['update'] for row in rows]}")
    assert [math.isfinite(row["evaluation_mean"]) for row in rows] == list(evaluated), (
        "an evaluated row reaches progress with its evaluation, never before it")
