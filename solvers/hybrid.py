"""CEM then DDP: a short stochastic search picks the basin, DDP's exact gradients finish.

Contact makes the cost landscape multi-modal (whether and how the catapult's
arm bats the box): DDP from zero torques settles in a poor basin (13.6 cm
from the target), while a few cheap cross-entropy iterations land in one that
DDP then descends to millimetres. The history is the CEM iterations followed by
the DDP ones, on one clock.
"""

from __future__ import annotations

import time

from trajopt.solution import Solution

from .cem import solve_cem
from .ddp import solve_ddp


def solve_cem_ddp(ocp, *, cem_iterations: int = 2, population: int = 16, knots: int = 8, sigma_init: float = 0.3,
                  seed: int = 0, max_iter: int = 200, time_limit: float | None = None, verbose: bool = True,
                  callback=None, us_init=None, **ddp_options) -> Solution:
    """``cem_iterations`` of CEM (``population`` samples, ``knots`` control knots), then DDP
    from its best controls until convergence, ``max_iter`` or ``time_limit`` (total seconds)."""
    t0 = time.perf_counter()
    cem = solve_cem(ocp, us_init=us_init, max_iter=cem_iterations, population=population, knots=knots,
                    sigma_init=sigma_init, seed=seed, verbose=verbose, callback=callback)
    offset = time.perf_counter() - t0
    history = [dict(h, stage="cem") for h in cem.history]

    def shifted(info):
        if callback is not None:
            callback(dict(info, time=info["time"] + offset, iteration=info["iteration"] + len(cem.history)))

    remaining = None if time_limit is None else max(time_limit - offset, 0.0)
    ddp = solve_ddp(ocp, us_init=cem.us, max_iter=max_iter, time_limit=remaining, verbose=verbose, callback=shifted,
                    **ddp_options)
    for h in ddp.history:
        history.append(dict(h, stage="ddp", time=h["time"] + offset, iteration=h["iteration"] + len(cem.history)))
    return Solution(ddp.xs, ddp.us, ddp.cost, history, ddp.status, "cem-ddp", time.perf_counter() - t0,
                    {"cem_cost": cem.cost, "cem_time": offset, **ddp.info})
