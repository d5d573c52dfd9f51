"""Input checks for the `response_masks` concept."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kata.concepts.arrays import ArrayLike, as_tensor, as_token_ids, check_integer, check_ndim


class MaskInputs(NamedTuple):
    """Checked mask inputs: ``input_ids`` int64 ``[B, T]``, ``prompt_lengths`` int64 ``[B]`` on the same device."""

    input_ids: torch.Tensor
    prompt_lengths: torch.Tensor
    pad_token_id: int
    eos_token_id: int
    include_eos: bool


def response_mask_inputs(
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    pad_token_id: int,
    eos_token_id: int,
    include_eos: bool,
) -> MaskInputs:
    """Check every argument of ``response_token_mask``; inputs are never changed."""
    ids = as_token_ids(input_ids, "input_ids")
    check_ndim("input_ids", ids, (2,))
    batch, length = ids.shape
    if batch < 1 or length < 2:
        raise ValueError(
            "input_ids must be [B, T] with B >= 1 rows and T >= 2 tokens (a label needs a token before it); "
            f"got shape {tuple(ids.shape)}"
        )
    lengths = as_token_ids(prompt_lengths, "prompt_lengths").to(ids.device)
    check_ndim("prompt_lengths", lengths, (1,))
    if lengths.shape[0] != batch:
        raise ValueError(
            f"prompt_lengths must have one entry per row of input_ids ({batch}); got shape {tuple(lengths.shape)}"
        )
    if (lengths < 1).any() or (lengths > length).any():
        row = int(((lengths < 1) | (lengths > length)).nonzero()[0, 0])
        raise ValueError(
            f"prompt_lengths must be in [1, T] = [1, {length}] (the prompt holds at least the first token and "
            f"fits in its row); row {row} has {int(lengths[row])}"
        )
    if not isinstance(include_eos, bool):
        raise ValueError(f"include_eos must be True or False; got {include_eos!r}")
    return MaskInputs(
        ids,
        lengths,
        check_integer("pad_token_id", pad_token_id, 0),
        check_integer("eos_token_id", eos_token_id, 0),
        include_eos,
    )


class LogProbInputs(NamedTuple):
    """Checked inputs of ``token_log_probs``: floating ``logits`` ``[B, T, V]``, int64 ``input_ids`` ``[B, T]``."""

    logits: torch.Tensor
    input_ids: torch.Tensor


def token_log_prob_inputs(logits: ArrayLike, input_ids: ArrayLike) -> LogProbInputs:
    """Check the arguments of ``token_log_probs`` (gradients of ``logits`` kept)."""
    scores = as_tensor(logits, "logits")
    if not torch.is_floating_point(scores):
        raise ValueError(f"logits must be floating point; got dtype {scores.dtype}")
    check_ndim("logits", scores, (3,))
    ids = as_token_ids(input_ids, "input_ids").to(scores.device)
    check_ndim("input_ids", ids, (2,))
    if tuple(ids.shape) != tuple(scores.shape[:2]):
        raise ValueError(
            f"input_ids must be [B, T] matching logits [B, T, V] = {tuple(scores.shape)}; got {tuple(ids.shape)}"
        )
    if ids.shape[1] < 2:
        raise ValueError(f"input_ids must have T >= 2 tokens (a label needs a token before it); got {ids.shape[1]}")
    vocabulary = scores.shape[2]
    if ids.numel() and ((ids < 0).any() or (ids >= vocabulary).any()):
        bad = int(ids[(ids < 0) | (ids >= vocabulary)][0])
        raise ValueError(f"input_ids must be token ids in [0, V) = [0, {vocabulary}); got {bad}")
    return LogProbInputs(scores, ids)
