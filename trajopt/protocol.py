"""The plugin protocol: what a solver may assume about a differentiable step.

Any object with these members plugs in (structural typing: no base class to
inherit): ``dynamics.Simulator``, a user's own step, a wrapped CasADi function.
Sizes follow the package notation (``nx``, ``ndx``, ``nu``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Dynamics(Protocol):
    """A discrete-time differentiable step ``x+ = f(x, u)`` on a state manifold.

    - ``step(x, u) -> x+`` (nx,)
    - ``step_derivatives(x, u) -> (x+, Fx, Fu)`` with ``Fx`` (ndx, ndx), ``Fu`` (ndx, nu)
      in the tangent space of the state manifold
    - ``state_integrate(x, dx) -> x (+) dx`` and ``state_difference(x0, x1) -> dx``
      with ``x1 = x0 (+) dx``
    """

    nx: int
    ndx: int
    nu: int

    def step(self, x: np.ndarray, u: np.ndarray) -> np.ndarray: ...

    def step_derivatives(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def state_integrate(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray: ...

    def state_difference(self, x0: np.ndarray, x1: np.ndarray) -> np.ndarray: ...


def check_dynamics(obj) -> None:
    """Raise ``TypeError`` naming what ``obj`` lacks to be used as dynamics."""
    missing = [m for m in ("nx", "ndx", "nu", "step", "step_derivatives", "state_integrate", "state_difference")
               if not hasattr(obj, m)]
    if missing:
        raise TypeError(f"{type(obj).__name__} cannot be used as dynamics: it lacks {', '.join(missing)} "
                        "(see trajopt.Dynamics)")


def difference_jacobians(dyn, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Jacobians of ``dyn.state_difference(x0, x1)`` w.r.t. x0 and x1 (ndx x ndx each).

    Uses ``dyn.state_difference_jacobians`` when the dynamics offers it; a plain
    vector state (``nx == ndx``) gives ``(-I, I)``.
    """
    f = getattr(dyn, "state_difference_jacobians", None)
    if f is not None:
        return f(x0, x1)
    if dyn.nx != dyn.ndx:
        raise TypeError(f"{type(dyn).__name__} has a non-Euclidean state (nx={dyn.nx}, ndx={dyn.ndx}) "
                        "but no state_difference_jacobians")
    eye = np.eye(dyn.ndx)
    return -eye, eye.copy()
