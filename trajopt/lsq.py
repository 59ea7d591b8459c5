"""Least-squares problems whose residuals come from the simulator (inverse problems).

    minimize_z  0.5 |r(z)|^2

``z`` (n,) are the unknowns (an initial velocity, joint torques ...), ``r`` (m,)
the residual (e.g. the difference between a simulated and an observed state)
and ``J = dr/dz`` (m, n) its Jacobian, analytical from the step Jacobians.
``solvers.gauss_newton`` solves them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class LeastSquares:
    """A least-squares problem: ``residual(z) -> r``, ``jacobian(z) -> (r, J)``, start ``z0``.

    ``metrics(z)`` maps an answer to the problem's own figures; ``dynamics`` and
    ``info`` (e.g. ``info["bench_state"]``) describe the simulator behind it. ``layout`` says what the
    entries of ``z`` are: residual, jacobian and metrics take ``z`` checked against ``z0``'s size
    (:meth:`check_unknowns`), so a wrong-sized or non-finite ``z`` is named there, not deep in a problem.
    """

    name: str
    residual: Callable[[np.ndarray], np.ndarray]
    jacobian: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    z0: np.ndarray
    dynamics: object = None
    metrics: Callable[[np.ndarray], dict] | None = None
    info: dict = field(default_factory=dict)
    layout: str = "the problem's unknowns"

    def __post_init__(self):
        self.z0 = np.asarray(self.z0, dtype=float).copy()
        if self.z0.ndim != 1 or not np.all(np.isfinite(self.z0)):
            raise ValueError(f"{self.name}: z0 must be a finite 1-D array, got shape {self.z0.shape}")
        self.residual, self.jacobian = self._checked(self.residual), self._checked(self.jacobian)
        if self.metrics is not None:
            self.metrics = self._checked(self.metrics)

    def check_unknowns(self, z) -> np.ndarray:
        """``z`` as ``z0``'s size of finite floats, or a ValueError naming z, its size and :attr:`layout` and what
        is wrong. Cheap (a shape check and ``isfinite`` on a small vector): solvers call it every iteration."""
        size = self.z0.size
        try:
            vec = np.asarray(z, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"z must be {size} numbers ({self.layout}), got {type(z).__name__} {z!r:.60}") from None
        if vec.shape != (size,):
            raise ValueError(f"z must be {size} numbers ({self.layout}), got shape {vec.shape}")
        finite = np.isfinite(vec)
        if not finite.all():
            raise ValueError(f"z must be finite, got non-finite values at indices {np.flatnonzero(~finite).tolist()}")
        return vec

    def _checked(self, fn):
        """``fn`` taking its ``z`` through :meth:`check_unknowns` first."""
        def checked(z):
            return fn(self.check_unknowns(z))
        checked.__wrapped__ = fn
        return checked

    def evaluate(self, z) -> dict:
        r = self.residual(np.asarray(z, dtype=float))
        out = {"cost": 0.5 * float(r @ r), "residual": float(np.linalg.norm(r))}
        if self.metrics is not None:
            out.update({k: float(v) for k, v in self.metrics(np.asarray(z, dtype=float)).items()})
        return out

