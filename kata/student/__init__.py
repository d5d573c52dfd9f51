"""The student's tools: `kata list`, `hint`, `status`, `check`, `watch`; they import kata.concepts and kata.testing,
and nothing of the catalogue or of grading (a student edition holds neither).

    commands.py  the five commands and their options
    status.py    where a student stands, from the parsed sources and the recorded results, without running a test
    watch.py     running a check again after every change
"""
