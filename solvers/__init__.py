"""Trajectory-optimization solvers over the ``trajopt`` plugin protocol (never ``dynamics``).

``solve(ocp, method=..., **options) -> trajopt.Solution`` dispatches to plain functions:

- ``"ddp"``: box-constrained DDP / iLQR (:mod:`solvers.ddp`);
- ``"shooting"``: multiple shooting with IPOPT through CasADi callbacks (:mod:`solvers.shooting`),
  ``shot_length=`` steps per shot;
- ``"ipopt"``: the same with one step per shot (direct transcription);
- ``"cem"``: the cross-entropy method, a gradient-free baseline (:mod:`solvers.cem`);
- ``"gn"``: single-shooting Gauss-Newton (Levenberg-Marquardt over all controls, :mod:`solvers.gn`);
- ``"cem-ddp"``, ``"cem-gn"``: a short CEM search for the basin, then DDP or Gauss-Newton
  (:mod:`solvers.hybrid`).

``smoothing=`` runs any gradient method by continuation on relaxed contact, ending on hard
contact (:mod:`solvers.continuation`).

Least-squares (inverse) problems, ``trajopt.LeastSquares``, are solved by
``gauss_newton(problem, jacobian="analytic" | "fd")`` (:mod:`solvers.gauss_newton`).
"""

from __future__ import annotations

from trajopt.solution import Solution, Status

from .cem import solve_cem
from .continuation import resolve_schedule, solve_continuation
from .ddp import solve_ddp
from .gauss_newton import gauss_newton
from .gn import solve_gn
from .hybrid import solve_cem_ddp, solve_cem_gn
from .shooting import solve_ipopt, solve_shooting

METHODS = {"ddp": solve_ddp, "gn": solve_gn, "shooting": solve_shooting, "ipopt": solve_ipopt, "cem": solve_cem,
           "cem-ddp": solve_cem_ddp, "cem-gn": solve_cem_gn}


def solve(ocp, method: str | None = None, *, smoothing=None, **options) -> Solution:
    """Solve ``ocp`` with ``method``; options go to the method's function.

    ``method=None`` uses the problem's own recipe: ``ocp.default_method`` with
    ``ocp.default_options`` (a problem built by hand defaults to ``"ddp"``, no options); options
    given here win over the recipe's. A method named here runs as asked, without the recipe.

    ``smoothing`` (``"auto"``, a number kappa, a list of them, or None / ``"none"``): solve on
    relaxed contact first and end on hard contact (:mod:`solvers.continuation`).
    """
    if method is None:
        defaults = dict(getattr(ocp, "default_options", None) or {})
        recipe_smoothing = defaults.pop("smoothing", None)
        smoothing = recipe_smoothing if smoothing is None else smoothing
        options = {**defaults, **options}
        method = getattr(ocp, "default_method", "ddp")
    try:
        fn = METHODS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(sorted(METHODS))}") from None
    if smoothing is None or smoothing == "none":
        return fn(ocp, **options)
    return solve_continuation(ocp, method, METHODS, smoothing, **options)


__all__ = ["METHODS", "Solution", "Status", "gauss_newton", "resolve_schedule", "solve"]
