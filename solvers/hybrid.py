"""CEM, then a gradient method: a short stochastic search picks the basin, exact gradients finish.

Contact makes the cost landscape multi-modal (whether and how the catapult's
arm bats the box): DDP from zero torques settles in a poor basin and
single-shooting Gauss-Newton does not move at all (the box rests on the arm:
the final position barely depends on the torques), while a few cheap
cross-entropy iterations land in a basin that either gradient method then
descends to millimetres. When the local method stalls at a kink, another
round starts a fresh search with a new seed (the basin was the wrong one). The history is the CEM
iterations followed by the local solver's, round after round, on one clock.
"""

from __future__ import annotations

import dataclasses
import time

from trajopt.solution import Solution, Status

from ._common import append_stage, finish, stage_callback
from .cem import solve_cem
from .ddp import solve_ddp
from .single_shooting_gn import solve_gn
from .shooting import solve_shooting

LOCAL = {"ddp": solve_ddp, "gn": solve_gn, "shooting": solve_shooting}
#: each hybrid's name and its local method (``"cem-ddp"`` -> ``"ddp"``)
HYBRIDS = {f"cem-{m}": m for m in LOCAL}
#: a local method whose line search accepts only steps below this (``alpha``) while the cost
#: barely falls is crawling along a kink (contact events changing), not converging
KINK_STEP = 0.1


def solve_cem_then(ocp, local: str, *, cem_iterations: int = 2, population: int = 16, knots: int = 8, lead: int = 0,
                   lead_sigma: float | None = None,
                   sigma_init: float = 0.3, seed: int = 0, rounds: int = 10, max_iter: int = 200,
                   chunk: int | None = 5, min_progress: float = 1e-2, round_share: float | None = 0.5,
                   time_limit: float | None = None,
                   verbose: bool = True, callback=None, us_init=None, **local_options) -> Solution:
    """``cem_iterations`` of CEM (``population`` samples, ``knots`` control knots), then the
    ``local`` method (``"ddp"``, ``"gn"`` or ``"shooting"``) from its best controls until it converges, stops
    after ``max_iter`` iterations or the ``time_limit`` (total seconds) runs out. ``lead``, ``lead_sigma``: CEM's
    leading controls of their own (:func:`solvers.cem.solve_cem`).

    When the local method STALLS (no step decreases the cost: a kink where the contact
    events change) or crawls (line-search steps all below ``KINK_STEP`` while its cost falls
    by less than ``min_progress``, relative, over ``chunk`` iterations: a kink; None: one run of
    ``max_iter``), up to ``rounds`` rounds in all
    start again, time permitting: a fresh CEM search from the initial guess with the next seed
    (a search around a kink's controls stays in its basin: measured on the catapult), the local
    method descends from CEM's best. The answer is the best over all rounds: ``info["rounds"]`` says how many
    ran (seeds ``seed`` .. ``seed + rounds - 1``), ``info["best_round"]`` which one the answer is (0-based), and
    ``info["last_round_cut"]`` whether the time ended the last round's descent while it still progressed (it
    neither converged, stalled nor crawled: its basin is not explored).

    With a ``time_limit``, a round that is not the last may use ``round_share`` of the time
    left (None: all of it); a local descent still unfinished then counts as stalled and the
    next round starts. Measured on the catapult (40 s, 9 runs that had missed or been
    slow): with 0.5, seeds 10 and 11 now hit (16 s, 26 s), slow hits come sooner (32 -> 18 s),
    and no hit was lost.
    """
    if local not in LOCAL:
        raise ValueError(f"unknown local method {local!r}; available: {', '.join(sorted(LOCAL))}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    t0 = time.perf_counter()
    history: list[dict] = []
    best = cem = None
    ran = best_round = 0
    cut = False  # the time ended the last round's descent (info["last_round_cut"])

    def now():
        return time.perf_counter() - t0

    def run(fn, stage, r, **kwargs):
        """One stage on the hybrid's clock: its history appended, the callback shifted."""
        offset = now()
        sol = fn(ocp, verbose=verbose, callback=stage_callback(callback, history, offset), **kwargs)
        append_stage(history, sol.history, offset, stage=stage, round=r)
        return sol

    def interrupted():
        """Ctrl-C (or SIGTERM / SIGHUP through the CLI), during a stage or between two: the best answer
        so far, local descents' and searches' alike, with status INTERRUPTED."""
        kept = min((s for s in (best, cem) if s is not None), key=lambda s: s.cost)
        return finish(ocp, method=f"cem-{local}", xs=kept.xs, us=kept.us, cost=kept.cost, history=history,
                      status=Status.INTERRUPTED, t0=t0, info={"cem_cost": cem.cost, "rounds": ran,
                                                              "last_round_cut": False, "best_round": best_round})

    if round_share is not None and not 0.0 < round_share <= 1.0:
        raise ValueError(f"round_share must be in (0, 1] or None, got {round_share!r}")
    chunk = max_iter if chunk is None else chunk
    if chunk < 1 or not 0.0 <= min_progress < 1.0:
        raise ValueError(f"chunk must be >= 1 and min_progress in [0, 1), got {chunk}, {min_progress}")
    try:
        for r in range(rounds):
            remaining = None if time_limit is None else time_limit - now()
            if remaining is not None and remaining <= 0 and best is not None:
                break
            ran = r + 1
            cem = run(solve_cem, "cem", r, us_init=us_init, max_iter=cem_iterations, population=population,
                      knots=knots, lead=lead, lead_sigma=lead_sigma, sigma_init=sigma_init, seed=seed + r,
                      time_limit=remaining)
            if cem.status == Status.INTERRUPTED:  # Ctrl-C during the search: stop, with what it found
                return interrupted()
            deadline = time_limit
            if time_limit is not None and round_share is not None and r < rounds - 1:
                deadline = now() + round_share * (time_limit - now())
            sol, stalled, cut = _descend(lambda r=r, **kw: run(LOCAL[local], local, r, **kw, **local_options),
                                         cem.us, cem.cost, max_iter, chunk, min_progress, deadline, now)
            if deadline != time_limit and sol.status != Status.CONVERGED and now() >= deadline:
                stalled = True  # out of this round's share: try another basin
            if best is None or sol.cost < best.cost:
                best, best_round = sol, r
            if sol.status == Status.INTERRUPTED:
                return interrupted()
            if not stalled:
                break
    except KeyboardInterrupt:  # between two stages (no solver was there to catch it)
        if cem is None:  # nothing found yet
            raise
        return interrupted()
    # the best round's status went through the local method's checks at these controls
    return finish(ocp, method=f"cem-{local}", xs=best.xs, us=best.us, cost=best.cost, history=history,
                  status=best.status, t0=t0, info={"cem_cost": cem.cost, "rounds": ran, "last_round_cut": cut,
                                                   "best_round": best_round, **best.info},
                  message=best.info.get("message"), checked=True)


def solve_cem_ddp(ocp, **options) -> Solution:
    """CEM, then box-constrained DDP (:func:`solve_cem_then` with ``local="ddp"``)."""
    return solve_cem_then(ocp, "ddp", **options)


def solve_cem_gn(ocp, **options) -> Solution:
    """CEM, then single-shooting Gauss-Newton (:func:`solve_cem_then` with ``local="gn"``)."""
    return solve_cem_then(ocp, "gn", **options)


def solve_cem_shooting(ocp, **options) -> Solution:
    """CEM, then IPOPT shooting (:func:`solve_cem_then` with ``local="shooting"``), in one IPOPT run
    per round (``chunk=None``: a restart would drop IPOPT's barrier and quasi-Newton state),
    which stops as STALLED when its cost falls by less than 1% over 10 iterations
    (``stall_iterations``, :func:`solvers.shooting.solve_shooting`), so the next round starts."""
    options.setdefault("chunk", None)
    # 1% less cost in 10 iterations: with 5, a round 0.7 mm from the catapult's target was cut
    # (slow final convergence) and seed 0 took 8 rounds, 252 s, instead of 1 round, 68 s
    options.setdefault("stall_iterations", 10)
    return solve_cem_then(ocp, "shooting", **options)


def _descend(run, us, cost, max_iter, chunk, min_progress, time_limit, now):
    """The local method (``run(us_init=, max_iter=, time_limit=)``) from ``us`` in runs of ``chunk``
    iterations, each from the last one's controls, until it converges, stalls, crawls (cost down by
    less than ``min_progress`` over a run), runs out of iterations or time. Returns
    ``(solution, stalled, timed_out)``; a crawl counts as a stall; ``timed_out``: the time ended a descent that
    neither converged, stalled nor crawled (its basin is not explored)."""
    done = 0
    sol = None
    while done < max_iter:
        remaining = None if time_limit is None else max(time_limit - now(), 0.0)
        before = cost if sol is None else sol.cost
        run_sol = run(us_init=us, max_iter=min(chunk, max_iter - done), time_limit=remaining)
        done += max(run_sol.iterations, 1)
        if sol is None or run_sol.cost <= sol.cost:
            sol = run_sol
        us = sol.us
        if run_sol.status == Status.INTERRUPTED:  # Ctrl-C: the best run so far, marked interrupted
            return dataclasses.replace(sol, status=Status.INTERRUPTED), False, False
        if run_sol.status != Status.MAX_ITERATIONS:
            return sol, run_sol.status == Status.STALLED, False
        steps = [h["alpha"] for h in run_sol.history if "alpha" in h]
        if steps and max(steps) < KINK_STEP and before - run_sol.cost < min_progress * abs(before):
            return sol, True, False  # a crawl, also when the time ran out with it: a kink's basin, explored
        if remaining is not None and now() >= time_limit:
            return sol, False, True
    return sol, False, False
