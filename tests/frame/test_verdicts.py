"""Reporting that must not mislead: a stub's line never hides a genuine failure, a passing test never reads as "not
started", fast tests green with slow ones unrun says so, and a dtype-only mismatch is called a dtype mismatch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kata.concepts.stub import not_implemented
from tests.assertions import close
from tests.frame.test_cli import layout, record, state_of, write_solution  # noqa: F401 - the fixture and helpers

pytestmark = pytest.mark.frame


def test_a_passing_test_on_an_untouched_stub_is_failing_k_of_n_not_not_started(layout):  # noqa: F811
    record(layout, {"rejects_bad_input": "passed", "t2": "failed", "t3": "failed"})
    assert state_of(layout).label == "failing 2 of 3", (
        f"a stub passing 1 test of 3 is 'failing 2 of 3', not 'not started': {state_of(layout).label!r}")


def test_fast_tests_green_with_slow_tests_unrun_says_what_remains(layout):  # noqa: F811
    write_solution(layout)
    record(layout, {"quick": "passed", "training": None}, slow=frozenset({"training"}))
    state = state_of(layout)
    assert state.done and state.label == (
        "fast tests green; `kata check gae --slow` trains the agent, and grading runs it"), (
        f"fast tests green with slow ones unrun is done and says what remains: {state.done}, {state.label!r}")
    record(layout, {"training": "passed"}, slow=frozenset({"training"}))
    assert state_of(layout).label == "done", (
        f"the slow test passing too makes the concept done: {state_of(layout).label!r}")


def test_a_float32_result_that_is_right_to_float32_precision_is_called_a_dtype_mismatch():
    with pytest.raises(AssertionError, match="float32 where float64 was expected"):
        close(np.float32(1 / 3), 1 / 3, "a third")
    with pytest.raises(AssertionError, match="a third") as error:
        close(np.float32(0.5), 1 / 3, "a third")
    assert "float32 where" not in str(error.value), "a wrong value is wrong arithmetic, whatever its dtype"
    close(torch.tensor(7 / 12, dtype=torch.float32), 7 / 12, "a fraction", any_float=True)


def _student_line():
    import conftest

    return conftest._student_line


def test_a_stub_line_never_hides_a_genuine_failure_in_an_exception_group():
    stub = not_implemented("gae_advantages")
    genuine = AssertionError("the min, not the max")
    assert _student_line()(BaseExceptionGroup("two failures", [genuine, stub])) is None, (
        "a genuine failure must be shown, not replaced by the stub's line")
    assert _student_line()(BaseExceptionGroup("stubs only", [stub, not_implemented("gae_advantages")])) == str(stub), (
        "an exception group of stubs only shows the stub's line")
    assert _student_line()(stub) == str(stub), "a lone stub exception shows the stub's line"
