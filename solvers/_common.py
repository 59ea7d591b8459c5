"""Pieces shared by the solvers: rollouts, cost evaluation, the progress table, and the one
epilogue (:func:`finish`) that decides the final status and builds the :class:`Solution`.

Honest statuses: a solver's own stopping test (a vanishing model decrease, IPOPT's KKT
test) is first-order optimality of the problem it solves, *provided the gradient it saw
means something*. On hard contact it often does not: a fingertip short of a box, or a
body resting on the floor, has an exactly zero gradient of the contact-dependent cost
with respect to the controls, so every method "converges" at once. :func:`finish` runs
:func:`gradient_reach` on every claimed convergence and turns a zero-gradient stop into
STALLED with a message saying why.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
import time

import numpy as np

from trajopt.sensitivity import trajectory_jacobians
from trajopt.solution import Solution, Status

#: a claimed optimum is a zero-gradient stop when the controls receive less than this
#: fraction of the state gradient the dynamics could carry (see :func:`gradient_reach`)
REACH_TOL = 1e-6


def knot_weights(T: int, K: int):
    """``(i, w)``: step t's controls are ``(1 - w[t]) P[i[t]] + w[t] P[i[t] + 1]`` for ``K < T`` knot
    values ``P`` spread over ``T`` steps (piecewise linear; CEM's and gn's parametrisation)."""
    s = np.linspace(0.0, K - 1.0, T)
    i = np.minimum(s.astype(int), K - 2)
    return i, s - i


def rollout(ocp, us) -> np.ndarray:
    """States (T+1, nx) under ``us``; a diverging simulation raises (SimulationError is a RuntimeError)."""
    return ocp.rollout(us)


class NonFiniteCost(ValueError):
    """The cost of a trajectory is NaN or infinite; ``where`` names the knot and the term
    (:func:`nonfinite_cost_where`) when it can be had (else None)."""

    def __init__(self, cost: float, where: str | None):
        super().__init__(f"non-finite cost {cost}" + (f": {where}" if where else ""))
        self.where = where


def finite_cost(ocp, xs, us) -> float:
    """``ocp.cost(xs, us)``; :class:`NonFiniteCost` when it is not finite (a trial iterate the solver
    must reject; at the initial guess, the solve FAILS naming it)."""
    cost = ocp.cost(xs, us)
    if not np.isfinite(cost):
        raise NonFiniteCost(cost, nonfinite_cost_where(ocp, xs, us))
    return cost


def nonfinite_cost_where(ocp, xs, us) -> str | None:
    """Where the cost of ``xs`` (T+1, nx), ``us`` (T, nu) is NaN or infinite: the first knot whose cost
    is not finite (the running cost of knot t < T, or the terminal cost) and, for a sum of costs, its
    first term that is not; None when every knot's cost is finite (or a cost raises)."""
    T = ocp.horizon
    try:
        for t in range(T + 1):
            cost, args = (ocp.running(t), (xs[t], us[t])) if t < T else (ocp.terminal_cost, (xs[t],))
            value = cost.value(*args)
            if np.isfinite(value):
                continue
            where = f"the running cost at knot {t}" if t < T else f"the terminal cost (knot {T})"
            terms = getattr(cost, "terms", None)
            if terms is not None:  # a CostSum: name the term
                for i, (w, term) in enumerate(terms):
                    if not np.isfinite(w * term.value(*args)):
                        return f"{where} is {value}: its term {i} ({type(term).__name__}, weight {w:g})"
            return f"{where} ({type(cost).__name__}) is {value}"
    except (ValueError, ArithmeticError, TypeError, AttributeError, IndexError):
        return None
    return None


def initial_cost_failure(ocp, *, method: str, xs, us, exc: Exception, t0: float, progress=None,
                         info: dict | None = None) -> Solution:
    """The FAILED :class:`Solution` of a solve whose cost at the initial guess ``xs``, ``us`` is not a
    number (``exc``, from :func:`finite_cost`): the message names the knot and the term when it can."""
    if isinstance(exc, NonFiniteCost):
        message = "at the initial guess"  # finish names the knot and the term
    else:
        message = f"the cost at the initial guess raised {type(exc).__name__}: {exc}"
    return finish(ocp, method=method, xs=xs, us=us, cost=np.nan, history=[], status=Status.FAILED, t0=t0,
                  info={**(info or {}), "error": str(exc)}, progress=progress, message=message)


def record(info: dict, history: list, progress: "Progress", callback, *, ocp=None, xs=None, us=None) -> None:
    """The end of every solver iteration: keep ``info``, show its row, hand it to the callback.

    Given the iterate (``ocp, xs, us``) and a problem with ``metrics``, ``info["metrics"]`` gets the
    problem's own figures (e.g. the catapult's distance to the target) for the convergence plot.
    """
    metrics = getattr(ocp, "metrics", None)
    if metrics is not None and xs is not None:
        info["metrics"] = {k: float(v) for k, v in metrics(np.asarray(xs), np.asarray(us)).items()}
    history.append(info)
    progress.row(info)
    if callback is not None:
        callback(info)


def append_stage(history: list, stage_history: list, offset: float, **tags) -> None:
    """Append a stage's iterations to ``history`` on the caller's clock (``time + offset``) and
    iteration count, each tagged (e.g. ``stage=``, ``round=``, ``kappa=``)."""
    start = len(history)
    history.extend(dict(h, **tags, time=h["time"] + offset, iteration=start + i) for i, h in enumerate(stage_history))


def stage_callback(callback, history: list, offset: float, **tags):
    """The callback a stage gets: the user's ``callback`` on the caller's clock and iteration count
    (None when there is none). Build it just before the stage starts."""
    if callback is None:
        return None
    start = len(history)
    return lambda info: callback(dict(info, **tags, time=info["time"] + offset, iteration=info["iteration"] + start))


def check_options(options: dict) -> None:
    """Raise ValueError naming an option no solve can use, before any solving (and before numba
    compiles anything): ``time_limit`` must be a number of seconds > 0 (None: no limit; 0, negative
    and NaN are refused), ``max_iter`` an integer >= 1, and CEM's ``population`` (``cem`` and the
    ``cem-*`` hybrids) an integer >= 2 (its elites' spread needs two samples), ``cem_iterations`` >= 1,
    ``elite`` a fraction with 0 < elite < 1 that does not keep every sample of a ``population`` > 2."""
    def integer(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    limit = options.get("time_limit")
    if limit is not None and not (isinstance(limit, numbers.Real) and not isinstance(limit, bool)
                                  and not math.isnan(limit) and limit > 0):
        raise ValueError(f"time_limit must be a number of seconds > 0 (None: no limit), got {limit!r}")
    max_iter = options.get("max_iter")
    if max_iter is not None and not (integer(max_iter) and max_iter >= 1):
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    population = options.get("population")  # cem and the cem-* hybrids
    if population is not None and not (integer(population) and population >= 2):
        raise ValueError(f"population must be an integer >= 2 (CEM keeps the best samples and their spread), "
                         f"got {population!r}")
    iterations = options.get("cem_iterations")
    if iterations is not None and not (integer(iterations) and iterations >= 1):
        raise ValueError(f"cem_iterations must be an integer >= 1, got {iterations!r}")
    elite = options.get("elite")  # cem: the fraction of the population kept
    if elite is not None:
        if not (isinstance(elite, numbers.Real) and not isinstance(elite, bool) and 0 < elite < 1):
            raise ValueError(f"elite is the fraction of CEM's population kept as elites, a number with "
                             f"0 < elite < 1 (e.g. 0.1), got {elite!r}")
        if population is not None and population > 2 and elite_count(elite, population) >= population:
            raise ValueError(f"elite={elite!r} keeps all {population} samples of the population (CEM keeps "
                             f"max(2, round(elite x population)) of them): nothing would be selected; give an "
                             f"elite fraction below {(population - 0.5) / population:.3g}")


def elite_count(elite: float, population: int) -> int:
    """How many of CEM's ``population`` samples an ``elite`` fraction keeps: ``max(2, round(elite population))``
    (their spread needs two)."""
    return max(2, int(round(elite * population)))


def renamed_option(old: str, old_value, new: str, new_value, default):
    """The value of an option that was renamed (``old`` -> ``new``): ``old_value`` when only the old name
    was given (``None``: not given), else ``new_value``; ValueError when both were given."""
    if old_value is None:
        return new_value
    if new_value != default:
        raise ValueError(f"{old} is the former name of {new}; give only {new}")
    return old_value


class NonFiniteDerivatives(ValueError):
    """A gradient the solver needs is NaN or infinite (the dynamics' Jacobians or the cost's
    derivatives): the solve FAILS naming it, rather than raising the regularization until it
    looks STALLED."""


def check_derivatives(Fx=None, Fu=None, running=None, terminal=None) -> None:
    """Raise :class:`NonFiniteDerivatives` naming the first non-finite block: the step Jacobians
    ``Fx`` (T, ndx, ndx) / ``Fu`` (T, ndx, nu) and their knot, the running costs' stacked
    derivatives (``Lx`` ... ``Luu``) and their knot, the terminal cost's."""
    def first_bad(a):
        a = np.asarray(a, dtype=float)
        if np.isfinite(a).all():
            return None
        return int(np.argwhere(~np.isfinite(a.reshape(len(a), -1) if a.ndim > 1 else a))[0][0])

    blocks = [("the step Jacobian Fx (the dynamics' step_derivatives)", Fx, True),
              ("the step Jacobian Fu (the dynamics' step_derivatives)", Fu, True)]
    for source, ders, knots in (("the running cost's", running, True), ("the terminal cost's", terminal, False)):
        if ders is not None:
            blocks += [(f"{source} {n}", getattr(ders, n), knots) for n in ("Lx", "Lu", "Lxx", "Lxu", "Luu")
                       if getattr(ders, n, None) is not None]
    for name, a, knots in blocks:
        if a is None:
            continue
        t = first_bad(a)
        if t is not None:
            where = f" at knot {t}" if knots else ""
            raise NonFiniteDerivatives(f"non-finite gradient: {name}{where} is NaN or infinite, where the "
                                       "trajectory itself is finite")


def out_of_time(info: dict, time_limit: float | None) -> bool:
    return time_limit is not None and info["time"] > time_limit


class Progress:
    """The verbose iteration table, which doubles as the progress display."""

    def __init__(self, method: str, verbose: bool, columns: list[str], stream=None):
        self.verbose = verbose
        self.columns = columns
        self.stream = stream or sys.stdout
        self.method = method
        self._rows = 0

    def row(self, info: dict) -> None:
        if not self.verbose:
            return
        if self._rows % 20 == 0:
            head = f"{'iter':>5} {'cost':>14} " + " ".join(f"{c:>10}" for c in self.columns) + f" {'time [s]':>9}"
            print(f"[{self.method}]\n{head}", file=self.stream)
        vals = " ".join(_fmt(info.get(c)) for c in self.columns)
        print(f"{info['iteration']:>5} {info['cost']:>14.6e} {vals} {info['time']:>9.2f}", file=self.stream, flush=True)
        self._rows += 1

    def done(self, status, cost, wall, message: str | None = None, iterations: int | None = None) -> None:
        if self.verbose:
            iterations = self._rows if iterations is None else iterations
            print(f"[{self.method}] {status.value}: cost {cost:.6e} after {iterations} iterations, {wall:.2f} s"
                  + (f" -- {message}" if message else ""), file=self.stream, flush=True)


def _fmt(v) -> str:
    if v is None:
        return f"{'-':>10}"
    if isinstance(v, (int, np.integer)):
        return f"{v:>10d}"
    return f"{v:>10.3e}"


@dataclasses.dataclass
class GradientReach:
    """How much of the cost's state gradient reaches the controls (:func:`gradient_reach`).

    ``carried = sum_s |S_s' Lx_s|`` and ``ceiling = sum_s |S_s|_F |Lx_s|`` over the knots
    ``s = 1..T``; ``state_gradient = sum_s |Lx_s|``; ``ratio = carried / ceiling`` (0 when the
    ceiling is 0); ``stalled``: the test's verdict.
    """

    carried: float
    ceiling: float
    state_gradient: float
    ratio: float
    stalled: bool


def sensitivity_sweep(Fx, Fu, ndx: int, nu: int):
    """Yield ``(t, S_t)`` for ``t = 0..T``: the state sensitivities ``S_t = d x_t / d u`` (ndx, T nu)
    of a single-shooting rollout with step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu):
    ``S_0 = 0``, ``S_{t+1} = Fx_t S_t + Fu_t E_t``. ``S_t`` is zero beyond its first ``t nu``
    columns; one array is updated in place after each yield (copy what you keep)."""
    T = len(Fx)
    S = np.zeros((ndx, T * nu))
    for t in range(T + 1):
        yield t, S
        if t == T:
            return
        n = t * nu
        S[:, :n + nu] = Fx[t] @ S[:, :n + nu]
        S[:, n:n + nu] += Fu[t]


def gradient_reach(ocp, xs, us, *, Fx=None, Fu=None, tol: float = REACH_TOL) -> GradientReach:
    """Does the cost's gradient with respect to the states reach the controls? (the stall test)

    At the iterate ``xs`` (T+1, nx), ``us`` (T, nu) with step Jacobians ``Fx`` (T, ndx, ndx),
    ``Fu`` (T, ndx, nu) (computed here when not given), the state sensitivities
    ``S_s = d x_s / d u`` (ndx, T nu) follow ``S_0 = 0``, ``S_{s+1} = Fx_s S_s + Fu_s E_s``.
    Knot ``s``'s state cost (the running cost's ``Lx_s``, the terminal's ``Lx_T``) sends the
    controls the gradient ``r_s = S_s' Lx_s``. The test compares, term by term (before the
    terms can cancel each other, as they do at a genuine optimum)::

        carried = sum_s |r_s|      with its ceiling      ceiling = sum_s |S_s|_F |Lx_s|

    (Cauchy-Schwarz: ``carried <= ceiling``; the ratio is free of units and of the cost's
    scale). The stop is a **zero-gradient stall** when the cost wants the states to move
    (``sum_s |Lx_s| > 0``) but ``carried <= tol * ceiling``, or no control moves any state
    (``ceiling = 0``): the dynamics' Jacobians carry none of the gradient, e.g. no contact
    yet between a hand and the box it must push, or a body resting on the floor (a clamping
    contact). At a genuine optimum the controls do receive the state gradient, and it is
    balanced by the control cost, by other knots' terms, or by active control bounds (the
    test ignores the bounds: a gradient held by a bound was carried).

    It does not judge first-order optimality itself (the solver's stopping test does) and
    costs one sweep of dense products ``Fx_s S_s`` (about ``T^2 ndx^2 nu / 2`` flops).
    """
    T, nu = ocp.horizon, ocp.nu
    if Fx is None or Fu is None:
        jac = trajectory_jacobians(ocp.dynamics, ocp.x0, us)
        Fx, Fu = jac.Fx, jac.Fu
    carried = ceiling = wanted = 0.0
    for s, S in sensitivity_sweep(Fx, Fu, ocp.ndx, nu):
        n = s * nu  # S_s is zero beyond its first n columns
        if s:
            Lx = ocp.running(s).derivatives(xs[s], us[s]).Lx if s < T else ocp.terminal_cost.derivatives(xs[s]).Lx
            size = float(np.linalg.norm(Lx))
            if size:
                wanted += size
                carried += float(np.linalg.norm(S[:, :n].T @ Lx))
                ceiling += float(np.linalg.norm(S[:, :n])) * size
    ratio = carried / ceiling if ceiling > 0 else 0.0
    stalled = bool(wanted > 0 and (ceiling == 0 or carried <= tol * ceiling))
    return GradientReach(carried, ceiling, wanted, ratio, stalled)


#: what to try after a zero-gradient stop on dynamics that can be smoothed
SMOOTHING_HINT = "try smoothing='auto' (--smoothing auto)"


def stall_message(ocp, reach: GradientReach) -> str:
    """Why a zero-gradient stop is not an optimum, and what to try."""
    hint = SMOOTHING_HINT if hasattr(ocp.dynamics, "with_smoothing") else "try another start or a gradient-free method"
    return (f"zero gradient: the cost wants the states to move (|dL/dx| = {reach.state_gradient:.3g}) but no control "
            f"can move them (the controls receive {reach.ratio:.1e} of the gradient the dynamics could carry): "
            f"no active contact carries gradient; {hint}")


def finish(ocp, *, method: str, xs, us, cost, history: list, status: Status, t0: float, info: dict | None = None,
           message: str | None = None, progress: "Progress | None" = None, Fx=None, Fu=None,
           checked: bool = False) -> Solution:
    """The one epilogue of every solver: decide the final status, then build the :class:`Solution`.

    - anything non-finite in ``xs``, ``us`` or ``cost`` -> FAILED (a non-finite cost of a finite
      trajectory names its knot and term: :func:`nonfinite_cost_where`);
    - a claimed CONVERGED is checked by :func:`gradient_reach` (with the step Jacobians
      ``Fx``, ``Fu`` at ``xs`` when the solver has them): a zero-gradient stop becomes STALLED;
    - ``info["message"]`` says why the solve ended (``message``, or the reason found here),
      and ``info["gradient_reach"]`` holds the test's figures when it ran;
    - ``progress`` prints the done line (with the message when the status is not CONVERGED).

    ``checked=True``: ``status`` and ``message`` come from a solve that went through ``finish``
    already at this ``xs, us`` (a hybrid's or a continuation's last stage): not tested again.
    """
    info = dict(info or {})
    xs, us = np.asarray(xs), np.asarray(us)
    bad = [name for name, v in (("states", xs), ("controls", us), ("cost", cost)) if not np.all(np.isfinite(v))]
    if bad and checked and status == Status.FAILED:
        pass  # a stage's FAILED, whose message names what is non-finite already
    elif bad:
        status = Status.FAILED
        where = nonfinite_cost_where(ocp, xs, us) if bad == ["cost"] else None
        message = f"non-finite {', '.join(bad)}" + (f": {where}" if where else "") + (f" ({message})" if message else "")
    elif status == Status.CONVERGED and not checked:
        try:
            reach = gradient_reach(ocp, xs, us, Fx=Fx, Fu=Fu)
        except (RuntimeError, ValueError) as exc:  # the Jacobians cannot be had at the answer
            status, message = Status.FAILED, f"the step Jacobians at the answer failed: {exc}"
        else:
            info["gradient_reach"] = dataclasses.asdict(reach)
            if reach.stalled:
                status, message = Status.STALLED, stall_message(ocp, reach)
            else:
                message = DEFAULT_MESSAGES[status] + (f" ({message})" if message else "")
    info["message"] = message or default_message(status)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress.done(status, float(cost), wall, None if status == Status.CONVERGED else info["message"],
                      iterations=len(history))
    return Solution(xs, us, float(cost), history, status, method, wall, info)


DEFAULT_MESSAGES = {
    Status.CONVERGED: "first-order optimal: the stopping test passed and the controls receive the cost's gradient",
    Status.MAX_ITERATIONS: "the iteration or time budget ran out",
    Status.STALLED: "no step decreased the cost",
    Status.INTERRUPTED: "interrupted (Ctrl-C)",
    Status.FAILED: "the solver failed",
}


#: the signal that stops the current run when it is not Ctrl-C (the CLI notes SIGTERM / SIGHUP here,
#: :func:`note_stop_signal`), so that an interrupted solver's last line names it
_STOP_SIGNAL: dict = {"name": None}


def note_stop_signal(name: str | None) -> None:
    """Which signal stops the run (``"SIGTERM"``, ``"SIGHUP"``; None or ``"SIGINT"``: Ctrl-C)."""
    _STOP_SIGNAL["name"] = name


def interrupted_message() -> str:
    """``interrupted (Ctrl-C)``, or the signal the CLI noted: ``interrupted (SIGTERM)``."""
    name = _STOP_SIGNAL["name"]
    return f"interrupted ({'Ctrl-C' if name in (None, 'SIGINT') else name})"


def default_message(status) -> str:
    """A status's message when the solver gives none (:data:`DEFAULT_MESSAGES`; an interruption names
    its signal)."""
    return interrupted_message() if status == Status.INTERRUPTED else DEFAULT_MESSAGES[status]


def error_message(exc: Exception) -> str:
    """The message of a solve stopped by ``exc`` (a SimulationError where no line search can recover)."""
    return f"stopped by an error ({type(exc).__name__}: {exc}); the last accepted iterate is returned"
