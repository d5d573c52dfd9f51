"""What `kata diagnose` observes of one call of a function on a probe, and when two observations agree.

A probe set (kata.catalogue.probes) pairs the cases drawn for one public function with the observer its concept's
probes name (:func:`observer`); ``guarded`` calls it on a fresh copy of the case and returns what can be compared
across implementations:

- values, as float64 or integer NumPy arrays (a raised exception is observed as its class name);
- gradients, where a mistake is about them (a detach contract): the gradient of a fixed weighting of the outputs
  with respect to every floating input named;
- where a contract is about containers and dtypes: whether each output is a tensor (``result_containers``), the
  kind of result when each named input alone is a tensor (``one_tensor_at_a_time``), or each output's container
  and dtype on the case as given (``kinds``);
- for functions that draw random numbers, what does not depend on the random stream: ``minibatch_indices`` is
  observed as its minibatch sizes and whether the indices form a permutation; ``sample_responses`` greedily as the
  tokens themselves and, when sampling, as whether every row is padded after its EOS (with the case's EOS and PAD
  ids), or, without a generator, as whether torch's global seed fixes the rows;
- for the update functions (``ppo_update``, ``rloo_iteration``), on small seeded networks and a plain SGD
  optimizer: the returned diagnostics and every parameter after the update. Private helpers (``_minibatch_loss``,
  ``_clipped_step``) are probed through the public function that calls them; one whole-batch minibatch per epoch
  makes the update independent of the shuffle's random stream. ``ppo_update``'s actor also records the samples
  each epoch visits, observed as whether every epoch is a permutation of the batch and whether the epochs' orders
  all differ: with 16 samples or more a uniform shuffle repeats an order with negligible probability.

``agree`` compares two observations within a probe set's tolerance.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

Observation = Any  # nested tuples of NumPy arrays and strings


class StubCalled(Exception):
    """The function under probe raised NotImplementedError: it is a stub and gets no diagnosis."""


def as_observation(value: Any) -> Observation:
    """A comparable form of a function's output: arrays as NumPy (floats as float64), containers as tuples."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.numpy().astype(np.float64) if value.is_floating_point() else value.numpy()
    if isinstance(value, np.ndarray):
        return value.astype(np.float64) if np.issubdtype(value.dtype, np.floating) else value
    if isinstance(value, dict):
        return tuple((key, as_observation(value[key])) for key in sorted(value))
    if isinstance(value, (list, tuple)):
        return tuple(as_observation(part) for part in value)
    if hasattr(value, "__dataclass_fields__"):
        return tuple((name, as_observation(getattr(value, name))) for name in value.__dataclass_fields__)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return np.asarray(value, dtype=np.float64)
    return repr(value)


def agree(a: Observation, b: Observation, rtol: float, atol: float) -> bool:
    """Equal observations: the same structure, arrays of one shape within tolerance (NaN equals NaN)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(agree(x, y, rtol, atol) for x, y in zip(a, b)))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b  # a string never equals an array
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True))


def guarded(observe: Callable[[Callable[..., Any], Any], Observation]):
    """``observe`` on a deep copy of the case; an exception becomes its name, a stub raises StubCalled."""

    def run(function: Callable[..., Any], case: Any) -> Observation:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                return observe(function, copy.deepcopy(case))
        except NotImplementedError as error:
            raise StubCalled(str(error)) from None
        except Exception as error:  # a wrong implementation may raise anything; what it raises is its behaviour
            return f"raised {type(error).__name__}"

    return run


def values(function: Callable[..., Any], case: dict) -> Observation:
    return as_observation(function(**case))


def with_gradients(*float_names: str):
    """Values, and the gradient of a fixed weighting of every output with respect to each of ``float_names``."""

    def observe(function: Callable[..., Any], case: dict) -> Observation:
        inputs = {name: torch.tensor(np.asarray(case[name], dtype=np.float64), requires_grad=True)
                  for name in float_names}
        outputs = function(**{**case, **inputs})
        parts = outputs if isinstance(outputs, tuple) else (outputs,)
        total = sum((index + 1.0) * torch.as_tensor(part).sum() for index, part in enumerate(parts)
                    if isinstance(part, torch.Tensor) and part.is_floating_point())
        leaves = list(inputs.values())
        if isinstance(total, torch.Tensor) and total.requires_grad:
            gradients = torch.autograd.grad(total, leaves, allow_unused=True)
        else:
            gradients = (None,) * len(leaves)
        gradients = tuple(torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, gradients))
        return as_observation(outputs), as_observation(gradients)

    return observe


def result_containers(*float_names: str):
    """Whether each output is a tensor, its values on the case as given, and :func:`with_gradients` of
    ``float_names``."""
    gradients = with_gradients(*float_names)

    def observe(function: Callable[..., Any], case: dict) -> Observation:
        result = function(**case)
        kind = tuple("tensor" if isinstance(part, torch.Tensor) else type(part).__name__
                     for part in (result if isinstance(result, tuple) else (result,)))
        return kind, values(lambda **_: result, case), gradients(function, case)

    return observe


def one_tensor_at_a_time(*float_names: str):
    """:func:`with_gradients` of ``float_names`` (every one of them a tensor), and the kind of result when each of
    them alone is a tensor."""
    gradients = with_gradients(*float_names)

    def observe(function: Callable[..., Any], case: dict) -> Observation:
        observed = gradients(function, case)
        kinds = tuple(type(function(**{key: torch.tensor(value) if key == name else value
                                        for key, value in case.items()})).__name__
                      for name in float_names)
        return observed, kinds

    return observe


def with_kinds(observe: Callable[[Callable[..., Any], Any], Observation]):
    """``observe``, and each output's container and dtype on the case as given (a tensor if any input is one, the
    promoted dtype): what a value cast to float64 for comparison no longer shows."""

    def run(function: Callable[..., Any], case: Any) -> Observation:
        output = function(**copy.deepcopy(case))
        parts = output if isinstance(output, tuple) else (output,)
        kinds = tuple(f"{type(part).__name__} {str(getattr(part, 'dtype', '')).replace('torch.', '')}"
                      for part in parts)
        return observe(function, case), kinds

    return run


def minibatch_partition(function: Callable[..., Any], case: tuple[int, int, int]) -> Observation:
    """What any valid shuffle shares: the minibatch sizes, indices in range, a permutation of the batch."""
    batch_size, minibatch_size, seed = case
    minibatches = function(batch_size, minibatch_size, torch.Generator().manual_seed(seed))
    sizes = np.array([len(m) for m in minibatches])
    indices = torch.cat([torch.as_tensor(m).reshape(-1) for m in minibatches]).tolist() if minibatches else []
    in_range = all(0 <= i < batch_size for i in indices)
    permutation = sorted(indices) == list(range(batch_size))
    return sizes, np.array([in_range, permutation])


class EosLeaningPolicy(torch.nn.Module):
    """The task's GRU policy (small, seeded) with a bias towards EOS, so that greedy rows end at different steps."""

    def __init__(self, seed: int, eos_bias: float) -> None:
        super().__init__()
        from kata.rl.sequence_task import EOS_ID, make_policy

        self.policy = make_policy(seed, hidden_size=8)
        self.bias = torch.zeros(self.policy.head.out_features)
        self.bias[EOS_ID] = eos_bias

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.policy(input_ids) + self.bias


def sampled_responses(function: Callable[..., Any], case: dict) -> Observation:
    """Greedy: the tokens. Sampled: only what every valid sampler shares, whatever its random stream."""
    from kata.rl.sequence_task import BOS_ID, EOS_ID, PAD_ID, PROMPT_TOKEN_IDS

    rng = np.random.default_rng(case["seed"])
    symbols = rng.choice(PROMPT_TOKEN_IDS, size=(case["rows"], case["prompt_length"] - 1))
    prompts = np.concatenate([np.full((case["rows"], 1), BOS_ID), symbols], axis=1).astype(np.int64)
    model = EosLeaningPolicy(case["seed"], case["eos_bias"])
    eos, pad = case.get("eos_token_id", EOS_ID), case.get("pad_token_id", PAD_ID)
    if case.get("global_generator"):
        # generator=None draws from torch's global generator and advances it: the same global seed gives the same
        # rows, another seed other rows, a second call other rows (16 sampled rows never coincide in practice).
        draws = []
        for global_seed in (case["seed"], case["seed"], case["seed"] + 1):
            torch.manual_seed(global_seed)
            draws.append(np.asarray(torch.as_tensor(function(model, prompts, case["max_new_tokens"]))))
        second = np.asarray(torch.as_tensor(function(model, prompts, case["max_new_tokens"])))
        return np.array([np.array_equal(draws[0], draws[1]), not np.array_equal(draws[0], draws[2]),
                         not np.array_equal(draws[2], second)])
    ids = function(model, prompts, case["max_new_tokens"], deterministic=case["deterministic"],
                   generator=torch.Generator().manual_seed(case["seed"]), eos_token_id=eos, pad_token_id=pad)
    ids = np.asarray(torch.as_tensor(ids))
    if case["deterministic"]:
        return ids
    responses = ids[:, prompts.shape[1]:]
    padded_after_eos = []
    for row in responses:
        ends = np.flatnonzero(row == eos)
        padded_after_eos.append(bool(ends.size == 0 or np.all(row[ends[0] + 1:] == pad)))
    return np.array(ids.shape), np.array([np.array_equal(ids[:, :prompts.shape[1]], prompts), all(padded_after_eos)])


class VisitRecorder(torch.nn.Module):
    """The actor, recording which rows of ``observations`` each forward pass with gradient sees, in order."""

    def __init__(self, actor: torch.nn.Module, observations: torch.Tensor) -> None:
        super().__init__()
        self.actor, self.observations = actor, observations
        self.visits: list[int] = []

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            same = (observations.detach()[:, None, :] == self.observations[None, :, :]).all(dim=-1)
            self.visits += [int(row.nonzero()[0]) if row.any() else -1 for row in same]
        return self.actor(observations)


def epoch_orders(visits: list[int], size: int, epochs: int) -> np.ndarray:
    """Whether the visits are ``epochs`` permutations of ``range(size)`` one after another, and whether those orders
    all differ from one another."""
    blocks = [visits[e * size:(e + 1) * size] for e in range(epochs)]
    permutations = len(visits) == size * epochs and all(sorted(b) == list(range(size)) for b in blocks)
    distinct = permutations and len({tuple(b) for b in blocks}) == epochs
    return np.array([permutations, distinct])


def _update_setup(case: dict) -> tuple:
    """Seeded actor, critic, batch and SGD optimizer for an update probe."""
    from kata.rl.cartpole import Actor, Critic, action_log_probs
    from kata.testing.sgd import SGD
    from kata.rl.ppo import RolloutBatch

    generator = torch.Generator().manual_seed(case["seed"])
    actor, critic = Actor(4, 2, (8,), generator), Critic(4, (8,), generator)
    size = case["size"]
    observations = torch.randn(size, 4, generator=generator)
    actions = torch.randint(0, 2, (size,), generator=generator)
    advantages = torch.randn(size, generator=generator)
    with torch.no_grad():
        old_log_probs = action_log_probs(actor(observations), actions)
        old_values = critic(observations)
    batch = RolloutBatch(observations, actions, old_log_probs, old_values, advantages,
                         old_values + advantages + torch.randn(size, generator=generator))
    optimizer = SGD([*actor.parameters(), *critic.parameters()], lr=0.5)
    return actor, critic, batch, optimizer


def updated_networks(function: Callable[..., Any], case: dict) -> Observation:
    """ppo_update on seeded networks, one whole-batch minibatch per epoch: diagnostics and parameters after, and
    what the epochs' orders of visiting the samples share with every valid shuffle (:func:`epoch_orders`).

    Cases with a ``kind`` observe what every valid shuffle shares when minibatches are smaller: ``"one_sample"``
    (minibatches of one sample, no value loss, no entropy bonus: each standardised advantage is 0, so whether the
    actor moved and whether every parameter is finite) and ``"target_kl"`` (a threshold every epoch's mean exceeds:
    the epochs completed and the minibatch steps taken); with one whole-batch minibatch per epoch,
    ``"leftover_grads"`` (every parameter holds a gradient before the call), ``"actor_optimizer"`` (the optimizer
    steps the actor only, its gradient norm clipped hard) and ``"kl_after_step"`` (a target_kl that only the KL
    measured after a step exceeds in the first epoch: the epochs completed)."""
    actor, critic, batch, optimizer = _update_setup(case)
    kind = case.get("kind")
    if kind == "leftover_grads":
        rng = torch.Generator().manual_seed(case["seed"])
        for parameter in (*actor.parameters(), *critic.parameters()):
            parameter.grad = torch.randn(parameter.shape, generator=rng)
    if kind == "actor_optimizer":
        optimizer = type(optimizer)(list(actor.parameters()), lr=0.5)
    if kind in ("leftover_grads", "actor_optimizer", "kl_after_step"):
        diagnostics = function(
            actor, critic, optimizer, batch, epochs=case["epochs"], minibatch_size=case["size"], clip_epsilon=0.2,
            value_clip_epsilon=0.5, value_coefficient=0.5, entropy_coefficient=0.0,
            max_grad_norm=0.05 if kind == "actor_optimizer" else 100.0,
            target_kl=1e-6 if kind == "kl_after_step" else None, generator=torch.Generator().manual_seed(case["seed"]))
        if kind == "kl_after_step":
            return np.array([diagnostics["epochs_completed"]])
        return as_observation(torch.cat([p.detach().reshape(-1) for p in (*actor.parameters(), *critic.parameters())]))
    size = case["size"]
    observations = batch.observations
    if case.get("kind") == "one_sample":
        before = [p.detach().clone() for p in actor.parameters()]
        function(actor, critic, optimizer, batch, epochs=case["epochs"], minibatch_size=1, clip_epsilon=0.2,
                 value_clip_epsilon=0.5, value_coefficient=0.0, entropy_coefficient=0.0, max_grad_norm=100.0,
                 generator=torch.Generator().manual_seed(case["seed"]))
        after = [p.detach() for p in (*actor.parameters(), *critic.parameters())]
        return np.array([all(torch.equal(a, b) for a, b in zip(before, after)),
                         all(bool(torch.isfinite(p).all()) for p in after)])
    if case.get("kind") == "target_kl":
        diagnostics = function(
            actor, critic, optimizer, batch, epochs=case["epochs"], minibatch_size=4, clip_epsilon=0.2,
            value_clip_epsilon=0.5, value_coefficient=0.5, entropy_coefficient=0.0, max_grad_norm=100.0,
            target_kl=1e-9, generator=torch.Generator().manual_seed(case["seed"]))
        return np.array([diagnostics["epochs_completed"], diagnostics["minibatch_steps"]])
    recorder = VisitRecorder(actor, observations)
    diagnostics = function(
        recorder, critic, optimizer, batch, epochs=case["epochs"], minibatch_size=size, clip_epsilon=0.2,
        value_clip_epsilon=0.5, value_coefficient=0.5, entropy_coefficient=case["entropy_coefficient"],
        max_grad_norm=case["max_grad_norm"], generator=torch.Generator().manual_seed(case["seed"]))
    parameters = torch.cat([p.detach().reshape(-1) for p in (*actor.parameters(), *critic.parameters())])
    return (as_observation(diagnostics), as_observation(parameters),
            epoch_orders(recorder.visits, size, case["epochs"]))


def iterated_policy(function: Callable[..., Any], case: dict) -> Observation:
    """rloo_iteration on a seeded small policy with plain SGD (with ``leftover_grads``, every parameter holding a
    gradient before the call): its result and the parameters after."""
    from kata.testing.sgd import SGD
    from kata.rl.sequence_task import make_policy

    model = make_policy(case.pop("seed"), hidden_size=8)
    optimizer = SGD(list(model.parameters()), lr=1.0)
    if case.pop("leftover_grads", False):  # gradients the caller left behind change nothing
        rng = torch.Generator().manual_seed(0)
        for parameter in model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=rng)
    result = function(model, optimizer, **case)
    parameters = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    advantages_dtype = str(getattr(getattr(result, "advantages", None), "dtype", None))
    return as_observation(result), as_observation(parameters), advantages_dtype


# ---- choosing an observer by name ----------------------------------------------------------------------------------

# Observers of any function, given the float arguments whose gradients they observe.
OF_FLOAT_ARGUMENTS = {
    "values": lambda *names: with_gradients(*names) if names else values,
    "result_containers": result_containers,
    "one_tensor_at_a_time": one_tensor_at_a_time,
}
# Observers of one kind of function (a shuffle, a sampler, an update), which take no options.
OF_A_KIND = {
    "minibatch_partition": minibatch_partition,
    "sampled_responses": sampled_responses,
    "updated_networks": updated_networks,
    "iterated_policy": iterated_policy,
}


def observer(name: str, gradients: tuple[str, ...] = (), kinds: bool = False):
    """The observer called ``name`` (with the gradients of ``gradients``; with ``kinds``, :func:`with_kinds`), as a
    concept's probes name it; ValueError names the observers there are otherwise."""
    if name in OF_FLOAT_ARGUMENTS:
        observe = OF_FLOAT_ARGUMENTS[name](*gradients)
    elif name in OF_A_KIND and not gradients:
        observe = OF_A_KIND[name]
    else:
        raise ValueError(f"observer: no observer {name!r} with gradients {gradients!r}; expected one of "
                         f"{', '.join(OF_FLOAT_ARGUMENTS)} (with gradients or none) or {', '.join(OF_A_KIND)} (none)")
    return with_kinds(observe) if kinds else observe
