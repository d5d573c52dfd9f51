"""The reinforce tests: REINFORCE, the score-function estimator and the detach contract.

The policy-gradient properties use a one-state softmax policy with K actions and parameters θ = its logits,
where everything is exact: the expected reward J(θ) = Σ_a π_a R_a has the analytic gradient
∂J/∂θ_k = π_k (R_k - J), and the expectation of the surrogate's gradient is a finite sum over the K actions
weighted by their probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.assertions import PRECISION, assert_differentiable, close, dtype_of, gradient, mistake, plain
from kata.testing.battery import battery_tests
from kata.testing.strategies import containers, float_dtypes, floats
from kata.testing.strategies.reinforce import (
    CONTRACTS,
    reward_streams,
    softmax_policies,
    surrogate_batches,
)

pytestmark = pytest.mark.reinforce

TIGHT = dict(rtol=1e-9, atol=1e-9)


def expected_surrogate_gradient(impl, logits, advantages):
    """Σ_a π_a ∇θ L(a): the surrogate's gradient for each action alone, weighted by its probability."""
    theta = torch.tensor(logits, requires_grad=True)
    log_pi = torch.log_softmax(theta, dim=0)
    probabilities = log_pi.exp().detach().numpy()
    total = np.zeros_like(logits)
    for action, advantage in enumerate(advantages):
        loss = impl.reinforce_surrogate_loss(log_pi[action:action + 1], torch.tensor([advantage]))
        assert_differentiable(loss, "the surrogate loss of tensor log-probabilities", "log_probs")
        (step,) = torch.autograd.grad(loss, theta, retain_graph=True, allow_unused=True)
        total += probabilities[action] * (0.0 if step is None else step.numpy())
    return total


def analytic_policy_gradient(logits, rewards):
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    return probabilities * (rewards - probabilities @ rewards)


# ---- the surrogate loss ----------------------------------------------------------------------------------------

def surrogate_readings(products: np.ndarray) -> dict[str, object]:
    return {mistake("reinforce/loss_sign_flipped"): np.mean(products),
            mistake("reinforce/loss_summed_not_averaged"): -np.sum(products)}


@given(batch=surrogate_batches())
def test_surrogate_loss_is_minus_the_mean_of_log_prob_times_advantage(impl, batch):
    originals = {key: value.copy() for key, value in batch.items()}
    loss = impl.reinforce_surrogate_loss(**batch)
    assert isinstance(loss, np.ndarray | np.floating) and np.ndim(loss) == 0, (
        f"NumPy in must give a NumPy scalar (a 0-d array) out; got {type(loss).__name__} of shape {np.shape(loss)}"
    )
    products = batch["log_probs"] * batch["advantages"]
    close(loss, -np.mean(products),
          "the surrogate loss is -mean(log_probs * advantages): minus, so that minimising it follows the policy "
          "gradient, and a mean over every sample", readings=surrogate_readings(products))
    for key, value in originals.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")


@given(batch=surrogate_batches(), dtypes=st.tuples(float_dtypes, float_dtypes), data=st.data())
def test_surrogate_loss_is_a_tensor_if_either_input_is_one_in_the_promoted_dtype(impl, batch, dtypes, data):
    arrays = {key: value.astype(dtype) for (key, value), dtype in zip(batch.items(), dtypes)}
    given_in = data.draw(containers(arrays), label="arguments")
    loss = impl.reinforce_surrogate_loss(**given_in)
    kinds = ", ".join(f"{key} as {'a tensor' if isinstance(value, torch.Tensor) else 'NumPy'} ({value.dtype})"
                      for key, value in given_in.items())
    wants_tensor = any(isinstance(value, torch.Tensor) for value in given_in.values())
    assert isinstance(loss, torch.Tensor) == wants_tensor, (
        f"with {kinds}, the loss must be {'a tensor' if wants_tensor else 'NumPy'} (a tensor if either input is a "
        f"tensor, else NumPy); got {type(loss).__name__}")
    promoted = np.promote_types(*dtypes).type
    assert dtype_of(loss) == np.dtype(promoted) and np.ndim(loss) == 0, (
        f"with {kinds}, the loss must be a scalar of the promoted dtype {np.dtype(promoted)}; got {dtype_of(loss)} "
        f"of shape {tuple(np.shape(loss))}")
    products = arrays["log_probs"].astype(np.float64) * arrays["advantages"].astype(np.float64)
    close(loss, -np.mean(products), f"with {kinds}, the loss is -mean(log_probs * advantages)",
          rtol=PRECISION[promoted], expected_dtype=promoted, readings=surrogate_readings(products))


@given(batch=surrogate_batches(), dtypes=st.tuples(float_dtypes, float_dtypes), data=st.data())
def test_gradient_reaches_log_probs_and_never_the_advantages(impl, batch, dtypes, data):
    arrays = {key: value.astype(dtype) for (key, value), dtype in zip(batch.items(), dtypes)}
    given_in = data.draw(containers(arrays, tensors=None), label="arguments")
    assume(any(isinstance(value, torch.Tensor) for value in given_in.values()))
    for value in given_in.values():
        if isinstance(value, torch.Tensor):
            value.requires_grad_(True)
    # The advantages as a caller computes them: a tensor with a graph of its own (a critic's output).
    advantages = given_in["advantages"]
    if isinstance(advantages, torch.Tensor):
        critic = advantages
        advantages = critic * 1.0
        given_in["advantages"] = advantages
    loss = impl.reinforce_surrogate_loss(**given_in)
    if isinstance(advantages, torch.Tensor):
        assert advantages.requires_grad and advantages.grad_fn is not None, (
            "advantages, a tensor computed with autograd, came back with requires_grad False: it was detached in "
            "place; detach a copy (advantages.detach()) and leave the caller's tensor as it was")
    log_probs = given_in["log_probs"]
    if not isinstance(log_probs, torch.Tensor):
        assert not isinstance(loss, torch.Tensor) or not loss.requires_grad, (
            "with NumPy log-probabilities only the advantages require grad, and they are constants: the loss must "
            "not require grad (gradient would reach the advantages)")
        return
    assert_differentiable(loss, "the surrogate loss of tensor log-probabilities", "log_probs")
    loss.backward()
    if isinstance(advantages, torch.Tensor):
        assert critic.grad is None or not critic.grad.any(), (
            f"gradient {plain(critic.grad)} reached the advantages: they are constants (detach them), or the policy "
            "loss trains whatever computed them")
    count = batch["advantages"].size
    expected = -arrays["advantages"].astype(np.float64) / count
    own = arrays["log_probs"].dtype.type
    close(gradient(log_probs, "log_probs"), expected, "∂loss/∂log_probs_i must be -A_i / N (a mean over N samples)",
          rtol=PRECISION[own], expected_dtype=own,
          readings={"-A_i, " + mistake("reinforce/loss_summed_not_averaged"): expected * count,
                    "+A_i / N, " + mistake("reinforce/loss_sign_flipped"): -expected})


NO_GRADIENT = "0: no gradient reaches the logits through log π"  # no catalogued mistake gives it


@given(policy=softmax_policies(), baseline=floats(-20.0, 20.0), target=st.integers(0, 5))
def test_expected_surrogate_gradient_is_the_policy_gradient(impl, policy, baseline, target):
    logits, rewards = policy
    expected = expected_surrogate_gradient(impl, logits, rewards)
    true_gradient = analytic_policy_gradient(logits, rewards)
    close(expected, -true_gradient,
          "averaged over the actions with their probabilities, the surrogate's gradient must be minus the true "
          "gradient of the expected reward, π_k (R_k - J)",
          readings={"+π_k (R_k - J), " + mistake("reinforce/loss_sign_flipped"): true_gradient,
                    NO_GRADIENT: np.zeros_like(true_gradient)})
    close(expected_surrogate_gradient(impl, logits, rewards - baseline), expected,
          "subtracting a constant baseline from every advantage must not change the expected gradient "
          "(E[∇ log π] = 0)", rtol=1e-8)
    # A verifier: 1 for the right action, 0 otherwise. A step function has no useful derivative, and REINFORCE
    # never differentiates the reward.
    verifier = (np.arange(len(logits)) == target % len(logits)).astype(np.float64)
    verifier_gradient = analytic_policy_gradient(logits, verifier)
    close(expected_surrogate_gradient(impl, logits, verifier), -verifier_gradient,
          "with a 0/1 verifier reward the expected surrogate gradient must still be minus the policy gradient",
          readings={"+π_k (R_k - J), " + mistake("reinforce/loss_sign_flipped"): verifier_gradient,
                    NO_GRADIENT: np.zeros_like(verifier_gradient)})


@given(policy=softmax_policies(), critic_offset=floats(-5.0, 5.0))
def test_advantages_are_constants_even_when_they_require_grad(impl, policy, critic_offset):
    logits, rewards = policy
    theta = torch.tensor(logits, requires_grad=True)
    critic = torch.tensor(critic_offset, requires_grad=True)
    # Advantages computed from a critic parameter AND from the policy's own parameters: both graphs must be cut.
    advantages = torch.tensor(rewards) - critic - torch.softmax(theta, dim=0)
    loss = impl.reinforce_surrogate_loss(torch.log_softmax(theta, dim=0), advantages)
    assert_differentiable(loss, "the surrogate loss of tensor log-probabilities", "log_probs")
    products = (torch.log_softmax(theta, dim=0) * advantages).detach().numpy()
    # The value first: a loss with the wrong value fails here with what the value is, not with the gradient below.
    close(loss.detach().numpy(), -products.mean(), "the surrogate loss is -mean(log π · A)",
          readings=surrogate_readings(products))
    loss.backward()
    assert critic.grad is None or float(critic.grad) == 0.0, (
        f"gradient {float(critic.grad):.4g} reached the critic parameter the advantages were computed from: "
        "detach the advantages, or the policy loss trains the critic"
    )
    constant = advantages.detach()
    expected = torch.autograd.functional.jacobian(
        lambda t: -(torch.log_softmax(t, dim=0) * constant).mean(), torch.tensor(logits))

    def readings():
        through_advantages = torch.autograd.functional.jacobian(
            lambda t: -(torch.log_softmax(t, dim=0) * (constant + torch.softmax(theta, dim=0).detach()
                                                       - torch.softmax(t, dim=0))).mean(), torch.tensor(logits))
        return {mistake("reinforce/advantages_not_detached"): through_advantages.numpy(),
                mistake("reinforce/loss_sign_flipped"): -expected.numpy(),
                mistake("reinforce/loss_summed_not_averaged"): len(logits) * expected.numpy()}

    close(gradient(theta, "the logits θ"), expected.numpy(),
          "∂loss/∂θ must be the gradient of -mean(log π · A) with A a constant; A depends on θ here, through "
          "softmax(θ), and no gradient may flow through it", readings=readings)


@given(policy=softmax_policies(), action=st.integers(0, 5), advantage=floats(0.1, 10.0),
       sign=st.sampled_from([1.0, -1.0]))
def test_one_gradient_step_moves_the_probability_with_the_advantage(impl, policy, action, advantage, sign):
    logits, _ = policy
    action %= len(logits)
    theta = torch.tensor(logits, requires_grad=True)
    before = torch.softmax(theta, dim=0)[action].item()
    assume(1e-6 < before < 1.0 - 1e-6)
    loss = impl.reinforce_surrogate_loss(torch.log_softmax(theta, dim=0)[action:action + 1],
                                         torch.tensor([sign * advantage]))
    assert_differentiable(loss, "the surrogate loss of tensor log-probabilities", "log_probs")
    loss.backward()
    with torch.no_grad():
        after = torch.softmax(theta - 0.05 * torch.as_tensor(gradient(theta, "the logits θ")), dim=0)[action].item()
    wanted = "raise" if sign > 0 else "lower"
    assert after != before, (
        f"one gradient step on the loss left the probability of an action with advantage {sign * advantage:.3g} "
        f"at {before:.6f}: it must {wanted} it, but the loss's gradient with respect to the logits is zero"
    )
    moved = "lowered" if sign > 0 else "raised"
    assert (after - before) * sign > 0, (
        f"one gradient step on the loss {moved} the probability of an action with advantage "
        f"{sign * advantage:.3g} ({before:.6f} -> {after:.6f}) where it must {wanted} it: the loss grows with "
        "log π · A, so minimising it moves against the advantage; the loss is MINUS mean(log π · A)"
    )


# ---- reward-to-go ----------------------------------------------------------------------------------------------


def explicit_reward_to_go(rewards, episode_ends, gamma):
    """G_t = Σ_{k=t}^{end} γ^(k-t) r_k, end being the first step >= t that ends an episode (or the last)."""
    if rewards.ndim == 2:
        return np.stack([explicit_reward_to_go(rewards[:, n], episode_ends[:, n], gamma)
                         for n in range(rewards.shape[1])], axis=1)
    steps = len(rewards)
    returns = np.zeros(steps)
    for t in range(steps):
        for k in range(t, steps):
            returns[t] += gamma ** (k - t) * rewards[k]
            if episode_ends[k]:
                break
    return returns


def forward_reward_to_go(rewards, episode_ends, gamma):
    """The recursion walked forward in time: G_t = r_t + γ (1 - end_t) G_{t-1}."""
    returns, carried = np.empty_like(rewards), np.zeros_like(rewards[0])
    for t in range(len(rewards)):
        carried = rewards[t] + gamma * (1.0 - episode_ends[t]) * carried
        returns[t] = carried
    return returns


def reward_to_go_readings(stream: dict) -> dict[str, np.ndarray]:
    """The returns each common misreading gives on ``stream``: named only when they are the values found."""
    return {mistake("reinforce/reward_to_go_not_discounted"): explicit_reward_to_go(**dict(stream, gamma=1.0)),
            mistake("reinforce/reward_to_go_ignores_episode_ends"): explicit_reward_to_go(**dict(
                stream, episode_ends=np.zeros_like(stream["episode_ends"]))),
            "the recursion walked forward in time": forward_reward_to_go(**stream)}  # no catalogued mistake


def test_reward_to_go_worked_example(impl):
    stream = dict(rewards=np.array([1.0, 1.0, 1.0]), episode_ends=np.array([0, 1, 0]), gamma=0.5)
    returns = impl.discounted_reward_to_go(**stream)
    assert isinstance(returns, np.ndarray), "NumPy in must give NumPy out"
    close(returns, [1.5, 1.0, 1.0], "the episode ends at step 1: G_0 = 1 + 0.5·1, and step 2 starts afresh",
          readings=lambda: reward_to_go_readings(stream))


@given(stream=reward_streams(), flag_type=st.sampled_from([bool, np.int64, np.float64]))
def test_reward_to_go_equals_the_explicit_sum(impl, stream, flag_type):
    original = stream["rewards"].copy()
    returns = impl.discounted_reward_to_go(**dict(stream, episode_ends=stream["episode_ends"].astype(flag_type)))
    assert isinstance(returns, np.ndarray), "NumPy in must give NumPy out"
    assert returns.shape == stream["rewards"].shape, (
        f"reward-to-go keeps the rewards' shape {stream['rewards'].shape}; got {returns.shape}")
    close(returns, explicit_reward_to_go(**stream),
          "G_t must be Σ γ^(k-t) r_k over the rest of t's episode only, up to and including the step that ends "
          "it (each column of [T, N] is its own stream, time is axis 0)",
          readings=lambda: reward_to_go_readings(stream))
    np.testing.assert_array_equal(stream["rewards"], original, err_msg="rewards were changed in place")


def reward_to_go_matrix(stream: dict) -> np.ndarray:
    """M with G = M r for each column: M[t, s, n] = ∂G[t, n]/∂r[s, n], from the explicit sum (G is linear in r)."""
    rewards = stream["rewards"].reshape(len(stream["rewards"]), -1)
    steps, streams = rewards.shape
    matrix = np.zeros((steps, steps, streams))
    for s in range(steps):
        for n in range(streams):
            unit = np.zeros_like(rewards)
            unit[s, n] = 1.0
            unit_returns = explicit_reward_to_go(**dict(stream, rewards=unit.reshape(stream["rewards"].shape)))
            matrix[:, s, n] = unit_returns.reshape(steps, streams)[:, n]
    return matrix


@given(stream=reward_streams(), dtype=float_dtypes, data=st.data())
def test_reward_to_go_is_the_rewards_kind_and_dtype_with_autograd(impl, stream, dtype, data):
    stream = dict(stream, rewards=stream["rewards"].astype(dtype))
    given_in = data.draw(containers(dict(rewards=stream["rewards"], episode_ends=stream["episode_ends"])),
                         label="arguments")
    rewards = given_in["rewards"]
    if isinstance(rewards, torch.Tensor):
        rewards.requires_grad_(True)
    returns = impl.discounted_reward_to_go(rewards, given_in["episode_ends"], stream["gamma"])
    kinds = ", ".join(f"{key} as {'a tensor' if isinstance(value, torch.Tensor) else 'NumPy'}"
                      for key, value in given_in.items())
    wanted = torch.Tensor if isinstance(rewards, torch.Tensor) else np.ndarray
    assert isinstance(returns, wanted), (
        f"with {kinds}, the returns must be {wanted.__module__.split('.')[0]}, the same kind of array as rewards "
        f"(episode_ends does not decide it); got {type(returns).__name__}")
    assert dtype_of(returns) == np.dtype(dtype), (
        f"{np.dtype(dtype)} rewards must give {np.dtype(dtype)} returns, the rewards' dtype; got {dtype_of(returns)}")
    close(returns, explicit_reward_to_go(**stream), f"with {kinds} in {np.dtype(dtype)}, G_t is the explicit sum",
          rtol=PRECISION[dtype], expected_dtype=dtype, readings=lambda: reward_to_go_readings(stream))
    np.testing.assert_array_equal(np.asarray(rewards.detach() if wanted is torch.Tensor else rewards),
                                  stream["rewards"], err_msg="rewards were changed in place")
    if wanted is not torch.Tensor:
        return
    assert_differentiable(returns, "the returns of tensor rewards", "rewards")
    weights = np.random.default_rng(len(stream["rewards"])).uniform(-1.0, 1.0, stream["rewards"].shape)
    (returns * torch.as_tensor(weights, dtype=returns.dtype)).sum().backward()
    matrix = reward_to_go_matrix(stream)
    flat_weights = weights.reshape(matrix.shape[0], -1)
    expected = np.einsum("tsn,tn->sn", matrix, flat_weights).reshape(weights.shape)
    close(gradient(rewards, "rewards"), expected,
          "∂(Σ_t w_t G_t)/∂r_s must be Σ_t w_t γ^(s-t) over the steps t <= s of s's episode: every later reward "
          "of the episode reaches G_t through autograd (nothing detached on the way)",
          rtol=PRECISION[dtype], expected_dtype=dtype,
          readings={"w_s, " + mistake("reinforce/reward_to_go_carry_detached"): weights})


# ---- bad input -------------------------------------------------------------------------------------------------


def test_bad_input_is_a_clear_error(impl):
    # Each error must begin with the argument's name, and say what was expected.
    impl.reinforce_surrogate_loss(np.array([-1.0, -2.0]), np.array([1.0, 0.5]))  # valid input works first
    for log_probs, advantages, message in [
        (np.array([-1.0, -2.0]), np.array([1.0, 0.5, 2.0]), r"^advantages must have the same shape as log_probs"),
        (np.array([-1.0, -2.0]), np.array([1.0]), r"^advantages must have the same shape as log_probs"),  # no broadcast
        (np.zeros(0), np.zeros(0), r"^log_probs must hold at least one value"),
        (np.array(["a"]), np.array([1.0]), r"^log_probs must be an array of numbers"),
        (np.array([-1.0]), np.array(["a"]), r"^advantages must be an array of numbers"),
    ]:
        with pytest.raises(ValueError, match=message):
            impl.reinforce_surrogate_loss(log_probs, advantages)

    good = dict(rewards=np.ones(3), episode_ends=np.array([0, 0, 1]), gamma=0.9)
    impl.discounted_reward_to_go(**good)
    for change, message in [
        (dict(gamma=1.5), r"^gamma must be in \[0, 1\]"),
        (dict(gamma=-0.1), r"^gamma must be in \[0, 1\]"),
        (dict(gamma=float("nan")), r"^gamma must be a number"),
        (dict(episode_ends=np.array([0, 2, 1])), r"^episode_ends must hold only 0/1"),
        (dict(episode_ends=np.array([0.0, 0.5, 1.0])), r"^episode_ends must hold only 0/1"),
        (dict(episode_ends=np.array([0, 1])), r"^episode_ends must have the same shape as rewards"),
        (dict(rewards=np.ones((3, 2, 1)), episode_ends=np.zeros((3, 2, 1))), r"^rewards must be 1-D or 2-D"),
        (dict(rewards=np.array(["a", "b", "c"])), r"^rewards must be an array of numbers"),
    ]:
        with pytest.raises(ValueError, match=message):
            impl.discounted_reward_to_go(**{**good, **change})


# ---- clauses no test holds, and why ----
# reinforce_surrogate_loss, "whatever computed them" is never trained: held for a critic parameter and for θ
#   itself; no test can reach every graph a caller may build.



test_contract, test_contract_edges = battery_tests(CONTRACTS)
