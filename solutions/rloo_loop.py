"""The reference for the RLOO loop: a tiny autoregressive policy learns from a verifier.

One executable path through everything the module teaches about language-model policies: responses of different
lengths ended by a sampled EOS, the causal shift, prompt and padding masks, a leave-one-out group baseline and
token-level clipping. The task, the GRU policy, the verifier and the loop's frame live in ``kata``; the four parts
below (sampling, grouped advantages, the loss, one iteration) are the concept's, and the loop hands them (with this
package's ``rloo_advantages``, ``response_token_mask``, ``token_log_probs`` and ``masked_token_ppo_objective``) to
the frame: the package's own code is what learns.

Row layout: ``[BOS, p<k> | response ... EOS, PAD ...]``; groups are prompt-major (rows ``k*G .. (k+1)*G - 1``
answer prompt ``k``).
"""

from __future__ import annotations

from typing import Any

import torch

from kata.arrays import (
    REDUCTIONS,
    ArrayLike,
    as_float_tensor,
    as_tensor,
    as_token_ids,
    check_choice,
    check_integer,
    check_ndim,
    check_positive,
    like_inputs,
    to_numpy,
)
from kata.rl.rloo import IterationResult, run_rloo
from kata.rl.sequence_task import EOS_ID, MAX_NEW_TOKENS, PAD_ID, evaluate_policy
# BEGIN STUB
# from kata.concepts.stub import not_implemented
# END STUB

from .baselines import rloo_advantages
from .response_masks import response_token_mask, token_log_probs
from .token_objectives import masked_token_ppo_objective


def sample_responses(
    model: Any,
    prompt_ids: ArrayLike,
    max_new_tokens: int,
    *,
    eos_token_id: int = EOS_ID,
    pad_token_id: int = PAD_ID,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
) -> ArrayLike:
    """Complete every prompt with one response, one token at a time, ended by EOS and right-padded.

    Args:
        model: a causal policy: ``model(ids)`` with int64 ``ids [B, t]`` returns logits ``[B, t, V]``, and
            ``logits[:, -1]`` scores the next token.
        prompt_ids: integer ``[B, P]``: the prompts (repeat a prompt G times for a group of G responses).
        max_new_tokens: the response length limit ``L >= 1``.
        eos_token_id, pad_token_id: the ids that end a response and fill the row after it (any ids ``>= 0``, equal
            ones too); the task's defaults are then ordinary tokens.
        deterministic: greedy decoding (the most probable token) instead of sampling.
        generator: the ``torch.Generator`` every draw uses (None: torch's global one, drawn from and advanced).

    Returns:
        int64 ``[B, P + L]`` (NumPy for NumPy prompts, else a tensor): the prompt unchanged, then the response.
        A row's response ends at its first EOS and every later position is ``pad_token_id``, whatever the model
        would have sampled there; a row that never samples EOS fills all L positions. No gradient is kept.

    Example:
        With a model that always prefers ``a`` then EOS, ``[[BOS, p0]]`` becomes ``[[BOS, p0, a, EOS, PAD, PAD]]``
        for ``max_new_tokens=4``.
    """
    if not callable(model):
        raise ValueError(f"model must be callable (input_ids [B, t] -> logits [B, t, V]); got {type(model).__name__}")
    prompts = as_token_ids(prompt_ids, "prompt_ids")
    check_ndim("prompt_ids", prompts, (2,))
    if prompts.shape[0] < 1 or prompts.shape[1] < 1:
        raise ValueError(f"prompt_ids must be [B, P] with B >= 1 and P >= 1; got shape {tuple(prompts.shape)}")
    if not isinstance(deterministic, bool):
        raise ValueError(f"deterministic must be True or False; got {deterministic!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None; got {type(generator).__name__}")
    length = check_integer("max_new_tokens", max_new_tokens, 1)
    eos = check_integer("eos_token_id", eos_token_id, 0)
    pad = check_integer("pad_token_id", pad_token_id, 0)
    # BEGIN SOLUTION
    rows = prompts.shape[0]
    ids = prompts.clone()
    finished = torch.zeros(rows, dtype=torch.bool)
    with torch.no_grad():
        for _ in range(length):
            if bool(finished.all()):
                # Every row has stopped: the rest is padding, no need to ask the model.
                padding = torch.full((rows, length - (ids.shape[1] - prompts.shape[1])), pad, dtype=torch.int64)
                ids = torch.cat([ids, padding], dim=1)
                break
            next_logits = model(ids)[:, -1].float()
            if deterministic:
                next_tokens = next_logits.argmax(dim=-1)
            else:
                probabilities = torch.softmax(next_logits, dim=-1)
                next_tokens = torch.multinomial(probabilities, 1, generator=generator).squeeze(1)
            # A finished row emits nothing more: its EOS was its last token.
            next_tokens = torch.where(finished, torch.full_like(next_tokens, pad), next_tokens)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = finished | (next_tokens == eos)
    return like_inputs(ids, prompt_ids)
    # END SOLUTION
    # BEGIN STUB
    # # prompts: a checked int64 tensor [B, P] (never change it in place: grow a copy with torch.cat). One step per
    # # new token for all rows at once: model(ids)[:, -1] scores the next token; keep a `finished` flag per row.
    # # Draw with torch.multinomial(..., generator=generator). Return like_inputs(ids, prompt_ids).
    # raise not_implemented("sample_responses")
    # END STUB


def group_rloo_advantages(rewards: ArrayLike, group_size: int) -> ArrayLike:
    """RLOO advantages of prompt-major rows: each row's baseline is the mean of the OTHER rows of its prompt.

    Args:
        rewards: floating ``[B]``, ``B = prompts * group_size``; rows ``k*G .. (k+1)*G - 1`` answer prompt ``k``.
        group_size: ``G >= 2`` responses per prompt.

    Returns:
        ``[B]`` in the same kind and floating dtype (float64 for float64 rewards): the advantages of each
        consecutive group of G rows sum to zero, and no group's rewards affect another's advantages.

    Example:
        >>> import numpy as np
        >>> group_rloo_advantages(np.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.0]), group_size=3)
        array([-1. ,  0.5,  0.5,  1. , -0.5, -0.5])
    """
    tensor, group_size = _grouped_rewards(rewards, group_size)
    # BEGIN SOLUTION
    advantages = rloo_advantages(tensor.reshape(-1, group_size)).reshape(-1)
    return like_inputs(advantages, rewards)
    # END SOLUTION
    # BEGIN STUB
    # # tensor: checked floating [B] with B a multiple of group_size. This package's rloo_advantages works on
    # # [groups, G]. Return like_inputs(advantages, rewards).
    # raise not_implemented("group_rloo_advantages")
    # END STUB


def sequence_policy_loss(
    logits: ArrayLike,
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    clip_epsilon: float,
    reduction: str = "token_mean",
    *,
    pad_token_id: int = PAD_ID,
    eos_token_id: int = EOS_ID,
) -> torch.Tensor:
    """The loss to minimise for one PPO epoch: minus the masked, clipped token objective of the responses.

    Args:
        logits: floating ``[B, T, V]``, the current policy's logits for ``input_ids`` (gradients kept).
        input_ids: integer ``[B, T]``: prompt, response ended by EOS, padding.
        prompt_lengths: integer ``[B]``.
        old_log_probs: ``[B, T - 1]``: the sampling policy's log-probs of the labels ``input_ids[:, 1:]`` (data).
        advantages: floating ``[B]``, one per response.
        clip_epsilon: PPO's clip range (> 0; any value, 1 - ε may be negative).
        reduction: ``token_mean``, ``sequence_mean`` or ``sequence_sum_mean`` (see ``masked_token_ppo_objective``).
        pad_token_id, eos_token_id: the ids that delimit each response, as in ``response_token_mask``.

    ``input_ids``, ``prompt_lengths``, ``old_log_probs`` and ``advantages`` may each be NumPy or a tensor; the last
    two are data and receive no gradient. ``old_log_probs`` outside the response may hold anything, inf and NaN
    included.

    Returns:
        A 0-d tensor in the logits' dtype: ``-masked_token_ppo_objective`` over the response tokens, EOS included.
        Logits at positions that predict a prompt token, a padding token or nothing (the last position) never
        change the loss or its gradient; neither do ``old_log_probs`` outside the response.
    """
    logits_t = as_tensor(logits, "logits")
    if not torch.is_floating_point(logits_t):
        raise ValueError(f"logits must be floating point; got dtype {logits_t.dtype}")
    check_ndim("logits", logits_t, (3,))
    input_ids_t = as_token_ids(input_ids, "input_ids")
    if tuple(input_ids_t.shape) != tuple(logits_t.shape[:2]):
        raise ValueError(
            f"input_ids must be [B, T] matching logits {tuple(logits_t.shape)}; got {tuple(input_ids_t.shape)}"
        )
    old_log_probs_t = as_float_tensor(old_log_probs, "old_log_probs")
    expected = (logits_t.shape[0], logits_t.shape[1] - 1)
    if tuple(old_log_probs_t.shape) != expected:
        raise ValueError(
            f"old_log_probs must be [B, T - 1] = {expected}, aligned with the labels input_ids[:, 1:]; "
            f"got {tuple(old_log_probs_t.shape)}"
        )
    advantages_t = as_float_tensor(advantages, "advantages")
    if tuple(advantages_t.shape) != (logits_t.shape[0],):
        raise ValueError(
            f"advantages must be [B] = ({logits_t.shape[0]},), one per row; got {tuple(advantages_t.shape)}"
        )
    check_positive("clip_epsilon", clip_epsilon)
    check_choice("reduction", reduction, REDUCTIONS)
    # BEGIN SOLUTION
    mask = response_token_mask(input_ids_t, prompt_lengths, pad_token_id, eos_token_id, include_eos=True)
    new_log_probs = token_log_probs(logits_t, input_ids_t)
    old, adv = old_log_probs_t.to(new_log_probs.dtype), advantages_t.to(new_log_probs.dtype)
    objective = masked_token_ppo_objective(new_log_probs, old, adv, mask, clip_epsilon, reduction)
    return -objective
    # END SOLUTION
    # BEGIN STUB
    # # Three concept functions of this package do the work: response_token_mask, token_log_probs and
    # # masked_token_ppo_objective. Which EOS setting does a policy that must learn to stop need?
    # raise not_implemented("sequence_policy_loss")
    # END STUB


def rloo_iteration(
    model: torch.nn.Module,
    optimizer: Any,
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    rewards: ArrayLike,
    group_size: int,
    ppo_epochs: int,
    clip_epsilon: float,
    reduction: str = "token_mean",
    *,
    pad_token_id: int = PAD_ID,
    eos_token_id: int = EOS_ID,
) -> IterationResult:
    """One RLOO/PPO iteration on a sampled batch: advantages, frozen old log-probs, ``ppo_epochs`` full-batch steps.

    Args:
        model: the policy that sampled ``input_ids`` (``model(ids) -> logits [B, T, V]``).
        optimizer: an optimizer over ``model``'s parameters with ``zero_grad()`` and ``step()``
            (kata.rl.Adam, or any torch.optim optimizer); zeroed before each ``backward()``: leftover ``.grad``
            from the caller changes nothing.
        input_ids: integer ``[B, T]``, prompt-major groups of ``group_size`` rows.
        prompt_lengths: integer ``[B]``.
        rewards: floating ``[B]``, the verifier's rewards.
        group_size: responses per prompt, ``G >= 2``.
        ppo_epochs: optimisation steps on the same batch, ``>= 1``.
        clip_epsilon, reduction: as in :func:`sequence_policy_loss`, which every epoch calls with them and with
            ``pad_token_id`` and ``eos_token_id``.

    Returns:
        :class:`kata.rl.rloo.IterationResult`: ``advantages`` (float64 NumPy ``[B]`` whatever the rewards' kind and
        floating dtype), ``response_mask``
        (``[B, T - 1]``, EOS included), ``old_log_probs`` (``[B, T - 1]``, computed once under ``no_grad`` before
        the first epoch and used unchanged by every epoch) and ``epoch_losses`` (each epoch's loss before its
        step; the first equals minus the mean advantage over the masked tokens, since the ratio starts at 1).
        The model's parameters change; ``input_ids`` and ``rewards`` do not.
    """
    if not callable(model):
        raise ValueError(f"model must be callable (input_ids -> logits); got {type(model).__name__}")
    if not (callable(getattr(optimizer, "zero_grad", None)) and callable(getattr(optimizer, "step", None))):
        raise ValueError(
            f"optimizer must have zero_grad() and step(), like a torch.optim.Optimizer; got {type(optimizer).__name__}"
        )
    input_ids_t = as_token_ids(input_ids, "input_ids")
    check_ndim("input_ids", input_ids_t, (2,))
    prompt_lengths_t = as_token_ids(prompt_lengths, "prompt_lengths")
    if tuple(prompt_lengths_t.shape) != (input_ids_t.shape[0],):
        raise ValueError(f"prompt_lengths must be [B] = ({input_ids_t.shape[0]},); got {tuple(prompt_lengths_t.shape)}")
    rewards_t, _ = _grouped_rewards(rewards, group_size)
    if rewards_t.shape[0] != input_ids_t.shape[0]:
        raise ValueError(
            f"rewards must hold one reward per row of input_ids ({input_ids_t.shape[0]}); got {rewards_t.shape[0]}"
        )
    check_integer("ppo_epochs", ppo_epochs, 1)
    # BEGIN SOLUTION
    ids = torch.as_tensor(input_ids).to(torch.int64)
    lengths = torch.as_tensor(prompt_lengths).to(torch.int64)
    advantages = torch.as_tensor(group_rloo_advantages(to_numpy(rewards).astype("float64"), group_size))
    mask = response_token_mask(ids, lengths, pad_token_id, eos_token_id, include_eos=True)
    # The old policy is the one that sampled the batch: freeze its log-probs once, before any step.
    with torch.no_grad():
        old_log_probs = token_log_probs(model(ids), ids)
    losses = []
    for _ in range(ppo_epochs):
        loss = sequence_policy_loss(
            model(ids), ids, lengths, old_log_probs, advantages, clip_epsilon, reduction,
            pad_token_id=pad_token_id, eos_token_id=eos_token_id,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return IterationResult(
        advantages=advantages.numpy(),
        response_mask=mask,
        old_log_probs=old_log_probs,
        epoch_losses=tuple(losses),
    )
    # END SOLUTION
    # BEGIN STUB
    # # Return IterationResult(advantages=<float64 NumPy [B]>, response_mask=..., old_log_probs=...,
    # # epoch_losses=tuple of floats). When must the old log-probs be computed, and under what context?
    # raise not_implemented("rloo_iteration")
    # END STUB


def train_tiny_sequence_policy(seed: int, **config: Any) -> dict[str, Any]:
    """Train the tiny sequence policy with this package's sampler and iteration (keyword arguments: see
    :func:`kata.rl.rloo.sequence_profile_config` and :func:`kata.rl.rloo.run_rloo`)."""
    return run_rloo(seed, sample_responses=sample_responses, rloo_iteration=rloo_iteration, **config)


def evaluate_sequence_policy(
    model: Any,
    samples_per_prompt: int = 32,
    deterministic: bool = False,
    seed: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> dict[str, Any]:
    """Score ``samples_per_prompt`` responses per prompt drawn with this package's ``sample_responses``
    (greedy with ``deterministic``); see :func:`kata.rl.sequence_task.evaluate_policy` for the returned dict."""
    return evaluate_policy(model, sample_responses, samples_per_prompt, deterministic, seed, max_new_tokens)


def _grouped_rewards(rewards: ArrayLike, group_size: int) -> tuple[torch.Tensor, int]:
    """``rewards`` as a floating ``[B]`` tensor with ``B`` a multiple of ``group_size >= 2``, and ``group_size``."""
    group_size = check_integer("group_size", group_size, 2)
    tensor = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", tensor, (1,))
    if tensor.shape[0] < 1 or tensor.shape[0] % group_size:
        raise ValueError(
            f"rewards must be [B] with B a positive multiple of group_size = {group_size} (prompt-major groups); "
            f"got shape {tuple(tensor.shape)}"
        )
    return tensor, group_size
