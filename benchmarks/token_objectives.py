"""Benchmark: response masks, causal-shift log-probs and the masked token objectives on a 64 x 1024 batch.

    python benchmarks/token_objectives.py [--impl solutions] [--rows 64] [--length 1024] [--vocabulary 256]
                                          [--threads 1]

Prints the median wall time of each step over warm repeats, in milliseconds (CPU, float32 as in a training loop), for
right-padded rows with prompts of 16-128 tokens and responses of any length up to the row's end (some without EOS).
``token_log_probs`` is a log-softmax over the whole ``[B, T, V]`` logits: its time grows with the vocabulary.
One torch thread by default: these kernels gain little from a second thread, and on a shared machine OpenMP's
spin-waiting makes multi-threaded timings erratic (``--threads 0`` keeps torch's default).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from kata.concepts import impl as implementations

PAD, EOS = 0, 2


def batch(rows: int, length: int, vocabulary: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Right-padded token rows [prompt | response | EOS | PAD...], some without EOS; logits and log-probs."""
    random = np.random.default_rng(seed)
    ids = random.integers(3, vocabulary, size=(rows, length))
    prompt_lengths = random.integers(16, 129, size=rows)
    for i in range(rows):
        end = random.integers(prompt_lengths[i], length + 1)  # response end (exclusive); == length: no EOS
        if end < length:
            ids[i, end] = EOS
            ids[i, end + 1:] = PAD
    generator = torch.Generator().manual_seed(seed)
    return dict(
        input_ids=torch.from_numpy(ids),
        prompt_lengths=torch.from_numpy(prompt_lengths),
        logits=torch.randn(rows, length, vocabulary, generator=generator, requires_grad=True),
        old_log_probs=-torch.rand(rows, length - 1, generator=generator) * 5.0,
        advantages=torch.randn(rows, generator=generator),
    )


def median_milliseconds(step: Callable[[], object], repeats: int) -> float:
    step()  # warm-up: first-call allocations
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--vocabulary", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads; 0: torch's default")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    kata = implementations.load(args.impl)
    data = batch(args.rows, args.length, args.vocabulary)
    new_log_probs = (data["old_log_probs"] + 0.1 * torch.randn_like(data["old_log_probs"])).requires_grad_()
    mask = kata.response_token_mask(data["input_ids"], data["prompt_lengths"], pad_token_id=PAD, eos_token_id=EOS,
                                    include_eos=True)

    def objective_backward(reduction: str) -> Callable[[], None]:
        def step() -> None:
            new_log_probs.grad = None
            kata.masked_token_ppo_objective(new_log_probs, data["old_log_probs"], data["advantages"], mask,
                                            clip_epsilon=0.2, reduction=reduction).backward()
        return step

    def log_probs_backward() -> None:
        data["logits"].grad = None
        kata.token_log_probs(data["logits"], data["input_ids"]).sum().backward()

    steps: dict[str, Callable[[], object]] = {
        "response_token_mask": lambda: kata.response_token_mask(
            data["input_ids"], data["prompt_lengths"], pad_token_id=PAD, eos_token_id=EOS, include_eos=True),
        "response_token_mask (NumPy in/out)": lambda: kata.response_token_mask(
            data["input_ids"].numpy(), data["prompt_lengths"].numpy(), pad_token_id=PAD, eos_token_id=EOS,
            include_eos=True),
        f"token_log_probs (V={args.vocabulary})": lambda: kata.token_log_probs(data["logits"], data["input_ids"]),
        f"token_log_probs + backward (V={args.vocabulary})": log_probs_backward,
        "masked_token_ppo_terms": lambda: kata.masked_token_ppo_terms(
            new_log_probs, data["old_log_probs"], data["advantages"], mask, clip_epsilon=0.2),
        **{f"objective {r} + backward": objective_backward(r)
           for r in ("token_mean", "sequence_mean", "sequence_sum_mean")},
        "sequence_probability_ratio": lambda: kata.sequence_probability_ratio(
            new_log_probs, data["old_log_probs"], mask),
    }
    tokens = int(torch.as_tensor(mask).sum())
    print(f"token objectives: {args.rows} x {args.length} tokens ({tokens} response tokens), implementation "
          f"{args.impl}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, step in steps.items():
        print(f"  {name:<44s} {median_milliseconds(step, args.repeats):8.2f} ms")


if __name__ == "__main__":
    main()
