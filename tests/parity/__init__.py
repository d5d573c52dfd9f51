"""The parity suite: the reference against the libraries' own code (docs/parity.md). Not collected by a bare
``pytest``; run ``pytest tests/parity`` after ``pip install -e ".[parity]"``."""
