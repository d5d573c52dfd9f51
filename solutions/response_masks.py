"""The reference for response masks and the causal shift.

Which label columns belong to the response, and the log-probabilities of those labels.

A causal language model's logits at position ``t`` predict token ``t + 1``: the first token is never predicted and
the last position predicts nothing. The labels are therefore ``input_ids[:, 1:]``: every per-token quantity of the
loss has ``T - 1`` columns, and column ``j`` scores token ``j + 1``.
Rows are right-padded: ``[prompt ... | response ... EOS | PAD ...]``.
"""

from __future__ import annotations

import torch

from kata.arrays import ArrayLike, as_tensor, as_token_ids, check_integer, check_ndim, like_inputs
# BEGIN STUB
# from kata.concepts.stub import not_implemented
# END STUB


def response_token_mask(
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    pad_token_id: int,
    eos_token_id: int,
    include_eos: bool,
) -> ArrayLike:
    """The 0/1 mask of response tokens, aligned with the labels ``input_ids[:, 1:]``.

    Args:
        input_ids: integer ``[B, T]`` (any integer dtype), ``T >= 2``: each row is its prompt followed by its
            response, right-padded. PAD and EOS ids may stand anywhere, the prompt included.
        prompt_lengths: integer ``[B]``, each in ``[1, T]``: the first ``prompt_lengths[i]`` tokens of row ``i``
            are its prompt (a prompt as long as its row leaves an empty response).
        pad_token_id, eos_token_id: token ids (``>= 0``, any ids, 0 included); they may be equal.
        include_eos: whether the EOS that ends a response is scored (it is, when the policy must learn to stop).

    Returns:
        int64 ``[B, T - 1]`` of 0 and 1 (a NumPy array when both inputs are NumPy, a tensor on ``input_ids``'
        device if either is a tensor). Column ``j`` is 1 exactly when token ``j + 1`` is a response token: the ones
        form one run that starts at column ``prompt_lengths[i] - 1`` and ends at the first EOS found at or after
        index ``prompt_lengths[i]`` (an EOS inside the prompt does not count; the EOS column is 1 only with
        ``include_eos``). Everything after that EOS is padding, even when ``pad_token_id == eos_token_id``.
        A response with no EOS runs to its last non-pad token; a PAD id before the response's end is a response
        token. An empty response gives a row of zeros.

    Example:
        >>> import numpy as np
        >>> response_token_mask(np.array([[1, 10, 11, 20, 21, 2, 0]]), np.array([3]),
        ...                     pad_token_id=0, eos_token_id=2, include_eos=True)
        array([[0, 0, 1, 1, 1, 0]])

    Raises:
        ValueError: non-integer ids, ``T < 2``, shapes that do not match, a prompt length outside ``[1, T]``, a
            negative ``pad_token_id`` or ``eos_token_id``, an ``include_eos`` that is not a bool.
    """
    ids = as_token_ids(input_ids, "input_ids")
    check_ndim("input_ids", ids, (2,))
    if ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(
            "input_ids must be [B, T] with B >= 1 rows and T >= 2 tokens (a label needs a token before it); "
            f"got shape {tuple(ids.shape)}"
        )
    lengths = as_token_ids(prompt_lengths, "prompt_lengths").to(ids.device)
    check_ndim("prompt_lengths", lengths, (1,))
    if lengths.shape[0] != ids.shape[0]:
        raise ValueError(
            f"prompt_lengths must have one entry per row of input_ids ({ids.shape[0]}); "
            f"got shape {tuple(lengths.shape)}"
        )
    if (lengths < 1).any() or (lengths > ids.shape[1]).any():
        row = int(((lengths < 1) | (lengths > ids.shape[1])).nonzero()[0, 0])
        raise ValueError(
            f"prompt_lengths must be in [1, T] = [1, {ids.shape[1]}] (the prompt holds at least the first token "
            f"and fits in its row); row {row} has {int(lengths[row])}"
        )
    if not isinstance(include_eos, bool):
        raise ValueError(f"include_eos must be True or False; got {include_eos!r}")
    pad = check_integer("pad_token_id", pad_token_id, 0)
    eos = check_integer("eos_token_id", eos_token_id, 0)
    # BEGIN SOLUTION
    length = ids.shape[1]
    positions = torch.arange(length, device=ids.device)
    after_prompt = positions >= lengths[:, None]

    # The first EOS after the prompt ends the response; one inside the prompt is just a prompt token.
    is_eos = (ids == eos) & after_prompt
    has_eos = is_eos.any(dim=1)
    first_eos = is_eos.to(torch.int8).argmax(dim=1)  # argmax returns the first maximum
    # Without an EOS the response runs to its last non-pad token (-1 when there is none: an empty response).
    last_real = torch.where((ids != pad) & after_prompt, positions, -1).amax(dim=1)
    last = torch.where(has_eos, first_eos - (0 if include_eos else 1), last_real)

    in_response = after_prompt & (positions <= last[:, None])
    mask = in_response[:, 1:].to(torch.int64)  # label column j is token j + 1
    return like_inputs(mask, input_ids, prompt_lengths)
    # END SOLUTION
    # BEGIN STUB
    # # ids: int64 tensor [B, T]; lengths: int64 tensor [B]; pad, eos: ints; include_eos: bool. Decide, for every
    # # token position, whether it is a response token, then shift to the label columns. Return an int64 tensor
    # # through like_inputs(mask, input_ids, prompt_lengths) so NumPy callers get NumPy back.
    # raise not_implemented("response_token_mask")
    # END STUB


def token_log_probs(logits: ArrayLike, input_ids: ArrayLike) -> ArrayLike:
    """Log-probabilities of the labels ``input_ids[:, 1:]`` under the logits that predict them.

    Args:
        logits: floating ``[B, T, V]``; ``logits[:, t]`` is the model's score of every token at position
            ``t + 1``.
        input_ids: integer ``[B, T]`` (``T >= 2``), ids in ``[0, V)``.

    Returns:
        ``[B, T - 1]`` in ``logits``' dtype: column ``j`` is ``log_softmax(logits[:, j])[input_ids[:, j + 1]]``,
        finite wherever the logits are finite, even near the dtype's limits (as long as two logits of one position
        differ by a finite amount). The last position ``logits[:, T - 1]`` predicts no label: whatever it holds
        never reaches the result, and (finite) it gets zero gradient. Gradients flow into ``logits``. NumPy when
        both inputs are NumPy, a tensor if either is a tensor.

    Raises:
        ValueError: non-floating logits, shapes that do not match, ``T < 2``, ids outside ``[0, V)``.
    """
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
    # BEGIN SOLUTION
    # Normalising the contiguous whole and dropping the last position after is quicker than normalising a slice.
    log_probs = torch.log_softmax(scores, dim=-1)[:, :-1]
    gathered = log_probs.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return like_inputs(gathered, logits, input_ids)
    # END SOLUTION
    # BEGIN STUB
    # # scores: floating tensor [B, T, V] (autograd kept); ids: int64 tensor [B, T] with ids in [0, V).
    # # Return like_inputs(result, logits, input_ids).
    # raise not_implemented("token_log_probs")
    # END STUB
