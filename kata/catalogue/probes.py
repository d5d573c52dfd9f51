"""The probe inputs `kata diagnose` runs each public function on, and what it observes of each call.

A probe set belongs to one public function: cases drawn once, with a fixed seed, from the strategies the tests use
(kata/testing/, drawn by kata.catalogue.drawing), plus boundary cases where catalogued mistakes part from the
reference (huge logits, extreme values at masked positions, log-ratios whose running product overflows).
``observe(function, case)``, one of the observers of kata.catalogue.observations wrapped by its ``guarded``, calls
the function on a fresh copy of the case and returns what can be compared across implementations: values, gradients
where a mistake is about them, and for the functions that draw random numbers or update networks only what does not
depend on the random stream (that module's docstring says what exactly).

Functions that train an agent, or that the frame provides, have no probes (``UNPROBED`` says why).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kata.catalogue.drawing import PROBES_PER_FUNCTION, draw, drawn as _drawn, strategies as _strategies
from kata.catalogue.observations import (
    Observation,
    guarded,
    iterated_policy,
    minibatch_partition,
    sampled_responses,
    updated_networks,
    values,
    with_gradients,
)

UPDATE_PROBES = 8  # ppo_update and rloo_iteration train small networks: fewer, dearer probes


@dataclass(frozen=True)
class ProbeSet:
    """The probes of one public function."""

    function: str
    concept: str
    draw_cases: Callable[[], list[Any]] = field(repr=False)
    observe: Callable[[Callable[..., Any], Any], Observation] = field(repr=False)
    rtol: float = 1e-6
    atol: float = 1e-9

    def cases(self) -> list[Any]:
        return _cached_cases(self.function, self.draw_cases)


_CASES: dict[str, list[Any]] = {}


def _cached_cases(function: str, draw_cases: Callable[[], list[Any]]) -> list[Any]:
    if function not in _CASES:
        _CASES[function] = draw_cases()
    return _CASES[function]


# ---- boundary cases ----------------------------------------------------------------------------------------------


def _huge_logits() -> list[Any]:
    """Probabilities that underflow to exactly 0 in float64, with rows and actions of different counts; logits of
    -inf (an action that cannot be taken); finite logits whose difference overflows (no ties at the top, where a
    valid logsumexp route loses a tie's log 2)."""
    top = float(np.finfo(np.float64).max)
    return [dict(logits=np.array([1000.0, 0.0])),
            dict(logits=np.array([[1e4, -1e4, 0.0], [0.0, 1.0, 2.0]])),
            dict(logits=np.array([[-800.0, 0.0, 3.0, 1.0]])),
            dict(logits=np.array([[0.0, 1.0, -np.inf], [-np.inf, 2.0, 2.0]])),
            dict(logits=np.array([0.5, -np.inf, -1.0, 0.0])),
            dict(logits=np.array([top, -top, 0.0]))]


def _mixed_cuts() -> list[Any]:
    """Rollouts where every kind of record meets: terminated, cut without termination (a time limit, the buffer
    end), and carried on; gamma and lambda strictly between 0 and 1 so that each of them shows."""
    random = np.random.default_rng(3)
    cases = []
    for shape in ((8,), (10,), (7, 3), (9, 2)):
        terminated = random.random(shape) < 0.2
        trace_cuts = terminated | (random.random(shape) < 0.25)
        trace_cuts[-1] = True
        cases.append(dict(rewards=random.uniform(-1.0, 1.0, shape), values=random.uniform(-5.0, 5.0, shape),
                          next_values=random.uniform(-5.0, 5.0, shape), terminated=terminated,
                          trace_cuts=trace_cuts, gamma=0.9, gae_lambda=0.7))
    return cases


def _gae_cases() -> list[Any]:
    """Drawn batches, then the mixed rollouts three times: as they are, with NaN and ±inf in next_values at
    terminated records, and with NaN, ±inf and huge values in every record after a cut (the records before it must
    not see them)."""
    drawn = _drawn("gae_batches")()
    extremes = np.array(_strategies().IGNORED_VALUES)
    mixed = _mixed_cuts()
    terminal, after_a_cut = [], []
    for index, case in enumerate(mixed):
        random = np.random.default_rng(index)
        junk = random.choice(extremes, size=case["rewards"].shape)
        terminal.append(dict(case, next_values=np.where(case["terminated"], junk, case["next_values"])))
        cut = len(case["rewards"]) // 2 - 1  # a cut across every column, with records after it
        case = {**case, "trace_cuts": case["trace_cuts"].copy()}
        case["trace_cuts"][cut] = True
        changed = {key: value.copy() if isinstance(value, np.ndarray) else value for key, value in case.items()}
        for key in ("rewards", "values", "next_values"):
            changed[key][cut + 1:] = junk[cut + 1:]
        after_a_cut.append(changed)
    return drawn + mixed + terminal + after_a_cut


def _container_values_and_gradients(*float_names: str):
    """Whether the result is a tensor, its values, and (on float64 tensors of ``float_names``) its gradients."""
    gradients = with_gradients(*float_names)

    def observe(function: Callable[..., Any], case: dict) -> Observation:
        import torch

        result = function(**case)
        kind = tuple("tensor" if isinstance(part, torch.Tensor) else type(part).__name__
                     for part in (result if isinstance(result, tuple) else (result,)))
        return kind, values(lambda **_: result, case), gradients(function, case)

    return observe


def _surrogate_cases() -> list[Any]:
    """Drawn batches; every third with only the advantages as a tensor (the terms must be tensors then); and the
    first eight again with both log-probabilities moved far below 0 (-800), where exp of either underflows."""
    import torch

    drawn = _drawn("ppo_batches")()
    mixed = [dict(case, advantages=torch.from_numpy(case["advantages"].copy())) if index % 3 == 0 else case
             for index, case in enumerate(drawn)]
    far = [dict(case, new_log_probs=case["new_log_probs"] - 800.0, old_log_probs=case["old_log_probs"] - 800.0)
           for case in drawn[:8]]
    return mixed + far


def _overflowing_log_ratios() -> list[Any]:
    """Token log-ratios whose running product overflows though their sum does not, and one beyond float64."""
    new = np.array([[400.0, 400.0, -400.0, -400.0], [250.0, 250.0, 250.0, 250.0]])
    steps = np.array([[-400.0, -400.0, 400.0, 399.0, 1.0], [720.0, -360.0, -360.0, 0.5, 0.0]])
    return [dict(new_log_probs=new, old_log_probs=np.zeros_like(new), mask=np.ones_like(new, dtype=np.int64)),
            dict(new_log_probs=new[:, ::-1].copy(), old_log_probs=np.zeros_like(new),
                 mask=np.array([[0, 1, 1, 1], [1, 1, 0, 0]])),
            dict(new_log_probs=steps - 1.0, old_log_probs=np.full_like(steps, -1.0),
                 mask=np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]))]


def _clip_boundaries() -> list[Any]:
    """Ratios at exactly 1 ± ε (exp(log r) == r for these r and ε in float64): neither clipped nor outside, since
    both branches are equal there; and ratios beyond, on both sides of the interval, with advantages of both signs."""
    cases = []
    for epsilon, ratios, advantages in ((0.5, [1.5, 0.5, 2.0, 0.25, 1.0, 1.5, 0.5], [1, -1, 1, -1, 1, -1, 1]),
                                        (0.25, [1.25, 0.75, 1.25, 0.75, 1.5, 0.5], [1, -1, -1, 1, 1, -1]),
                                        (0.5, [[1.5, 1.5, 0.5], [0.5, 2.0, 1.0]], [[1, 2, -2], [-1, 3, -1]])):
        new = np.log(np.array(ratios))
        cases.append(dict(new_log_probs=new, old_log_probs=np.zeros_like(new),
                          advantages=np.array(advantages, dtype=np.float64), clip_epsilon=epsilon))
    return cases


def _with_masked_extremes(case: dict, seed: int) -> dict:
    """The case with extreme log-probs (far beyond exp's range, infinite, NaN) at every masked position."""
    extremes = np.array(_strategies().IGNORED_VALUES)
    masked = case["mask"] == 0
    random = np.random.default_rng(seed)
    for key in ("new_log_probs", "old_log_probs"):
        case[key] = np.where(masked, random.choice(extremes, size=masked.shape), case[key])
    return case


def _mixed(case: dict, index: int) -> dict:
    """The case with its containers and dtypes mixed by ``index``: one argument a tensor while the log-probs stay
    NumPy, float32 new log-probs beside float64 old ones, or a tensor bool mask; every fourth case left as drawn."""
    import torch

    case = dict(case)
    if index % 4 == 1:
        case["advantages" if "advantages" in case else "mask"] = torch.as_tensor(case.get("advantages", case["mask"]))
    elif index % 4 == 2:
        case["new_log_probs"] = case["new_log_probs"].astype(np.float32)
    elif index % 4 == 3:
        case["mask"] = torch.as_tensor(case["mask"] != 0)
    return case


def _with_kinds(observe: Callable[[Callable[..., Any], Any], Observation]):
    """``observe``, and each output's container and dtype on the case as given (a tensor if any input is one, the
    promoted dtype): what a value cast to float64 for comparison no longer shows."""
    import copy

    def run(function: Callable[..., Any], case: Any) -> Observation:
        output = function(**copy.deepcopy(case))
        parts = output if isinstance(output, tuple) else (output,)
        kinds = tuple(f"{type(part).__name__} {str(getattr(part, 'dtype', '')).replace('torch.', '')}"
                      for part in parts)
        return observe(function, case), kinds

    return run


def _token_cases(with_reduction: bool) -> Callable[[], list[Any]]:
    def cases() -> list[Any]:
        strategies = _strategies()
        drawn = draw(strategies.token_objective_batches(), 36, "token_objective_batches")
        result = []
        for index, case in enumerate(drawn):
            if index % 2:
                case = _with_masked_extremes(dict(case), index)
            case = _mixed(case, index // 2)
            if with_reduction:
                case = {**case, "reduction": ("token_mean", "sequence_mean", "sequence_sum_mean")[index % 3]}
            result.append(case)
        return result

    return cases


def _ratio_cases() -> list[Any]:
    drawn = _token_cases(False)()
    keys = ("new_log_probs", "old_log_probs", "mask")
    return [{key: case[key] for key in keys} for case in drawn] + _overflowing_log_ratios()


def _pick(*keys: str) -> Callable[[dict], dict]:
    return lambda case: {key: case[key] for key in keys}


def _minibatch_cases() -> list[Any]:
    return _drawn("probe_minibatch_layouts")() + [(8, 8, 0), (64, 16, 1), (70, 3, 2)]


def _sampling_cases() -> list[Any]:
    drawn = draw(_strategies().sampling_cases, PROBES_PER_FUNCTION, "sampling_cases")
    cases = [{**case, "deterministic": index % 2 == 0} for index, case in enumerate(drawn)]
    # Other EOS and PAD ids (an answer token as EOS; PAD a prompt token, or EOS itself), and no generator at all.
    for index, (eos, pad) in enumerate(((6, 3), (7, 7), (9, 1), (8, 0))):
        cases.append({**drawn[index], "rows": 6, "max_new_tokens": 5, "deterministic": index % 2 == 0,
                      "eos_token_id": eos, "pad_token_id": pad})
    cases += [{**drawn[index], "rows": 16, "max_new_tokens": 4, "deterministic": False, "global_generator": True}
              for index in range(2)]
    return cases


def _update_cases() -> list[Any]:
    drawn = _drawn("update_cases", count=UPDATE_PROBES)()
    # Minibatches smaller than the batch, observed only through what every valid shuffle shares.
    return drawn + [{**case, "kind": kind} for case in drawn[:3] for kind in ("one_sample", "target_kl")]


def _relabelled_loss_cases() -> list[Any]:
    """sequence_policy_loss with other EOS and PAD ids, and inf, NaN or huge old log-probs outside the response."""
    from kata.rl.sequence_task import VOCAB_SIZE

    from kata.testing import loop_strategies

    strategies = _strategies()
    cases = []
    for index, case in enumerate(draw(loop_strategies.loss_cases(), 12, "loss_cases")):
        batch, random = case["batch"], np.random.default_rng(index)
        ids, lengths = batch["input_ids"], batch["prompt_lengths"]
        rows, width = ids.shape
        outside = np.ones((rows, width - 1), dtype=bool)
        for i, prompt in enumerate(lengths):
            tail = ids[i, prompt:].tolist()
            eos, pad = batch["eos_token_id"], batch["pad_token_id"]
            end = prompt + (tail.index(eos) + 1 if eos in tail else
                            max([j + 1 for j, token in enumerate(tail) if token != pad], default=0))
            outside[i, prompt - 1:end - 1] = False
        old = np.where(outside, random.choice(np.array(strategies.IGNORED_VALUES), size=outside.shape),
                       random.uniform(-3.0, 0.0, outside.shape))
        cases.append(dict(logits=random.uniform(-3.0, 3.0, (rows, width, VOCAB_SIZE)), input_ids=ids,
                          prompt_lengths=lengths, old_log_probs=old, advantages=random.uniform(-2.0, 2.0, rows),
                          clip_epsilon=case["clip_epsilon"], reduction=case["reduction"],
                          pad_token_id=batch["pad_token_id"], eos_token_id=batch["eos_token_id"]))
    return cases


def _relabelled_iteration_cases() -> list[Any]:
    """rloo_iteration with other EOS and PAD ids and float32 or float64, NumPy or tensor rewards."""
    import torch

    from kata.testing import loop_strategies

    cases = []
    for case in draw(loop_strategies.iteration_settings(), 6, "iteration_settings"):
        batch = case["batch"]
        rewards = torch.from_numpy(case["rewards"]) if case["rewards_as_tensor"] else case["rewards"]
        cases.append(dict(seed=case["seed"], input_ids=batch["input_ids"], prompt_lengths=batch["prompt_lengths"],
                          rewards=rewards, group_size=case["group_size"], ppo_epochs=case["ppo_epochs"],
                          clip_epsilon=case["clip_epsilon"], reduction=case["reduction"],
                          pad_token_id=batch["pad_token_id"], eos_token_id=batch["eos_token_id"]))
    return cases


def _response_mask_cases() -> list[Any]:
    import torch

    drawn = draw(_strategies().response_batches(), PROBES_PER_FUNCTION, "response_batches")
    cases = [{**case, "include_eos": index % 2 == 0} for index, case in enumerate(drawn)]
    # Prompt lengths as a tensor beside NumPy ids, in every third case: the mask is then a tensor.
    return [{**case, "prompt_lengths": torch.as_tensor(case["prompt_lengths"])} if index % 3 == 1 else case
            for index, case in enumerate(cases)]


def _log_prob_cases() -> list[Any]:
    """Ordinary logits, then logits near the float64 and float32 limits (where log(softmax) gives -inf)."""
    strategies = _strategies()
    cases = []
    for arguments in ((), (3, 6, 6, np.float64, True), (3, 6, 6, np.float32, True)):
        drawn = draw(strategies.logits_and_ids(*arguments), 12, "logits_and_ids" + repr(arguments))
        cases += [dict(logits=logits, input_ids=ids) for logits, ids in drawn]
    return cases


def _group_rloo_cases() -> list[Any]:
    drawn = draw(_strategies().prompt_major_rewards(), PROBES_PER_FUNCTION, "prompt_major_rewards")
    return [dict(rewards=rewards, group_size=group_size) for rewards, group_size in drawn]


def _surrogate_observation(function: Callable[..., Any], case: dict) -> Observation:
    """Values and gradients with both inputs tensors, and the kind of result when only one of them is a tensor."""
    import torch

    observed = with_gradients("log_probs", "advantages")(function, case)
    kinds = tuple(type(function(**{key: torch.tensor(value) if key == name else value
                                    for key, value in case.items()})).__name__
                  for name in ("log_probs", "advantages"))
    return observed, kinds


# ---- the probe sets ----------------------------------------------------------------------------------------------

_SURROGATE = ("new_log_probs", "old_log_probs", "advantages")
_TRAINING_TOLERANCE = dict(rtol=1e-4, atol=1e-6)  # float32 networks: summation order moves the last bits

PROBE_SETS: tuple[ProbeSet, ...] = (
    # 1. reinforce
    ProbeSet("reinforce_surrogate_loss", "reinforce", _drawn("surrogate_batches"), guarded(_surrogate_observation)),
    ProbeSet("discounted_reward_to_go", "reinforce", _drawn("reward_streams"), guarded(with_gradients("rewards"))),
    ProbeSet("categorical_entropy", "reinforce",
             _drawn("logits_arrays", build=lambda logits: dict(logits=logits), extra=_huge_logits),
             guarded(with_gradients("logits"))),
    # 2. baselines
    *(ProbeSet(name, "baselines", _drawn("group_rewards", build=lambda rewards: dict(rewards=rewards)),
               guarded(values))
      for name in ("no_baseline_advantages", "group_mean_advantages", "rloo_advantages")),
    ProbeSet("simulate_group_baseline_bias", "baselines", _drawn("simulation_cases", count=8), guarded(values)),
    # 3. gae
    # Values only: a loop through NumPy (no autograd, the container of one argument) is common, and the diagnosis
    # should still name its misconception; the tests name the container and gradient clauses themselves.
    ProbeSet("gae_advantages", "gae", _gae_cases, guarded(values)),
    # 4. clipped_surrogate
    ProbeSet("clipped_surrogate_terms", "clipped_surrogate", _surrogate_cases,
             guarded(_container_values_and_gradients(*_SURROGATE))),
    ProbeSet("clipped_policy_loss", "clipped_surrogate", _drawn("ppo_batches"), guarded(with_gradients(*_SURROGATE))),
    ProbeSet("clipped_value_loss", "clipped_surrogate", _drawn("value_batches"), guarded(values)),
    ProbeSet("ppo_loss", "clipped_surrogate", _drawn("ppo_loss_cases"), guarded(values)),
    ProbeSet("approximate_kl", "clipped_surrogate",
             _drawn("ppo_batches", build=_pick("new_log_probs", "old_log_probs")),
             guarded(with_gradients("new_log_probs", "old_log_probs"))),
    ProbeSet("active_clip_fraction", "clipped_surrogate", _drawn("ppo_batches", extra=_clip_boundaries),
             guarded(values)),
    ProbeSet("ratio_outside_fraction", "clipped_surrogate",
             _drawn("ppo_batches", build=_pick("new_log_probs", "old_log_probs", "clip_epsilon"),
                    extra=lambda: [_pick("new_log_probs", "old_log_probs", "clip_epsilon")(case)
                                   for case in _clip_boundaries()]), guarded(values)),
    # 5. ppo_cartpole
    ProbeSet("gae_masks", "ppo_cartpole", _drawn("rollout_flags"), guarded(values)),
    ProbeSet("bootstrap_values", "ppo_cartpole", _drawn("bootstrap_cases"), guarded(values)),
    ProbeSet("minibatch_indices", "ppo_cartpole", _minibatch_cases, guarded(minibatch_partition)),
    ProbeSet("ppo_update", "ppo_cartpole", _update_cases, guarded(updated_networks),
             **_TRAINING_TOLERANCE),
    # 6. response_masks
    ProbeSet("response_token_mask", "response_masks", _response_mask_cases, guarded(_with_kinds(values))),
    ProbeSet("token_log_probs", "response_masks", _log_prob_cases, guarded(_with_kinds(values))),
    # 7. token_objectives
    ProbeSet("masked_token_ppo_terms", "token_objectives", _token_cases(False), guarded(_with_kinds(values))),
    ProbeSet("masked_token_ppo_objective", "token_objectives", _token_cases(True), guarded(_with_kinds(values))),
    *(ProbeSet(name, "token_objectives", _ratio_cases,
               guarded(_with_kinds(with_gradients("new_log_probs", "old_log_probs"))))
      for name in ("sequence_log_probability_ratio", "sequence_probability_ratio")),
    # 8. rloo_loop
    ProbeSet("sample_responses", "rloo_loop", _sampling_cases, guarded(sampled_responses)),
    ProbeSet("group_rloo_advantages", "rloo_loop", _group_rloo_cases, guarded(values)),
    ProbeSet("sequence_policy_loss", "rloo_loop", _drawn("sequence_loss_cases", extra=_relabelled_loss_cases),
             guarded(values)),
    ProbeSet("rloo_iteration", "rloo_loop",
             _drawn("iteration_cases", count=UPDATE_PROBES, extra=_relabelled_iteration_cases),
             guarded(iterated_policy),
             **_TRAINING_TOLERANCE),
)

PROBES: dict[str, ProbeSet] = {probe.function: probe for probe in PROBE_SETS}

UNPROBED: dict[str, str] = {
    "profile_config": "the frame's configuration, not the student's code",
    "train_ppo": "trains an agent for minutes; its parts are probed instead",
    "aggregate_training_runs": "the frame's summary of training runs",
    "sequence_profile_config": "the frame's configuration, not the student's code",
    "train_tiny_sequence_policy": "trains a policy; its parts are probed instead",
    "evaluate_sequence_policy": "evaluates a trained policy by sampling; sample_responses is probed instead",
    "decode_sequence": "the frame's decoder, re-exported",
}
