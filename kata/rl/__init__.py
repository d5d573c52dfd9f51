"""kata.rl."""
