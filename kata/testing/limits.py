"""How long one test may run, the same for the student's ``kata check`` and the instructor's ``kata grade``.

The pytest plugin :mod:`kata.testing.progress` enforces it (``--kata-test-timeout``): a test that runs longer fails
as timed out, so a concept that passes ``kata check`` is not failed by grading for its speed.
"""

DEFAULT_TEST_TIMEOUT = 60.0  # seconds per test: a hanging loop costs one minute, never the whole run
SLOW_TEST_TIMEOUT = 300.0  # seconds per test with `kata check --slow`, whose tests train an agent
