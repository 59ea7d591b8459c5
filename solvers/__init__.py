"""Trajectory-optimization solvers over the ``trajopt`` plugin protocol (never ``dynamics``).

``solve(ocp, method=..., **options) -> trajopt.Solution`` dispatches to plain functions:

- ``"ddp"``: box-constrained DDP / iLQR (:mod:`solvers.ddp`);
- ``"shooting"``: multiple shooting with IPOPT through CasADi callbacks (:mod:`solvers.shooting`),
  ``shot_length=`` steps per shot;
- ``"ipopt"``: the same with one step per shot (direct transcription);
- ``"cem"``: the cross-entropy method, a gradient-free baseline (:mod:`solvers.cem`);
- ``"gn"``: single-shooting Gauss-Newton (Levenberg-Marquardt over all controls, :mod:`solvers.single_shooting_gn`);
- ``"cem-ddp"``, ``"cem-gn"``, ``"cem-shooting"``: a short CEM search for the basin, then DDP,
  Gauss-Newton or IPOPT shooting, with fresh searches when the local method stalls
  (:mod:`solvers.hybrid`); ``search="cem"`` on ``ddp``, ``gn`` or ``shooting`` is the same;
- ``"design-search"``: co-design (a dynamics with a design knot): the fixed-design problem solved at a few
  candidate designs, then the joint problem polished from the best (:mod:`solvers.design_search`).

A problem may carry advice per method (``ocp.method_options``, from its registration):
``solve(ocp, "shooting")`` on the catapult starts from a CEM search and shoots once over the
whole horizon, because that is what works there (measured); options given here win.

``smoothing=`` runs any gradient method by continuation on relaxed contact, ending on hard
contact (:mod:`solvers.continuation`).

Least-squares (inverse) problems, ``trajopt.LeastSquares``, are solved by
``gauss_newton(problem, jacobian="analytic" | "fd")`` (:mod:`solvers.least_squares`).
"""

from __future__ import annotations

from trajopt.lsq import LeastSquares
from trajopt.protocol import check_complementarity_aware
from trajopt.solution import Solution, Status

from ._common import check_options
from .cem import solve_cem
from .design_search import solve_design_search
from .continuation import resolve_schedule, solve_continuation
from .ddp import solve_ddp
from .least_squares import gauss_newton
from .single_shooting_gn import solve_gn
from .hybrid import LOCAL, solve_cem_ddp, solve_cem_gn, solve_cem_shooting
from .shooting import check_graph_memory, solve_ipopt, solve_shooting

METHODS = {"ddp": solve_ddp, "gn": solve_gn, "shooting": solve_shooting, "ipopt": solve_ipopt, "cem": solve_cem,
           "cem-ddp": solve_cem_ddp, "cem-gn": solve_cem_gn, "cem-shooting": solve_cem_shooting,
           "design-search": solve_design_search}


#: the methods a CEM search can start (``search="cem"``): ``m`` becomes ``"cem-" + m``
SEARCHABLE = tuple(LOCAL)


def resolve(ocp, method: str | None = None, options: dict | None = None) -> tuple[str, dict, dict]:
    """What :func:`solve` will run: ``(method, options, advice)``, before any solving.

    ``method=None`` takes the problem's recipe (``ocp.default_method`` with
    ``ocp.default_options``; a problem built by hand: ``"ddp"``, no options). A named method
    takes the problem's advice for it (``ocp.method_options[method]``, may be empty). The
    options given win over both; ``advice`` is what came from the problem. ``search="cem"``
    turns ``ddp``/``gn``/``shooting`` into ``cem-ddp``/``cem-gn``/``cem-shooting``.
    Unknown methods and searches raise ValueError naming the choices.
    """
    options = dict(options or {})
    if method is None:
        method = getattr(ocp, "default_method", "ddp")
        advice = dict(getattr(ocp, "default_options", None) or {})
    else:
        advice = dict((getattr(ocp, "method_options", None) or {}).get(method, {}))
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(sorted(METHODS))}")
    options = {**advice, **options}
    search = options.pop("search", None)
    if search is not None:
        if search != "cem":
            raise ValueError(f"unknown search {search!r}; available: 'cem'")
        if method not in SEARCHABLE:
            raise ValueError(f"search='cem' applies to {', '.join(SEARCHABLE)}, not {method!r}")
        method = f"cem-{method}"
    return method, options, advice


def solve(ocp, method: str | None = None, *, smoothing=None, **options) -> Solution:
    """Solve ``ocp`` with ``method``; options go to the method's function.

    ``method=None`` uses the problem's own recipe (``ocp.default_method`` with
    ``ocp.default_options``); a named method uses the problem's advice for it, if any
    (``ocp.method_options``): :func:`resolve`. Options given here win over both.

    ``smoothing`` (``"auto"``, a number kappa, a list of them, or None / ``"none"``): solve on
    relaxed contact first and end on hard contact (:mod:`solvers.continuation`).

    A least-squares (inverse) problem raises ValueError: it is solved by :func:`gauss_newton`.

    Options no solve can use (``time_limit=0``, ``max_iter=0``, ``population=1``) raise
    ValueError naming them, before any solving (:func:`check_options`).
    """
    if isinstance(ocp, LeastSquares):
        raise ValueError(f"{ocp.name!r} is an inverse (least-squares) problem, solved by Gauss-Newton: "
                         f"solvers.gauss_newton(problem) (the CLI: trajopt solve {ocp.name}), not solve(..., "
                         f"method={method!r})")
    if smoothing is not None:
        options["smoothing"] = smoothing
    method, options, _ = resolve(ocp, method, options)
    check_options(options)
    if options.get("complementarity_aware"):
        check_complementarity_aware(ocp.dynamics)  # before any stage (CEM, continuation) runs
    if any(m in ("shooting", "ipopt", "cem-shooting") for m in (method, options.get("inner"), options.get("polish"))):
        check_graph_memory(ocp)  # before any stage (CEM, a design search) runs: a graph too big loses their work
    if "ddp" in method:  # compiled before any stage's clock starts (cem-ddp's budget covers both stages)
        from ._ddp_kernels import ensure_compiled
        ensure_compiled(options.get("verbose", True))
    smoothing = options.pop("smoothing", None)
    if smoothing is None or smoothing == "none":
        return METHODS[method](ocp, **options)
    return solve_continuation(ocp, method, METHODS, smoothing, **options)


__all__ = ["METHODS", "Solution", "Status", "check_options", "gauss_newton", "resolve", "resolve_schedule", "solve"]
