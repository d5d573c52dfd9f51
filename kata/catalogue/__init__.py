"""The instructor's catalogue: the stub generator, the mistakes and valid variants and their runs, the diagnosis, the
stubs' selfcheck. It may import the layers below it (lab and student aside), never grading.

    commands.py     `kata stubs`, and the commands that parse their own options: diagnose, mistakes, variants,
                    selfcheck
    stubs.py        exercises/ written from the marked solutions/
    runs.py         a concept's tests against catalogue entries, each in a forked process
    mistakes.py     every catalogued mistake must be caught, on every run
    variants.py     every catalogued valid variant must pass, slow tests included
    mutation.py     mutmut over each concept's reference: what its tests let survive, recorded in mutation/
    diagnose.py     which catalogued mistake a function behaves like, by behaviour on fixed probes
    probes.py       the probes of every concept, collected from its module of kata/testing/strategies/
    observations.py what the diagnosis observes of one call, and when two observations agree
    selfcheck.py    every concept test fails on the shipped stubs, with the readable line
"""
