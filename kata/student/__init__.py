"""kata.student."""
