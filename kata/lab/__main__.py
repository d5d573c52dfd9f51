"""``python -m kata.lab``: the same as ``kata lab``."""

import sys

from kata.lab.commands import main

if __name__ == "__main__":  # a spawned worker imports this module too: it must not run the lab again
    sys.exit(main())
