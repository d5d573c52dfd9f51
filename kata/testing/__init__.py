"""kata.testing."""
