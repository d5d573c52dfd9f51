"""The reference against TRL 1.16.0 (GUIDE.md §4, §6, §7 and §8): ``selective_log_softmax``,
``entropy_from_logits``, the GRPO loss for each ``loss_type`` the guide names, and the RLOO trainer's advantages
and loss.

The trainers compute their losses and advantages inline, in methods of a ``transformers.Trainer``; the tests run
those methods (``GRPOTrainer._compute_loss``, ``RLOOTrainer._compute_loss`` and
``RLOOTrainer._generate_and_score_completions``) on a stand-in ``self`` that holds what they read. Generation, the
model's log-probabilities and the reward functions are the stand-in's: the case's tensors, handed back as they are.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.rloo_config import RLOOConfig
from trl.trainer.rloo_trainer import RLOOTrainer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from .cases import cases, close, largest_difference, log_prob_pair, prefix_mask, reference_loss, tensor

pytestmark = pytest.mark.parity

PAD = 0


def _default(config, name: str):
    """A field's default in a TRL config dataclass, read without building one (they are TrainingArguments)."""
    field = next(field for field in dataclasses.fields(config) if field.name == name)
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


# ---- selective_log_softmax and entropy_from_logits (§4, §6) --------------------------------------------------


def test_selective_log_softmax_of_the_shifted_logits_is_token_log_probs(reference, ledger):
    """TRL gathers the response tokens' log-probabilities with ``selective_log_softmax`` of the logits that predict
    them (``logits[:, :-1]`` for the labels ``input_ids[:, 1:]``): the reference's ``token_log_probs``, value and
    gradient, float64 and float32 (TRL's float32 path is ``logit - logsumexp``; compared at 1e-5 there)."""
    worst = {torch.float64: 0.0, torch.float32: 0.0}
    for label, rng in cases("trl selective_log_softmax"):
        dtype = torch.float64 if rng.random() < 0.5 else torch.float32
        rows, length, vocabulary = int(rng.integers(1, 5)), int(rng.integers(2, 12)), int(rng.integers(2, 40))
        logits = rng.normal(0.0, rng.choice([0.5, 3.0, 20.0]), size=(rows, length, vocabulary))
        ids = rng.integers(0, vocabulary, size=(rows, length))
        weights = torch.tensor(rng.normal(size=(rows, length - 1)), dtype=dtype)
        leaf = torch.tensor(logits, dtype=dtype, requires_grad=True)
        trl = selective_log_softmax(leaf[:, :-1], torch.tensor(ids[:, 1:]))
        (trl * weights).sum().backward()
        expected_leaf = torch.tensor(logits, dtype=dtype, requires_grad=True)
        expected = reference.token_log_probs(expected_leaf, torch.tensor(ids))
        (expected * weights).sum().backward()
        tolerance = {"rtol": 1e-9, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
        worst[dtype] = max(worst[dtype], largest_difference(trl, expected))
        assert trl.dtype == expected.dtype == dtype, f"{label}: both keep the logits' dtype"
        assert close(trl, expected, **tolerance), (
            f"{label} ({dtype}): selective_log_softmax differs from token_log_probs by "
            f"{largest_difference(trl, expected):.3g}")
        assert close(leaf.grad, expected_leaf.grad, **tolerance), f"{label} ({dtype}): the gradients differ"
    ledger.add("TRL selective_log_softmax(logits[:, :-1], ids[:, 1:]) vs token_log_probs, float64", 300,
               worst[torch.float64], "equal")
    ledger.add("TRL selective_log_softmax vs token_log_probs, float32 (tolerance 1e-5)", 300, worst[torch.float32],
               "equal")


def test_entropy_from_logits_is_categorical_entropy(reference, ledger):
    """TRL's ``entropy_from_logits`` (``-Σ exp(logp)·logp`` over ``log_softmax``, in chunks; no Triton kernel on a
    CPU) is the reference's ``categorical_entropy``, value and gradient, on finite logits."""
    worst = 0.0
    for label, rng in cases("trl entropy"):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 200)), int(rng.integers(2, 30)))
        logits = rng.normal(0.0, rng.choice([0.1, 1.0, 10.0]), size=shape)
        weights = tensor(rng.normal(size=shape[:-1]))
        leaf, expected_leaf = tensor(logits, grad=True), tensor(logits, grad=True)
        trl = entropy_from_logits(leaf, chunk_size=int(rng.integers(1, 300)))
        expected = reference.categorical_entropy(expected_leaf)
        (trl * weights).sum().backward()
        (expected * weights).sum().backward()
        worst = max(worst, largest_difference(trl, expected))
        assert close(trl, expected), f"{label}: TRL's entropy differs by {largest_difference(trl, expected):.3g}"
        assert close(leaf.grad, expected_leaf.grad), f"{label}: the entropy gradients differ"
    ledger.add("TRL entropy_from_logits (chunked) vs categorical_entropy", 300, worst, "equal")


# ---- GRPOTrainer._compute_loss (§7) --------------------------------------------------------------------------


class _Accelerator:
    """One process: gathering and reducing give back what they are given."""

    device = torch.device("cpu")
    num_processes = 1
    process_index = 0
    sync_gradients = True

    @staticmethod
    def gather(value):
        return value

    @staticmethod
    def reduce(value, reduction="sum"):
        return value


def _completion_inputs(mask: np.ndarray) -> dict[str, torch.Tensor]:
    rows, columns = mask.shape
    return {"prompt_ids": torch.ones(rows, 2, dtype=torch.long), "prompt_mask": torch.ones(rows, 2, dtype=torch.long),
            "completion_ids": torch.ones(rows, columns, dtype=torch.long),
            "completion_mask": torch.tensor(mask, dtype=torch.long)}


def _log_probs_of(per_token: torch.Tensor, entropies: torch.Tensor):
    """The stand-in's ``_get_per_token_logps_and_entropies``: the case's log-probabilities, whatever the model."""

    def per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        assert logits_to_keep == per_token.shape[1], "the trainer scores the completion columns only"
        return per_token, entropies, None

    return per_token_logps_and_entropies


def grpo_loss(loss_type: str, new, old, advantages, mask, epsilon: float, *, beta: float = 0.0, ref=None,
              max_completion_length: int | None = None, generation_tokens: int | None = None):
    """``GRPOTrainer._compute_loss`` on a stand-in; returns the loss, its gradient w.r.t. ``new`` and the metrics."""
    leaf = tensor(new, grad=True)
    metrics = {"train": defaultdict(list)}
    stand_in = SimpleNamespace(
        _get_per_token_logps_and_entropies=_log_probs_of(leaf, torch.zeros_like(leaf.detach())),
        aux_loss_enabled=False, top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        importance_sampling_level="token", beta=beta, loss_type=loss_type, epsilon_low=epsilon, epsilon_high=epsilon,
        use_vllm=False, vllm_importance_sampling_correction=False, model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, max_completion_length=max_completion_length,
        accelerator=_Accelerator(), _entropy_bonus_enabled=False, _metrics=metrics,
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1))
    inputs = {**_completion_inputs(mask), "advantages": tensor(advantages), "old_per_token_logps": tensor(old)}
    if ref is not None:
        inputs["ref_per_token_logps"] = tensor(ref)
    if generation_tokens is not None:
        inputs["num_items_in_batch"] = torch.tensor(float(generation_tokens))
    loss = GRPOTrainer._compute_loss(stand_in, None, inputs)
    loss.backward()
    return float(loss.detach()), leaf.grad, {name: values[-1] for name, values in metrics["train"].items()}


def _grpo_case(rng: np.random.Generator, empty: float = 0.2):
    rows, columns = int(rng.integers(1, 9)), int(rng.integers(1, 13))
    new, old = log_prob_pair(rng, (rows, columns), spread=0.3)
    advantages = rng.normal(size=rows)
    return new, old, advantages, prefix_mask(rng, rows, columns, empty=empty), float(rng.uniform(0.05, 0.4))


LOSS_TYPES = {  # loss_type -> the reference's reduction, and what the reference's loss is multiplied by
    "grpo": ("sequence_mean", lambda mask, completion, generation: 1.0),
    "bnpo": ("token_mean", lambda mask, completion, generation: 1.0),
    "dr_grpo": ("sequence_sum_mean", lambda mask, completion, generation: 1.0 / completion),
    "dapo": ("token_mean", lambda mask, completion, generation: mask.sum() / max(generation, 1.0)),
}


@pytest.mark.parametrize("loss_type", list(LOSS_TYPES))
def test_grpo_loss_is_the_masked_token_objective_with_its_reduction(reference, ledger, loss_type):
    """``"grpo"`` is minus ``sequence_mean`` (an empty row counts in B, as here); ``"bnpo"`` minus ``token_mean``
    over the local batch; ``"dr_grpo"`` the token sum over B × ``max_completion_length``, minus ``sequence_sum_mean``
    divided by that length; ``"dapo"`` the token sum over the tokens of the whole generation batch, minus
    ``token_mean`` × local tokens / generation tokens (one process, no accumulation). Value and gradient, empty
    rows and batches without a token included."""
    reduction, factor = LOSS_TYPES[loss_type]
    worst = 0.0
    for label, rng in cases(f"trl grpo {loss_type}"):
        new, old, advantages, mask, epsilon = _grpo_case(rng, empty=rng.choice([0.0, 0.3, 1.0], p=[0.4, 0.5, 0.1]))
        completion = mask.shape[1] + int(rng.integers(0, 5))
        generation = int(mask.sum()) + int(rng.choice([0, 0, int(rng.integers(0, 40))]))
        loss, gradient, _ = grpo_loss(loss_type, new, old, advantages, mask, epsilon,
                                      max_completion_length=completion, generation_tokens=generation)
        expected, expected_gradient = reference_loss(reference, new, old, advantages, mask, epsilon, reduction)
        scale = factor(mask, completion, generation)
        worst = max(worst, abs(loss - scale * expected))
        assert close(loss, scale * expected), (
            f"{label}: TRL's {loss_type} loss {loss!r} is not the reference's {reduction} loss x {scale:.4g} "
            f"({scale * expected!r})")
        assert close(gradient, scale * expected_gradient), (
            f"{label}: the gradient of TRL's {loss_type} loss differs from the reference's by "
            f"{largest_difference(gradient, scale * expected_gradient):.3g}")
    ledger.add(f"TRL GRPOTrainer._compute_loss loss_type={loss_type!r} vs {reduction}", 300, worst, "equal")


def test_grpo_kl_is_k3_with_the_reference_model_as_new_and_its_clip_ratio_the_active_clip_fraction(
        reference, ledger):
    """With ``beta`` > 0, TRL's per-token KL is ``exp(ref - logp) - (ref - logp) - 1``: the reference's
    ``approximate_kl(ref, logp)``, which the trainer logs as ``kl`` (a token mean); its ``clip_ratio/region_mean``
    is the reference's ``active_clip_fraction`` over the response tokens. Two completion columns at least: with one,
    the trainer's ``global_masked_mean`` takes the metric for a sequence-level one and averages it over every row,
    empty ones included (``trl/trainer/grpo_trainer.py``), a logging quirk outside this comparison."""
    worst = 0.0
    for label, rng in cases("trl grpo kl"):
        new, old, advantages, mask, epsilon = _grpo_case(rng, empty=0.2)
        if mask.shape[1] == 1:
            new, old, mask = (np.concatenate([array, array], axis=1) for array in (new, old, mask))
        mask[0, 0] = 1.0
        ref = new + rng.normal(0.0, 0.3, size=new.shape)
        _, _, metrics = grpo_loss("bnpo", new, old, advantages, mask, epsilon, beta=float(rng.uniform(0.01, 0.2)),
                                  ref=ref)
        taken = mask.astype(bool)
        kl = float(reference.approximate_kl(ref[taken], new[taken]))
        token_advantages = np.repeat(advantages[:, None], mask.shape[1], axis=1)
        active = float(reference.active_clip_fraction(new[taken], old[taken], token_advantages[taken], epsilon))
        worst = max(worst, abs(metrics["kl"] - kl))
        assert close(metrics["kl"], kl), f"{label}: TRL's kl {metrics['kl']!r} is not approximate_kl(ref, logp) {kl!r}"
        # TRL takes the fraction's mean in float32 (is_region_clipped.float()): within 2^-24 of k/N, while two counts
        # differ by at least 1/96 here, so 1e-7 separates a rounding from another count.
        assert close(metrics["clip_ratio/region_mean"], active, rtol=0.0, atol=1e-7), (
            f"{label}: TRL's clip_ratio/region_mean {metrics['clip_ratio/region_mean']!r} is not "
            f"active_clip_fraction {active!r}")
    ledger.add("TRL GRPO per_token_kl (logged kl) vs approximate_kl(ref, logp); region clip vs active_clip_fraction",
               300, worst, "equal")


def test_grpo_loss_type_defaults_to_dapo():
    """GUIDE §7: ``"dapo"`` is TRL 1.16's default ``loss_type``."""
    assert _default(GRPOConfig, "loss_type") == "dapo", f"got {_default(GRPOConfig, 'loss_type')!r}"


# ---- RLOOTrainer (§7, §8) ------------------------------------------------------------------------------------


def rloo_loss(new, old, advantages, mask, epsilon: float):
    """``RLOOTrainer._compute_loss`` on a stand-in: the loss and its gradient w.r.t. the per-token ``new``."""
    leaf = tensor(new, grad=True)
    stand_in = SimpleNamespace(
        _get_per_token_logps_and_entropies=_log_probs_of(leaf, torch.zeros_like(leaf.detach())),
        aux_loss_enabled=False, epsilon_low=epsilon, epsilon_high=epsilon, model=SimpleNamespace(training=True),
        accelerator=_Accelerator(), _metrics={"train": defaultdict(list)})
    old_logps = (tensor(old) * tensor(mask)).sum(1)  # as _generate_and_score_completions stores them
    inputs = {**_completion_inputs(mask), "old_logps": old_logps, "advantages": tensor(advantages)}
    loss = RLOOTrainer._compute_loss(stand_in, None, inputs)
    loss.backward()
    return float(loss.detach()), leaf.grad


def test_rloo_loss_clips_the_exact_sequence_ratio(reference, ledger):
    """TRL's RLOO loss clips ``exp(Σ log π - Σ log π_old)`` over the completion mask, per response, and averages
    over the responses: the reference's ``clipped_policy_loss`` of ``sequence_log_probability_ratio``, value and
    gradient into every token's log-probability."""
    worst = 0.0
    for label, rng in cases("trl rloo loss"):
        new, old, advantages, mask, epsilon = _grpo_case(rng, empty=0.2)
        loss, gradient = rloo_loss(new, old, advantages, mask, epsilon)
        leaf = tensor(new, grad=True)
        log_ratio = reference.sequence_log_probability_ratio(leaf, tensor(old), tensor(mask))
        expected = reference.clipped_policy_loss(log_ratio, torch.zeros_like(log_ratio.detach()),
                                                 tensor(advantages), epsilon)
        expected.backward()
        worst = max(worst, abs(loss - float(expected.detach())))
        assert close(loss, expected), f"{label}: TRL's RLOO loss {loss!r} is not {float(expected.detach())!r}"
        assert close(gradient, leaf.grad), (
            f"{label}: the RLOO loss gradients differ by {largest_difference(gradient, leaf.grad):.3g}")
    ledger.add("TRL RLOOTrainer._compute_loss vs clipped_policy_loss(sequence_log_probability_ratio)", 300, worst,
               "equal")


def rloo_advantages(rewards: np.ndarray, group_size: int, *, beta: float = 0.0, old=None, ref=None, mask=None,
                    normalize: bool = False) -> np.ndarray:
    """``RLOOTrainer._generate_and_score_completions`` on a stand-in: generation, log-probabilities and rewards are
    the case's; the advantages are what the method computes from them."""
    rows = rewards.size
    mask = np.ones((rows, 1)) if mask is None else mask
    lengths = mask.sum(axis=1).astype(int)
    old = np.zeros(mask.shape) if old is None else old
    ref = np.zeros(mask.shape) if ref is None else ref
    model, ref_model = SimpleNamespace(training=True, is_gradient_checkpointing=False), object()

    def generate(prompts):
        completions = [[1] * int(length) for length in lengths]
        return [[1, 1] for _ in prompts], completions, ["" for _ in prompts]

    def per_token_logps(which, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        values = ref if which is ref_model else old
        return tensor(values)[:, :logits_to_keep], None, None

    stand_in = SimpleNamespace(
        accelerator=_Accelerator(), model=model, ref_model=ref_model, _generate=generate,
        _tokenizer=SimpleNamespace(pad_token_id=PAD), pad_to_multiple_of=None, mask_truncated_completions=False,
        args=SimpleNamespace(per_device_train_batch_size=rows, gradient_checkpointing_kwargs=None),
        _get_per_token_logps_and_entropies=per_token_logps,
        _calculate_rewards=lambda inputs, prompts, completions, ids: tensor(rewards)[:, None],
        beta=beta, num_generations=group_size, reward_weights=torch.ones(1, dtype=torch.float64),
        reward_clip_range=None, normalize_advantages=normalize, reward_func_names=["verifier"],
        _metrics={"train": defaultdict(list)}, _pending_extra_logs={}, _pending_metrics={}, log_multimodal=False,
        _logs={"prompt": [], "completion": [], "rewards": defaultdict(list), "advantages": [],
               "extra": defaultdict(list)})
    output = RLOOTrainer._generate_and_score_completions(stand_in, [{"prompt": f"p{k}"} for k in range(rows)])
    kept = int(lengths.max())  # the trainer pads the completions to the longest one
    assert torch.equal(output["completion_mask"], torch.tensor(mask[:, :kept], dtype=torch.long)), (
        "the trainer's completion mask is the case's")
    return output["advantages"].numpy()


def test_rloo_trainer_advantages_are_group_rloo_advantages_of_the_kl_penalised_rewards(reference, ledger):
    """``RLOOTrainer`` subtracts the mean of the others directly: the reference's ``group_rloo_advantages`` of
    prompt-major rows. With ``beta`` > 0 the rewards first lose ``beta · Σ (old - ref)`` over the completion (k1
    summed, the reference's ``sequence_log_probability_ratio(old, ref, mask)``)."""
    worst = 0.0
    for label, rng in cases("trl rloo advantages"):
        group_size, prompts = int(rng.integers(2, 7)), int(rng.integers(1, 5))
        rows, columns = group_size * prompts, int(rng.integers(1, 8))
        rewards = rng.normal(size=rows) * rng.choice([0.0, 1.0], size=rows, p=[0.1, 0.9])
        mask = prefix_mask(rng, rows, columns)
        old, ref = log_prob_pair(rng, (rows, columns), spread=0.3)
        beta = float(rng.choice([0.0, rng.uniform(0.01, 0.2)]))
        trl = rloo_advantages(rewards, group_size, beta=beta, old=old, ref=ref, mask=mask)
        penalised = rewards - beta * reference.sequence_log_probability_ratio(old, ref, mask)
        expected = reference.group_rloo_advantages(penalised, group_size)
        worst = max(worst, largest_difference(trl, expected))
        assert close(trl, expected), (
            f"{label} (beta {beta:.3g}): TRL's RLOO advantages differ from group_rloo_advantages by "
            f"{largest_difference(trl, expected):.3g}")
    ledger.add("TRL RLOOTrainer._generate_and_score_completions advantages vs group_rloo_advantages (with k1 penalty)",
               300, worst, "equal")


def test_rloo_trainer_normalize_advantages_standardises_over_the_batch(reference, ledger):
    """``normalize_advantages`` (off by default) standardises the RLOO advantages over the batch: (A - mean) /
    (std + 1e-4), Bessel's std. TRL's ``nanstd`` computes Bessel's factor ``count / (count - 1)`` as a float32
    tensor (``trl/trainer/utils.py``): compared at rtol 1e-7."""
    worst = 0.0
    for label, rng in cases("trl rloo normalize", count=100):
        group_size, prompts = int(rng.integers(2, 6)), int(rng.integers(1, 5))
        rewards = rng.normal(size=group_size * prompts)
        trl = rloo_advantages(rewards, group_size, normalize=True)
        plain = reference.group_rloo_advantages(rewards, group_size)
        expected = (plain - plain.mean()) / (plain.std(ddof=1) + 1e-4)
        worst = max(worst, largest_difference(trl, expected))
        assert close(trl, expected, rtol=1e-7, atol=1e-9), (
            f"{label}: normalised RLOO advantages differ by {largest_difference(trl, expected):.3g}")
    ledger.add("TRL RLOOTrainer normalize_advantages=True vs standardised group_rloo_advantages (rtol 1e-7)", 100,
               worst, "equal")


def test_rloo_configs_defaults_are_the_guides():
    """GUIDE §8: ``num_iterations`` 1, ``beta`` 0.05 (a KL penalty on by default), ``normalize_advantages`` off."""
    defaults = {name: _default(RLOOConfig, name) for name in ("num_iterations", "beta", "normalize_advantages")}
    assert defaults == {"num_iterations": 1, "beta": 0.05, "normalize_advantages": False}, f"got {defaults}"


# ---- GRPOTrainer's advantages (§2) ---------------------------------------------------------------------------


def grpo_advantages(rewards: np.ndarray, group_size: int, scale_rewards: str) -> np.ndarray:
    """``GRPOTrainer._generate_and_score_completions`` on a stand-in (one reward function, no tools, no vLLM); the
    advantages are what the method computes from the case's rewards."""
    rows = rewards.size

    def generate(prompts):
        # prompt ids, completion ids, tool mask, completions, sampling log-probs, extra fields, images, tool images
        return [[1, 1] for _ in prompts], [[1] for _ in prompts], None, ["" for _ in prompts], None, {}, None, None

    def per_token_logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        return torch.zeros(input_ids.shape[0], logits_to_keep, dtype=torch.float64), None, None

    stand_in = SimpleNamespace(
        accelerator=_Accelerator(), model=SimpleNamespace(training=True, is_gradient_checkpointing=False),
        environment_factories=None, tools=None, environments=None, _generate=generate,
        _tokenizer=SimpleNamespace(pad_token_id=PAD), pad_to_multiple_of=None, mask_truncated_completions=False,
        args=SimpleNamespace(per_device_train_batch_size=rows, gradient_checkpointing_kwargs=None,
                             gradient_accumulation_steps=1, steps_per_generation=1),
        _get_per_token_logps_and_entropies=per_token_logps,
        _calculate_rewards=lambda inputs, prompts, completions, ids: tensor(rewards)[:, None],
        beta=0.0, ref_model=None, num_generations=group_size, reward_weights=torch.ones(1, dtype=torch.float64),
        reward_funcs=[None], reward_func_names=["verifier"], multi_objective_aggregation="sum_then_normalize",
        scale_rewards=scale_rewards, use_vllm=False, vllm_importance_sampling_correction=False, num_iterations=1,
        _metrics={"train": defaultdict(list)}, _pending_extra_logs={}, _pending_metrics={}, log_multimodal=False,
        _logs={"prompt": [], "completion": [], "rewards": defaultdict(list), "advantages": [],
               "extra": defaultdict(list)})
    output = GRPOTrainer._generate_and_score_completions(stand_in, [{"prompt": f"p{k}"} for k in range(rows)])
    return output["advantages"].numpy()


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_grpo_trainer_advantages_are_the_group_mean_scaled_as_scale_rewards_says(reference, ledger, scale_rewards):
    """TRL's GRPO advantage is the reference's ``group_mean_advantages`` divided by the group's std plus 1e-4
    (``"group"``, the default), by the batch's std plus 1e-4 (``"batch"``), or not divided (``"none"``); Bessel's
    std, whose factor ``count / (count - 1)`` TRL's ``nanstd`` takes in float32: compared at rtol 1e-7."""
    worst = 0.0
    for label, rng in cases(f"trl grpo advantages {scale_rewards}"):
        group_size, prompts = int(rng.integers(2, 7)), int(rng.integers(1, 5))
        rewards = rng.normal(size=group_size * prompts) * rng.choice([0.0, 1.0], size=group_size * prompts,
                                                                     p=[0.1, 0.9])
        trl = grpo_advantages(rewards, group_size, scale_rewards)
        centred = reference.group_mean_advantages(rewards.reshape(prompts, group_size))
        if scale_rewards == "group":
            expected = centred / (np.sqrt((centred ** 2).sum(axis=1, keepdims=True) / (group_size - 1)) + 1e-4)
        elif scale_rewards == "batch":
            expected = centred / (rewards.std(ddof=1) + 1e-4) if rewards.size > 1 else centred
        else:
            expected = centred
        expected = expected.reshape(-1)
        worst = max(worst, largest_difference(trl, expected))
        assert close(trl, expected, rtol=1e-7, atol=1e-9), (
            f"{label}: TRL's GRPO advantages (scale_rewards={scale_rewards!r}) differ from the reference's by "
            f"{largest_difference(trl, expected):.3g}")
    divided = {"group": " / (group std + 1e-4)", "batch": " / (batch std + 1e-4)", "none": ""}[scale_rewards]
    ledger.add(f"TRL GRPOTrainer advantages scale_rewards={scale_rewards!r} vs group_mean_advantages{divided}"
               " (rtol 1e-7)", 300, worst, "equal")


def test_grpo_trainer_on_a_group_of_one_gives_0_and_its_config_refuses_one(reference, tmp_path):
    """GUIDE §2: TRL's GRPO gives a group of one 3 - 3 = 0, as the reference's same-group centring does, and its
    config refuses ``num_generations < 2``; ``scale_rewards`` defaults to ``"group"``."""
    for scale_rewards in ("group", "batch", "none"):
        trl = grpo_advantages(np.array([3.0, -1.0]), 1, scale_rewards)
        assert np.array_equal(trl, [0.0, 0.0]), f"TRL gives groups of one {trl} with scale_rewards={scale_rewards!r}"
    assert np.array_equal(reference.group_mean_advantages(np.array([[3.0]])), [[0.0]]), "the reference gives 0"
    with pytest.raises(ValueError, match="at least 2 generations"):
        GRPOConfig(output_dir=str(tmp_path), num_generations=1, per_device_train_batch_size=2, report_to="none",
                   use_cpu=True, bf16=False)
    assert _default(GRPOConfig, "scale_rewards") == "group", f"got {_default(GRPOConfig, 'scale_rewards')!r}"
