"""What a solver returns: :class:`Solution` with a :class:`Status`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Status(str, enum.Enum):
    """How a solve ended."""

    CONVERGED = "converged"  # first-order optimal: the stopping test passed and the gradient means something
    MAX_ITERATIONS = "max_iterations"  # the iteration budget ran out (the last iterate is returned)
    STALLED = "stalled"  # no step decreased the cost, or a zero-gradient stop (info["message"] says which)
    INTERRUPTED = "interrupted"  # Ctrl-C: the last iterate is returned
    FAILED = "failed"  # the solver could not produce a usable iterate (e.g. diverged)


@dataclass
class Solution:
    """``xs`` (T+1, nx), ``us`` (T, nu), total ``cost``, per-iteration ``history`` (dicts with at
    least ``iteration``, ``cost``, ``time``), ``status``, the ``method`` name and solver ``info``
    (``info["message"]``: why the solve ended, from ``solvers._common.finish``).

    A least-squares problem (``trajopt.LeastSquares``, solved by ``solvers.gauss_newton``) has no
    trajectory: its answer is ``z`` (n,), and ``cost = 0.5 |r(z)|^2``. For it ``xs`` holds the
    iterates ``z`` (iterations+1, n) and ``us`` the answer again as one row (1, n) (``us[0]``, the
    form earlier code reads); ``z`` is None for an optimal-control solve."""

    xs: np.ndarray
    us: np.ndarray
    cost: float
    history: list = field(default_factory=list)
    status: Status = Status.MAX_ITERATIONS
    method: str = ""
    wall_time: float = 0.0
    info: dict = field(default_factory=dict)
    z: np.ndarray | None = None

    @property
    def iterations(self) -> int:
        return len(self.history)

    @property
    def success(self) -> bool:
        return self.status == Status.CONVERGED
