"""``python -m kata``: the same as the ``kata`` command."""

import sys

from kata.cli import main

sys.exit(main())
