"""The kata's shared package: what is neither an exercise nor an answer, laid out by role.

    arrays.py   what every implementation shares: NumPy in, NumPy out; tensor in, tensor out; the argument checks
    concepts/   the course data (course.toml: concepts, hints, mistakes, variants), the stub error, the package
                exports, the loader
    rl/         the RL parts: CartPole, the networks and optimizer, the PPO and RLOO loops, the sequence task
    testing/    what the concept tests run on: the pytest plugins, Hypothesis strategies, training verdicts
    student/    the student's tools: list, hint, status, check, watch
    lab/        the lab: the seed notebook's route as one command, its report and figures
    catalogue/  the instructor's catalogue: stub generator, mistakes, variants, diagnosis, selfcheck
    grading/    the instructor's grading: grader, limits, reports, Gradescope autograder, class report
    cli.py      the ``kata`` command, whose subcommands the tool packages add

Each package imports only the packages listed after it here; ``lint-imports`` (pyproject.toml) holds that. Nothing
here ever imports ``solutions`` on behalf of ``exercises``.
"""
