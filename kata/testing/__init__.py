"""What the concept tests run on: it imports kata.concepts and kata.rl, and no tool.

    options.py     the pytest plugin of --impl, --mistake and --variant (an entry point: known before pytest parses)
    progress.py    the pytest plugin that records results for `kata status`, reports them to the grader, and holds
                   every test to its deadline
    record.py      the record of a student's last results per concept, and the fingerprint of what they depend on
    limits.py      how long one test may run, the same for `kata check` and `kata grade`
    plain_asserts.py  the concept test modules left unrewritten by pytest: a failure reads as its message alone
    strategies/    one module per concept: the Hypothesis strategies its tests draw from and its probes (the cases
                   `kata diagnose` runs each public function on, as data); __init__.py the shared building blocks
    drawing.py     how a probe's cases are drawn: the same examples on every run and in every process; and what
                   keeps every test's examples independent of the modules imported (one verdict everywhere)
    battery.py     the contract battery every public array function goes through (inputs unchanged, no gradient
                   into data, any layout, the domain's edges), declared per concept as CONTRACTS
    calls.py       the impl the tests get: a failing example shows each call's arguments
    training.py    the verdicts of the two training tests, and the one definition of "solved"
"""
