"""kata.catalogue."""
