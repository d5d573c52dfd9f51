"""6. response_masks: the strategies its tests draw from, and its probes (drawn batches in mixed containers,
and logits near the float64 and float32 limits)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from kata.testing.battery import Contract, Edge, in_float_dtypes, plain_array
from kata.testing.drawing import PROBES_PER_FUNCTION, draw
from kata.testing.strategies import Probes, seeds

# ---- strategies ---------------------------------------------------------------------------------------------------
# Token ids 0..7: small, so that EOS and PAD ids turn up inside prompts, responses and junk tails, and either may be
# the vocabulary's first or last id. The structure of a batch (lengths, which tail) is drawn by Hypothesis and
# shrinks; token contents come from a drawn seed, which keeps a concept's tests within their time budget.
TOKEN_VOCABULARY = 8
token_id_dtypes = st.sampled_from([np.int64, np.int32])


@st.composite
def response_batches(draw, max_rows: int = 4, max_length: int = 12) -> dict:
    """Keyword arguments for response_token_mask except include_eos: right-padded rows [prompt | response | tail].

    ``pad_token_id`` and ``eos_token_id`` are any ids (0 and the last id drawn often), equal half of the time.
    Prompts draw from every id (EOS and PAD included); response tokens are never EOS but may be PAD (a pad id
    before the response's end is a response token); the tail is padding, or an EOS followed by padding or by junk of
    any id (nothing after the first EOS may count). Responses may be empty or fill the row without an EOS; prompt
    lengths run from 1 to the row's width. Ids and lengths are int64 or int32.
    """
    ends = st.sampled_from([0, TOKEN_VOCABULARY - 1])
    pad = draw(st.one_of(ends, st.integers(0, TOKEN_VOCABULARY - 1)))
    eos = draw(st.one_of(st.just(pad), ends, st.integers(0, TOKEN_VOCABULARY - 1)))
    words = np.array([token for token in range(TOKEN_VOCABULARY) if token != eos])
    length = draw(st.integers(2, max_length))
    rows = draw(st.integers(1, max_rows))
    random = np.random.default_rng(draw(seeds))
    input_ids = random.integers(0, TOKEN_VOCABULARY, size=(rows, length))  # prompts and junk: any id
    prompt_lengths = np.empty(rows, dtype=np.int64)
    for i in range(rows):
        prompt_length = draw(st.one_of(st.just(1), st.just(length), st.integers(1, length)))
        size = draw(st.integers(0, length - prompt_length))
        end = prompt_length + size
        # PAD (when it is not EOS) is one response token in three: a pad id inside a response is a response token.
        weights = np.where(words == pad, len(words) - 1.0, 2.0) if pad != eos else np.ones(len(words))
        input_ids[i, prompt_length:end] = random.choice(words, size=size, p=weights / weights.sum())
        tail = draw(st.sampled_from(["padding", "eos then padding", "eos then junk"])) if end < length else ""
        if tail == "padding":
            input_ids[i, end:] = pad
        elif tail:
            input_ids[i, end] = eos
            if tail == "eos then padding":
                input_ids[i, end + 1:] = pad
        prompt_lengths[i] = prompt_length
    dtype = draw(token_id_dtypes)
    return dict(input_ids=input_ids.astype(dtype), prompt_lengths=prompt_lengths.astype(draw(token_id_dtypes)),
                pad_token_id=pad, eos_token_id=eos)


def logit_scales(dtype) -> list[float]:
    """Magnitudes of logits from ordinary to near ``dtype``'s limit: ``finfo.max / 4`` keeps every difference of
    two logits finite, so every log-prob is a finite number, while ``exp`` of one overflows and ``softmax`` of the
    others underflows to 0 (``log(softmax(z))`` is then ``-inf``)."""
    largest = float(np.finfo(dtype).max)
    return [10.0, 200.0, 1e4, largest / 4]


@st.composite
def logits_and_ids(draw, max_rows: int = 3, max_length: int = 6, max_vocabulary: int = 6,
                   dtype=np.float64, extreme: bool = False) -> tuple:
    """``(logits [B, T, V], input_ids [B, T])`` with T >= 2 and ids in [0, V) (0 and V - 1 among them often);
    logits uniform in [-10, 10] in ``dtype``, or with ``extreme`` scaled by one of :func:`logit_scales`."""
    rows, length = draw(st.integers(1, max_rows)), draw(st.integers(2, max_length))
    vocabulary = draw(st.integers(2, max_vocabulary))
    random = np.random.default_rng(draw(seeds))
    scale = draw(st.sampled_from(logit_scales(dtype))) if extreme else 10.0
    logits = (random.uniform(-1.0, 1.0, size=(rows, length, vocabulary)) * scale).astype(dtype)
    return logits, random.integers(0, vocabulary, size=(rows, length))

# ---- probes -------------------------------------------------------------------------------------------------------

def _response_mask_cases() -> list[Any]:
    import torch

    drawn = draw(response_batches(), PROBES_PER_FUNCTION, "response_batches")
    cases = [{**case, "include_eos": index % 2 == 0} for index, case in enumerate(drawn)]
    # Prompt lengths as a tensor beside NumPy ids, in every third case: the mask is then a tensor.
    return [{**case, "prompt_lengths": torch.as_tensor(case["prompt_lengths"])} if index % 3 == 1 else case
            for index, case in enumerate(cases)]


def _log_prob_cases() -> list[Any]:
    """Ordinary logits, then logits near the float64 and float32 limits (where log(softmax) gives -inf)."""
    cases = []
    for arguments in ((), (3, 6, 6, np.float64, True), (3, 6, 6, np.float32, True)):
        drawn = draw(logits_and_ids(*arguments), 12, "logits_and_ids" + repr(arguments))
        cases += [dict(logits=logits, input_ids=ids) for logits, ids in drawn]
    return cases


PROBES = (
    Probes("response_token_mask", _response_mask_cases, kinds=True),
    Probes("token_log_probs", _log_prob_cases, kinds=True),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

def _huge_ids() -> list[Edge]:
    """Ids up to 2^31 - 1: relabelling every id but PAD and EOS (here to 65537, 2^31 - 1, ..., which wrap onto EOS
    and other small ids in a narrower integer type) changes no mask."""
    random = np.random.default_rng(23)
    pad, eos = 0, 1
    ids = random.integers(2, 8, size=(4, 12))
    ids[0, 6], ids[1, 4:] = eos, pad
    ids[2, 8], ids[2, 9:] = eos, pad
    relabelled = {2: 65537, 3: 2**31 - 1, 4: 131073, 5: 65536 + pad, 6: 2**31 - 2, 7: 98305}
    huge = np.vectorize(lambda token: relabelled.get(int(token), int(token)))(ids).astype(np.int64)
    lengths = np.array([3, 2, 5, 12])

    def small_ids(function, arguments):
        return [plain_array(function(**{**arguments, "input_ids": ids}))]

    return [Edge(f"ids up to 2^31 - 1, include_eos={include}",
                 dict(input_ids=huge, prompt_lengths=lengths, pad_token_id=pad, eos_token_id=eos,
                      include_eos=include), small_ids) for include in (False, True)]


def _limit_logits() -> list[Edge]:
    """Logits near the dtype's largest value: the log-probs equal those of the logits less each position's largest
    (a softmax does not see the shift)."""
    random = np.random.default_rng(29)
    ids = random.integers(0, 5, size=(2, 4))

    def shifted(function, arguments):
        logits = arguments["logits"]
        return [plain_array(function(logits=logits - logits.max(axis=-1, keepdims=True), input_ids=ids))]

    return [Edge(f"logits up to {np.finfo(dtype).max / 4:.1e} ({np.dtype(dtype).name})",
                 dict(logits=(random.uniform(-1.0, 1.0, (2, 4, 5)) * np.finfo(dtype).max / 4).astype(dtype),
                      input_ids=ids), shifted) for dtype in (np.float32, np.float64)]


CONTRACTS = (
    Contract("response_token_mask",
             lambda: response_batches().flatmap(
                 lambda case: st.booleans().map(lambda include: {**case, "include_eos": include})),
             edges=_huge_ids),
    Contract("token_log_probs",
             lambda: logits_and_ids().map(lambda pair: dict(logits=pair[0], input_ids=pair[1])).flatmap(
                 lambda case: in_float_dtypes(st.just(case), ("logits",))),
             differentiable=("logits",), edges=_limit_logits),
)
