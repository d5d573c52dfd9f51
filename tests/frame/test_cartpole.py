"""The course's CartPole (kata/rl/cartpole.py) against CartPole-v1's published dynamics.

Each expected step below is computed by hand, in Python floats with the math module, from the published equations
(Barto, Sutton and Anderson 1983; Gymnasium's CartPole-v1): no code is shared with the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kata.rl.cartpole import CartPole, CartPoleBatch
from kata.testing.strategies import cartpole_states

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


@given(state=cartpole_states, action=st.integers(0, 1))
def test_one_step_follows_the_published_equations(state, action):
    env = CartPole()
    env.state = state
    observation, reward, terminated, truncated, _ = env.step(action)
    expected, expected_terminated = published_step(state, action)
    np.testing.assert_allclose(env.state, expected, rtol=1e-12, atol=1e-15,
                               err_msg="the state must follow CartPole-v1's equations with explicit Euler")
    assert observation.dtype == np.float32 and env.state.dtype == np.float64, (
        f"observations are float32, the state float64: {observation.dtype}, {env.state.dtype}")
    np.testing.assert_array_equal(observation, expected.astype(np.float32),
                                  err_msg="the observation is the state (x, x_dot, theta, theta_dot) cast to float32")
    assert reward == 1.0, "every step earns +1, the terminating one included"
    assert terminated == expected_terminated and not truncated, (
        f"terminated as published, never truncated within the limit: {terminated}, {truncated}")


def test_positions_move_with_the_old_velocities():
    env = CartPole()
    env.state = [0.0, 1.0, 0.0, 2.0]
    env.step(1)
    x, x_dot, theta, theta_dot = env.state
    assert x == pytest.approx(0.02) and theta == pytest.approx(0.04), "explicit Euler: x += tau * old x_dot"
    assert x_dot != 1.0 and theta_dot != 2.0, "the velocities change in the step (the accelerations are applied)"


@pytest.mark.parametrize("state, reason", [
    ([2.39, 1.0, 0.0, 0.0], "the cart left |x| <= 2.4"),
    ([-2.39, -1.0, 0.0, 0.0], "the cart left |x| <= 2.4"),
    ([0.0, 0.0, 0.2094, 0.5], "the pole passed 12 degrees"),
    ([0.0, 0.0, -0.2094, -0.5], "the pole passed 12 degrees"),
])
def test_termination_thresholds(state, reason):
    env = CartPole()
    env.state = state
    _, reward, terminated, truncated, _ = env.step(0 if state[1] < 0 or state[3] < 0 else 1)
    assert terminated and not truncated and reward == 1.0, reason
    with pytest.raises(ValueError, match="reset"):
        env.step(0)


def test_the_time_limit_truncates_and_does_not_terminate():
    env = CartPole()
    env.reset(seed=3)
    for step in range(1, 501):
        x, x_dot, theta, theta_dot = env.state
        # A textbook balancing rule: push toward where the pole is falling, gently re-centre the cart.
        _, _, terminated, truncated, _ = env.step(int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0))
        assert not terminated, "the balancing rule keeps the pole up for 500 steps"
        assert truncated == (step == 500), "truncation comes at exactly the 500th step"
    with pytest.raises(ValueError):
        env.step(0)


def test_termination_on_the_last_allowed_step_reports_both_flags():
    env = CartPole(max_episode_steps=1)
    env.state = [2.39, 1.0, 0.0, 0.0]
    _, _, terminated, truncated, _ = env.step(1)
    assert terminated and truncated, (
        f"terminating on the last allowed step reports both flags: {terminated}, {truncated}")


def test_seeded_resets():
    env = CartPole()
    first, _ = env.reset(seed=7)
    assert np.all(np.abs(first) <= 0.05), "the reset state is U(-0.05, 0.05) in every coordinate"
    second, _ = env.reset()
    again, _ = CartPole().reset(seed=7)
    np.testing.assert_array_equal(first, again, err_msg="the same seed gives the same reset state")
    assert not np.array_equal(first, second), "a reset without a seed continues the generator"
    assert not np.array_equal(first, CartPole().reset(seed=8)[0]), "different seeds give different reset states"


def test_state_is_copied_in_and_out():
    env = CartPole()
    mine = np.array([0.1, 0.0, 0.0, 0.0])
    env.state = mine
    env.step(1)
    assert mine[0] == 0.1, "setting the state must not keep the caller's array"
    view = env.state
    view[0] = 99.0
    assert env.state[0] != 99.0, "the state read out is a copy: writing to it must not change the environment"


def test_bad_input_is_rejected():
    env = CartPole()
    env.reset(seed=0)
    for action in (2, -1, 0.5, [0, 1]):
        with pytest.raises(ValueError, match="action"):
            env.step(action)
    with pytest.raises(ValueError, match="state"):
        env.state = [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="num_envs"):
        CartPoleBatch(0)
    batch = CartPoleBatch(2)
    with pytest.raises(ValueError, match="reset"):
        batch.step(np.array([0, 1]))
    batch.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        batch.step(np.array([0, 1, 1]))


@pytest.mark.parametrize("limit", [12, 500])
def test_the_batch_equals_n_single_environments(limit):
    count, seed = 3, 40
    batch = CartPoleBatch(count, max_episode_steps=limit)
    singles = [CartPole(max_episode_steps=limit) for _ in range(count)]
    observations, _ = batch.reset(seed=seed)
    single_observations = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    np.testing.assert_array_equal(observations, np.stack(single_observations),
                                  err_msg="the batch environment observes what the single environments do")
    actions_rng = np.random.default_rng(0)
    ended = 0
    for _ in range(300):
        actions = actions_rng.integers(0, 2, size=count)
        observations, rewards, terminated, truncated, info = batch.step(actions)
        for i, env in enumerate(singles):
            obs, reward, term, trunc, _ = env.step(actions[i])
            assert (term, trunc, reward) == (terminated[i], truncated[i], rewards[i]), (
                f"env {i}: the batch's (terminated, truncated, reward) "
                f"{(terminated[i], truncated[i], rewards[i])} must be a single env's {(term, trunc, reward)}")
            if term or trunc:
                ended += 1
                np.testing.assert_array_equal(info["final_observation"][i], obs,
                                              err_msg="the batch keeps the observation that ended the episode")
                obs, _ = env.reset()
            np.testing.assert_array_equal(observations[i], obs, err_msg="after an autoreset the batch returns "
                                          "the next episode's first observation, drawn as a single env would")
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
