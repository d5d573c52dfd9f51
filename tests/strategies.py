"""Every Hypothesis strategy the tests use, in one place, each bounded in size and magnitude.

Sections follow the manifest's order. Bounds are part of the contract a test checks: magnitudes stay where float64
arithmetic is exact enough for the tolerances the tests state.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# ---- shared building blocks ------------------------------------------------------------------------------------

MAX_MAGNITUDE = 100.0


def floats(low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[float]:
    """Finite float64 values in [low, high] (no NaN, no infinity, no subnormals)."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def float_arrays(shape, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=floats(low, high))


def bool_arrays(shape) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.bool_, shape, elements=st.booleans())


unit_interval = st.floats(0.0, 1.0, allow_nan=False)
clip_epsilons = st.floats(0.01, 0.5, allow_nan=False)

# ---- 1. reinforce ----------------------------------------------------------------------------------------------
# (reinforce strategies)

# ---- 2. baselines ----------------------------------------------------------------------------------------------
# (baselines strategies)

# ---- 3. gae ----------------------------------------------------------------------------------------------------
# (gae strategies)

# ---- 4. clipped_surrogate --------------------------------------------------------------------------------------
# (clipped_surrogate strategies)

# ---- 5. ppo_cartpole -------------------------------------------------------------------------------------------
# (ppo_cartpole strategies)

# ---- 6. response_masks -----------------------------------------------------------------------------------------
# (response_masks strategies)

# ---- 7. token_objectives ---------------------------------------------------------------------------------------
# (token_objectives strategies)

# ---- 8. rloo_loop ----------------------------------------------------------------------------------------------
# (rloo_loop strategies)
