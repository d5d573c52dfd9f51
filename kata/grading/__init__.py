"""kata.grading."""
