"""Co-design by a search over designs: trajectory optimization at a few fixed designs, then a joint polish.

A co-design OCP whose dynamics carries the design in a leading *design knot* (its control sets time-invariant
design variables, e.g. :class:`problems.design.DesignDynamics`) can be descended jointly -- DDP moves the design
and the controls together -- but a joint descent only moves the design locally, and on contact problems the
local picture can be degenerate: a throw whose every control and design variable moves the end point along one
line (``problems/design.py``, "a rank-one throw") is a stationary point for the fixed design and the co-design
alike. Whether a *different* design reaches the target is then a question of that design's own trajectory
optimization, which no derivative at the current design answers. :func:`solve_design_search` asks it:

1. for each candidate design (``dynamics.design_candidates()``: the nominal design first), the fixed-design
   problem (``dynamics.fixed_design_ocp(ocp, design)``: the same cost, the design frozen, no design knot) is
   solved by the ``inner`` method (default ``cem-ddp``, the problem's advice for it applied) with an equal share
   of the search's time; the search stops early once a candidate's metric ``stop_metric`` (one of the
   fixed-design problem's metrics, e.g. ``distance_to_target``) is at most ``stop_below`` (None: try them all);
2. the best candidate (lowest cost) becomes the co-design's start (its design in the design knot,
   ``dynamics.control_of(design)``, then its controls) and ``polish`` (default ``ddp``) descends the joint
   problem from there with the time left (:data:`POLISH_SHARE` of it when a smoothed polish, 2b., may follow, the
   best candidate missing ``stop_below``: a polish crawling across kinks used all of it, catapult-design (4.0, 0.3)
   seed 6 96 iterations in 54 s to 0.174 m, and left 2b. none), so the answer is never worse than the best fixed
   design;
2b. when that polish stalls (a kink of hard contact: contact events change along its step) or runs out of
   iterations without converging (crawling across kinks at tiny steps: catapult-design (3.95, 0.5) seed 3 ended
   its 100 iterations at 0.135 m with steps of 1e-3, then by continuation 3.6e-5 m, CONVERGED, in 1 s; 2026-11-28,
   before which only a stall led here), the answer still
   misses ``stop_below``, the dynamics offers ``with_smoothing`` and the polish method can use it, the polish runs
   again from its answer by continuation on gently relaxed contact (:func:`polish_schedule`: the finest
   ``kappa`` of the dynamics' ``"auto"`` schedule, then hard contact; :mod:`solvers.continuation` always ends on
   hard contact, whose status it reports) with :data:`SMOOTHED_POLISH_SHARE` of the time left; its answer is kept
   when its cost is lower. The same after step 3's polish ("smoothed polish 2", with the time left). Measured on
   catapult-design from stalled answers (30 s budget each): (3.3, 0.0) 1.29 cm -> 9.0e-5 m in 18 s, (3.9, 0.7)
   3.0 mm -> 7.5e-5 m in 1 s, (4.0, 0.5) 10.5 cm -> 2.1e-5 m in 6 s (all CONVERGED); (2.2, 2.2) 6.2 -> 3.9 cm,
   (3.3, 2.0) 0.29 -> 0.245 m. The whole ``"auto"`` schedule, whose first stages hover 30 mm and lose the throw,
   did worse from the same answers (3.9, 0.7: 3.6 cm; 2.2, 2.2: 11.8 cm; 3.3, 0.0 converged in 25 s, not in 14),
   and so did the finest three (4.0, 0.5: 5.2 cm; 2.2, 2.2: 10.1 cm). The candidates share 70 % of
   catapult-design's 180 s (80 % of 150 s before: the same time per candidate), leaving these polishes time;
3. when the answer still misses ``stop_below`` and at least :data:`MORE_ROUNDS_MIN` of ``time_limit`` is left
   (a polish that stalls at a kink returns most of its share), the inner method searches again at the best
   candidate's design with that time (:data:`MORE_ROUNDS_SHARE` of it), from the seeds after the ones its first
   search used (``seed + info["rounds"]``: new basins, not the same ones again), for a multi-round inner method
   only (one that reports ``rounds``, e.g. ``cem-ddp``); a lower cost is polished again with the rest. The last
   of those seeds is taken again when the time cut that round's descent short (``info["last_round_cut"]``) and
   the answer is another round's (``info["best_round"]``): the inner search ends on its budget, so its last round
   gets what is left, and nothing explored that basin. (The earlier rounds a share of the time cut short gave way
   by design: cem-ddp's ``round_share``.) Catapult-design (2.6, 2.0) seeds 0 and 1, 2026-11-29: the (0.33, 0.33)
   candidate's 25 s gave its five rounds about 11.5, 7, 3, 1 and 0.4 s, the last one's descent cut after its
   search. The further
   rounds get :data:`MORE_ROUNDS_CAP` rounds (unless the caller set ``rounds``), so their time share ends them,
   not the inner method's default count (cem-ddp's 10 ended them early: (3.3, 2.0) with a 600 s limit stopped
   after 153 s). No time is left unused while the target is missed: measured on (3.5, 1.5) seed 0, the
   candidates took 115 s of 150, the polish stalled after 4 s, and the design (0.33, 0.33) that missed by 2.8 cm
   in its 9 rounds hits within 5e-5 m at its 16th (a run of 60 rounds at that design). With the cap, the three
   misses of catapult-design's docstring ended as before ((4.1, 0.4) s0 0.107 m, (3.3, 2.0) s1 0.245 m, (2.2,
   2.2) s0 3.9 cm; 163-168 s of 180, 2026-11-27 18:18).

The nominal candidate's result is the fixed design's best with the same method and budget:
``Solution.info["candidates"]`` lists every candidate's design, cost, status and time, and
``info["fixed_design_cost"]`` the nominal one's; the same list is kept on the problem, ``ocp.info["design_search"]``
(each entry with the fixed-design problem's ``metrics``), so that the problem's metrics can report the fixed
design's result (catapult-design: ``fixed_design_distance``). The cost of a start and of the polish are the joint OCP's
(the design knot adds no cost term: problems/design.py), so they compare directly.
"""

from __future__ import annotations

import time

import numpy as np

from trajopt.solution import Status

from ._common import append_stage, finish, stage_callback

#: the share of ``time_limit`` the candidates' solves may use together (the polish gets the rest; no stage starts
#: once ``time_limit`` is spent, and each solver checks its budget between iterations, so a run ends within about
#: one iteration of it)
SEARCH_SHARE = 0.7
#: the least time a stage that starts is given (a candidate: its share of it), never 0 s, which solvers refuse
MIN_BUDGET = 1e-3
#: the share of the time left that the first polish may use when a smoothed polish may follow (module docstring, 2.)
POLISH_SHARE = 0.5
#: the share of the time left that a smoothed polish (module docstring, 2b.) may use (further rounds get the rest)
SMOOTHED_POLISH_SHARE = 0.5
#: more rounds of the inner search (module docstring, 3.) only with at least this share of ``time_limit`` left
MORE_ROUNDS_MIN = 0.05
#: the share of the time left that the further rounds may use (their polish gets the rest)
MORE_ROUNDS_SHARE = 2.0 / 3.0
#: the further rounds' round budget: enough that their time share, not the inner method's own default of rounds
#: (cem-ddp: 10), ends them (module docstring, 3.)
MORE_ROUNDS_CAP = 1000


def check_design_dynamics(dynamics) -> None:
    """A clear error when ``dynamics`` has no design knot protocol (before any solving)."""
    missing = [m for m in ("design_candidates", "fixed_design_ocp", "control_of") if not hasattr(dynamics, m)]
    if missing:
        raise TypeError(f"method 'design-search' needs a co-design dynamics with a design knot "
                        f"({', '.join(missing)} missing on {type(dynamics).__name__}); e.g. catapult-design")


def solve_design_search(ocp, *, inner: str = "cem-ddp", polish: str = "ddp", time_limit: float | None = 120.0,
                        stop_metric: str | None = None, stop_below: float = 0.0, seed: int = 0, verbose: bool = True,
                        callback=None, us_init=None, **inner_options):
    """Solve the co-design ``ocp`` by the search of the module docstring. ``inner_options`` go to every
    candidate's ``inner`` solve (over the problem's advice for ``inner``); ``seed`` to each candidate's
    search. ``us_init`` is not used (each candidate starts from its fixed-design problem's own guess). Unknown
    ``inner``/``polish`` methods and a ``stop_metric`` the fixed-design problem does not report raise
    ValueError before any solving; Ctrl-C keeps the best candidate so far (INTERRUPTED)."""
    from . import METHODS  # the dispatcher (a package-level import would be circular)

    check_design_dynamics(ocp.dynamics)
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be > 0 s, got {time_limit!r}")
    for role, name in (("inner", inner), ("polish", polish)):
        if name not in METHODS or name == "design-search":
            choices = ", ".join(sorted(m for m in METHODS if m != "design-search"))
            raise ValueError(f"design-search's {role} method must be one of {choices}, got {name!r}")
    t0 = time.perf_counter()
    dyn = ocp.dynamics
    candidates = [np.asarray(d, dtype=float) for d in dyn.design_candidates()]
    if stop_metric is not None:  # named before any solving: a misspelt metric would never stop the search
        sub = dyn.fixed_design_ocp(ocp, candidates[0])
        xs0 = sub.dynamics.rollout(sub.x0, sub.us_init)
        known = sorted(sub.metrics(xs0, sub.us_init)) if sub.metrics is not None else []
        if stop_metric not in known:
            raise ValueError(f"stop_metric {stop_metric!r} is not a metric of the fixed-design problem; its metrics: "
                             f"{', '.join(known) or 'none'}")
    history: list[dict] = []
    found: list[dict] = []  # per candidate: design, cost (the joint problem's), status, time, metrics, controls

    def now():
        return time.perf_counter() - t0

    interrupted = False
    try:
        for i, design in enumerate(candidates):
            budget = None
            if time_limit is not None:
                left = SEARCH_SHARE * time_limit - now()
                if left <= 0 and found:
                    break
                budget = max(left, MIN_BUDGET) / (len(candidates) - i)
            if verbose:
                print(f"[design-search] candidate {i + 1}/{len(candidates)}: design {np.round(design, 4).tolist()}, "
                      f"{inner}" + (f", {budget:.0f} s" if budget is not None else ""), flush=True)
            sol, entry = _fixed_design(ocp, design, inner, inner_options, budget, seed, False, f"candidate {i}",
                                       {"candidate": i}, now, history, callback)
            found.append(entry)
            metrics = entry["metrics"]
            if verbose:
                _say(entry, stop_metric)
            if sol.status == Status.INTERRUPTED:
                interrupted = True
                break
            if stop_metric is not None and metrics[stop_metric] <= stop_below:
                break
    except KeyboardInterrupt:  # between two candidates' solves (no solver was there to catch it)
        if not found:
            raise
        interrupted = True
    best = min(found, key=lambda c: c["cost"])
    cost0, design, us = best["cost"], np.asarray(best["design"]), best["us"]
    info = {"candidates": [{k: v for k, v in c.items() if k != "us"} for c in found],
            "fixed_design_cost": found[0]["cost"], "start_design": best["design"]}
    ocp.info["design_search"] = info["candidates"]
    if interrupted:
        return _finish(ocp, _unpolished(ocp, us, cost0, Status.INTERRUPTED), history, t0, info)

    def misses(a):
        return stop_metric is not None and _metric(ocp, a, stop_metric) > stop_below

    def spent():  # no stage starts once the time limit is spent (a solver checks it between its iterations only)
        return time_limit is not None and time_limit - now() <= 0

    if spent():  # the candidates used it all: their best, not claimed converged on the joint problem
        return _finish(ocp, _unpolished(ocp, us, cost0, Status.MAX_ITERATIONS,
                                        f"the time limit ({time_limit:g} s) ran out in the candidates' search, before "
                                        "the joint polish: the best candidate's answer"), history, t0, info)

    # the joint descent from the best candidate (module docstring, 2.), with POLISH_SHARE of the time left when a
    # smoothed polish may follow it (the best candidate misses; one that meets the target ends the search there)
    budget = None
    if (time_limit is not None and stop_metric is not None and _smoothable(ocp, polish)
            and best["metrics"][stop_metric] > stop_below):
        budget = POLISH_SHARE * max(time_limit - now(), MIN_BUDGET)
    answer = _polish(ocp, polish, us, cost0, design, "polish", time_limit, now, history, callback, verbose,
                     budget=budget)
    info["polish"] = answer.pop("record")
    if answer["status"] == Status.INTERRUPTED:
        return _finish(ocp, answer, history, t0, info)

    # a stalled polish again by continuation on gently relaxed contact (module docstring, 2b.)
    def unconverged_and_missed(a):  # stalled, or out of iterations crawling across kinks, and missing
        return a["status"] in (Status.STALLED, Status.MAX_ITERATIONS) and _smoothable(ocp, polish) and misses(a)

    if unconverged_and_missed(answer) and not spent():
        budget = None if time_limit is None else SMOOTHED_POLISH_SHARE * max(time_limit - now(), MIN_BUDGET)
        answer = _smoothed_polish(ocp, polish, answer, design, "smoothed polish", time_limit, now, history, callback,
                                  verbose, budget, info)
        if answer["status"] == Status.INTERRUPTED:
            return _finish(ocp, answer, history, t0, info)

    # more rounds of the inner search at the best candidate's design while the target is missed (module docstring, 3.)
    left = None if time_limit is None else time_limit - now()
    if left is not None and left >= MORE_ROUNDS_MIN * time_limit and best["rounds"] and misses(answer):
        # after the seeds its search used, or from its last one when that round's time was cut short and the
        # answer (which the polish continued) is another round's: that basin is not explored
        rounds = int(best["rounds"])
        rewind = best["last_round_cut"] and best["best_round"] is not None and best["best_round"] != rounds - 1
        more_seed = seed + rounds - (1 if rewind else 0)
        if verbose:
            print(f"[design-search] more rounds: {inner} at design {np.round(design, 4).tolist()} from seed "
                  f"{more_seed}, {MORE_ROUNDS_SHARE * left:.0f} s (the answer misses {stop_metric} <= {stop_below:g})",
                  flush=True)
        more, entry = _fixed_design(ocp, design, inner, inner_options, MORE_ROUNDS_SHARE * left, more_seed, True,
                                    "more rounds", {"stage": "more rounds"}, now, history, callback,
                                    rounds=MORE_ROUNDS_CAP)
        us2, cost2 = entry["us"], entry["cost"]
        info["more_rounds"] = {"seed": more_seed, "rounds": entry["rounds"], "cost": cost2, "status": entry["status"],
                               "time": entry["time"]}
        if verbose:
            _say(entry, stop_metric)
        if more.status == Status.INTERRUPTED:
            if cost2 < answer["cost"]:
                answer = _unpolished(ocp, us2, cost2, Status.INTERRUPTED)
            return _finish(ocp, {**answer, "status": Status.INTERRUPTED}, history, t0, info)
        if cost2 < answer["cost"] and spent():  # the rounds' answer, unpolished: no time is left for it
            answer = _unpolished(ocp, us2, cost2, Status.MAX_ITERATIONS, f"the time limit ({time_limit:g} s) ran out "
                                 "in the further rounds, before their polish: their answer")
        elif cost2 < answer["cost"]:
            again = _polish(ocp, polish, us2, cost2, design, "polish 2", time_limit, now, history, callback, verbose)
            info["polish_2"] = again.pop("record")
            if again["cost"] <= answer["cost"]:
                answer = again
                left = time_limit - now()
                if unconverged_and_missed(answer) and left >= MORE_ROUNDS_MIN * time_limit:
                    answer = _smoothed_polish(ocp, polish, answer, design, "smoothed polish 2", time_limit, now,
                                              history, callback, verbose, left, info)
    return _finish(ocp, answer, history, t0, info)


def _fixed_design(ocp, design, inner, inner_options, budget, seed, new_seed, stage, tags, now, history, callback,
                  rounds=None):
    """The ``inner`` method on the fixed-design problem at ``design`` (the problem's advice for it applied, within
    ``budget`` seconds when given; a cem search's ``seed``: the advice's own unless ``new_seed``), its iterations
    appended to ``history`` as ``stage`` and the callback's reports tagged with ``tags``. Returns ``(solution,
    entry)``, ``entry`` the search's record: design, cost (the joint problem's, its design knot first), status,
    time, the fixed-design problem's metrics, the joint controls ``us`` and the rounds a multi-round search used."""
    from . import resolve, solve

    dyn = ocp.dynamics
    sub = dyn.fixed_design_ocp(ocp, design)
    _, advice, _ = resolve(sub, inner, inner_options)
    advice.update(verbose=False, callback=stage_callback(callback, history, now(), **tags))
    if budget is not None:
        advice["time_limit"] = budget
    if new_seed:
        advice["seed"] = seed
    elif "cem" in inner:
        advice.setdefault("seed", seed)
    if rounds is not None and budget is not None and "rounds" not in inner_options:  # its time binds, not its rounds
        advice["rounds"] = rounds
    offset = now()
    sol = solve(sub, inner, **advice)
    append_stage(history, sol.history, offset, stage=stage)
    us = np.vstack([dyn.control_of(design)[None], sol.us])
    entry = {"design": np.asarray(design).tolist(), "cost": float(ocp.cost(dyn.rollout(ocp.x0, us), us)),
             "status": sol.status.value, "time": round(sol.wall_time, 2),
             "metrics": sub.metrics(sol.xs, sol.us) if sub.metrics is not None else {}, "us": us,
             "rounds": sol.info.get("rounds"), "last_round_cut": bool(sol.info.get("last_round_cut")),
             "best_round": sol.info.get("best_round")}
    return sol, entry


def _say(entry, stop_metric) -> None:
    shown = f", {stop_metric} {entry['metrics'][stop_metric]:.4g}" if stop_metric in entry["metrics"] else ""
    print(f"[design-search]   cost {entry['cost']:.6g}{shown} ({entry['status']})", flush=True)


def _polish(ocp, polish, us, cost0, design, stage, time_limit, now, history, callback, verbose, *, budget=None,
            smoothing=None) -> dict:
    """``polish`` on the joint problem from ``us`` (cost ``cost0``) with ``budget`` seconds (None: the time left),
    by continuation on the ``smoothing`` schedule (a list of kappa) when given: the answer as a dict (xs, us, cost,
    status, info, message; ``record`` for the search's info). A polish that ends above its start (it only keeps
    lower costs: a failure) gives the start back, STALLED, not claimed converged."""
    from . import solve

    if budget is None and time_limit is not None:
        budget = max(time_limit - now(), MIN_BUDGET)
    if verbose:
        how = "" if smoothing is None else f" by continuation (kappa {', '.join(f'{k:.3g}' for k in smoothing)})"
        print(f"[design-search] {stage}: {polish}{how} on the joint problem from design "
              f"{np.round(design, 4).tolist()}", flush=True)
    offset = now()
    options = {} if smoothing is None else {"smoothing": smoothing}
    sol = solve(ocp, polish, us_init=us, time_limit=budget, verbose=verbose,
                callback=stage_callback(callback, history, offset, stage=stage), **options)
    append_stage(history, sol.history, offset, stage=stage)
    record = {"status": sol.status.value, "cost": float(sol.cost), "time": round(sol.wall_time, 2)}
    if sol.cost <= cost0:
        return {"xs": sol.xs, "us": sol.us, "cost": float(sol.cost), "status": sol.status, "info": sol.info,
                "message": sol.info.get("message"), "record": record}
    return {**_unpolished(ocp, us, cost0, Status.INTERRUPTED if sol.status == Status.INTERRUPTED else Status.STALLED,
                          f"the {stage} ({polish}) ended at {sol.cost:.6g} above its start {cost0:.6g}: the start's "
                          "answer"), "record": record}


def _unpolished(ocp, us, cost, status, message=None) -> dict:
    """The search's answer (the dict :func:`_polish` returns, without ``record``) at controls ``us`` of joint cost
    ``cost`` that no polish improved: their rollout, ``status``, ``message``."""
    return {"xs": ocp.dynamics.rollout(ocp.x0, us), "us": us, "cost": cost, "status": status, "info": {},
            "message": message}


def polish_schedule(dynamics) -> list[float]:
    """The smoothing schedule of a polish from a stalled hard-contact answer (module docstring, 2b.): the finest
    ``kappa`` of ``dynamics``' ``"auto"`` schedule (:func:`contact.relaxed.auto_schedule`), then 0 (hard)."""
    from .continuation import resolve_schedule

    return resolve_schedule(dynamics, "auto")[-2:]


def _smoothed_polish(ocp, polish, answer, design, stage, time_limit, now, history, callback, verbose, budget,
                     info) -> dict:
    """``answer`` polished again by continuation on :func:`polish_schedule` within ``budget`` seconds (module
    docstring, 2b.): the lower-cost answer, INTERRUPTED when the continuation was; its record in ``info``."""
    smooth = _polish(ocp, polish, answer["us"], answer["cost"], design, stage, time_limit, now, history, callback,
                     verbose, budget=budget, smoothing=polish_schedule(ocp.dynamics))
    info[stage.replace(" ", "_")] = smooth.pop("record")
    better = smooth if smooth["cost"] < answer["cost"] else answer
    if smooth["status"] == Status.INTERRUPTED:
        return {**better, "status": Status.INTERRUPTED}
    return better


def _smoothable(ocp, polish) -> bool:
    """Whether ``polish`` can run by continuation on ``ocp``'s dynamics (module docstring, 2b.)."""
    from .continuation import SMOOTHABLE

    return polish in SMOOTHABLE and hasattr(ocp.dynamics, "with_smoothing")


def _metric(ocp, answer, name) -> float:
    """The joint problem's metric ``name`` at the answer (-inf when the problem does not report it: no further
    rounds are started for a target it cannot tell missed)."""
    figures = ocp.metrics(answer["xs"], answer["us"]) if ocp.metrics is not None else {}
    return float(figures.get(name, -np.inf))


def _finish(ocp, answer, history, t0, info):
    return finish(ocp, method="design-search", xs=answer["xs"], us=answer["us"], cost=answer["cost"], history=history,
                  status=answer["status"], t0=t0, info={**answer["info"], **info}, message=answer["message"],
                  checked=True)
