"""CEM, then a gradient method: a short stochastic search picks the basin, exact gradients finish.

Contact makes the cost landscape multi-modal (whether and how the catapult's
arm bats the box): DDP from zero torques settles in a poor basin and
single-shooting Gauss-Newton does not move at all (the box rests on the arm:
the final position barely depends on the torques), while a few cheap
cross-entropy iterations land in a basin that either gradient method then
descends to millimetres. When the local method stalls at a kink, another
round of CEM samples around the best answer so far. The history is the CEM
iterations followed by the local solver's, round after round, on one clock.
"""

from __future__ import annotations

import time

from trajopt.solution import Solution, Status

from ._common import finish
from .cem import solve_cem
from .ddp import solve_ddp
from .gn import solve_gn

LOCAL = {"ddp": solve_ddp, "gn": solve_gn}


def solve_cem_then(ocp, local: str, *, cem_iterations: int = 2, population: int = 16, knots: int = 8,
                   sigma_init: float = 0.3, seed: int = 0, rounds: int = 3, max_iter: int = 200,
                   time_limit: float | None = None, verbose: bool = True, callback=None, us_init=None,
                   **local_options) -> Solution:
    """``cem_iterations`` of CEM (``population`` samples, ``knots`` control knots), then the
    ``local`` method (``"ddp"`` or ``"gn"``) from its best controls until it converges, stops
    after ``max_iter`` iterations or the ``time_limit`` (total seconds) runs out.

    When the local method STALLS (no step decreases the cost: a kink where the contact
    events change), up to ``rounds`` rounds in all start again: CEM samples around the best
    answer so far (a new seed), the local method descends from CEM's best. The answer is the
    best over all rounds.
    """
    if local not in LOCAL:
        raise ValueError(f"unknown local method {local!r}; available: {', '.join(sorted(LOCAL))}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    t0 = time.perf_counter()
    history: list[dict] = []
    best = cem = None

    def now():
        return time.perf_counter() - t0

    def merge(stage_history, stage, r, offset):
        """Append a stage's iterations on the hybrid's clock and iteration count."""
        start = len(history)
        history.extend(dict(h, stage=stage, round=r, time=h["time"] + offset, iteration=start + i)
                       for i, h in enumerate(stage_history))

    def shifted(info):
        if callback is not None:
            callback(dict(info, time=info["time"] + offset, iteration=info["iteration"] + len(history)))

    for r in range(rounds):
        remaining = None if time_limit is None else time_limit - now()
        if remaining is not None and remaining <= 0:
            break
        offset = now()
        cem = solve_cem(ocp, us_init=us_init if best is None else best.us, max_iter=cem_iterations,
                        population=population, knots=knots, sigma_init=sigma_init, seed=seed + r, verbose=verbose,
                        callback=shifted, time_limit=remaining)
        merge(cem.history, "cem", r, offset)
        if cem.status == Status.INTERRUPTED:  # Ctrl-C during the search: stop, with what it found
            best = best if best is not None and best.cost <= cem.cost else cem
            return finish(ocp, method=f"cem-{local}", xs=best.xs, us=best.us, cost=best.cost, history=history,
                          status=Status.INTERRUPTED, t0=t0, info={"cem_cost": cem.cost, "rounds": r + 1})
        offset = now()
        remaining = None if time_limit is None else max(time_limit - offset, 0.0)
        sol = LOCAL[local](ocp, us_init=cem.us, max_iter=max_iter, time_limit=remaining, verbose=verbose,
                           callback=shifted, **local_options)
        merge(sol.history, local, r, offset)
        if best is None or sol.cost < best.cost:
            best = sol
        if sol.status != Status.STALLED:
            break
    # the best round's status went through the local method's checks at these controls
    return finish(ocp, method=f"cem-{local}", xs=best.xs, us=best.us, cost=best.cost, history=history,
                  status=best.status, t0=t0, info={"cem_cost": cem.cost, "rounds": r + 1, **best.info},
                  message=best.info.get("message"), checked=True)


def solve_cem_ddp(ocp, **options) -> Solution:
    """CEM, then box-constrained DDP (:func:`solve_cem_then` with ``local="ddp"``)."""
    return solve_cem_then(ocp, "ddp", **options)


def solve_cem_gn(ocp, **options) -> Solution:
    """CEM, then single-shooting Gauss-Newton (:func:`solve_cem_then` with ``local="gn"``)."""
    return solve_cem_then(ocp, "gn", **options)
