"""Concept 6 — response masks and the causal shift (GUIDE.md §6)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import logits_and_ids, response_batches

pytestmark = pytest.mark.response_masks


def first_eos_after_prompt(row: np.ndarray, prompt_length: int, eos: int) -> int | None:
    """Index of the first EOS at or after the prompt's end, by a plain loop (None if there is none)."""
    for index in range(prompt_length, len(row)):
        if row[index] == eos:
            return index
    return None


def last_non_pad(row: np.ndarray, prompt_length: int, pad: int) -> int:
    """Index of the last non-pad token after the prompt (prompt_length - 1 if the response is empty)."""
    last = prompt_length - 1
    for index in range(prompt_length, len(row)):
        if row[index] != pad:
            last = index
    return last


def masks(impl, batch: dict) -> tuple[np.ndarray, np.ndarray]:
    return (impl.response_token_mask(**batch, include_eos=True),
            impl.response_token_mask(**batch, include_eos=False))


def rows(batch: dict):
    for i, (row, prompt_length) in enumerate(zip(batch["input_ids"], batch["prompt_lengths"])):
        yield i, row, int(prompt_length)


# ---- the seed's example ----------------------------------------------------------------------------------------

SEED_IDS = np.array([[1, 10, 11, 20, 21, 2, 0], [1, 12, 30, 2, 0, 0, 0]])
SEED_PROMPT_LENGTHS = np.array([3, 2])


def test_seed_example(impl):
    mask = impl.response_token_mask(SEED_IDS, SEED_PROMPT_LENGTHS, pad_token_id=0, eos_token_id=2, include_eos=True)
    assert isinstance(mask, np.ndarray), "NumPy in must give NumPy out"
    np.testing.assert_array_equal(
        mask, [[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]],
        err_msg="column j scores token j + 1: row 0's response 20, 21, EOS sits at indices 3..5, so columns 2..4",
    )
    without_eos = impl.response_token_mask(
        SEED_IDS, SEED_PROMPT_LENGTHS, pad_token_id=0, eos_token_id=2, include_eos=False
    )
    np.testing.assert_array_equal(without_eos, [[0, 0, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0]],
                                  err_msg="include_eos=False drops exactly the EOS column")
    assert "0" in str(mask) and "1" in str(mask) and "." not in str(mask) and "True" not in str(mask), (
        "the mask prints as 0/1 (an integer array), as the lab shows it"
    )


# ---- properties ------------------------------------------------------------------------------------------------


@given(batch=response_batches(), include_eos=st.booleans())
def test_a_0_1_mask_of_label_columns_with_prompt_columns_zero(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    rows_, length = batch["input_ids"].shape
    assert isinstance(mask, np.ndarray), "NumPy in must give NumPy out"
    assert mask.shape == (rows_, length - 1), (
        f"the mask is aligned with the labels input_ids[:, 1:], so it has T - 1 = {length - 1} columns; "
        f"got shape {mask.shape}"
    )
    assert np.issubdtype(mask.dtype, np.integer), f"the mask is an integer 0/1 array; got dtype {mask.dtype}"
    assert set(np.unique(mask)) <= {0, 1}, "the mask holds only 0 and 1"
    for i, _, prompt_length in rows(batch):
        assert not mask[i, : prompt_length - 1].any(), (
            f"row {i}: a prompt token is in the mask (columns 0..{prompt_length - 2} score prompt tokens 1.."
            f"{prompt_length - 1}): prompt tokens must never be in the loss"
        )


@given(batch=response_batches(), include_eos=st.booleans())
def test_ones_form_one_run_starting_at_prompt_length_minus_one(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    for i, _, prompt_length in rows(batch):
        ones = np.flatnonzero(mask[i])
        if ones.size == 0:
            continue
        assert ones[0] == prompt_length - 1, (
            f"row {i}: the first response token sits at index {prompt_length}, so its label column is "
            f"{prompt_length - 1}; the mask starts at column {ones[0]}: is the causal shift off by one "
            "(mask aligned with input_ids[:, :-1] instead of input_ids[:, 1:])?"
        )
        assert np.all(np.diff(ones) == 1), f"row {i}: the response's ones must form one unbroken run"


@given(batch=response_batches(), include_eos=st.booleans())
def test_the_run_stops_at_the_first_eos_after_the_prompt(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    for i, row, prompt_length in rows(batch):
        eos = first_eos_after_prompt(row, prompt_length, batch["eos_token_id"])
        if eos is None:
            continue
        expected = np.zeros(len(row) - 1, dtype=np.int64)
        expected[prompt_length - 1: eos - 1] = 1
        expected[eos - 1] = int(include_eos)
        where = "the prompt" if np.any(row[:prompt_length] == batch["eos_token_id"]) else "no prompt"
        np.testing.assert_array_equal(
            mask[i], expected,
            err_msg=f"row {i} = {row.tolist()} with prompt length {prompt_length}: the response runs from index "
            f"{prompt_length} to the first EOS after the prompt (index {eos}; an EOS in {where} does not count), "
            f"its EOS column kept only with include_eos={include_eos}, and nothing after it (padding, junk, "
            f"pad_token_id == eos_token_id: {batch['pad_token_id'] == batch['eos_token_id']}) is in the mask",
        )


@given(batch=response_batches())
def test_include_eos_changes_exactly_the_eos_column(impl, batch):
    with_eos, without_eos = masks(impl, batch)
    for i, row, prompt_length in rows(batch):
        eos = first_eos_after_prompt(row, prompt_length, batch["eos_token_id"])
        changed = np.flatnonzero(with_eos[i] != without_eos[i]).tolist()
        expected = [] if eos is None else [eos - 1]
        assert changed == expected, (
            f"row {i} = {row.tolist()}: include_eos must change exactly the EOS's column {expected} "
            f"(EOS at index {eos}, scored by column {None if eos is None else eos - 1}); columns {changed} changed"
        )


@given(batch=response_batches(), include_eos=st.booleans())
def test_a_response_without_eos_runs_to_its_last_non_pad_token(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    for i, row, prompt_length in rows(batch):
        if first_eos_after_prompt(row, prompt_length, batch["eos_token_id"]) is not None:
            continue
        last = last_non_pad(row, prompt_length, batch["pad_token_id"])
        expected = np.zeros(len(row) - 1, dtype=np.int64)
        expected[prompt_length - 1: last] = 1
        np.testing.assert_array_equal(
            mask[i], expected,
            err_msg=f"row {i} = {row.tolist()} (prompt length {prompt_length}) has no EOS: its response runs "
            f"from index {prompt_length} to its last non-pad token (index {last}), and the padding after it is "
            "never in the mask",
        )


def test_pad_equal_to_eos_keeps_the_real_eos(impl):
    ids = np.array([[1, 5, 6, 7, 0, 0], [1, 5, 6, 7, 3, 0]])
    mask = impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=0, include_eos=True)
    np.testing.assert_array_equal(
        mask, [[0, 1, 1, 1, 0], [0, 1, 1, 1, 1]],
        err_msg="with pad_token_id == eos_token_id the first such token after the prompt is the real EOS: it is "
        "kept with include_eos=True, and only the ones after it are padding",
    )


def test_an_eos_inside_the_prompt_does_not_end_the_response(impl):
    ids = np.array([[1, 2, 7, 8, 2, 0]])
    mask = impl.response_token_mask(ids, np.array([2]), pad_token_id=0, eos_token_id=2, include_eos=True)
    np.testing.assert_array_equal(
        mask, [[0, 1, 1, 1, 0]],
        err_msg="the EOS at index 1 is part of the prompt: search for EOS only from index prompt_length on",
    )


def test_empty_responses_give_rows_of_zeros(impl):
    ids = np.array([[1, 5, 6, 7], [1, 5, 2, 0], [1, 5, 0, 0]])
    mask = impl.response_token_mask(ids, np.array([4, 2, 2]), pad_token_id=0, eos_token_id=2, include_eos=False)
    np.testing.assert_array_equal(
        mask, np.zeros((3, 3)),
        err_msg="a prompt that fills its row, a response that is only a dropped EOS, and a response of padding "
        "only are all empty: their rows are zero",
    )


@pytest.mark.parametrize("include_eos", [True, False])
def test_tensor_in_tensor_out_and_inputs_untouched(impl, include_eos):
    batch = dict(input_ids=SEED_IDS.copy(), prompt_lengths=SEED_PROMPT_LENGTHS.copy(), pad_token_id=0, eos_token_id=2)
    expected = impl.response_token_mask(**batch, include_eos=include_eos)
    for tensors in (dict(input_ids=torch.from_numpy(SEED_IDS)),
                    dict(input_ids=torch.from_numpy(SEED_IDS), prompt_lengths=torch.from_numpy(SEED_PROMPT_LENGTHS))):
        mask = impl.response_token_mask(**dict(batch, **tensors), include_eos=include_eos)
        assert isinstance(mask, torch.Tensor), "a tensor in must give a tensor out"
        assert mask.dtype == torch.int64, f"the documented mask dtype is int64; got {mask.dtype}"
        np.testing.assert_array_equal(mask.numpy(), expected, err_msg="tensors and NumPy arrays must agree")
    np.testing.assert_array_equal(batch["input_ids"], SEED_IDS, err_msg="input_ids was changed in place")
    np.testing.assert_array_equal(batch["prompt_lengths"], SEED_PROMPT_LENGTHS,
                                  err_msg="prompt_lengths was changed in place")


def test_bad_input_is_a_clear_error(impl):
    ids = np.array([[1, 5, 6, 2], [1, 5, 2, 0]])
    impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=2, include_eos=True)
    valid = dict(pad_token_id=0, eos_token_id=2, include_eos=True)
    with pytest.raises(ValueError, match="prompt_lengths"):
        impl.response_token_mask(ids, np.array([2, 5]), **valid)  # a prompt longer than its row
    with pytest.raises(ValueError, match="prompt_lengths"):
        impl.response_token_mask(ids, np.array([0, 2]), **valid)  # the first token is never scored
    with pytest.raises(ValueError, match="prompt_lengths"):
        impl.response_token_mask(ids, np.array([2, 2, 2]), **valid)  # one length per row
    with pytest.raises(ValueError, match="input_ids"):
        impl.response_token_mask(ids[0], np.array([2]), **valid)  # [B, T] is required
    with pytest.raises(ValueError, match="input_ids"):
        impl.response_token_mask(ids.astype(float), np.array([2, 2]), **valid)
    with pytest.raises(ValueError, match="include_eos"):
        impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=2, include_eos="yes")


# ---- token log-probs: the causal shift ---------------------------------------------------------------------------


def direct_token_log_probs(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """log softmax(logits[b, j])[ids[b, j + 1]] by a plain loop."""
    rows_, length, _ = logits.shape
    result = np.empty((rows_, length - 1))
    for b in range(rows_):
        for j in range(length - 1):
            scores = logits[b, j]
            top = scores.max()
            result[b, j] = scores[ids[b, j + 1]] - top - np.log(np.exp(scores - top).sum())
    return result


@given(pair=logits_and_ids())
def test_log_probs_at_column_j_score_token_j_plus_one(impl, pair):
    logits, ids = pair
    log_probs = impl.token_log_probs(logits, ids)
    assert isinstance(log_probs, np.ndarray), "NumPy in must give NumPy out"
    assert log_probs.shape == (ids.shape[0], ids.shape[1] - 1), (
        "token log-probs are aligned with the labels input_ids[:, 1:]: T - 1 columns"
    )
    np.testing.assert_allclose(
        log_probs, direct_token_log_probs(logits, ids), rtol=1e-10, atol=1e-10,
        err_msg="column j must be log_softmax(logits[:, j])[input_ids[:, j + 1]]: the logits at position t "
        "predict token t + 1 (is the shift off by one, or the softmax over the wrong axis?)",
    )


@given(pair=logits_and_ids())
def test_log_probs_keep_autograd_and_ignore_the_last_position(impl, pair):
    logits, ids = pair
    tensor = torch.tensor(logits, requires_grad=True)
    log_probs = impl.token_log_probs(tensor, torch.from_numpy(ids))
    assert isinstance(log_probs, torch.Tensor) and log_probs.requires_grad, (
        "a tensor in must give a tensor out, with the gradient path to the logits kept"
    )
    log_probs.sum().backward()
    assert torch.all(tensor.grad[:, -1] == 0), "the last position predicts no label: its logits get no gradient"
    np.testing.assert_array_equal(logits, tensor.detach().numpy(), err_msg="logits were changed in place")


def test_log_probs_bad_input_is_a_clear_error(impl):
    logits, ids = np.zeros((2, 4, 5)), np.array([[1, 2, 3, 4], [0, 0, 1, 1]])
    impl.token_log_probs(logits, ids)
    with pytest.raises(ValueError, match="input_ids"):
        impl.token_log_probs(logits, ids[:, :3])  # shapes differ
    with pytest.raises(ValueError, match="input_ids"):
        impl.token_log_probs(logits, ids + 1)  # id 5 is outside the vocabulary of 5
    with pytest.raises(ValueError, match="logits"):
        impl.token_log_probs(logits[0], ids)
