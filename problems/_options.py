"""Checks of the problems' vector options (a target point, a twist): one place, one wording."""

from __future__ import annotations

import numpy as np

_WORDS = {2: "two", 3: "three", 6: "six"}


def finite_vector(name: str, value, size: int, meaning: str = "") -> np.ndarray:
    """``value`` as ``size`` finite floats, or a ValueError naming the option, e.g. ``target must be
    two finite numbers (x, y), got 1`` (a scalar, the wrong length, NaN / inf, text)."""
    try:
        vec = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        vec = None
    if vec is None or vec.shape != (size,) or not np.isfinite(vec).all():
        words = _WORDS.get(size, str(size))
        raise ValueError(f"{name} must be {words} finite numbers{' ' + meaning if meaning else ''}, got {value!r}")
    return vec


def target_point(value) -> np.ndarray:
    """A planar target ``(x, y)`` in m (the catapults)."""
    return finite_vector("target", value, 2, "(x, y)")


def twist(name: str, value) -> np.ndarray:
    """A free body's velocity: linear then angular, 6 numbers (the cube problems)."""
    return finite_vector(name, value, 6, "(vx, vy, vz, wx, wy, wz)")
