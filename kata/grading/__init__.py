"""The instructor's grading; it may import every layer below it (the catalogue for the diagnoses), never kata.cli.

    commands.py      `kata grade` and `kata autograder`
    grader.py        one submission: per-concept views, a fresh copy, the pytest subprocess, points and statuses
    batch.py         many submissions, several at a time, the reports rewritten after each
    workspace.py     the fresh copy a run works in, and the per-concept views of a submission
    limits.py        resource limits and the reaping of every process a run started
    sandbox.py       the bubblewrap sandbox a run of submitted code sees: its copy, the interpreter, nothing else
    guard.py         the pytest plugin that forbids a submission to import the answers
    results.py       what grading finds, and the reports (Markdown, JSON, CSV, Gradescope)
    diagnoses.py     the diagnosis of a graded submission, in throwaway copies
    autograder.py    the Gradescope autograder: its zip, and its run inside Gradescope
    class_report.py  the class's misconceptions, concept by concept
"""
