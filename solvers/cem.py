"""Cross-entropy method: a gradient-free stochastic-search baseline (Nimble's Figure 7 comparison).

Each iteration samples ``population`` control sequences from a Gaussian
(mean ``us``, per-knot standard deviation ``sigma``, clipped to the bounds),
rolls each out, keeps the ``elite`` fraction with the lowest cost, and moves the
mean and standard deviation towards the elites' (smoothing ``alpha``). The best
sequence seen is returned. Controls can be parametrised by ``knots`` (piecewise
linear over the horizon), which shrinks the search space as gradient-free
methods need.
"""

from __future__ import annotations

import time

import numpy as np

from trajopt.solution import Solution, Status

from ._common import Progress, check_options, elite_count, finish, knot_weights, out_of_time, record


def _expand(P, T, lead=0):
    """Piecewise-linear controls (T, nu) from knot values P (K, nu); the first ``lead`` rows of ``P`` are the
    first ``lead`` controls themselves, the rest spread over the remaining steps."""
    if lead:
        return np.concatenate((P[:lead], _expand(P[lead:], T - lead)))
    K = len(P)
    if K == T:
        return P
    i, w = knot_weights(T, K)
    w = w[:, None]
    return (1 - w) * P[i] + w * P[i + 1]


def solve_cem(ocp, *, us_init=None, population: int = 64, elite: float = 0.1, max_iter: int = 100,
              sigma_init: float = 0.3, alpha: float = 0.8, knots: int | None = 20, seed: int = 0, lead: int = 0,
              lead_sigma: float | None = None,
              time_limit: float | None = None, tol: float = 1e-10, verbose: bool = True, callback=None) -> Solution:
    """Minimise ``ocp`` by the cross-entropy method (see the module docstring).

    ``elite``: the fraction of the ``population`` kept (``max(2, round(elite population))`` samples),
    0 < elite < 1 and fewer than all samples, else ValueError before any rollout.
    ``sigma_init`` is relative to the control bounds' half-range (1 where unbounded).
    ``lead``: the first ``lead`` controls are knots of their own, sampled but not interpolated into the
    steps after them (a knot that sets time-invariant parameters, e.g. ``catapult-design``'s design knot);
    ``knots`` then spread over the remaining steps. ``lead_sigma``: their ``sigma_init`` (None: ``sigma_init``;
    0 keeps them at ``us_init``'s).
    Stops after ``max_iter`` iterations or ``time_limit`` seconds (MAX_ITERATIONS), or when the
    sampling distribution has collapsed (its largest relative spread below ``tol``): STALLED, since a
    collapse is no optimality test (the search stopped moving, wherever it was); CEM never claims
    CONVERGED.
    """
    check_options({"population": population, "elite": elite})  # before any rollout
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    T, nu = ocp.horizon, ocp.nu
    if not (isinstance(lead, (int, np.integer)) and 0 <= lead <= T - 2):
        raise ValueError(f"lead must be a number of leading controls from 0 to horizon - 2 = {T - 2}, got {lead!r}")
    K = T - lead if knots is None else max(2, min(knots, T - lead))
    lo, hi = ocp.u_lower, ocp.u_upper
    half = np.where(np.isfinite(hi - lo), 0.5 * (hi - lo), 1.0)
    us0 = np.clip(ocp.check_controls(ocp.us_init if us_init is None else us_init), lo, hi)
    mean = us0[np.concatenate((np.arange(lead), lead + np.linspace(0, T - lead - 1, K).round().astype(int)))]
    K += lead
    std = np.broadcast_to(sigma_init * half, (K, nu)).copy()
    if lead_sigma is not None:
        std[:lead] = lead_sigma * half
    n_elite = elite_count(elite, population)
    best_us = us0
    best_cost, best_xs, _ = _evaluate(ocp, us0)
    progress = Progress("cem", verbose, ["best", "elite mean", "sigma"])
    history = []
    status, message = Status.MAX_ITERATIONS, None
    try:
        for it in range(max_iter):
            samples = mean + std * rng.standard_normal((population, K, nu))
            samples = np.clip(samples, lo, hi)
            controls = [_expand(P, T, lead) for P in samples]
            results = [_evaluate(ocp, us) for us in controls]
            broken = [err for _, _, err in results if err is not None]
            if broken and it == 0:  # the cost itself is broken, not the simulation: say so, do not rank it
                status = Status.FAILED
                message = (f"the cost is not a number at {len(broken)} of {population} samples of the first "
                           f"population, whose trajectories are finite ({broken[0]}): the problem's cost is broken "
                           "there")
                break
            costs = np.array([c for c, _, _ in results])
            order = np.argsort(costs)[:n_elite]
            elites = samples[order]
            mean = alpha * elites.mean(axis=0) + (1 - alpha) * mean
            std = alpha * elites.std(axis=0) + (1 - alpha) * std
            if costs[order[0]] < best_cost:
                best_cost, best_us, best_xs = float(costs[order[0]]), controls[order[0]], results[order[0]][1]
            info = {"iteration": it, "cost": best_cost, "best": best_cost, "elite mean": float(costs[order].mean()),
                    "sigma": float((std / half).max()), "time": time.perf_counter() - t0}
            record(info, history, progress, callback, ocp=ocp, xs=best_xs, us=best_us)
            if info["sigma"] < tol:
                status = Status.STALLED
                message = (f"the sampling distribution collapsed (relative spread {info['sigma']:.1e} < tol {tol:g}): "
                           "the search stopped moving; CEM has no optimality test, so this is not called converged")
                break
            if out_of_time(info, time_limit):
                break
    except KeyboardInterrupt:
        status = Status.INTERRUPTED
    xs = best_xs if best_xs is not None else ocp.rollout(best_us)  # (the start diverged: raises, as it should)
    cost = best_cost if status == Status.FAILED else ocp.cost(xs, best_us)
    return finish(ocp, method="cem", xs=xs, us=best_us, cost=cost, history=history, status=status,
                  t0=t0, info={"population": population, "knots": K}, progress=progress, message=message)


def _evaluate(ocp, us):
    """``(cost, states, error)`` of a control sequence: a diverging rollout costs +inf with no states
    (it is simply not an elite); a finite trajectory whose cost is NaN or raises costs +inf with
    ``error`` saying why (a broken cost, not a hard start)."""
    try:
        xs = ocp.rollout(us)
    except (RuntimeError, ValueError):
        return np.inf, None, None
    try:
        cost = ocp.cost(xs, us)
    except (ValueError, FloatingPointError) as exc:
        return np.inf, xs, f"{type(exc).__name__}: {exc}"
    if np.isnan(cost):
        return np.inf, xs, "the cost returned nan"
    return cost, xs, None
