"""The reinforce tests: REINFORCE, the score-function estimator and the detach contract.

The policy-gradient properties use a one-state softmax policy with K actions and parameters θ = its logits,
where everything is exact: the expected reward J(θ) = Σ_a π_a R_a has the analytic gradient
∂J/∂θ_k = π_k (R_k - J), and the expectation of the surrogate's gradient is a finite sum over the K actions
weighted by their probabilities.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, close, gradient, plain
from kata.testing.strategies import floats, logits_arrays, reward_streams, softmax_policies, surrogate_batches

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


@given(batch=surrogate_batches())
def test_surrogate_loss_is_minus_the_mean_of_log_prob_times_advantage(impl, batch):
    originals = {key: value.copy() for key, value in batch.items()}
    loss = impl.reinforce_surrogate_loss(**batch)
    assert isinstance(loss, np.ndarray | np.floating | float) and np.ndim(loss) == 0, (
        f"NumPy in must give a NumPy scalar (0-d) out; got {type(loss).__name__} of shape {np.shape(loss)}"
    )
    products = batch["log_probs"] * batch["advantages"]
    close(loss, -np.mean(products),
          "the surrogate loss is -mean(log_probs * advantages): minus, so that minimising it follows the policy "
          "gradient, and a mean over every sample",
          readings={"+mean(log_probs * advantages): the sign is flipped": np.mean(products),
                    "-sum(log_probs * advantages), a sum instead of a mean": -np.sum(products)})

    log_probs = torch.tensor(batch["log_probs"], dtype=torch.float32, requires_grad=True)
    loss = impl.reinforce_surrogate_loss(log_probs, torch.tensor(batch["advantages"], dtype=torch.float32))
    assert isinstance(loss, torch.Tensor) and loss.ndim == 0, (
        f"a tensor in must give a 0-d tensor out; got {type(loss).__name__} of shape {tuple(np.shape(loss))}")
    assert loss.dtype == torch.float32, f"float32 tensors in must give a float32 loss; got {loss.dtype}"
    assert_differentiable(loss, "the loss of float32 tensor log-probabilities", "log_probs")
    loss.backward()
    close(gradient(log_probs, "log_probs"), -batch["advantages"] / batch["advantages"].size,
          "∂loss/∂log_probs_i must be -A_i / N", rtol=1e-5)
    for key, value in originals.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")


@given(policy=softmax_policies(), baseline=floats(-20.0, 20.0), target=st.integers(0, 5))
def test_expected_surrogate_gradient_is_the_policy_gradient(impl, policy, baseline, target):
    logits, rewards = policy
    expected = expected_surrogate_gradient(impl, logits, rewards)
    true_gradient = analytic_policy_gradient(logits, rewards)
    close(expected, -true_gradient,
          "averaged over the actions with their probabilities, the surrogate's gradient must be minus the true "
          "gradient of the expected reward, π_k (R_k - J)",
          readings={"+π_k (R_k - J): minimising the loss lowers the expected reward (the sign is flipped)":
                    true_gradient, "0: no gradient reaches the logits through log π": np.zeros_like(true_gradient)})
    close(expected_surrogate_gradient(impl, logits, rewards - baseline), expected,
          "subtracting a constant baseline from every advantage must not change the expected gradient "
          "(E[∇ log π] = 0)", rtol=1e-8)
    # A verifier: 1 for the right action, 0 otherwise. A step function has no useful derivative, and REINFORCE
    # never differentiates the reward.
    verifier = (np.arange(len(logits)) == target % len(logits)).astype(np.float64)
    verifier_gradient = analytic_policy_gradient(logits, verifier)
    close(expected_surrogate_gradient(impl, logits, verifier), -verifier_gradient,
          "with a 0/1 verifier reward the expected surrogate gradient must still be minus the policy gradient",
          readings={"+π_k (R_k - J): the sign is flipped": verifier_gradient,
                    "0: no gradient reaches the logits through log π": np.zeros_like(verifier_gradient)})


@given(policy=softmax_policies(), critic_offset=floats(-5.0, 5.0))
def test_advantages_are_constants_even_when_they_require_grad(impl, policy, critic_offset):
    logits, rewards = policy
    theta = torch.tensor(logits, requires_grad=True)
    critic = torch.tensor(critic_offset, requires_grad=True)
    # Advantages computed from a critic parameter AND from the policy's own parameters: both graphs must be cut.
    advantages = torch.tensor(rewards) - critic - torch.softmax(theta, dim=0)
    loss = impl.reinforce_surrogate_loss(torch.log_softmax(theta, dim=0), advantages)
    assert_differentiable(loss, "the surrogate loss of tensor log-probabilities", "log_probs")
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
        return {"the gradient with A's dependence on θ differentiated too (advantages not detached)":
                through_advantages.numpy(), "+∇θ mean(log π · A): the sign is flipped": -expected.numpy()}

    close(gradient(theta, "the logits θ"), expected.numpy(),
          "∂loss/∂θ must be the gradient of -mean(log π · A) with A held constant (A depends on θ here, through "
          "softmax(θ))", readings=readings)


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
    return {"the sum without discount (γ = 1)": explicit_reward_to_go(**dict(stream, gamma=1.0)),
            "the sum run on past episode ends": explicit_reward_to_go(**dict(stream, episode_ends=np.zeros_like(
                stream["episode_ends"]))),
            "the recursion walked forward in time": forward_reward_to_go(**stream)}


def test_reward_to_go_worked_example(impl):
    returns = impl.discounted_reward_to_go(np.array([1.0, 1.0, 1.0]), np.array([0, 1, 0]), gamma=0.5)
    assert isinstance(returns, np.ndarray), "NumPy in must give NumPy out"
    close(returns, [1.5, 1.0, 1.0], "the episode ends at step 1: G_0 = 1 + 0.5·1, and step 2 starts afresh",
          readings={"1 + 1: rewards not discounted (γ = 1)": [2.0, 1.0, 1.0],
                    "1 + 0.5·(1 + 0.5·1): the sum runs on past the episode's end": [1.75, 1.5, 1.0],
                    "the recursion walked forward in time": [1.0, 1.0, 1.5]})


@given(stream=reward_streams())
def test_reward_to_go_equals_the_explicit_sum(impl, stream):
    original = stream["rewards"].copy()
    returns = impl.discounted_reward_to_go(**stream)
    assert isinstance(returns, np.ndarray), "NumPy in must give NumPy out"
    assert returns.shape == stream["rewards"].shape, (
        f"reward-to-go keeps the rewards' shape {stream['rewards'].shape}; got {returns.shape}")
    close(returns, explicit_reward_to_go(**stream),
          "G_t must be Σ γ^(k-t) r_k over the rest of t's episode only, up to and including the step that ends "
          "it (each column of [T, N] is its own stream, time is axis 0)",
          readings=lambda: reward_to_go_readings(stream))

    rewards = torch.tensor(stream["rewards"], requires_grad=True)
    tensor_returns = impl.discounted_reward_to_go(rewards, torch.tensor(stream["episode_ends"]), stream["gamma"])
    assert isinstance(tensor_returns, torch.Tensor), (
        f"a tensor in must give a tensor out; got {type(tensor_returns).__name__}")
    close(tensor_returns.detach().numpy(), returns, "tensor and NumPy inputs must agree")
    assert_differentiable(tensor_returns, "the returns of tensor rewards", "rewards")
    tensor_returns.sum().backward()
    gradient(rewards, "rewards")  # a readable failure when no gradient reached the rewards
    np.testing.assert_array_equal(stream["rewards"], original, err_msg="rewards were changed in place")


# ---- entropy ---------------------------------------------------------------------------------------------------


def explicit_entropy(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    return -(probabilities * np.log(probabilities)).sum(axis=-1)


@given(logits=logits_arrays(), shift=floats(-50.0, 50.0), huge=st.sampled_from([1e4, 1e30, 1e300]))
def test_entropy_of_the_softmax_over_the_last_axis(impl, logits, shift, huge):
    entropy = impl.categorical_entropy(logits)
    assert isinstance(entropy, np.ndarray), f"NumPy in must give NumPy out; got {type(entropy).__name__}"
    assert entropy.shape == logits.shape[:-1], (
        f"one entropy per distribution: logits of shape {logits.shape} give {logits.shape[:-1]}, the last axis "
        f"summed away; got {entropy.shape}")
    with np.errstate(all="ignore"):
        readings = {"-Σ z log z of the logits themselves, as if they were probabilities":
                    -(logits * np.log(logits)).sum(axis=-1)}
        if logits.ndim == 2:
            across = logits - np.logaddexp.reduce(logits, axis=0, keepdims=True)
            readings["-Σ p log p with the softmax taken over axis 0 (across the batch)"] = -(
                np.exp(across) * across).sum(axis=-1)
    close(entropy, explicit_entropy(logits), "entropy must be -Σ p log p with p = softmax(logits) over the last axis",
          rtol=1e-9, readings=readings)
    assert np.all(entropy >= 0.0) and np.all(entropy <= math.log(logits.shape[-1]) + 1e-12), (
        f"a categorical entropy lies in [0, log K] = [0, {math.log(logits.shape[-1]):.6g}]; got {plain(entropy)}"
    )
    close(impl.categorical_entropy(logits + shift), entropy,
          "softmax ignores a constant added to every logit, so the entropy must too", rtol=1e-8)

    # Extreme logits: up to ±1e4 elsewhere, one huge logit per row, and one action masked out with -inf.
    extreme = 500.0 * logits
    extreme[..., 0] = huge
    extreme = np.concatenate([extreme, np.full(extreme.shape[:-1] + (1,), -np.inf)], axis=-1)
    tensor = torch.tensor(extreme, requires_grad=True)
    extreme_entropy = impl.categorical_entropy(tensor)
    assert torch.isfinite(extreme_entropy).all(), (
        f"entropy is {plain(extreme_entropy)} for the logits {plain(extreme)} (probabilities that are exactly 0 "
        "in float64, one logit -inf): it must stay finite, and a p = 0 adds exactly 0; for example, "
        "log(softmax(z)) gives log 0 = -inf there and 0 * -inf is NaN, which log_softmax avoids"
    )
    assert_differentiable(extreme_entropy, "the entropy of tensor logits", "logits")
    extreme_entropy.sum().backward()
    assert torch.isfinite(tensor.grad).all(), (
        f"the entropy's gradient must stay finite for extreme logits; got {plain(tensor.grad)} for the logits "
        f"{plain(extreme)}")


def test_entropy_of_uniform_and_of_certain_policies(impl):
    close(impl.categorical_entropy(np.zeros((2, 4))), [math.log(4)] * 2, "equal logits: the entropy is log K")
    close(impl.categorical_entropy(np.array([0.0, -1e4, -1e4])), 0.0, "a near-certain policy has entropy ~0")


def test_entropy_torch_in_torch_out_and_float32_kept(impl):
    logits = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float32, requires_grad=True)
    entropy = impl.categorical_entropy(logits)
    assert isinstance(entropy, torch.Tensor) and entropy.dtype == torch.float32, (
        f"float32 logits gave {type(entropy).__name__} {getattr(entropy, 'dtype', '')}: a float32 tensor in gives a "
        "float32 tensor out")
    assert_differentiable(entropy, "the entropy of tensor logits", "logits")
    entropy.sum().backward()
    assert torch.isfinite(torch.as_tensor(gradient(logits, "logits"))).all(), (
        f"the entropy's gradient must be finite; got {plain(logits.grad)}")


# ---- bad input -------------------------------------------------------------------------------------------------


def test_bad_input_is_a_clear_error(impl):
    impl.reinforce_surrogate_loss(np.array([-1.0, -2.0]), np.array([1.0, 0.5]))  # valid input works first
    with pytest.raises(ValueError, match="advantages"):
        impl.reinforce_surrogate_loss(np.array([-1.0, -2.0]), np.array([1.0, 0.5, 2.0]))
    with pytest.raises(ValueError, match="advantages"):
        impl.reinforce_surrogate_loss(np.array([-1.0, -2.0]), np.array([1.0]))  # no broadcasting
    with pytest.raises(ValueError, match="log_probs"):
        impl.reinforce_surrogate_loss(np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match="log_probs"):
        impl.reinforce_surrogate_loss(np.array(["a"]), np.array([1.0]))

    good = dict(rewards=np.ones(3), episode_ends=np.array([0, 0, 1]), gamma=0.9)
    impl.discounted_reward_to_go(**good)
    for change, argument in [
        (dict(gamma=1.5), "gamma"),
        (dict(gamma=-0.1), "gamma"),
        (dict(gamma=float("nan")), "gamma"),
        (dict(episode_ends=np.array([0, 2, 1])), "episode_ends"),
        (dict(episode_ends=np.array([0.0, 0.5, 1.0])), "episode_ends"),
        (dict(episode_ends=np.array([0, 1])), "episode_ends"),
        (dict(rewards=np.ones((3, 2, 1)), episode_ends=np.zeros((3, 2, 1))), "rewards"),
    ]:
        with pytest.raises(ValueError, match=argument):
            impl.discounted_reward_to_go(**{**good, **change})

    impl.categorical_entropy(np.zeros(3))
    for bad in (np.array(1.0), np.zeros((2, 0)), np.array([0.0, np.nan]), np.array([0.0, np.inf]),
                np.array([-np.inf, -np.inf])):
        with pytest.raises(ValueError, match="logits"):
            impl.categorical_entropy(bad)
