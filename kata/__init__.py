"""The kata's shared package: what is neither an exercise nor an answer.

The manifest, the machinery that loads an implementation (``exercises``, ``solutions`` or a submitted folder),
the array and argument checks that every implementation shares, the course's environments and models, the loops'
frames, the lab, and the command line. It never imports ``solutions`` on behalf of ``exercises``.
"""

__all__ = ["manifest"]
