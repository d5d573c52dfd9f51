"""The response_masks tests: response masks and the causal shift."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, gradient, mistake, plain, word
from kata.testing.strategies import IGNORED_VALUES, containers, float_dtypes
from kata.testing.strategies.response_masks import logits_and_ids, response_batches
from kata.testing.battery import battery_tests
from kata.testing.strategies.response_masks import CONTRACTS

pytestmark = pytest.mark.response_masks


def first_eos_after_prompt(row: np.ndarray, prompt_length: int, eos: int, start: int | None = None) -> int | None:
    """Index of the first EOS at or after the prompt's end (or after ``start``), by a plain loop (None if none)."""
    for index in range(prompt_length if start is None else start, len(row)):
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


def expected_mask_row(row: np.ndarray, prompt_length: int, pad: int, eos: int, include_eos: bool,
                      eos_search_start: int | None = None) -> np.ndarray:
    """The row's mask by the contract, by a plain loop: label column j is 1 when token j + 1 is a response token.

    ``eos_search_start=0``: the misreading that searches the prompt for EOS too (then an EOS in the prompt ends the
    response before it starts)."""
    end = first_eos_after_prompt(row, prompt_length, eos, eos_search_start)
    last = last_non_pad(row, prompt_length, pad) if end is None else end - (0 if include_eos else 1)
    mask = np.zeros(len(row) - 1, dtype=np.int64)
    for index in range(prompt_length, last + 1):
        mask[index - 1] = 1
    return mask


def _what_column_scores(row: np.ndarray, prompt_length: int, pad: int, eos: int, include_eos: bool,
                        column: int, actual: int, like_prompt_search: bool = False) -> str:
    """What label column ``column`` scores and why it must be ``1 - actual``. ``like_prompt_search``: the row's whole
    mask is the one an EOS search that starts inside the prompt gives, so that reading may be named."""
    index, token = column + 1, int(row[column + 1])
    end = first_eos_after_prompt(row, prompt_length, eos)
    scores = f"column {column} scores token {token} at index {index}"
    same = " (pad_token_id == eos_token_id)" if pad == eos else ""
    if index < prompt_length:
        return (f"{scores}, a prompt token (the prompt is indices 0..{prompt_length - 1}): prompt tokens are never "
                "in the mask")
    if end is not None and index == end:
        if include_eos:
            return (f"{scores}, the first EOS after the prompt, which ends the response: include_eos=True keeps "
                    f"its column" + (f"; with pad_token_id == eos_token_id == {eos} the first such token after the "
                                     "prompt is the EOS, only the ones after it are padding" if same else ""))
        return (f"{scores}, the first EOS after the prompt, which ends the response: include_eos=False leaves its "
                "column out" + (f" (with pad_token_id == eos_token_id == {eos} it is still the EOS: the response "
                                "ends here, not at a later one)" if same else ""))
    if end is not None and index > end:
        return (f"{scores}, after the first EOS after the prompt (index {end}), which ends the response: nothing "
                "after it is in the mask, whatever it holds (padding, or junk sampled after the stop)")
    last = last_non_pad(row, prompt_length, pad)
    if end is None and index > last:
        return (f"{scores}, padding after the response's last non-pad token (index {last}; the row has no EOS after "
                "the prompt): padding is never in the mask")
    # A response token (before the first EOS, or up to the last non-pad token when there is none).
    prompt_eos = [i for i in range(prompt_length) if row[i] == eos]
    hint = ""
    if prompt_eos and like_prompt_search:
        hint = (f"; the row's mask is {mistake('response_masks/eos_searched_in_prompt')}: the EOS at index "
                f"{prompt_eos[0]} is inside the prompt, and EOS is searched from index {prompt_length} on")
    elif end is not None and row[index] == pad:
        hint = f"; token {token} equals pad_token_id but comes before the EOS at index {end}: it is not padding"
    elif row[index] == pad:
        hint = (f"; token {token} equals pad_token_id but comes before the last non-pad token at index {last}: it is "
                "not padding")
    return (f"{scores}, a response token (the response runs from index {prompt_length} to "
            + (f"the EOS at index {end}" if end is not None else f"its last non-pad token at index {last}, with no "
               "EOS after the prompt") + f"): it is in the mask{hint}")


def mask_row_discrepancy(row: np.ndarray, prompt_length: int, pad: int, eos: int, include_eos: bool,
                         actual: np.ndarray) -> str | None:
    """None when ``actual`` is the row's mask by the contract; else what differs and why, first, then the row."""
    row, actual = np.asarray(row), np.asarray(actual)
    expected = expected_mask_row(row, prompt_length, pad, eos, include_eos)
    if actual.shape != expected.shape:
        return (f"the row's mask has shape {actual.shape}, expected {expected.shape}: one column per label "
                "input_ids[:, 1:], T - 1 of them")
    wrong = np.flatnonzero(actual != expected)
    if wrong.size == 0:
        return None
    facts = (f"row {row.tolist()} with prompt length {prompt_length}, pad_token_id={pad}, eos_token_id={eos}, "
             f"include_eos={include_eos}: mask {plain(actual)}, expected {plain(expected)}")
    late, early = np.zeros_like(expected), np.zeros_like(expected)
    late[1:], early[:-1] = expected[:-1], expected[1:]
    # A shifted mask: the same run of ones, starting one column after (late) or before (early) the response's.
    start = np.flatnonzero(expected)[0] if expected.any() else None
    which = None
    if start is not None and actual.any():
        if np.array_equal(actual, late) and np.flatnonzero(actual)[0] == start + 1:
            which = "late"
        elif np.array_equal(actual, early) and np.flatnonzero(actual)[0] == start - 1:
            which = "early"
    if which is not None:
        return (f"every one of the mask is one column {which}: label column j scores token j + 1, so the mask is "
                "the response's token mask shifted onto the labels input_ids[:, 1:]"
                + (f"; it equals {mistake('response_masks/mask_not_shifted')}" if which == "late" else "")
                + f"; {facts}")
    searched_prompt = expected_mask_row(row, prompt_length, pad, eos, include_eos, eos_search_start=0)
    like_prompt_search = np.array_equal(actual, searched_prompt)
    reasons = [f"column {j} is {int(actual[j])}, expected {int(expected[j])}: "
               + _what_column_scores(row, prompt_length, pad, eos, include_eos, int(j), int(actual[j]),
                                     like_prompt_search)
               for j in wrong[:2]]
    more = f" (and {wrong.size - 2} more columns differ)" if wrong.size > 2 else ""
    return "; ".join(reasons) + more + f"; {facts}"


def assert_masks(actual, input_ids, prompt_lengths, pad: int, eos: int, include_eos: bool, what: str) -> None:
    """Every row of ``actual`` is its row's mask by the contract; the first row that is not is explained."""
    actual = np.asarray(actual)
    ids = np.asarray(input_ids)
    if actual.shape != (ids.shape[0], ids.shape[1] - 1):
        raise AssertionError(f"the mask has shape {actual.shape}, expected {(ids.shape[0], ids.shape[1] - 1)}: one "
                             f"row per sequence and one column per label input_ids[:, 1:], T - 1 of them ({what})")
    for i, (row, prompt_length) in enumerate(zip(ids, np.asarray(prompt_lengths))):
        problem = mask_row_discrepancy(row, int(prompt_length), pad, eos, include_eos, actual[i])
        if problem is not None:
            raise AssertionError(f"row {i}, {problem} ({what})")


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
    assert isinstance(mask, np.ndarray), f"NumPy in must give NumPy out; got {type(mask).__name__}"
    assert_masks(mask, SEED_IDS, SEED_PROMPT_LENGTHS, 0, 2, True,
                 "the seed's example with include_eos=True: label column j scores token j + 1, and row 0's response "
                 "20, 21, EOS sits at indices 3..5, so its ones are columns 2..4")
    np.testing.assert_array_equal(
        mask, [[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]],
        err_msg="column j scores token j + 1: row 0's response 20, 21, EOS sits at indices 3..5, so columns 2..4",
    )
    without_eos = impl.response_token_mask(
        SEED_IDS, SEED_PROMPT_LENGTHS, pad_token_id=0, eos_token_id=2, include_eos=False
    )
    assert_masks(without_eos, SEED_IDS, SEED_PROMPT_LENGTHS, 0, 2, False,
                 "the seed's example with include_eos=False: exactly the EOS columns, 4 in row 0 and 2 in row 1, "
                 "turn to 0")
    np.testing.assert_array_equal(without_eos, [[0, 0, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0]],
                                  err_msg="include_eos=False drops exactly the EOS column")
    assert "0" in str(mask) and "1" in str(mask) and "." not in str(mask) and "True" not in str(mask), (
        f"the mask prints as 0/1 (an integer array), as the lab shows it; it prints as {str(mask)!r} "
        f"(dtype {mask.dtype})"
    )


# ---- properties ------------------------------------------------------------------------------------------------


@given(batch=response_batches(), include_eos=st.booleans(), data=st.data())
def test_a_0_1_mask_of_label_columns_with_prompt_columns_zero(impl, batch, include_eos, data):
    arrays = data.draw(containers({key: batch[key] for key in ("input_ids", "prompt_lengths")}), label="containers")
    mask = impl.response_token_mask(**dict(batch, **arrays), include_eos=include_eos)
    rows_, length = batch["input_ids"].shape
    kinds = ", ".join(f"{key} {'a tensor' if isinstance(value, torch.Tensor) else 'NumPy'}"
                      for key, value in arrays.items())
    tensor_in = any(isinstance(value, torch.Tensor) for value in arrays.values())
    if isinstance(mask, torch.Tensor) != tensor_in:
        raise AssertionError(f"the mask is {type(mask).__name__} for {kinds}: a tensor if any input is a tensor, NumPy "
                             "otherwise (hand both inputs to like_inputs)")
    if tensor_in:
        assert mask.dtype == torch.int64, f"the mask is int64; got {mask.dtype} (for {kinds})"
        mask = mask.numpy()
    else:
        assert mask.dtype == np.int64, f"the mask is int64; got {mask.dtype} (for {kinds})"
    for key, value in arrays.items():
        np.testing.assert_array_equal(np.asarray(value), batch[key], err_msg=f"{key} was changed in place")
    assert mask.shape == (rows_, length - 1), (
        f"the mask is aligned with the labels input_ids[:, 1:], so it has T - 1 = {length - 1} columns; "
        f"got shape {mask.shape} for input_ids of shape {batch['input_ids'].shape}"
    )
    assert np.issubdtype(mask.dtype, np.integer), f"the mask is an integer 0/1 array; got dtype {mask.dtype}"
    assert set(np.unique(mask).tolist()) <= {0, 1}, f"the mask holds only 0 and 1; it holds {plain(np.unique(mask))}"
    for i, row, prompt_length in rows(batch):
        if mask[i, : prompt_length - 1].any():
            raise AssertionError(
                f"row {i} = {row.tolist()} with prompt length {prompt_length}: a prompt token is in the mask "
                f"(columns 0..{prompt_length - 2} score prompt tokens 1..{prompt_length - 1}; the mask there is "
                f"{plain(mask[i, : prompt_length - 1])}): prompt tokens must never be in the loss"
            )


@given(batch=response_batches(), include_eos=st.booleans())
def test_ones_form_one_run_starting_at_prompt_length_minus_one(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    for i, row, prompt_length in rows(batch):
        ones = np.flatnonzero(mask[i])
        if ones.size == 0:
            continue
        starts = ones[0] == prompt_length - 1
        unbroken = bool(np.all(np.diff(ones) == 1))
        if starts and unbroken:
            continue
        why = mask_row_discrepancy(row, prompt_length, batch["pad_token_id"], batch["eos_token_id"], include_eos,
                                   mask[i])
        rule = (f"the first response token sits at index {prompt_length}, so the ones start at its label column "
                f"{prompt_length - 1}" if not starts else "the ones form one unbroken run")
        detail = f"{rule}; the mask has ones at columns {plain(ones)}"
        raise AssertionError(f"row {i}, {why} ({detail})" if why else f"row {i}: {detail}")


@given(batch=response_batches(), include_eos=st.booleans())
def test_the_run_stops_at_the_first_eos_after_the_prompt(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    assert_masks(mask, batch["input_ids"], batch["prompt_lengths"], batch["pad_token_id"], batch["eos_token_id"],
                 include_eos, "the response runs to the first EOS after the prompt, and nothing after that EOS is "
                 "in the mask")


@given(batch=response_batches())
def test_include_eos_changes_exactly_the_eos_column(impl, batch):
    with_eos, without_eos = masks(impl, batch)
    pad, eos_id = batch["pad_token_id"], batch["eos_token_id"]
    for i, row, prompt_length in rows(batch):
        eos = first_eos_after_prompt(row, prompt_length, eos_id)
        changed = np.flatnonzero(with_eos[i] != without_eos[i]).tolist()
        expected = [] if eos is None else [eos - 1]
        if changed == expected:
            continue
        why = (mask_row_discrepancy(row, prompt_length, pad, eos_id, True, with_eos[i])
               or mask_row_discrepancy(row, prompt_length, pad, eos_id, False, without_eos[i]))
        rule = ("include_eos must change exactly " + (
            f"the column of the first EOS after the prompt (EOS at index {eos}, column {eos - 1})" if eos is not None
            else "nothing (no EOS after the prompt)") + f"; columns {changed} changed")
        raise AssertionError(f"row {i}, {why} ({rule})" if why
                             else f"row {i} = {row.tolist()} (prompt length {prompt_length}): {rule}")


@given(batch=response_batches(), include_eos=st.booleans())
def test_a_response_without_eos_runs_to_its_last_non_pad_token(impl, batch, include_eos):
    mask = impl.response_token_mask(**batch, include_eos=include_eos)
    for i, row, prompt_length in rows(batch):
        if first_eos_after_prompt(row, prompt_length, batch["eos_token_id"]) is not None:
            continue
        problem = mask_row_discrepancy(row, prompt_length, batch["pad_token_id"], batch["eos_token_id"],
                                       include_eos, mask[i])
        assert problem is None, (
            f"row {i}, {problem} (a response with no EOS after the prompt runs from index {prompt_length} to its "
            "last non-pad token, and the padding after it is never in the mask)"
        )


def test_pad_equal_to_eos_keeps_the_real_eos(impl):
    ids = np.array([[1, 5, 6, 7, 0, 0], [1, 5, 6, 7, 3, 0]])
    mask = impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=0, include_eos=True)
    assert_masks(mask, ids, np.array([2, 2]), 0, 0, True,
                 "with pad_token_id == eos_token_id the first such token after the prompt is the real EOS: it is "
                 "kept with include_eos=True, and only the ones after it are padding")
    np.testing.assert_array_equal(
        mask, [[0, 1, 1, 1, 0], [0, 1, 1, 1, 1]],
        err_msg="with pad_token_id == eos_token_id the first such token after the prompt is the real EOS: it is "
        "kept with include_eos=True, and only the ones after it are padding",
    )


def test_an_eos_inside_the_prompt_does_not_end_the_response(impl):
    ids = np.array([[1, 2, 7, 8, 2, 0]])
    mask = impl.response_token_mask(ids, np.array([2]), pad_token_id=0, eos_token_id=2, include_eos=True)
    assert_masks(mask, ids, np.array([2]), 0, 2, True,
                 "the EOS at index 1 is part of the prompt, and EOS is searched for from index prompt_length on")
    np.testing.assert_array_equal(
        mask, [[0, 1, 1, 1, 0]],
        err_msg="the EOS at index 1 is part of the prompt, and EOS is searched for from index prompt_length on",
    )


@pytest.mark.parametrize("include_eos", [True, False])
def test_a_pad_id_inside_the_response_is_a_response_token(impl, include_eos):
    # Row 0 has no EOS: its response runs to its last non-pad token (index 3), so the pad at index 2 is inside it.
    # Row 1 ends at its EOS (index 4): the pad at index 2 comes before it.
    ids = np.array([[1, 5, 0, 6, 0, 0], [1, 5, 0, 6, 2, 0]])
    mask = impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=2, include_eos=include_eos)
    assert_masks(mask, ids, np.array([2, 2]), 0, 2, include_eos,
                 "a pad id before the response's end (its EOS, or its last non-pad token) is a response token")


def test_empty_responses_give_rows_of_zeros(impl):
    ids = np.array([[1, 5, 6, 7], [1, 5, 2, 0], [1, 5, 0, 0]])
    mask = impl.response_token_mask(ids, np.array([4, 2, 2]), pad_token_id=0, eos_token_id=2, include_eos=False)
    assert_masks(mask, ids, np.array([4, 2, 2]), 0, 2, False,
                 "a prompt that fills its row, a response that is only a dropped EOS, and a response of padding "
                 "only are all empty: their rows are zero")
    np.testing.assert_array_equal(
        mask, np.zeros((3, 3), dtype=np.int64),
        err_msg="a prompt that fills its row, a response that is only a dropped EOS, and a response of padding "
        "only are all empty: their rows are zero",
    )


@pytest.mark.parametrize("include_eos", [True, False])
def test_tensor_in_tensor_out_and_inputs_untouched(impl, include_eos):
    batch = dict(input_ids=SEED_IDS.copy(), prompt_lengths=SEED_PROMPT_LENGTHS.copy(), pad_token_id=0, eos_token_id=2)
    expected = impl.response_token_mask(**batch, include_eos=include_eos)
    ids, lengths = torch.from_numpy(SEED_IDS), torch.from_numpy(SEED_PROMPT_LENGTHS)
    for tensors in (dict(input_ids=ids), dict(prompt_lengths=lengths), dict(input_ids=ids, prompt_lengths=lengths)):
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
    # A prompt length outside [1, T]: the message names the first row that has one, and its value.
    for lengths, row, value in (([1, 5], 1, 5), ([4, 5], 1, 5), ([2, 0], 1, 0), ([0, 2], 0, 0)):
        with pytest.raises(ValueError, match=word("prompt_lengths") + rf"[\s\S]*row {row} has {value}\b"):
            impl.response_token_mask(ids, np.array(lengths), **valid)
    with pytest.raises(ValueError, match=word("prompt_lengths") + r"[\s\S]*row of input_ids \(2\)"):
        impl.response_token_mask(ids, np.array([2, 2, 2]), **valid)  # one length per row; the message says B
    with pytest.raises(ValueError, match=word("prompt_lengths")):
        impl.response_token_mask(ids, np.array([[2, 2]]), **valid)  # [B], not [1, B]
    with pytest.raises(ValueError, match=word("prompt_lengths")):
        impl.response_token_mask(ids, np.array([2.0, 2.0]), **valid)  # lengths are integers
    with pytest.raises(ValueError, match=word("input_ids")):
        impl.response_token_mask(ids[0], np.array([2]), **valid)  # [B, T] is required
    with pytest.raises(ValueError, match=word("input_ids")):
        impl.response_token_mask(ids.astype(float), np.array([2, 2]), **valid)
    with pytest.raises(ValueError, match=word("include_eos")):
        impl.response_token_mask(ids, np.array([2, 2]), pad_token_id=0, eos_token_id=2, include_eos="yes")
    with pytest.raises(ValueError, match=word("input_ids") + r"[\s\S]*T >= 2"):
        impl.response_token_mask(ids[:, :1], np.array([1, 1]), **valid)  # T >= 2: a label needs a token before it
    with pytest.raises(ValueError, match=word("input_ids") + r"[\s\S]*B >= 1"):
        impl.response_token_mask(ids[:0], np.array([], dtype=np.int64), **valid)  # no row at all
    for name in ("pad_token_id", "eos_token_id"):
        with pytest.raises(ValueError, match=word(name)):
            impl.response_token_mask(ids, np.array([2, 2]), **dict(valid, **{name: -1}))  # ids are >= 0


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
    assert isinstance(log_probs, np.ndarray), f"NumPy in must give NumPy out; got {type(log_probs).__name__}"
    assert log_probs.shape == (ids.shape[0], ids.shape[1] - 1), (
        f"token log-probs are aligned with the labels input_ids[:, 1:]: T - 1 columns, shape "
        f"{(ids.shape[0], ids.shape[1] - 1)}; got {log_probs.shape}"
    )
    expected = direct_token_log_probs(logits, ids)
    if np.allclose(log_probs, expected, rtol=1e-10, atol=1e-10):
        return
    b, j = np.argwhere(~np.isclose(log_probs, expected, rtol=1e-10, atol=1e-10))[0]
    every = np.take_along_axis(torch.log_softmax(torch.from_numpy(logits), dim=-1).numpy(), ids[..., None],
                               axis=-1)[..., 0]  # every[b, t] = log_softmax(logits[b, t])[ids[b, t]]: token t at t
    if np.allclose(log_probs, every[:, :-1], rtol=1e-8, atol=1e-8):
        why = (f"it is log_softmax(logits[:, j])[input_ids[:, j]], {mistake('response_masks/log_probs_not_shifted')}: "
               "the logits at position j predict token j + 1; the labels are input_ids[:, 1:]")
    elif np.allclose(log_probs, every[:, 1:], rtol=1e-8, atol=1e-8):
        why = ("it is log_softmax(logits[:, j + 1])[input_ids[:, j + 1]]: each token is scored by the logits at its "
               "own position, but those predict the NEXT token; the logits are logits[:, :-1]")
    else:
        why = ("column j is log_softmax over the vocabulary (the last axis) of logits[:, j], the scores of the token "
               "that follows position j, taken at the label input_ids[:, j + 1]")
    raise AssertionError(
        f"row {b}, column {j} is {plain(log_probs[b, j])}, expected log_softmax(logits[{b}, {j}])"
        f"[input_ids[{b}, {j + 1}] = {int(ids[b, j + 1])}] = {plain(expected[b, j])}: {why}"
    )


@given(pair=logits_and_ids())
def test_log_probs_keep_autograd_and_ignore_the_last_position(impl, pair):
    logits, ids = pair
    tensor = torch.tensor(logits, requires_grad=True)
    log_probs = impl.token_log_probs(tensor, torch.from_numpy(ids))
    assert_differentiable(log_probs, "the log-probs of tensor logits", "logits")
    log_probs.sum().backward()
    last = gradient(tensor, "logits")[:, -1]
    if (last != 0).any():
        raise AssertionError(f"the gradient at the last position is {plain(last)}: the last position predicts no "
                             "label, so its logits get no gradient")
    np.testing.assert_array_equal(logits, tensor.detach().numpy(), err_msg="logits were changed in place")


@pytest.mark.parametrize("alone", ["logits", "input_ids"])
def test_log_probs_are_a_tensor_if_either_input_is(impl, alone):
    arguments = dict(logits=np.zeros((2, 4, 5)), input_ids=np.array([[1, 2, 3, 4], [0, 0, 1, 1]]))
    arguments[alone] = torch.from_numpy(arguments[alone])
    found = impl.token_log_probs(**arguments)
    assert isinstance(found, torch.Tensor), (
        f"the log-probs are {type(found).__name__} when {alone} alone is a tensor: a tensor if either input is a tensor"
    )


def test_log_probs_bad_input_is_a_clear_error(impl):
    logits, ids = np.zeros((2, 4, 5)), np.array([[1, 2, 3, 4], [0, 0, 1, 1]])
    impl.token_log_probs(logits, ids)
    with pytest.raises(ValueError, match=word("input_ids")):
        impl.token_log_probs(logits, ids[:, :3])  # shapes differ
    with pytest.raises(ValueError, match=word("input_ids")):
        impl.token_log_probs(logits, ids[0])  # [B, T] is required
    # An id outside [0, V): the message names the first such id (after valid ones, 0 among them).
    for bad, value in ((np.array([[0, 5, 1, 1], [0, 0, 1, 1]]), 5), (np.array([[0, 1, 1, 1], [0, -1, 1, 1]]), -1)):
        with pytest.raises(ValueError, match=word("input_ids") + rf"[\s\S]*got {value}\b"):
            impl.token_log_probs(logits, bad)
    with pytest.raises(ValueError, match=word("input_ids")):
        impl.token_log_probs(logits, ids.astype(float))  # ids are integers
    with pytest.raises(ValueError, match=word("input_ids") + r"[\s\S]*T >= 2"):
        impl.token_log_probs(logits[:, :1], ids[:, :1])  # T >= 2: a label needs a token before it
    with pytest.raises(ValueError, match=word("logits")):
        impl.token_log_probs(logits[0], ids)
    with pytest.raises(ValueError, match=word("logits")):
        impl.token_log_probs(logits.astype(np.int64), ids)  # logits are floating
    with pytest.raises(ValueError, match=word("logits")):
        impl.token_log_probs(np.full((2, 4, 5), "x"), ids)  # logits are numbers


@given(pair=st.one_of(logits_and_ids(extreme=True), logits_and_ids(extreme=True, dtype=np.float32)), data=st.data())
def test_log_probs_are_finite_in_the_logits_dtype_for_logits_near_its_limits(impl, pair, data):
    logits, ids = pair
    arrays = data.draw(containers(dict(logits=logits, input_ids=ids)), label="containers")
    kinds = ", ".join(f"{key} {'a tensor' if isinstance(value, torch.Tensor) else 'NumPy'}"
                      for key, value in arrays.items())
    found = impl.token_log_probs(**arrays)
    for key, value in arrays.items():
        np.testing.assert_array_equal(np.asarray(value), pair[0] if key == "logits" else ids,
                                      err_msg=f"{key} was changed in place")
    tensor_in = any(isinstance(value, torch.Tensor) for value in arrays.values())
    if isinstance(found, torch.Tensor) != tensor_in:
        raise AssertionError(f"the log-probs are {type(found).__name__} for {kinds}: a tensor if any input is a "
                             "tensor, NumPy otherwise")
    found = found.detach().numpy() if tensor_in else np.asarray(found)
    assert found.dtype == logits.dtype, (
        f"the log-probs are {found.dtype} for {logits.dtype} logits: they are in the logits' dtype"
    )
    expected = direct_token_log_probs(logits.astype(np.float64), ids)
    if not np.isfinite(found).all():
        b, j = (int(i) for i in np.argwhere(~np.isfinite(found))[0])
        raise AssertionError(
            f"row {b}, column {j} is {plain(found[b, j])} for finite {logits.dtype} logits (as large as "
            f"{plain(np.abs(logits[b, j]).max())}): the log-prob is {plain(expected[b, j])}, a finite number; "
            "log_softmax subtracts the largest logit first, so no exp overflows and no probability is taken the log of"
            + ("; it equals log(softmax(z)), whose probabilities underflow to 0" if np.array_equal(
                found[b, j], np.log(torch.softmax(torch.from_numpy(logits[b, j]), -1).numpy())[ids[b, j + 1]])
               else "")
        )
    eps = float(np.finfo(logits.dtype).eps)
    tolerance = 8 * eps * (1.0 + np.abs(logits[:, :-1]).max(axis=-1) + np.log(logits.shape[-1]))
    wrong = ~(np.abs(found - expected) <= tolerance)
    if wrong.any():
        b, j = (int(i) for i in np.argwhere(wrong)[0])
        raise AssertionError(
            f"row {b}, column {j} is {plain(found[b, j])}, expected log_softmax(logits[{b}, {j}])[input_ids[{b}, "
            f"{j + 1}]] = {plain(expected[b, j])} for {logits.dtype} logits as large as "
            f"{plain(np.abs(logits[b, j]).max())} ({kinds})"
        )


@given(pair=logits_and_ids(), data=st.data())
def test_the_last_position_never_reaches_a_log_prob(impl, pair, data):
    logits, ids = pair
    expected = np.asarray(impl.token_log_probs(logits, ids))
    changed = logits.copy()
    changed[:, -1] = data.draw(st.sampled_from(IGNORED_VALUES), label="value at the last position")
    found = np.asarray(impl.token_log_probs(changed, ids))
    if not np.array_equal(found, expected):
        b, j = (int(i) for i in np.argwhere(~(found == expected))[0])
        raise AssertionError(
            f"row {b}, column {j} is {plain(found[b, j])}, expected {plain(expected[b, j])}, when only the last "
            f"position's logits changed (to {plain(changed[0, -1, 0])}): the last position predicts no label, so "
            "its logits never reach a log-prob (each position is normalised over its own vocabulary only)"
        )


@given(pair=logits_and_ids(), dtype=float_dtypes)
def test_the_gradient_is_the_one_hot_label_minus_the_softmax(impl, pair, dtype):
    logits, ids = pair
    tensor = torch.tensor(logits.astype(dtype), requires_grad=True)
    log_probs = impl.token_log_probs(tensor, ids)
    assert_differentiable(log_probs, "the log-probs of tensor logits", "logits")
    weights = np.random.default_rng(int(ids.sum())).uniform(-1.0, 1.0, size=log_probs.shape)
    (log_probs * torch.from_numpy(weights.astype(dtype))).sum().backward()
    found = gradient(tensor, "logits")
    softmax = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
    one_hot = np.zeros_like(logits)
    np.put_along_axis(one_hot[:, :-1], ids[:, 1:, None], 1.0, axis=-1)
    expected = np.zeros_like(logits)
    expected[:, :-1] = weights[..., None] * (one_hot[:, :-1] - softmax[:, :-1])
    eps = float(np.finfo(dtype).eps)
    if not np.allclose(found, expected, rtol=64 * eps, atol=64 * eps):
        b, t, v = (int(i) for i in np.argwhere(~np.isclose(found, expected, rtol=64 * eps, atol=64 * eps))[0])
        raise AssertionError(
            f"d log_prob / d logits[{b}, {t}, {v}] (weighted by {plain(weights[b, min(t, weights.shape[1] - 1)])}) "
            f"is {plain(found[b, t, v])}, expected {plain(expected[b, t, v])}: the gradient of "
            "log_softmax(z)[y] is one_hot(y) - softmax(z) at the positions 0..T-2, and 0 at the last"
        )


# ---- clauses no test holds, and why ----
# response_token_mask "a tensor on input_ids' device": the tests run where only the CPU exists; the mask is built
#   from input_ids' own tensors, and no other device is there to tell a wrong one.
# response_token_mask "(it is [scored], when the policy must learn to stop)": why include_eos exists, not a result.
# token_log_probs "as long as two logits of one position differ by a finite amount": the limit of the domain the
#   finiteness clause covers (logits within finfo.max / 4 are drawn); beyond it the true log-prob is no float.


test_contract, test_contract_edges = battery_tests(CONTRACTS)
