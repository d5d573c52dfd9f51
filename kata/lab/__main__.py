"""``python -m kata.lab``: the same as ``kata lab``, parsed by the one parser, kata.cli's."""

import sys

from kata.cli import main

if __name__ == "__main__":  # a spawned worker imports this module too: it must not run the lab again
    sys.exit(main(["lab", *sys.argv[1:]]))
