"""kata.concepts."""
