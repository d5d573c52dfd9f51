"""Argument checking for each concept's functions, shared by exercises/ and solutions/.

Checking inputs is not what a concept teaches, so it is written once, here: a stub calls the same check as the
reference and gets clean tensors back, and every implementation rejects bad input with the same ValueError.

A check returns what it checked: one value as it is (``group_rewards`` gives the tensor), several as a NamedTuple
whose fields are named after the arguments (``gae_inputs(...).rewards``), which also unpacks like a tuple.
"""
