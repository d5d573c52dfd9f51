"""Argument checking for each concept's functions, shared by exercises/ and solutions/.

Checking inputs is not what a concept teaches, so it is written once, here: a stub calls the same check as the
reference and gets clean tensors back, and every implementation rejects bad input with the same ValueError.
"""
