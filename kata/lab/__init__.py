"""The lab: the seed notebook's whole route as one command, on the reference or on a student's own code.

    kata lab [--profile smoke|full] [--impl exercises|solutions|PATH] [--out DIR] [--jobs N]
    python -m kata.lab ...             the same command (kata.lab.commands)

Five sections, in the seed notebook's order:

1. the baseline simulation (the three estimators' spread, the predicted and observed ``(G-1)/G``);
2. the GAE example with separate bootstrap and trace masks (``kata.lab.plan.GAE_EXAMPLE``);
3. PPO on CartPole over the profile's seeds (learning curve, and the diagnostics of the first seed);
4. the response mask, local and sequence ratios and the three reductions, on the seed's arrays;
5. the tiny RLOO/PPO run of an autoregressive policy (reward and success curves, the first rollout's rows, the
   greedy responses).

It writes PNG figures, ``report.md`` (readable on its own) and ``results.json`` (every number the report shows;
the report is rendered from it) to the output folder. It uses only the seed's public names, taken from the chosen
implementation through :func:`kata.concepts.impl.load`, so a student's code is what trains.

A stub that is not implemented yet does not stop the lab: its section prints one line (``skipped: gae_advantages
is not implemented yet — GUIDE.md §3 ...``), what depends on it is skipped with the reason, and the rest goes on.
An error or a failed check in a section is reported and the rest goes on too; the exit code is then 1.

The training runs (each PPO seed and the RLOO run) are independent: with idle cores they run in worker processes,
one per idle core, while the main process computes the quick sections and draws; on a busy machine they run
in-process, which is then faster (see :func:`kata.lab.workers.default_jobs`). ``--jobs N`` decides instead.

The package imports kata.concepts, kata.rl and kata.testing, and no other tool. One job a module:
:mod:`~kata.lab.commands` (its options), :mod:`~kata.lab.plan` (what a profile runs, the seed's examples),
:mod:`~kata.lab.sections` (what each section computes: the functions notebooks/lab.py and the benchmarks call too),
:mod:`~kata.lab.outcome` (a value, a skip or an error; plain data), :mod:`~kata.lab.workers` (the worker pool),
:mod:`~kata.lab.run` (one run, printed section by section), :mod:`~kata.lab.report` (report.md),
:mod:`~kata.lab.plots` (the figures) and :mod:`~kata.lab.notebook` (notebooks/lab.py and .ipynb kept in step).
"""
