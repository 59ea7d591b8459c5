"""Trajectory-optimization solvers over the ``trajopt`` plugin protocol (never ``dynamics``).

``solve(ocp, method=..., **options) -> trajopt.Solution`` dispatches to plain functions:

- ``"ddp"``: box-constrained DDP / iLQR (:mod:`solvers.ddp`).
"""

from __future__ import annotations

from trajopt.solution import Solution, Status

from .ddp import solve_ddp

METHODS = {"ddp": solve_ddp}


def solve(ocp, method: str = "ddp", **options) -> Solution:
    """Solve ``ocp`` with ``method``; options go to the method's function."""
    try:
        fn = METHODS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(sorted(METHODS))}") from None
    return fn(ocp, **options)


__all__ = ["METHODS", "Solution", "Status", "solve"]
