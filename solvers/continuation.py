"""Continuation on relaxed contact: solve with soft contact first, end on hard contact.

The exact gradient of hard contact is zero where no contact exists yet (a fingertip
short of a box) and carries nothing about contacts that could be made. A dynamics
that offers ``with_smoothing(kappa)`` (``dynamics.Simulator``: complementarity on the
central path, :mod:`contact.relaxed`) has gradients that see contacts before they
happen. :func:`solve_continuation` runs a method on a schedule of ``kappa`` values
down to 0, each stage warm-started from the previous stage's controls, and **always
ends on hard contact**: the returned trajectory, cost, metrics and status are those of
the exact physics (the hard problem), and ``Solution.info["stages"]`` reports every
stage (its ``kappa``, iterations, time, its own cost and the hard cost of its controls).

Schedules (``smoothing=``): ``"auto"`` -- :func:`contact.relaxed.auto_schedule` on the
dynamics' ``smoothing_scale`` (a typical body's weight; ``kappa`` = weight x a hover
distance of 30, 10, 3, 1, 0.3 mm, then 0), a number ``kappa > 0`` (that, then 0), or a
sequence of numbers (0 appended when missing). ``"none"`` (or None) solves the hard
problem only.

Time: each smoothed stage may use an equal share of 60% of ``time_limit``; the hard
stage gets what is left. The first stage runs the method as asked (``"cem-ddp"``: its
search, then DDP); later stages run its local part (``"ddp"``) from the previous
controls.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from collections.abc import Sequence

from trajopt.solution import Solution, Status

from ._common import SMOOTHING_HINT, append_stage, finish, stage_callback
from .hybrid import HYBRIDS, LOCAL

#: methods whose later stages run a different (local) method
LOCAL_STAGE = HYBRIDS
#: methods that can use smoothing (all but the gradient-free CEM)
SMOOTHABLE = (*LOCAL, "ipopt", *HYBRIDS)
#: share of the time limit the smoothed stages may use together
SMOOTHED_SHARE = 0.6


def resolve_schedule(dynamics, smoothing) -> list[float]:
    """The ``kappa`` values of a ``smoothing=`` option (see the module docstring), ending with 0.

    Raises ``ValueError`` naming the choices on an unknown name or a negative / non-finite
    value, and ``TypeError`` when the dynamics cannot be smoothed.
    """
    if smoothing is None or (isinstance(smoothing, str) and smoothing == "none"):
        return [0.0]
    if isinstance(smoothing, str):
        if smoothing != "auto":
            try:
                smoothing = float(smoothing)
            except ValueError:
                raise ValueError(f"unknown smoothing {smoothing!r}; choose 'auto', 'none' or a number "
                                 "kappa >= 0 (J)") from None
    if not hasattr(dynamics, "with_smoothing"):
        raise TypeError(f"the dynamics {type(dynamics).__name__} has no with_smoothing(kappa): it cannot be "
                        "solved with smoothing (use smoothing='none')")
    if isinstance(smoothing, str):  # "auto"
        from contact.relaxed import auto_schedule  # the schedule's units are the simulator's

        return auto_schedule(dynamics.smoothing_scale)
    values = list(smoothing) if isinstance(smoothing, Sequence) else [smoothing]
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"smoothing values must be finite numbers kappa >= 0 (J), got {v!r}")
        out.append(float(v))
    if not out or out[-1] != 0.0:
        out.append(0.0)
    return out


def _accepted(fn, options: dict) -> dict:
    """The ``options`` that ``fn`` takes: a hybrid's later stages run its local method, which
    has no use for the search's options (``seed``, ``population``, ...)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return options
    return {k: v for k, v in options.items() if k in params}


def check_smoothing(method: str, smoothing) -> None:
    """A clear error, before any solving, when ``method`` cannot use ``smoothing``."""
    if smoothing is None or smoothing == "none":
        return
    if method not in SMOOTHABLE:
        why = ("it smooths by itself: its polish goes on by continuation when it stalls" if method == "design-search"
               else "it uses no gradients")
        raise ValueError(f"method {method!r} cannot use smoothing ({why}); methods that can: {', '.join(SMOOTHABLE)}")


def solve_continuation(ocp, method: str, methods: dict, smoothing="auto", *, time_limit: float | None = None,
                       verbose: bool = True, callback=None, us_init=None, **options) -> Solution:
    """Solve ``ocp`` by ``method`` along the ``smoothing`` schedule, ending on hard contact.

    ``methods`` maps method names to solver functions (``solvers.METHODS``); ``options``
    go to every stage's solver (``max_iter`` per stage). See the module docstring.
    """
    check_smoothing(method, smoothing)
    schedule = resolve_schedule(ocp.dynamics, smoothing)
    t0 = time.perf_counter()
    hard_dyn = ocp.dynamics.hard if hasattr(ocp.dynamics, "hard") else ocp.dynamics
    hard = dataclasses.replace(ocp, dynamics=hard_dyn) if hard_dyn is not ocp.dynamics else ocp
    us = ocp.us_init if us_init is None else us_init
    history: list[dict] = []
    stages: list[dict] = []
    n_soft = len(schedule) - 1
    sol = None
    interrupted = False
    try:
        for k, kappa in enumerate(schedule):
            elapsed = time.perf_counter() - t0
            if time_limit is None:
                budget = None
            elif kappa > 0:
                budget = min(SMOOTHED_SHARE * time_limit / n_soft, SMOOTHED_SHARE * time_limit - elapsed)
                if budget <= 0:
                    continue  # out of smoothing time: go to the hard stage
            else:
                budget = max(time_limit - elapsed, 0.0)
            stage_ocp = hard if kappa == 0 else dataclasses.replace(ocp, dynamics=hard_dyn.with_smoothing(kappa))
            name = method if sol is None else LOCAL_STAGE.get(method, method)
            if verbose:
                print(f"[continuation] stage {k + 1}/{len(schedule)}: kappa = {kappa:.3g}"
                      f"{' (hard contact)' if kappa == 0 else ''}, {name}", flush=True)
            offset = time.perf_counter() - t0
            stage_options = options if name == method else _accepted(methods[name], options)
            sol = methods[name](stage_ocp, us_init=us, time_limit=budget, verbose=verbose,
                                callback=stage_callback(callback, history, offset, kappa=kappa), **stage_options)
            append_stage(history, sol.history, offset, stage=k, kappa=kappa)
            entry = {"kappa": kappa, "method": name, "status": sol.status.value, "iterations": sol.iterations,
                     "time": sol.wall_time, "cost": sol.cost}
            if sol.status == Status.FAILED and kappa > 0:
                # a smoothed stage that failed (e.g. its dynamics diverged) is skipped: the next stage
                # starts from the controls this one started from
                entry["error"] = sol.info.get("message", "failed")
                stages.append(entry)
                continue
            us = sol.us
            if kappa > 0:
                try:
                    entry["hard_cost"] = hard.cost(hard.rollout(us), us)
                except (RuntimeError, ValueError) as exc:
                    entry["hard_cost"] = math.inf
                    entry["error"] = str(exc)
            stages.append(entry)
            if sol.status == Status.INTERRUPTED and kappa > 0:
                break  # end on hard contact with what we have
    except KeyboardInterrupt:  # between two stages, or before a stage's solver could catch it
        if sol is None:  # nothing found yet
            raise
        interrupted = True
    if interrupted or (schedule[-1] == 0.0 and (not stages or stages[-1]["kappa"] != 0.0)):
        # interrupted or out of time while smoothed: the answer is still judged on hard contact
        xs = hard.rollout(us)
        status = Status.INTERRUPTED if interrupted or sol.status == Status.INTERRUPTED else Status.MAX_ITERATIONS
        return finish(hard, method=f"{method}+continuation", xs=xs, us=us, cost=hard.cost(xs, us), history=history,
                      status=status, t0=t0, info=dict(sol.info, stages=stages),
                      message="stopped before the hard-contact stage; the result is the last smoothed controls "
                              "simulated with hard contact")
    # the status is the hard stage's, checked there (a zero-gradient stop on hard contact is STALLED)
    message = sol.info.get("message")
    if message and sol.status == Status.STALLED:
        message = message.replace(SMOOTHING_HINT, "even after smoothing: try a longer schedule or more iterations")
    return finish(hard, method=f"{method}+continuation", xs=sol.xs, us=sol.us, cost=sol.cost, history=history,
                  status=sol.status, t0=t0, info=dict(sol.info, stages=stages, schedule=schedule), message=message,
                  checked=True)
