"""The tiny sequence task of the RLOO loop: a vocabulary, three prompts, a verifier and a small GRU policy.

A row of token ids is ``[BOS, prompt symbol | response ... EOS, PAD, ...]``. Prompt ``k`` (token ``p<k>``) has one
correct response: its two answer symbols followed by EOS, e.g. ``BOS p1 | c a EOS``. The policy reads the row
left to right and proposes the next token; it can only ever propose answer symbols and EOS (never PAD, BOS or a
prompt symbol), so a sampled response is answer symbols ended by a sampled EOS, or cut at the length limit.

The verifier gives dense but non-differentiable reward: a third for each answer symbol in its place and a third for
stopping right after them. Only the exact response earns 1.0.

Nothing here is an exercise. The sampler is the student's, so :func:`evaluate_policy` takes it as an argument and
the packages bind their own (``evaluate_sequence_policy``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from kata.arrays import ArrayLike, as_tensor, check_integer, to_numpy

# ---- vocabulary -------------------------------------------------------------------------------------------------

VOCABULARY: tuple[str, ...] = ("PAD", "BOS", "EOS", "p0", "p1", "p2", "a", "b", "c", "d")
TOKEN_IDS: dict[str, int] = {name: index for index, name in enumerate(VOCABULARY)}
VOCAB_SIZE = len(VOCABULARY)
PAD_ID = TOKEN_IDS["PAD"]
BOS_ID = TOKEN_IDS["BOS"]
EOS_ID = TOKEN_IDS["EOS"]
PROMPT_TOKEN_IDS: tuple[int, ...] = (TOKEN_IDS["p0"], TOKEN_IDS["p1"], TOKEN_IDS["p2"])
ANSWER_TOKEN_IDS: tuple[int, ...] = tuple(TOKEN_IDS[name] for name in ("a", "b", "c", "d"))
# What the policy may propose. "d" is never part of an answer: a distractor.
GENERABLE_TOKEN_IDS: tuple[int, ...] = (*ANSWER_TOKEN_IDS, EOS_ID)

NUM_PROMPTS = len(PROMPT_TOKEN_IDS)
PROMPT_LENGTH = 2  # BOS and the prompt symbol
MAX_NEW_TOKENS = 4  # room for the answer, its EOS and one token too many
# Each symbol appears first in one answer and second in another, so the second step must remember the prompt.
ANSWERS: tuple[tuple[int, int], ...] = (
    (TOKEN_IDS["a"], TOKEN_IDS["b"]),
    (TOKEN_IDS["c"], TOKEN_IDS["a"]),
    (TOKEN_IDS["b"], TOKEN_IDS["c"]),
)
CORRECT_RESPONSES: tuple[tuple[int, ...], ...] = tuple((*answer, EOS_ID) for answer in ANSWERS)

# The logit of every token the policy may never propose. Finite, so a log-prob of a padding label stays finite, and
# low enough that float32 softmax gives it probability exactly 0: it is never sampled.
NEVER_LOGIT = -1.0e4


def _prompt_classes(prompt_classes: ArrayLike) -> np.ndarray:
    classes = to_numpy(as_tensor(prompt_classes, "prompt_classes"))
    if classes.ndim != 1 or not np.issubdtype(classes.dtype, np.integer):
        raise ValueError(f"prompt_classes must be a 1-D integer array; got shape {classes.shape}, {classes.dtype}")
    if classes.size and (classes.min() < 0 or classes.max() >= NUM_PROMPTS):
        raise ValueError(f"prompt_classes must be in [0, {NUM_PROMPTS}); got {classes.min()}..{classes.max()}")
    return classes.astype(np.int64)


def _token_rows(input_ids: ArrayLike, name: str = "input_ids") -> np.ndarray:
    ids = to_numpy(as_tensor(input_ids, name))
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{name} must hold integer token ids; got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= VOCAB_SIZE):
        raise ValueError(f"{name} must hold token ids in [0, {VOCAB_SIZE}); got {ids.min()}..{ids.max()}")
    return ids.astype(np.int64)


# ---- prompts ----------------------------------------------------------------------------------------------------


def prompt_ids(prompt_classes: ArrayLike) -> torch.Tensor:
    """The prompt rows ``[BOS, p<k>]`` of ``prompt_classes`` (integer ``[B]``): int64 tensor ``[B, 2]``."""
    classes = torch.from_numpy(_prompt_classes(prompt_classes))
    symbols = torch.tensor(PROMPT_TOKEN_IDS, dtype=torch.int64)[classes]
    return torch.stack([torch.full_like(symbols, BOS_ID), symbols], dim=1)


def prompt_batch(group_size: int) -> tuple[np.ndarray, torch.Tensor]:
    """Every prompt ``group_size`` times, prompt-major: ``(prompt_classes [3G], prompt_ids [3G, 2])``.

    Rows ``k*G .. (k+1)*G - 1`` hold prompt ``k``: one group of G responses per prompt, consecutive.
    """
    group_size = check_integer("group_size", group_size, 1)
    classes = np.repeat(np.arange(NUM_PROMPTS, dtype=np.int64), group_size)
    return classes, prompt_ids(classes)


# ---- the verifier -----------------------------------------------------------------------------------------------


def response_tokens(row: ArrayLike, prompt_length: int = PROMPT_LENGTH) -> tuple[int, ...]:
    """The response of one row: the tokens after the prompt up to and including the first EOS.

    Without an EOS, everything after the prompt except trailing padding.
    """
    ids = _token_rows(row, "row")
    if ids.ndim != 1:
        raise ValueError(f"row must be 1-D; got shape {ids.shape}")
    response = ids[prompt_length:].tolist()
    if EOS_ID in response:
        return tuple(response[: response.index(EOS_ID) + 1])
    while response and response[-1] == PAD_ID:
        response.pop()
    return tuple(response)


def response_reward(prompt_class: int, response: Sequence[int]) -> float:
    """The verifier's reward of one response (token ids after the prompt) to prompt ``prompt_class``.

    A third for each answer symbol in its place, a third for EOS right after them: 0, 1/3, 2/3 or 1.0, and 1.0 only
    for the exact response ``answer[0] answer[1] EOS``. Tokens after the first EOS are not read.
    """
    prompt_class = check_integer("prompt_class", prompt_class, 0)
    if prompt_class >= NUM_PROMPTS:
        raise ValueError(f"prompt_class must be in [0, {NUM_PROMPTS}); got {prompt_class}")
    tokens = [int(token) for token in response]
    if EOS_ID in tokens:
        tokens = tokens[: tokens.index(EOS_ID) + 1]
    target = CORRECT_RESPONSES[prompt_class]
    correct = sum(1 for index, token in enumerate(target) if index < len(tokens) and tokens[index] == token)
    return correct / len(target)


def _correct_parts(classes: np.ndarray, ids: np.ndarray, prompt_length: int) -> np.ndarray:
    """Bool ``[B, 3]``: each part of the target response (symbol, symbol, EOS) in its place, before any EOS."""
    target_length = len(CORRECT_RESPONSES[0])
    response = np.full((ids.shape[0], target_length), PAD_ID, dtype=np.int64)
    available = ids[:, prompt_length : prompt_length + target_length]
    response[:, : available.shape[1]] = available
    targets = np.asarray(CORRECT_RESPONSES, dtype=np.int64)[classes]
    # A token is read only while no EOS came before it: what follows the first EOS is not the response.
    eos_before = np.cumsum(response == EOS_ID, axis=1) - (response == EOS_ID)
    return (response == targets) & (eos_before == 0)


def _rows_and_classes(prompt_classes: ArrayLike, input_ids: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    classes = _prompt_classes(prompt_classes)
    ids = _token_rows(input_ids)
    if ids.ndim != 2 or ids.shape[0] != classes.shape[0]:
        raise ValueError(
            f"input_ids must be [B, T] with one row per prompt class ({classes.shape[0]}); got {ids.shape}"
        )
    return classes, ids


def sequence_rewards(prompt_classes: ArrayLike, input_ids: ArrayLike, prompt_length: int = PROMPT_LENGTH) -> np.ndarray:
    """The verifier's reward of every row: float64 NumPy ``[B]`` (rows ``[B, T]``, prompt first).

    Row ``i`` gets ``response_reward(prompt_classes[i], response_tokens(input_ids[i]))``, computed for the whole
    batch at once.
    """
    classes, ids = _rows_and_classes(prompt_classes, input_ids)
    parts = _correct_parts(classes, ids, prompt_length)
    return parts.sum(axis=1) / parts.shape[1]


def exact_responses(prompt_classes: ArrayLike, input_ids: ArrayLike, prompt_length: int = PROMPT_LENGTH) -> np.ndarray:
    """Bool NumPy ``[B]``: the row's response is exactly its prompt's answer followed by EOS (reward 1.0)."""
    classes, ids = _rows_and_classes(prompt_classes, input_ids)
    return _correct_parts(classes, ids, prompt_length).all(axis=1)


# ---- reading rows -----------------------------------------------------------------------------------------------


def decode_sequence(row: ArrayLike, prompt_length: int = PROMPT_LENGTH) -> str:
    """One row as text, ``"BOS p1 | c a EOS"``: the prompt, a bar, the response; trailing PAD tokens left out.

    Accepts a NumPy row, a tensor row or a list of ids. A token after EOS that is not PAD is shown: a sampler that
    emits after EOS is visible at a glance.
    """
    ids = _token_rows(row, "row")
    if ids.ndim != 1:
        raise ValueError(f"row must be 1-D (one sequence of token ids); got shape {ids.shape}")
    tokens = ids.tolist()
    while len(tokens) > prompt_length and tokens[-1] == PAD_ID:
        tokens.pop()
    prompt = " ".join(VOCABULARY[t] for t in tokens[:prompt_length])
    response = " ".join(VOCABULARY[t] for t in tokens[prompt_length:])
    return f"{prompt} | {response}".rstrip()


# ---- the policy -------------------------------------------------------------------------------------------------


class SequencePolicy(nn.Module):
    """A small GRU language model over :data:`VOCABULARY`.

    ``model(input_ids)`` with int64 ``input_ids [B, t]`` returns float32 logits ``[B, t, V]``; ``logits[:, j]``
    scores the token at position ``j + 1`` from tokens ``0..j`` (causal: it never reads a later token). Tokens
    outside :data:`GENERABLE_TOKEN_IDS` always get :data:`NEVER_LOGIT`, so their probability is exactly 0.
    """

    def __init__(self, hidden_size: int = 64, embedding_size: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB_SIZE, embedding_size)
        self.gru = nn.GRU(embedding_size, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, VOCAB_SIZE)
        # A small output layer starts the policy near uniform over what it may propose: broad exploration.
        with torch.no_grad():
            self.head.weight.mul_(0.1)
            self.head.bias.zero_()
        never = torch.full((VOCAB_SIZE,), NEVER_LOGIT)
        never[list(GENERABLE_TOKEN_IDS)] = 0.0
        self.register_buffer("never_logits", never)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        ids = as_tensor(input_ids, "input_ids")
        if ids.ndim != 2 or torch.is_floating_point(ids) or ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be an integer [B, t] tensor; got {tuple(ids.shape)}, {ids.dtype}")
        hidden, _ = self.gru(self.embedding(ids.to(torch.int64)))
        return self.head(hidden) + self.never_logits


def make_policy(seed: int, hidden_size: int = 64) -> SequencePolicy:
    """A freshly initialised policy; the same seed gives the same weights, bit for bit (global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SequencePolicy(hidden_size=hidden_size)


# ---- evaluation -------------------------------------------------------------------------------------------------


def exact_response_probability(model: nn.Module) -> np.ndarray:
    """float64 NumPy ``[3]``: the probability that sampling from ``model`` gives prompt k's exact response.

    The product of the three token probabilities (two symbols, then EOS), read from one forward pass: no sampling
    noise, so it shows how sure a policy whose sampled success is already 1.0 has become.
    """
    rows = torch.tensor([[BOS_ID, PROMPT_TOKEN_IDS[k], *CORRECT_RESPONSES[k]] for k in range(NUM_PROMPTS)])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(rows)[:, :-1].double(), dim=-1)
        labels = log_probs.gather(-1, rows[:, 1:, None]).squeeze(-1)[:, PROMPT_LENGTH - 1 :]
    return labels.sum(dim=1).exp().numpy()


Sampler = Callable[..., Any]  # sample_responses(model, prompt_ids, max_new_tokens, *, deterministic, generator)


def evaluate_policy(
    model: nn.Module,
    sampler: Sampler,
    samples_per_prompt: int = 32,
    deterministic: bool = False,
    seed: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> dict[str, Any]:
    """Sample ``samples_per_prompt`` responses to each prompt with ``sampler`` and score them.

    ``deterministic=True`` asks the sampler for greedy decoding. Sampling draws from a generator seeded with
    ``seed``, so the same model, seed and sampler give the same rows; the global RNG is not used.

    Returns:
        ``prompt_classes`` (int64 NumPy ``[3n]``, prompt-major), ``input_ids`` (int64 NumPy ``[3n, 2 +
        max_new_tokens]``), ``rewards`` (float64 NumPy ``[3n]``), ``success`` (bool NumPy ``[3n]``: exact
        response), ``mean_reward`` and ``success_rate`` (floats), ``per_prompt_success_rate`` (float64 ``[3]``),
        ``exact_response_probability`` (float64 ``[3]``, see :func:`exact_response_probability`).
    """
    samples_per_prompt = check_integer("samples_per_prompt", samples_per_prompt, 1)
    if not isinstance(deterministic, bool):
        raise ValueError(f"deterministic must be True or False; got {deterministic!r}")
    classes, prompts = prompt_batch(samples_per_prompt)
    generator = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        rows = sampler(model, prompts, max_new_tokens, deterministic=deterministic, generator=generator)
    input_ids = _token_rows(rows)
    rewards = sequence_rewards(classes, input_ids)
    success = exact_responses(classes, input_ids)
    return {
        "prompt_classes": classes,
        "input_ids": input_ids,
        "rewards": rewards,
        "success": success,
        "mean_reward": float(rewards.mean()),
        "success_rate": float(success.mean()),
        "per_prompt_success_rate": success.reshape(NUM_PROMPTS, samples_per_prompt).mean(axis=1),
        "exact_response_probability": exact_response_probability(model),
    }
