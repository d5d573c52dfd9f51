"""The frame of the RLOO loop (not an exercise): the task's vocabulary and verifier, the GRU policy, readable rows,
evaluation with a given sampler, the loop's schedule and records, its profiles and its optimizer.

The loop is exercised here with scripted stand-ins for the student's two functions, so these tests pass on the
stubs too.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kata.rl import rloo as frame
from kata.rl import sequence_task as task
from kata.rl.sequence_task import BOS_ID, EOS_ID, PAD_ID, TOKEN_IDS

pytestmark = pytest.mark.frame

A, B, C, D = (TOKEN_IDS[name] for name in "abcd")
P0, P1, P2 = task.PROMPT_TOKEN_IDS




# ---- vocabulary and prompts -------------------------------------------------------------------------------------


def test_the_vocabulary():
    assert len(set(task.VOCABULARY)) == task.VOCAB_SIZE, (
        f"the vocabulary's {len(task.VOCABULARY)} tokens are distinct and VOCAB_SIZE counts them: {task.VOCAB_SIZE}")
    assert (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2), f"PAD, BOS and EOS are ids 0, 1, 2: {(PAD_ID, BOS_ID, EOS_ID)}"
    assert set(task.GENERABLE_TOKEN_IDS) == {A, B, C, D, EOS_ID}, (
        f"the policy may generate a, b, c, d and EOS, nothing else: {task.GENERABLE_TOKEN_IDS}")
    assert len(task.ANSWERS) == task.NUM_PROMPTS == 3, (
        f"one answer per prompt, three prompts: {len(task.ANSWERS)}, {task.NUM_PROMPTS}")
    assert all(len(answer) == 2 and EOS_ID not in answer for answer in task.ANSWERS), (
        f"each answer is two symbols without EOS: {task.ANSWERS}")
    assert len(set(task.ANSWERS)) == 3, "three prompts, three different answers"


def test_prompt_batches_are_prompt_major():
    classes, prompts = task.prompt_batch(3)
    np.testing.assert_array_equal(classes, [0, 0, 0, 1, 1, 1, 2, 2, 2],
                                  err_msg="prompts come in blocks of one class per group, groups in class order")
    assert prompts.dtype == torch.int64 and prompts.shape == (9, 2), (
        f"prompts are int64 rows of (BOS, prompt symbol): {prompts.dtype}, {tuple(prompts.shape)}")
    assert torch.all(prompts[:, 0] == BOS_ID), f"every prompt row starts with BOS: {prompts[:, 0].tolist()}"
    np.testing.assert_array_equal(prompts[:, 1], [P0] * 3 + [P1] * 3 + [P2] * 3,
                                  err_msg="each prompt's second token names its class")
    with pytest.raises(ValueError, match="group_size"):
        task.prompt_batch(0)
    with pytest.raises(ValueError, match="prompt_classes"):
        task.prompt_ids(np.array([3]))


# ---- the verifier ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt_class", "response", "reward"),
    [
        (0, [A, B, EOS_ID], 1.0),  # the exact response
        (1, [C, A, EOS_ID], 1.0),
        (2, [B, C, EOS_ID], 1.0),
        (0, [A, B, EOS_ID, A, PAD_ID], 1.0),  # what follows the first EOS is not read
        (0, [A, B], 2 / 3),  # right symbols, never stopped
        (0, [A, B, C, EOS_ID], 2 / 3),  # stopped one token late
        (0, [A, EOS_ID], 1 / 3),  # stopped early
        (0, [B, A, EOS_ID], 1 / 3),  # symbols swapped, stop in place
        (0, [C, A, EOS_ID], 1 / 3),  # prompt 1's answer to prompt 0: only the stop counts
        (0, [EOS_ID], 0.0),
        (0, [D, D, D, D], 0.0),
        (2, [B, D, EOS_ID], 2 / 3),
        (0, [], 0.0),
    ],
)
def test_the_verifier_on_hand_made_responses(prompt_class, response, reward):
    assert task.response_reward(prompt_class, response) == pytest.approx(reward, abs=1e-15), (
        f"the readable verifier scores {response} for prompt {prompt_class} as {reward}")
    row = np.array([BOS_ID, task.PROMPT_TOKEN_IDS[prompt_class], *response] + [PAD_ID] * 2)
    assert task.sequence_rewards(np.array([prompt_class]), row[None]) == pytest.approx([reward], abs=1e-15), (
        f"the batch verifier scores {response} for prompt {prompt_class} as {reward}")
    assert task.exact_responses(np.array([prompt_class]), row[None])[0] == (reward == 1.0), (
        f"exact means reward 1.0: {response} for prompt {prompt_class} (reward {reward})")


def test_the_batch_verifier_agrees_with_the_readable_one_on_every_short_response():
    tokens = [*task.GENERABLE_TOKEN_IDS, PAD_ID]
    rows, classes = [], []
    for prompt_class in range(3):
        for response in itertools.product(tokens, repeat=4):
            rows.append([BOS_ID, task.PROMPT_TOKEN_IDS[prompt_class], *response])
            classes.append(prompt_class)
    rows, classes = np.array(rows), np.array(classes)
    expected = np.array([task.response_reward(k, task.response_tokens(row)) for k, row in zip(classes, rows)])
    rewards = task.sequence_rewards(classes, torch.as_tensor(rows))
    assert rewards.dtype == np.float64, f"rewards are float64: {rewards.dtype}"
    np.testing.assert_array_equal(rewards, expected,
                                  err_msg="the batch verifier scores every short response as the readable one does")
    np.testing.assert_array_equal(task.exact_responses(classes, rows), expected == 1.0,
                                  err_msg="exact_responses marks the rows whose reward is 1")
    assert set(np.unique(rewards)) == {0.0, 1 / 3, 2 / 3, 1.0}, (
        f"every short response scores 0, 1/3, 2/3 or 1, and each occurs: {set(np.unique(rewards))}")


def test_response_tokens_and_verifier_errors():
    assert task.response_tokens([BOS_ID, P0, A, EOS_ID, PAD_ID]) == (A, EOS_ID), (
        "the response is what follows the prompt, up to and including EOS, without padding")
    assert task.response_tokens([BOS_ID, P0, A, B, PAD_ID]) == (A, B), (
        "a response never stopped is what follows the prompt, without padding")
    assert task.response_tokens([BOS_ID, P0, PAD_ID, PAD_ID]) == (), (
        "a row of padding after the prompt is the empty response")
    with pytest.raises(ValueError, match="prompt_class"):
        task.response_reward(3, [A])
    with pytest.raises(ValueError, match="input_ids"):
        task.sequence_rewards(np.array([0, 1]), np.array([[BOS_ID, P0, A]]))
    with pytest.raises(ValueError, match="input_ids"):
        task.sequence_rewards(np.array([0]), np.array([[BOS_ID, P0, 99]]))


# ---- reading rows ------------------------------------------------------------------------------------------------


def test_decode_sequence():
    row = np.array([BOS_ID, P1, C, A, EOS_ID, PAD_ID])
    assert task.decode_sequence(row) == "BOS p1 | c a EOS", (
        f"a row reads BOS, prompt, '|', the response, padding dropped: {task.decode_sequence(row)!r}")
    assert task.decode_sequence(torch.as_tensor(row)) == "BOS p1 | c a EOS", "a tensor row decodes like a NumPy row"
    assert task.decode_sequence(row.tolist()) == "BOS p1 | c a EOS", "a list row decodes like a NumPy row"
    assert task.decode_sequence(np.array([BOS_ID, P0, A, B, C, D])) == "BOS p0 | a b c d", (
        "a response without EOS decodes every token")
    assert task.decode_sequence(np.array([BOS_ID, P2, PAD_ID, PAD_ID])) == "BOS p2 |", (
        "an empty response decodes to the prompt and '|' alone")
    # A token after EOS stays visible: a sampler that emits after EOS shows at a glance.
    assert task.decode_sequence(np.array([BOS_ID, P0, EOS_ID, A, PAD_ID])) == "BOS p0 | EOS a", (
        "a token after EOS stays visible in the decoded row")
    with pytest.raises(ValueError, match="row"):
        task.decode_sequence(np.array([[BOS_ID, P0]]))
    with pytest.raises(ValueError, match="row"):
        task.decode_sequence(np.array([BOS_ID, 42]))


# ---- the policy --------------------------------------------------------------------------------------------------


def test_the_policy_is_causal_and_never_proposes_pad_bos_or_a_prompt_symbol():
    model = task.make_policy(seed=0, hidden_size=16)
    ids = torch.tensor([[BOS_ID, P0, A, B, EOS_ID], [BOS_ID, P2, C, PAD_ID, PAD_ID]])
    logits = model(ids)
    assert logits.shape == (2, 5, task.VOCAB_SIZE) and logits.dtype == torch.float32, (
        f"logits are float32 of shape (batch, length, VOCAB_SIZE): {tuple(logits.shape)}, {logits.dtype}")
    probabilities = torch.softmax(logits, dim=-1)
    never = [t for t in range(task.VOCAB_SIZE) if t not in task.GENERABLE_TOKEN_IDS]
    assert torch.all(probabilities[..., never] == 0), "PAD, BOS and prompt symbols must have probability 0"
    changed = ids.clone()
    changed[:, 3:] = D
    assert torch.equal(model(changed)[:, :3], logits[:, :3]), "logits at position t must not read later tokens"
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.zeros(2, 3))


def test_make_policy_is_seeded_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = task.make_policy(seed=4, hidden_size=8)
    assert torch.equal(torch.rand(1), expected_next), "make_policy must not consume the global RNG"
    second = task.make_policy(seed=4, hidden_size=8)
    other = task.make_policy(seed=5, hidden_size=8)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b), "the same seed gives the same parameters"
    assert any(not torch.equal(a, c) for a, c in zip(first.parameters(), other.parameters())), (
        "another seed gives other parameters")


def test_exact_response_probability_is_the_product_of_the_three_token_probabilities():
    model = task.make_policy(seed=1, hidden_size=16)
    probabilities = task.exact_response_probability(model)
    assert probabilities.shape == (3,) and probabilities.dtype == np.float64, (
        f"three float64 probabilities, one per prompt: {probabilities.shape}, {probabilities.dtype}")
    for k in range(3):
        row = torch.tensor([[BOS_ID, task.PROMPT_TOKEN_IDS[k], *task.CORRECT_RESPONSES[k]]])
        with torch.no_grad():
            step = torch.softmax(model(row)[0].double(), dim=-1)
        expected = math.prod(float(step[1 + i, token]) for i, token in enumerate(task.CORRECT_RESPONSES[k]))
        assert probabilities[k] == pytest.approx(expected, rel=1e-6), (  # float32 logits, batched differently
            f"prompt {k}: the exact response's probability is its tokens' product: {probabilities[k]} vs {expected}")


# ---- evaluation with a given sampler ----------------------------------------------------------------------------


def scripted_sampler(model, prompt_ids, max_new_tokens, *, deterministic=False, generator=None):
    """A stand-in for the student's sampler: each row the correct answer, or uniform random tokens and EOS."""
    rows = []
    for prompt in torch.as_tensor(prompt_ids).tolist():
        k = task.PROMPT_TOKEN_IDS.index(prompt[1])
        if deterministic:
            response = list(task.CORRECT_RESPONSES[k])
        else:
            draws = torch.randint(0, len(task.GENERABLE_TOKEN_IDS), (max_new_tokens,), generator=generator)
            response = [task.GENERABLE_TOKEN_IDS[int(i)] for i in draws]
            if EOS_ID in response:
                response = response[: response.index(EOS_ID) + 1]
        rows.append(prompt + response + [PAD_ID] * (max_new_tokens - len(response)))
    return torch.tensor(rows)


def test_evaluation_scores_what_the_sampler_returns():
    model = task.make_policy(seed=0, hidden_size=8)
    greedy = task.evaluate_policy(model, scripted_sampler, samples_per_prompt=2, deterministic=True)
    assert greedy["success_rate"] == 1.0 and greedy["mean_reward"] == 1.0, (
        f"the correct answers greedily score 1: {greedy['success_rate']}, {greedy['mean_reward']}")
    np.testing.assert_array_equal(greedy["prompt_classes"], [0, 0, 1, 1, 2, 2],
                                  err_msg="greedy evaluation covers each class's prompts in order")
    assert isinstance(greedy["input_ids"], np.ndarray) and greedy["input_ids"].shape == (6, 2 + task.MAX_NEW_TOKENS), (
        f"input_ids are a NumPy array of (6, prompt + MAX_NEW_TOKENS): {type(greedy['input_ids'])}")
    sampled = task.evaluate_policy(model, scripted_sampler, samples_per_prompt=50, deterministic=False, seed=3)
    np.testing.assert_array_equal(sampled["rewards"], task.sequence_rewards(sampled["prompt_classes"],
                                                                             sampled["input_ids"]),
                                  err_msg="the sampled rewards are the task's rewards of the sampled responses")
    assert sampled["mean_reward"] == pytest.approx(sampled["rewards"].mean()), (
        f"mean_reward is the rewards' mean: {sampled['mean_reward']} vs {sampled['rewards'].mean()}")
    assert sampled["success_rate"] == pytest.approx(sampled["success"].mean()), (
        f"success_rate is the successes' mean: {sampled['success_rate']} vs {sampled['success'].mean()}")
    np.testing.assert_allclose(sampled["per_prompt_success_rate"], sampled["success"].reshape(3, 50).mean(axis=1),
                               err_msg="the per-prompt success rate is the mean success over that prompt's 50 samples")
    again = task.evaluate_policy(model, scripted_sampler, samples_per_prompt=50, deterministic=False, seed=3)
    np.testing.assert_array_equal(again["input_ids"], sampled["input_ids"], err_msg="a seed fixes the samples")
    with pytest.raises(ValueError, match="samples_per_prompt"):
        task.evaluate_policy(model, scripted_sampler, samples_per_prompt=0)


# ---- the loop ----------------------------------------------------------------------------------------------------


class ScriptedIteration:
    """A stand-in for the student's rloo_iteration: records what it was given, takes no step."""

    def __init__(self):
        self.batches = []

    def __call__(self, model, optimizer, input_ids, prompt_lengths, rewards, group_size, ppo_epochs, clip_epsilon,
                 reduction):
        self.batches.append(input_ids.clone())
        groups = rewards.reshape(-1, group_size)
        advantages = (groups - (groups.sum(axis=1, keepdims=True) - groups) / (group_size - 1)).reshape(-1)
        mask = torch.zeros(input_ids.shape[0], input_ids.shape[1] - 1)
        return frame.IterationResult(advantages, mask, torch.zeros_like(mask), (0.0,) * ppo_epochs)


LOOP = dict(iterations=5, group_size=3, ppo_epochs=2, learning_rate=0.01, clip_epsilon=0.2, hidden_size=8,
            evaluation_samples=2)


def test_the_loop_evaluates_first_on_schedule_and_last():
    iteration = ScriptedIteration()
    run = frame.run_rloo(0, sample_responses=scripted_sampler, rloo_iteration=iteration, evaluation_every=2, **LOOP)
    history = run["history"]
    assert history["iteration"] == [0, 2, 4, 5], (
        f"evaluated before training, every 2 iterations and after the last: {history['iteration']}")
    assert len(iteration.batches) == 5, f"one iteration call per iteration: {len(iteration.batches)}"
    assert all(len(values) == 4 for values in history.values()), (
        f"one value per evaluation in every history list: {[len(v) for v in history.values()]}")
    assert math.isnan(history["train_mean_reward"][0]), (
        f"no training reward before the first iteration (NaN): {history['train_mean_reward'][0]}")
    assert run["final_evaluation"]["success_rate"] == history["success_rate"][-1], (
        "the final evaluation is the history's last")
    batch = run["first_batch"]
    assert torch.equal(batch.input_ids, iteration.batches[0]), (
        "first_batch holds the batch the first iteration was given")
    np.testing.assert_array_equal(batch.prompt_classes, [0, 0, 0, 1, 1, 1, 2, 2, 2],
                                  err_msg="a batch's prompt classes come in groups, in class order")
    np.testing.assert_array_equal(batch.rewards, task.sequence_rewards(batch.prompt_classes, batch.input_ids),
                                  err_msg="a batch's rewards are the task's rewards of its responses")
    assert batch.advantages.dtype == np.float64, f"first_batch's advantages are float64: {batch.advantages.dtype}"
    assert run["config"]["evaluation_every"] == 2, (
        f"the run's config records evaluation_every: {run['config']['evaluation_every']}")


def test_how_often_the_loop_evaluates_never_changes_what_it_trains_on():
    often, rarely = ScriptedIteration(), ScriptedIteration()
    frame.run_rloo(7, sample_responses=scripted_sampler, rloo_iteration=often, evaluation_every=1, **LOOP)
    frame.run_rloo(7, sample_responses=scripted_sampler, rloo_iteration=rarely, evaluation_every=5, **LOOP)
    for a, b in zip(often.batches, rarely.batches):
        assert torch.equal(a, b), "evaluation must draw from its own generator"


def test_the_loop_rejects_bad_configuration():
    for key, value in [("iterations", -1), ("group_size", 1), ("ppo_epochs", 0), ("learning_rate", 0.0),
                       ("reduction", "mean"), ("evaluation_every", 0)]:
        with pytest.raises(ValueError, match=key):
            frame.run_rloo(0, sample_responses=scripted_sampler, rloo_iteration=ScriptedIteration(),
                           **{**LOOP, "evaluation_every": 1, key: value})


def test_the_profiles():
    smoke, full = frame.sequence_profile_config("smoke"), frame.sequence_profile_config("full")
    assert smoke["iterations"] < full["iterations"], (
        f"the smoke profile runs fewer iterations than full: {smoke['iterations']}, {full['iterations']}")
    smoke["iterations"] = -1
    assert frame.sequence_profile_config("smoke")["iterations"] > 0, "each call returns a new dict"
    with pytest.raises(ValueError, match="mode"):
        frame.sequence_profile_config("quick")
    run = frame.run_rloo(0, sample_responses=scripted_sampler, rloo_iteration=ScriptedIteration(),
                         **dict(frame.sequence_profile_config("smoke"), iterations=1))
    assert run["history"]["iteration"] == [0, 1], (
        f"one iteration: evaluated before and after it: {run['history']['iteration']}")
