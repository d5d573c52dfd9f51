"""The contract battery: checks every public array function goes through, whatever its concept (after PyTorch's
OpInfo, where each operator declares its sample inputs once and generic tests run all of them through the same
checks).

Each concept's strategies module declares ``CONTRACTS``, one :class:`Contract` per public array function: the
strategy of its valid keyword arguments (the widest its contract admits, values at ignored positions included), which
of its floating arguments gradient must reach and which are data that must receive none, and the edges of its domain
(long episodes, large groups, huge clip ranges). Each concept's test module turns them into tests with
:func:`battery_tests`, so the battery runs wherever the concept tests run (the student edition, grading) and a
failure carries the concept's marker. The checks, each a test of its own so that a failure names the clause:

- ``leaves_its_inputs_unchanged``: every argument identical after the call: its bits (NaN and ±inf included), dtype,
  device, shape and strides, ``requires_grad``, ``.grad``, the tensor's version counter (an in-place operation
  through a view or ``.detach()`` shares it) and a NumPy array's writeable flag; each drawn as NumPy or as a tensor,
  a leaf that requires grad (with a ``.grad`` left by the caller) or a non-leaf.
- ``sends_no_gradient_into_data``: each data argument drawn as a leaf that requires grad and as a non-leaf; after
  backpropagating a random cotangent from every floating output, none reaches it, and every differentiable
  argument that requires grad gets a gradient.
- ``gives_the_same_values_for_any_layout``: the same values as contiguous arrays, as NumPy views with negative
  strides and as non-contiguous tensor views, in any mixture of NumPy and tensors, give the same results.
- ``handles_the_edges_of_its_domain``: on each edge case (all NumPy, then all tensors) the call returns finite
  results without raising, and equals what the contract's relation says (``Edge.expected``) where one is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

# An in-place change may leave the values as they were (nan_to_num_ on finite data): the version counter, which an
# in-place operation bumps whatever it writes, is what tells.


@dataclass(frozen=True)
class Edge:
    """One case at the edge of a function's domain: ``arguments`` (NumPy arrays and Python scalars), a ``name`` for
    the failure message, and optionally ``expected(arguments) -> list of arrays``: what the contract implies the
    floating outputs are (a relation that needs no reference: e.g. each episode computed on its own by the same
    function), compared at the dtype's precision."""

    name: str
    arguments: dict
    expected: Callable[[Callable, dict], list[np.ndarray]] | None = None


@dataclass(frozen=True)
class Contract:
    """One public array function's declaration for the battery.

    ``samples()`` returns a strategy of valid keyword arguments (NumPy arrays and Python scalars; the battery picks
    each array's container and layout). ``differentiable``: floating arguments the docstring says gradient reaches;
    ``data``: floating arguments it says receive none. ``edges()`` returns :class:`Edge` cases."""

    function: str
    samples: Callable[[], st.SearchStrategy[dict]] = field(repr=False)
    differentiable: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    edges: Callable[[], list[Edge]] | None = field(default=None, repr=False)


# ---- the arguments as a caller may pass them ----------------------------------------------------------------------

def _torch():
    import torch

    return torch


def _floating(value: Any) -> bool:
    return isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating)


def as_passed(value: np.ndarray, container: str, *, requires_grad: bool = False, leaf: bool = True,
              layout: str = "contiguous", leftover_grad: bool = False):
    """``value`` as the caller passes it: ``container`` "numpy" or "tensor"; for a floating tensor, a leaf that
    requires grad (with a ``.grad`` the caller left when ``leftover_grad``) or a non-leaf computed from one; with
    ``layout="strided"``, the same values in a view that is not contiguous (NumPy: negative strides)."""
    torch = _torch()
    if container == "numpy":
        if layout == "strided" and value.ndim:
            return np.flip(np.flip(value).copy())  # negative strides, the same values
        return value.copy()
    tensor = torch.from_numpy(value.copy())
    if layout == "strided" and value.ndim:
        tensor = torch.stack([tensor, tensor], dim=-1)[..., 0]  # every element twice as far apart
    if requires_grad and tensor.is_floating_point():
        base = tensor.detach().clone().requires_grad_(True)
        if leftover_grad:
            base.grad = torch.full_like(base, 0.5)
        tensor = base if leaf else base * 1.0
    return tensor


@st.composite
def passed(draw, arguments: dict, *, layout: str = "contiguous", grad: bool = True) -> dict:
    """``arguments`` with each array drawn as NumPy or as a tensor (a floating tensor: a leaf that requires grad,
    with or without a leftover ``.grad``, a non-leaf, or a plain tensor), independently."""
    chosen = {}
    for name, value in arguments.items():
        if not isinstance(value, np.ndarray):
            chosen[name] = value
            continue
        container = draw(st.sampled_from(["numpy", "tensor"]))
        kind = draw(st.sampled_from(["plain", "leaf", "leaf with grad", "non-leaf"])) if grad else "plain"
        chosen[name] = as_passed(value, container, requires_grad=kind != "plain", leaf=kind != "non-leaf",
                                 leftover_grad=kind == "leaf with grad", layout=layout)
    return chosen


# ---- what is compared ---------------------------------------------------------------------------------------------

def _bits(tensor) -> bytes:
    torch = _torch()
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def state(value: Any) -> tuple:
    """Everything a caller can see of an argument: for a tensor its bits, dtype, device, shape, strides,
    requires_grad, .grad and version counter; for a NumPy array its bits, dtype, shape, strides and writeable flag."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        grad = (value.grad.dtype, _bits(value.grad)) if value.is_leaf and value.grad is not None else None
        return ("tensor", str(value.dtype), str(value.device), tuple(value.shape), value.stride(),
                value.requires_grad, value._version, grad, _bits(value))
    if isinstance(value, np.ndarray):
        return ("numpy", str(value.dtype), value.shape, value.strides, bool(value.flags.writeable), value.tobytes())
    return ("value", repr(value))


def _what_changed(before: tuple, after: tuple) -> str:
    if before[0] == "tensor":
        fields = ("container", "dtype", "device", "shape", "strides", "requires_grad", "version counter (an "
                  "in-place operation on it, or on a view or .detach() of it)", ".grad", "values")
    elif before[0] == "numpy":
        fields = ("container", "dtype", "shape", "strides", "writeable flag", "values")
    else:
        fields = ("kind", "value")
    return ", ".join(name for name, a, b in zip(fields, before, after) if a != b)


def floating_outputs(result: Any, *, every_array: bool = False) -> list:
    """The floating arrays among ``result`` (a value, or a tuple/list/dict of them), in order; with
    ``every_array``, the integer and boolean ones too."""
    torch = _torch()
    if isinstance(result, dict):
        return [part for key in sorted(result) for part in floating_outputs(result[key], every_array=every_array)]
    if isinstance(result, (tuple, list)):
        return [part for item in result for part in floating_outputs(item, every_array=every_array)]
    if isinstance(result, torch.Tensor) and (every_array or result.is_floating_point()):
        return [result]
    if isinstance(result, np.ndarray) and (every_array or np.issubdtype(result.dtype, np.floating)):
        return [result]
    return []


def plain_array(value: Any) -> np.ndarray:
    torch = _torch()
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.float().numpy() if value.dtype in (torch.bfloat16, torch.float16) else value.numpy()
    return np.asarray(value)


def _shown(arguments: dict) -> str:
    torch = _torch()
    parts = []
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{name}=tensor{tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
                         f"{' requires_grad' if value.requires_grad else ''}")
        elif isinstance(value, np.ndarray):
            parts.append(f"{name}=ndarray{value.shape} {value.dtype}")
        else:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts)


def _agree(found: np.ndarray, expected: np.ndarray) -> bool:
    """Equal shapes, and values equal to a few units in the last place of their dtype (NaN equals NaN)."""
    if found.shape != expected.shape:
        return False
    if not (np.issubdtype(found.dtype, np.floating) or np.issubdtype(expected.dtype, np.floating)):
        return bool(np.array_equal(found, expected))
    eps = max(float(np.finfo(found.dtype).eps) if np.issubdtype(found.dtype, np.floating) else 0.0,
              float(np.finfo(expected.dtype).eps) if np.issubdtype(expected.dtype, np.floating) else 0.0)
    f, e = found.astype(np.float64), expected.astype(np.float64)
    scale = 1.0 + np.abs(np.where(np.isfinite(e), e, 0.0)).max(initial=0.0)
    with np.errstate(invalid="ignore"):
        return bool(np.allclose(f, e, rtol=64 * eps, atol=64 * eps * scale, equal_nan=True))


# ---- the checks ---------------------------------------------------------------------------------------------------

def leaves_its_inputs_unchanged(function: Callable, contract: Contract, data) -> None:
    arguments = data.draw(passed(data.draw(contract.samples(), label="arguments")), label="as passed")
    before = {name: state(value) for name, value in arguments.items()}
    function(**arguments)
    for name, value in arguments.items():
        after = state(value)
        if not (after == before[name]):
            raise AssertionError(
                f"{contract.function} changed its argument {name} ({_what_changed(before[name], after)}); the "
                f"inputs are never changed: compute on a copy or out of place (called with {_shown(arguments)})")


def sends_no_gradient_into_data(function: Callable, contract: Contract, data) -> None:
    torch = _torch()
    drawn = data.draw(contract.samples(), label="arguments")
    floating = [name for name in (*contract.data, *contract.differentiable) if _floating(drawn.get(name))]
    leaves = {name: data.draw(st.booleans(), label=f"{name} a leaf") for name in floating}
    arguments = dict(drawn)
    bases = {}
    for name in floating:
        base = torch.from_numpy(drawn[name].copy()).requires_grad_(True)
        bases[name] = base
        arguments[name] = base if leaves[name] else base * 1.0
    for name, value in drawn.items():  # the other arrays as NumPy or tensors
        if isinstance(value, np.ndarray) and name not in bases:
            arguments[name] = as_passed(value, data.draw(st.sampled_from(["numpy", "tensor"]), label=name))
    outputs = [part for part in floating_outputs(function(**arguments))
               if isinstance(part, torch.Tensor) and part.requires_grad]
    # Gradient must reach the differentiable arguments through the result; it may be zero for one of them (a
    # bootstrap skipped at every terminal step leaves next_values out of the graph, validly).
    wanted = [name for name in contract.differentiable if name in bases]
    if wanted and not outputs:
        raise AssertionError(
            f"{contract.function} returned no result that requires grad although {', '.join(wanted)} did: gradient "
            f"must reach {', '.join(contract.differentiable)} (called with {_shown(arguments)})")
    if not outputs:
        return
    generator = torch.Generator().manual_seed(0)
    total = sum((torch.randn(part.shape, generator=generator, dtype=torch.float64).to(part.dtype) * part)
                .nan_to_num(0.0, 0.0, 0.0).sum() for part in outputs)
    total.backward()
    for name in contract.data:
        if name in bases:
            gradient = bases[name].grad
            if not (gradient is None or not bool(gradient.ne(0).any())):
                raise AssertionError(
                    f"gradient reached {name} ({'a leaf' if leaves[name] else 'a non-leaf'} that requires grad) "
                    f"through {contract.function}: {name} is data and must be detached whatever its kind, leaf or not "
                    f"(called with {_shown(arguments)})")


def gives_the_same_values_for_any_layout(function: Callable, contract: Contract, data) -> None:
    drawn = data.draw(contract.samples(), label="arguments")
    containers = {name: data.draw(st.sampled_from(["numpy", "tensor"]), label=name)
                  for name, value in drawn.items() if isinstance(value, np.ndarray)}

    def call(layout: str):
        arguments = {name: as_passed(value, containers[name], layout=layout) if name in containers else value
                     for name, value in drawn.items()}
        return floating_outputs(function(**arguments), every_array=True), arguments

    (plain, _), (strided, arguments) = call("contiguous"), call("strided")
    if not (len(plain) == len(strided)):
        raise AssertionError(
            f"{contract.function} returned {len(strided)} floating results for non-contiguous views and {len(plain)} "
            f"for contiguous arrays of the same values (called with {_shown(arguments)})")
    for index, (a, b) in enumerate(zip(plain, strided)):
        if not (_agree(plain_array(b), plain_array(a))):
            raise AssertionError(
                f"{contract.function} gave other values (result {index}) when its arguments were non-contiguous views "
                f"(NumPy with negative strides, strided tensors) of the same values: a function's result depends on "
                f"the values only, never on the memory layout (called with {_shown(arguments)})")


def handles_the_edges_of_its_domain(function: Callable, contract: Contract) -> None:
    for edge in contract.edges():
        for container in ("numpy", "tensor"):
            arguments = {name: as_passed(value, container) if isinstance(value, np.ndarray) else value
                         for name, value in edge.arguments.items()}
            try:
                outputs = floating_outputs(function(**arguments))
            except NotImplementedError:
                raise
            except Exception as error:
                raise AssertionError(
                    f"{contract.function} raised {type(error).__name__} on valid input at the edge of its domain, "
                    f"{edge.name} ({container}): {str(error)[:200]}") from None
            for index, output in enumerate(outputs):
                values = plain_array(output)
                if not (np.isfinite(values).all()):
                    raise AssertionError(
                        f"{contract.function} returned non-finite values (result {index}) at the edge of its domain, "
                        f"{edge.name} ({container}), where every exact result is finite")
            if edge.expected is not None:
                for index, (output, expected) in enumerate(zip(outputs, edge.expected(function, edge.arguments))):
                    if not (_agree(plain_array(output), np.asarray(expected))):
                        raise AssertionError(
                            f"{contract.function} is wrong at the edge of its domain, {edge.name} ({container}), "
                            f"result {index}: it must equal the same computation done piece by piece")


CHECKS = {
    "leaves_its_inputs_unchanged": leaves_its_inputs_unchanged,
    "sends_no_gradient_into_data": sends_no_gradient_into_data,
    "gives_the_same_values_for_any_layout": gives_the_same_values_for_any_layout,
}


def battery_tests(contracts: tuple[Contract, ...]) -> tuple[Callable, Callable]:
    """Two test functions for a concept's test module: the drawn checks for every contract, and the edges of those
    that declare them (``test_contract, test_contract_edges = battery_tests(CONTRACTS)``; None when none does)."""
    import pytest

    drawn_cases = [pytest.param(contract, check, id=f"{contract.function}-{check}")
                   for contract in contracts for check in CHECKS
                   if check != "sends_no_gradient_into_data" or contract.data or contract.differentiable]

    @pytest.mark.parametrize("contract, check", drawn_cases)
    @given(data=st.data())
    def test_contract(impl, contract, check, data):
        CHECKS[check](getattr(impl, contract.function), contract, data)

    edged = [pytest.param(contract, id=contract.function) for contract in contracts if contract.edges is not None]

    @pytest.mark.parametrize("contract", edged)
    def test_contract_edges(impl, contract):
        handles_the_edges_of_its_domain(getattr(impl, contract.function), contract)

    return test_contract, (test_contract_edges if edged else None)


# ---- building blocks for the concepts' declarations -------------------------------------------------------------

@st.composite
def in_float_dtypes(draw, samples: st.SearchStrategy[dict], names: tuple[str, ...]) -> dict:
    """``samples`` with each of ``names`` in float32 or float64, independently."""
    drawn = dict(draw(samples))
    for name in names:
        drawn[name] = drawn[name].astype(draw(st.sampled_from([np.float32, np.float64])))
    return drawn


def piecewise(function: Callable, arguments: dict, pieces: list[slice], axis: int = 0,
              arrays: tuple[str, ...] = ()) -> list[np.ndarray]:
    """``function`` called on each piece of ``arrays`` along ``axis`` (the other arguments as they are), its
    results joined again: what a function whose pieces are independent (episodes, columns) must give whole."""
    parts = []
    for piece in pieces:
        index = (slice(None),) * axis + (piece,)
        called = {name: value[index] if name in arrays else value for name, value in arguments.items()}
        parts.append(plain_array(function(**called)))
    return [np.concatenate(parts, axis=axis)]
