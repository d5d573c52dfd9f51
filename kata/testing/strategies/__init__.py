"""The Hypothesis strategies the tests use, each bounded in size and magnitude, in sections in the manifest's order
(the loops' clause tests draw more from kata.testing.loop_strategies, the diagnosis's probes from probe_strategies).
Bounds are part of the contract a test checks: magnitudes stay where float arithmetic is exact enough for the
tolerances the tests state."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# ---- shared building blocks ------------------------------------------------------------------------------------

MAX_MAGNITUDE = 100.0


def floats(low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[float]:
    """Finite float64 values in [low, high] (no NaN, no infinity, no subnormals)."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def float_arrays(shape, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=floats(low, high))


def bool_arrays(shape) -> st.SearchStrategy[np.ndarray]:
    """Boolean arrays drawn as one integer's bits: one choice per array, not one per element (drawing is most of a
    concept test's time); a failing mask still shrinks towards all False."""
    size = int(np.prod(shape, dtype=np.int64))
    return st.integers(0, 2**size - 1).map(
        lambda bits: np.array([(bits >> i) & 1 for i in range(size)], dtype=bool).reshape(shape))


unit_interval, clip_epsilons = st.floats(0.0, 1.0, allow_nan=False), st.floats(0.01, 0.5, allow_nan=False)

# ---- the domain every contract admits: dtypes, containers, values at ignored positions ---------------------------
# A function documented "NumPy in, NumPy out; a tensor if any input is a tensor" is called with every mixture; one that
# keeps "the promoted floating dtype" sees float32 and float64, mixed too. Positions the contract ignores (masked,
# padded, after a cut) may hold anything finite or not: IGNORED_VALUES are the values that break an implementation
# which computes there and masks afterwards (0 * inf is NaN, exp(800) is inf).

float_dtypes = st.sampled_from([np.float32, np.float64])
IGNORED_VALUES = (np.inf, -np.inf, np.nan, 1e4, -1e4, 800.0, -800.0, 88.0, -104.0)


def extreme_log_probs(dtype) -> list[float]:
    """Log-probabilities that are valid yet far from 0: where ``exp`` underflows to 0 in ``dtype`` (below about
    -104 in float32, -745 in float64) and just above, so that a ratio computed as ``exp(new) / exp(old)`` gives
    0 / 0 while ``exp(new - old)`` stays exact."""
    if np.dtype(dtype) == np.float32:
        return [-90.0, -104.0, -120.0, -200.0]
    return [-700.0, -745.0, -800.0, -1000.0]


@st.composite
def containers(draw, arrays: dict, *, tensors: bool | None = None) -> dict:
    """``arrays`` (name -> NumPy array; other values pass through unchanged), each drawn as NumPy or as a CPU
    tensor independently: all NumPy, all tensors and every mixture. ``tensors`` forces all (True) or none (False)."""
    import torch

    chosen = {}
    for name, value in arrays.items():
        as_tensor = isinstance(value, np.ndarray) and (draw(st.booleans()) if tensors is None else tensors)
        chosen[name] = torch.from_numpy(value.copy()) if as_tensor else value
    return chosen

# ---- 1. reinforce ----------------------------------------------------------------------------------------------

def sample_shapes(max_samples: int = 12) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch of samples [N], or [B, N] (sequences of per-step samples)."""
    return st.one_of(st.tuples(st.integers(1, max_samples)), st.tuples(st.integers(1, 3), st.integers(1, 4)))


def any_shapes(max_samples: int = 12) -> st.SearchStrategy[tuple[int, ...]]:
    """Non-empty shapes of 0 to 3 axes: [N] and [B, N] most often, a 0-d scalar and [B, T, N] too."""
    return st.one_of(sample_shapes(max_samples), st.just(()), st.tuples(*[st.integers(1, 3)] * 3))


EXTREME_LOG_PROBS = tuple(extreme_log_probs(np.float32) + extreme_log_probs(np.float64))  # exact in both dtypes


@st.composite
def surrogate_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for reinforce_surrogate_loss: log-probabilities <= 0 (in [-10, 0], and far out where exp
    underflows: EXTREME_LOG_PROBS) and advantages in [-10, 10] (zeros drawn often), of one non-empty shape with 0 to
    3 axes."""
    shape = draw(any_shapes(max_samples))
    log_probs = draw(hnp.arrays(np.float64, shape, elements=st.one_of(floats(-10.0, 0.0),
                                                                      st.sampled_from(EXTREME_LOG_PROBS))))
    advantages = draw(hnp.arrays(np.float64, shape, elements=st.one_of(st.just(0.0), floats(-10.0, 10.0))))
    return dict(log_probs=log_probs, advantages=advantages)


@st.composite
def softmax_policies(draw, max_actions: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A one-state softmax policy's logits [K] (2 <= K <= 6, |logit| <= 3) and each action's reward [K]."""
    actions = draw(st.integers(2, max_actions))
    return draw(float_arrays((actions,), -3.0, 3.0)), draw(float_arrays((actions,), -10.0, 10.0))


@st.composite
def reward_streams(
    draw, time_major: bool | None = None, min_steps: int = 1, max_steps: int = 10, max_envs: int = 3
) -> dict:
    """Keyword arguments for discounted_reward_to_go: [T] or time-major [T, N] rewards in [-10, 10], episode ends at
    random, at every step or at none, and gamma with the endpoints 0 and 1 drawn often."""
    batched = draw(st.booleans()) if time_major is None else time_major
    steps = draw(st.integers(min_steps, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if batched else (steps,)
    return dict(
        rewards=draw(float_arrays(shape, -10.0, 10.0)),
        episode_ends=draw(st.one_of(bool_arrays(shape), st.builds(np.full, st.just(shape), st.booleans()))),
        gamma=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
    )


@st.composite
def logits_arrays(draw, low: float = -20.0, high: float = 20.0, max_dims: int = 3) -> np.ndarray:
    """Logits [..., K]: 1 to ``max_dims`` axes, K from 1 to 5 actions, values in [low, high]."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, min_side=1, max_side=5))
    return draw(float_arrays(shape, low, high))


def limit_logits(dtype) -> list[float]:
    """Finite logits near ``dtype``'s limits (a difference of two overflows: log_softmax gives -inf) and between."""
    top = float(np.finfo(dtype).max)
    return [top, -top, top / 2, -top / 2, 1e4, -1e4, 0.0, 1.0]


@st.composite
def masked_logits(draw) -> np.ndarray:
    """Logits [..., K] in [-20, 20] with -inf (an action that cannot be taken) at drawn positions, every row keeping
    at least one finite logit."""
    logits = draw(logits_arrays(max_dims=2))
    masked = draw(bool_arrays(logits.shape))
    masked[..., draw(st.integers(0, logits.shape[-1] - 1))] = False
    return np.where(masked, -np.inf, logits)

# ---- 2. baselines ----------------------------------------------------------------------------------------------

@st.composite
def group_rewards(draw, min_group_size: int = 2, max_group_size: int = 6, max_groups: int = 5) -> np.ndarray:
    """Rewards shaped [groups, G]; groups and G differ often, so a mean over the wrong axis shows. Values in
    [-10, 10], or a verifier's 0/1 (groups whose rewards are all equal included), each row sometimes on an offset of
    ±1e6 or 1e9, where a sum loses the small differences' last digits."""
    groups = draw(st.integers(1, max_groups))
    group_size = draw(st.integers(min_group_size, max_group_size))
    elements = st.sampled_from([0.0, 1.0]) if draw(st.booleans()) else floats(-10.0, 10.0)
    rewards = draw(hnp.arrays(np.float64, (groups, group_size), elements=elements))
    offsets = draw(hnp.arrays(np.float64, (groups, 1), elements=st.sampled_from([0.0, 0.0, 0.0, 1e6, -1e6, 1e9])))
    return rewards + offsets

# ---- 3. gae ----------------------------------------------------------------------------------------------------

@st.composite
def gae_batches(
    draw, time_major: bool | None = None, min_steps: int = 1, max_steps: int = 10, max_envs: int = 3
) -> dict:
    """Keyword arguments for gae_advantages: [T] records, or time-major [T, N] when time_major (either if None).

    Cuts are frequent and every terminated record is cut, as the contract requires; gamma and lambda cover [0, 1]
    with the endpoints drawn often.
    """
    batched = draw(st.booleans()) if time_major is None else time_major
    steps = draw(st.integers(min_steps, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if batched else (steps,)
    terminated = draw(bool_arrays(shape))
    trace_cuts = terminated | draw(bool_arrays(shape))
    return dict(
        rewards=draw(float_arrays(shape, -10.0, 10.0)),
        values=draw(float_arrays(shape, -10.0, 10.0)),
        next_values=draw(float_arrays(shape, -10.0, 10.0)),
        terminated=terminated,
        trace_cuts=trace_cuts,
        gamma=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
        gae_lambda=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
    )


GAE_VALUE_ARRAYS, GAE_MASKS = ("rewards", "values", "next_values"), ("terminated", "trace_cuts")


def ignored_values(shape) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``shape`` whose every element is one of :data:`IGNORED_VALUES` (NaN and ±inf drawn often)."""
    return hnp.arrays(np.float64, shape, elements=st.sampled_from(IGNORED_VALUES))

# ---- 4. clipped_surrogate --------------------------------------------------------------------------------------

@st.composite
def ppo_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for clipped_surrogate_terms: clip_epsilon in [0.01, 0.5], old log-probs in [-5, 0], new =
    old + a shift in [-1, 1] (so ratios fall on both sides of [1 - eps, 1 + eps]) or one of
    :func:`boundary_log_ratios`, advantages in [-10, 10] with zeros and both signs drawn, of one shape [N] or
    [B, N]."""
    shape = draw(sample_shapes(max_samples))
    epsilon = draw(clip_epsilons)
    old = draw(float_arrays(shape, -5.0, 0.0))
    shift = draw(hnp.arrays(np.float64, shape, elements=st.one_of(floats(-1.0, 1.0),
                                                                 st.sampled_from(boundary_log_ratios(epsilon)))))
    advantages = draw(hnp.arrays(np.float64, shape, elements=st.one_of(st.just(0.0), floats(-10.0, 10.0))))
    return dict(new_log_probs=old + shift, old_log_probs=old, advantages=advantages, clip_epsilon=epsilon)


def boundary_log_ratios(epsilon: float) -> list[float]:
    """Log-ratios where a random draw rarely lands and a wrong interval shows: r = e^±ε and the midpoints of the
    gaps between [1 - ε, 1 + ε] and [e^-ε, e^ε]. Each is at least ε²/4 away from 1 ± ε, so rounding never decides
    which side of the clip it falls on."""
    upper, lower = (1.0 + epsilon + np.exp(epsilon)) / 2, (1.0 - epsilon + np.exp(-epsilon)) / 2
    return [epsilon, -epsilon, float(np.log(upper)), float(np.log(lower))]


@st.composite
def value_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for clipped_value_loss: old values and returns in [-10, 10], new values within 3 of the old
    (inside and outside the clip range), one shape [N] or [B, N], clip_epsilon in [0.01, 0.5]."""
    shape = draw(sample_shapes(max_samples))
    old = draw(float_arrays(shape, -10.0, 10.0))
    return dict(values=old + draw(float_arrays(shape, -3.0, 3.0)), old_values=old,
                returns=draw(float_arrays(shape, -10.0, 10.0)), clip_epsilon=draw(clip_epsilons))


SURROGATE_ARRAYS, VALUE_ARRAYS = ("new_log_probs", "old_log_probs", "advantages"), ("values", "old_values", "returns")


@st.composite
def typed_batches(draw, batches: st.SearchStrategy[dict], names: tuple[str, ...], log_probs: bool = False,
                  masks: tuple[str, ...] = ()) -> dict:
    """A batch as a caller may pass it: each of ``names`` float32 or float64, each of ``masks`` bool, 0/1 int64 or
    0/1 float32, and every array NumPy or a tensor, independently (:func:`containers`). With ``log_probs``, half
    the batches move both log-probabilities by one of :func:`extreme_log_probs` of their promoted dtype: the ratio
    is unchanged, ``exp`` of either underflows."""
    batch = draw(batches)
    for name in masks:
        batch[name] = batch[name].astype(draw(st.sampled_from([np.bool_, np.int64, np.float32])))
    dtypes = {name: draw(float_dtypes) for name in names}
    if log_probs and draw(st.booleans()):
        offset = draw(st.sampled_from(extreme_log_probs(np.result_type(dtypes["new_log_probs"],
                                                                       dtypes["old_log_probs"]))))
        for name in ("new_log_probs", "old_log_probs"):
            batch[name] = batch[name] + offset
    for name in names:
        batch[name] = batch[name].astype(dtypes[name])
    return draw(containers(batch))


@st.composite
def entropy_batches(draw, max_samples: int = 12) -> np.ndarray:
    """Per-sample entropies in [0, 2], of shape [N] or [B, N]."""
    return draw(float_arrays(draw(sample_shapes(max_samples)), 0.0, 2.0))


@st.composite
def categorical_pairs(draw, max_actions: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Two categorical distributions over the same K actions (2 <= K <= 6), as logits in [-3, 3]."""
    actions = draw(st.integers(2, max_actions))
    return draw(float_arrays((actions,), -3.0, 3.0)), draw(float_arrays((actions,), -3.0, 3.0))

# ---- 5. ppo_cartpole -------------------------------------------------------------------------------------------
@st.composite
def rollout_flags(draw, max_steps: int = 8, max_envs: int = 3) -> dict:
    """``terminated`` and ``truncated`` flags of one rollout, ``[T]`` or time-major ``[T, N]``, every combination
    (both True included: the pole falls on the time limit's last step)."""
    steps = draw(st.integers(1, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if draw(st.booleans()) else (steps,)
    return dict(terminated=draw(bool_arrays(shape)), truncated=draw(bool_arrays(shape)))


@st.composite
def bootstrap_cases(draw, max_steps: int = 8, max_envs: int = 3) -> dict:
    """Keyword arguments for bootstrap_values: values and final values in [-100, 100] of the flags' shape,
    last values of the shape without its time axis. Where no episode ended, ``final_values`` is "any value": it
    holds one of IGNORED_VALUES (inf and NaN included) half of the time."""
    flags = draw(rollout_flags(max_steps, max_envs))
    shape = flags["terminated"].shape
    final_values = draw(float_arrays(shape))
    if draw(st.booleans()):
        ignored = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from(IGNORED_VALUES)))
        final_values = np.where(flags["terminated"] | flags["truncated"], final_values, ignored)
    return dict(values=draw(float_arrays(shape)), final_values=final_values,
                last_values=draw(float_arrays(shape[1:])), **flags)


minibatch_layouts = st.tuples(st.integers(1, 70), st.integers(1, 80), st.integers(0, 2**31 - 1))  # batch, mb, seed


cartpole_states = hnp.arrays(  # inside the termination bounds, velocities as large as a falling pole reaches
    np.float64, 4, elements=floats(-1.0, 1.0)
).map(lambda u: u * np.array([2.3, 3.0, 0.2, 3.0]))

# ---- 6. response_masks -----------------------------------------------------------------------------------------
# Token ids 0..7: small, so that EOS and PAD ids turn up inside prompts, responses and junk tails, and either may be
# the vocabulary's first or last id. The structure of a batch (lengths, which tail) is drawn by Hypothesis and
# shrinks; token contents come from a drawn seed, which keeps a concept's tests within their time budget.
TOKEN_VOCABULARY = 8
seeds = st.integers(0, 2**32 - 1)
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

# ---- 7. token_objectives ---------------------------------------------------------------------------------------


@st.composite
def token_objective_batches(
    draw, max_rows: int = 5, max_length: int = 8, equal_lengths: bool = False, allow_empty: bool = True,
    dtype=np.float64,
) -> dict:
    """Keyword arguments for masked_token_ppo_terms: [B, L] log-probs, [B] advantages, a 0/1 int64 mask.

    Each row's mask is one run of ones (as response_token_mask gives) at a drawn offset; rows have different
    lengths unless ``equal_lengths``, and may be empty when ``allow_empty``. Log-probs at response positions are
    a row's base plus uniform in [-4, 0] (ratios up to e^4 from 1: both the clipped and the unclipped branch bind);
    the base is 0 or one of :func:`extreme_log_probs` of ``dtype`` (where ``exp`` of a log-prob underflows, so a
    ratio taken as ``exp(new) / exp(old)`` is 0 / 0). Advantages in [-5, 5]; masked positions hold moderate junk
    here, and the tests overwrite them with IGNORED_VALUES. Arrays are in ``dtype``; clip_epsilon from 1e-6 to 5.
    """
    rows, length = draw(st.integers(1, max_rows)), draw(st.integers(1, max_length))
    minimum = 0 if allow_empty and not equal_lengths else 1
    shared = draw(st.integers(minimum, length))
    mask = np.zeros((rows, length), dtype=np.int64)
    for i in range(rows):
        size = shared if equal_lengths else draw(st.integers(minimum, length))
        start = draw(st.integers(0, length - size))
        mask[i, start:start + size] = 1
    bases = np.array(draw(st.lists(st.sampled_from([0.0, *extreme_log_probs(dtype)]), min_size=rows,
                                   max_size=rows)))[:, None]
    random = np.random.default_rng(draw(seeds))
    response = mask == 1
    new, old = (np.where(response, bases + random.uniform(-4.0, 0.0, mask.shape),
                         random.uniform(-100.0, 100.0, mask.shape)).astype(dtype) for _ in range(2))
    return dict(
        new_log_probs=new,
        old_log_probs=old,
        advantages=random.uniform(-5.0, 5.0, rows).astype(dtype),
        mask=mask,
        clip_epsilon=draw(st.one_of(clip_epsilons, st.sampled_from([1e-6, 1.0, 5.0]))),  # any eps > 0
    )

# ---- 8. rloo_loop ----------------------------------------------------------------------------------------------

@st.composite
def sequence_batches(
    draw, max_rows: int = 5, max_prompt_length: int = 3, max_response_length: int = 5, min_rows: int = 1
) -> dict:
    """Rows ``[BOS, prompt symbols | answer symbols, EOS?, PAD...]`` of the sequence task's vocabulary.

    Returns ``input_ids`` (int64 ``[B, T]``), ``prompt_lengths`` (int64 ``[B]``) and ``response_lengths`` (int64
    ``[B]``: response tokens, EOS included, so the response's label columns are ``P - 1 .. P - 2 + n``). Every row
    has at least one response token; some end with EOS, some are cut without one; padding lengths differ. The
    lengths are drawn (and shrunk) by Hypothesis; which symbols fill them comes from one drawn seed, which keeps
    each example cheap to generate.
    """
    from kata.rl.sequence_task import ANSWER_TOKEN_IDS, BOS_ID, EOS_ID, PAD_ID, PROMPT_TOKEN_IDS

    rows = draw(st.integers(min_rows, max_rows))
    prompt_lengths = np.array(draw(st.lists(st.integers(1, max_prompt_length), min_size=rows, max_size=rows)))
    symbols = np.array(draw(st.lists(st.integers(0, max_response_length - 1), min_size=rows, max_size=rows)))
    ended = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows))) | (symbols == 0)
    response_lengths = symbols + ended
    width = int((prompt_lengths + response_lengths).max()) + draw(st.integers(0, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    input_ids = np.full((rows, width), PAD_ID, dtype=np.int64)
    for i in range(rows):
        prompt = [BOS_ID, *rng.choice(PROMPT_TOKEN_IDS, size=prompt_lengths[i] - 1)]
        response = [*rng.choice(ANSWER_TOKEN_IDS, size=symbols[i])] + ([EOS_ID] if ended[i] else [])
        input_ids[i, : len(prompt) + len(response)] = prompt + response
    return dict(
        input_ids=input_ids,
        prompt_lengths=prompt_lengths.astype(np.int64),
        response_lengths=response_lengths.astype(np.int64),
    )


@st.composite
def prompt_major_rewards(draw, max_prompts: int = 4, max_group_size: int = 6, verifier_values: bool | None = None):
    """``(rewards [prompts * G], G)``: prompt-major groups, verifier-like values (k/3) or bounded floats."""
    prompts = draw(st.integers(1, max_prompts))
    group_size = draw(st.integers(2, max_group_size))
    discrete = draw(st.booleans()) if verifier_values is None else verifier_values
    elements = st.sampled_from([0.0, 1 / 3, 2 / 3, 1.0]) if discrete else floats(-10.0, 10.0)
    return draw(hnp.arrays(np.float64, (prompts * group_size,), elements=elements)), group_size


sampling_cases = st.fixed_dictionaries(
    dict(
        seed=st.integers(0, 2**16),
        rows=st.integers(1, 8),
        prompt_length=st.integers(1, 3),
        max_new_tokens=st.integers(1, 6),
        eos_bias=floats(-2.0, 3.0),
    )
)
