"""The course's CartPole (kata/rl/cartpole.py) against CartPole-v1's published dynamics; one environment is a batch
of one.

Each expected step below is computed by hand, in Python floats with the math module, from the published equations
(Barto, Sutton and Anderson 1983; Gymnasium's CartPole-v1): no code is shared with the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kata.rl.cartpole import CartPoleBatch, step_states
from kata.testing.strategies.ppo_cartpole import cartpole_states

pytestmark = pytest.mark.frame


def published_step(state, action):
    """One step of CartPole-v1 as published: semi-implicit dynamics, explicit Euler with the old velocities."""
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    x, x_dot, theta, theta_dot = (float(v) for v in state)
    force = force_mag if action == 1 else -force_mag
    costheta, sintheta = math.cos(theta), math.sin(theta)
    temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
    thetaacc = (gravity * sintheta - costheta * temp) / (length * (4.0 / 3.0 - masspole * costheta**2 / total_mass))
    xacc = temp - polemass_length * thetaacc * costheta / total_mass
    x, x_dot = x + tau * x_dot, x_dot + tau * xacc
    theta, theta_dot = theta + tau * theta_dot, theta_dot + tau * thetaacc
    terminated = x < -2.4 or x > 2.4 or theta < -12 * 2 * math.pi / 360 or theta > 12 * 2 * math.pi / 360
    return np.array([x, x_dot, theta, theta_dot]), terminated


def one_environment(state, max_episode_steps=500):
    """A batch of one environment that starts from ``state``."""
    env = CartPoleBatch(1, max_episode_steps=max_episode_steps)
    env.reset(seed=0)
    env.states = [state]
    return env


@given(state=cartpole_states, action=st.integers(0, 1))
def test_one_step_follows_the_published_equations(state, action):
    expected, expected_terminated = published_step(state, action)
    next_states, terminated = step_states(state[None, :], np.array([action]))
    np.testing.assert_allclose(next_states[0], expected, rtol=1e-12, atol=1e-15,
                               err_msg="the state must follow CartPole-v1's equations with explicit Euler")
    assert terminated[0] == expected_terminated, f"terminated as published: {terminated[0]}, {expected_terminated}"
    env = one_environment(state)
    observation, reward, terminated, truncated, info = env.step(np.array([action]))
    seen = info["final_observation"][0] if terminated[0] else observation[0]  # an ended episode was reset
    assert seen.dtype == np.float32 and env.states.dtype == np.float64, (
        f"observations are float32, the state float64: {seen.dtype}, {env.states.dtype}")
    np.testing.assert_array_equal(seen, expected.astype(np.float32),
                                  err_msg="the observation is the state (x, x_dot, theta, theta_dot) cast to float32")
    assert reward[0] == 1.0, "every step earns +1, the terminating one included"
    assert terminated[0] == expected_terminated and not truncated[0], (
        f"terminated as published, never truncated within the limit: {terminated[0]}, {truncated[0]}")


def test_positions_move_with_the_old_velocities():
    env = one_environment([0.0, 1.0, 0.0, 2.0])
    env.step(np.array([1]))
    x, x_dot, theta, theta_dot = env.states[0]
    assert x == pytest.approx(0.02) and theta == pytest.approx(0.04), "explicit Euler: x += tau * old x_dot"
    assert x_dot != 1.0 and theta_dot != 2.0, "the velocities change in the step (the accelerations are applied)"


@pytest.mark.parametrize("state, reason", [
    ([2.39, 1.0, 0.0, 0.0], "the cart left |x| <= 2.4"),
    ([-2.39, -1.0, 0.0, 0.0], "the cart left |x| <= 2.4"),
    ([0.0, 0.0, 0.2094, 0.5], "the pole passed 12 degrees"),
    ([0.0, 0.0, -0.2094, -0.5], "the pole passed 12 degrees"),
])
def test_termination_thresholds_end_the_episode_and_the_environment_resets_itself(state, reason):
    env = one_environment(state)
    action = np.array([0 if state[1] < 0 or state[3] < 0 else 1])
    observation, reward, terminated, truncated, info = env.step(action)
    assert terminated[0] and not truncated[0] and reward[0] == 1.0, reason
    ending, _ = step_states(np.array([state]), action)
    np.testing.assert_array_equal(info["final_observation"], ending.astype(np.float32),
                                  err_msg="the final observation is the state that ended the episode")
    assert np.all(np.abs(observation[0]) <= 0.05) and env.elapsed_steps[0] == 0, (
        f"the environment starts its next episode at once: {observation[0]}, step {env.elapsed_steps[0]}")


def test_the_time_limit_truncates_and_does_not_terminate():
    env = CartPoleBatch(1)
    env.reset(seed=3)
    for step in range(1, 501):
        x, x_dot, theta, theta_dot = env.states[0]
        # A textbook balancing rule: push toward where the pole is falling, gently re-centre the cart.
        _, _, terminated, truncated, _ = env.step(np.array([int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)]))
        assert not terminated[0], "the balancing rule keeps the pole up for 500 steps"
        assert truncated[0] == (step == 500), "truncation comes at exactly the 500th step"
    assert env.elapsed_steps[0] == 0, "a truncated episode is followed by a new one"


def test_termination_on_the_last_allowed_step_reports_both_flags():
    env = one_environment([2.39, 1.0, 0.0, 0.0], max_episode_steps=1)
    _, _, terminated, truncated, _ = env.step(np.array([1]))
    assert terminated[0] and truncated[0], (
        f"terminating on the last allowed step reports both flags: {terminated[0]}, {truncated[0]}")


def test_seeded_resets():
    env = CartPoleBatch(1)
    first, _ = env.reset(seed=7)
    assert np.all(np.abs(first) <= 0.05), "the reset state is U(-0.05, 0.05) in every coordinate"
    second, _ = env.reset()
    again, _ = CartPoleBatch(1).reset(seed=7)
    np.testing.assert_array_equal(first, again, err_msg="the same seed gives the same reset state")
    assert not np.array_equal(first, second), "a reset without a seed continues the generator"
    assert not np.array_equal(first, CartPoleBatch(1).reset(seed=8)[0]), "different seeds give different states"


def test_state_is_copied_in_and_out():
    mine = np.array([[0.1, 0.0, 0.0, 0.0]])
    env = one_environment(mine[0])
    env.states = mine
    env.step(np.array([1]))
    assert mine[0, 0] == 0.1, "setting the state must not keep the caller's array"
    view = env.states
    view[0, 0] = 99.0
    assert env.states[0, 0] != 99.0, "the state read out is a copy: writing to it must not change the environment"


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="num_envs"):
        CartPoleBatch(0)
    batch = CartPoleBatch(2)
    with pytest.raises(ValueError, match="reset"):
        batch.step(np.array([0, 1]))
    batch.reset(seed=0)
    for actions in ([0, 2], [-1, 0], [0.5, 1.0], [0, 1, 1], 1):
        with pytest.raises(ValueError, match="action"):
            batch.step(np.array(actions))
    with pytest.raises(ValueError, match="states"):
        batch.states = [[0.0, 0.0, 0.0, 0.0]]


@pytest.mark.parametrize("limit", [12, 500])
def test_the_batch_equals_n_environments_stepped_alone(limit):
    count, seed = 3, 40
    batch = CartPoleBatch(count, max_episode_steps=limit)
    alone = [CartPoleBatch(1, max_episode_steps=limit) for _ in range(count)]
    observations, _ = batch.reset(seed=seed)
    first = [env.reset(seed=seed + i)[0][0] for i, env in enumerate(alone)]
    np.testing.assert_array_equal(observations, np.stack(first),
                                  err_msg="environment i of a batch seeded s starts as one alone seeded s + i")
    actions_rng = np.random.default_rng(0)
    ended = 0
    for _ in range(300):
        actions = actions_rng.integers(0, 2, size=count)
        observations, rewards, terminated, truncated, info = batch.step(actions)
        for i, env in enumerate(alone):
            obs, reward, term, trunc, own = env.step(actions[i:i + 1])
            assert (term[0], trunc[0], reward[0]) == (terminated[i], truncated[i], rewards[i]), (
                f"env {i}: the batch's (terminated, truncated, reward) "
                f"{(terminated[i], truncated[i], rewards[i])} must be the lone env's {(term[0], trunc[0], reward[0])}")
            if term[0] or trunc[0]:
                ended += 1
                np.testing.assert_array_equal(info["final_observation"][i], own["final_observation"][0],
                                              err_msg="the batch keeps the observation that ended the episode")
            np.testing.assert_array_equal(observations[i], obs[0], err_msg="after an autoreset the batch returns "
                                          "the next episode's first observation, drawn as the lone env draws it")
    assert ended > count, "the comparison must cross several autoresets"


def test_batch_episode_statistics():
    batch = CartPoleBatch(2, max_episode_steps=5)
    batch.reset(seed=1)
    for step in range(1, 6):
        _, _, terminated, truncated, info = batch.step(np.array([0, 1]) if step % 2 else np.array([1, 0]))
    assert truncated.all() and not terminated.any(), (
        f"5 steps with a limit of 5 truncate both envs and terminate neither: {truncated}, {terminated}")
    np.testing.assert_array_equal(info["episode_returns"], [5.0, 5.0],
                                  err_msg="an episode's return is reported in info when it ends")
    np.testing.assert_array_equal(info["episode_lengths"], [5, 5],
                                  err_msg="an episode's length is reported in info when it ends")
