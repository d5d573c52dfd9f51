"""kata.rl."""

PROFILES: tuple[str, ...] = ("smoke", "full")  # the sizes of a training run: a quick end-to-end run; every seed, longer
