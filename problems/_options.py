"""Checks of the problems' options (vectors such as a target point or a twist, numbers, seeds, counts, the contact
model): one place, one wording."""

from __future__ import annotations

import numpy as np

from trajopt.memory import check_memory  # noqa: F401 -- the problems' size checks, from here with the others

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


#: the farthest target a catapult takes (m): they throw a few metres (``problems/design.py``), and the cost, the
#: squared distance to the target, of a target much farther swamps the solvers' relative stopping tests (DDP's
#: expected decrease below 1e-8 (1 + cost)): a target 1e9 m away was "converged" with the box 1.5 m from its start
MAX_TARGET_DISTANCE = 1e3


def target_point(value) -> np.ndarray:
    """A planar target ``(x, y)`` in m (the catapults), within :data:`MAX_TARGET_DISTANCE` of the origin."""
    p = finite_vector("target", value, 2, "(x, y)")
    if float(np.hypot(*p)) > MAX_TARGET_DISTANCE:
        raise ValueError(f"target must be within {MAX_TARGET_DISTANCE:g} m of the origin, got {p.tolist()}: the "
                         "catapults throw a few metres, and the squared distance to a target that far swamps the "
                         "solvers' relative stopping tests")
    return p


def twist(name: str, value) -> np.ndarray:
    """A free body's velocity: linear then angular, 6 numbers (the cube problems)."""
    return finite_vector(name, value, 6, "(vx, vy, vz, wx, wy, wz)")


# -- scalar options: one rule for what a number is, one wording ---------------------------------------------------

def is_real(value) -> bool:
    """A real number: a Python or numpy int or float (or a 0-d array of one), not a bool (``True`` is no torque)
    and not text."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def real(name: str, value, what: str, *, above: float | None = None, at_least: float | None = None) -> float:
    """``value`` as a float: a finite real number (:func:`is_real`), ``> above`` and ``>= at_least`` where given;
    else a ValueError naming the option, ``{name} must be {what}, got {value!r}`` (``what`` states the bound and
    the unit, e.g. ``torque must be a finite limit > 0 N m, got inf``)."""
    try:
        x = float(value) if is_real(value) else np.nan
    except OverflowError:  # an int past float's range
        x = np.nan
    if not (np.isfinite(x) and (above is None or x > above) and (at_least is None or x >= at_least)):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return x


def integer(name: str, value, low: int) -> int:
    """``value`` as an int ``>= low``: a Python or numpy integer, not a bool, not 1.5 or "1" (a seed, a count of
    steps); else a ValueError ``{name} must be an integer >= {low}, got {value!r}``."""
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= low):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def random_seed(name: str, value) -> int:
    """A random seed (``np.random.default_rng``'s): an integer >= 0."""
    return integer(name, value, 0)


#: the contact models of the problems that differentiate the step w.r.t. model parameters (system identification,
#: co-design): the hard ones :mod:`dynamics.parameters` differentiates ("penalty" has no parameter derivatives;
#: "relaxed" has, but needs a smoothing these problems' ``contact`` option does not carry)
PARAMETER_CONTACTS = ("lcp", "ncp")


def parameter_contact(value) -> str:
    """``contact`` of a problem whose derivatives include parameter derivatives: one of :data:`PARAMETER_CONTACTS`,
    refused while building (else "penalty" loads and fails with NotImplementedError in the first Jacobian)."""
    if not (isinstance(value, str) and value in PARAMETER_CONTACTS):
        raise ValueError(f"contact must be 'lcp' or 'ncp' (the contact models with parameter derivatives here: "
                         f"'penalty' has none, 'relaxed' needs a smoothing this problem does not take), got {value!r}")
    return value
