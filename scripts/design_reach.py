"""Reachability study for ``catapult-design`` (issue 14): where can the box be at the last step?

Each run solves one target with one method and seed and prints one JSON line: the design (``fixed`` at
0.25 m, given lengths ``l1,l2``, or ``co`` for the co-design), the target, the box's final point, its distance to
the target, the lengths used and the time. A far target along a ray measures the frontier in that direction
(the method's best reachable point closest to it); a grid of targets along rays measures which are hit.

    python scripts/design_reach.py --design fixed --targets 4,3 8,6 --seeds 0 1 --time 40
    python scripts/design_reach.py --design co --targets 4.5,3.5 --seeds 0
    python scripts/design_reach.py --design 0.33,0.33 --targets 4.5,3.5 --method cem-gn

``--frontier N``: no solver; N random bang-bang throws (piecewise-constant torques of 0, +-125, +-250 N m, 2-5
pieces switching in the first 350 steps) of the design, and per 15-degree direction from the start the farthest
final point (throws whose box jumps more than 5 mm in one step beyond ``dt v+``, the squeezed-box defect of
``problems/design.py``, are discarded and counted): a constructive lower bound on the design's reach.

    python scripts/design_reach.py --design fixed --frontier 5000 --seeds 3

``--motor-damping B`` (N m s, default 0: the undamped family these studies measured; the registered family
since 2026-11-27 has 25) applies to every design, fixed or co.

``--continuation STEP``: target continuation along the ray of each target: the fixed design's ``cem-ddp``
(``--time`` s) at the target, then ``ddp`` (``--step-time`` s) from the last answer at targets STEP m farther out,
while each lands within 1 cm; ``--design fixed`` keeps the nominal design, ``co`` lets DDP move the lengths too
(the augmented OCP). The same search for both: how far each follows the ray.

    python scripts/design_reach.py --design co --targets 3.8,3.6 --continuation 0.25 --step-time 30
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def run(design: str, target, seed: int, time_limit: float, method: str, contact: str, torque: float,
        bounds=None, options=None, motor_damping: float = 0.0) -> dict:
    import problems
    from problems.design import DESIGN_TORQUE, fixed_design_ocp
    from solvers import solve

    t0 = time.perf_counter()
    if design == "co":
        kw = {} if bounds is None else {"bounds": bounds}
        ocp = problems.load("catapult-design", target=tuple(target), contact=contact, torque=torque,
                            motor_damping=motor_damping, **kw)
        sol = solve(ocp, method, seed=seed, time_limit=time_limit, verbose=False, **(options or {}))
        n = ocp.dynamics.nsim
        lengths = sol.xs[-1, n:n + ocp.dynamics.k].tolist()
        extra = ocp.info["final_metrics"](sol.xs, sol.us)
    else:
        lengths = [0.25, 0.25] if design == "fixed" else [float(v) for v in design.split(",")]
        ocp = fixed_design_ocp(target=tuple(target), lengths=lengths, contact=contact,
                               torque=torque if torque else DESIGN_TORQUE, motor_damping=motor_damping)
        sol = solve(ocp, method, seed=seed, time_limit=time_limit, verbose=False, **(options or {}))
        extra = {}
    end = sol.xs[-1, :2]
    return {"design": design, "method": method or "default", "contact": contact, "seed": seed, "time_limit": time_limit,
            "target": list(map(float, target)), "final": end.round(5).tolist(),
            "distance": float(np.linalg.norm(end - np.asarray(target))), "lengths": [round(v, 5) for v in lengths],
            "time": round(time.perf_counter() - t0, 1), "status": str(sol.status),
            **{k: v for k, v in extra.items() if k in ("release", "design_link_contacts")}}


def random_frontier(lengths, n: int, seed: int, torque: float = 250.0, motor_damping: float = 0.0) -> dict:
    """The farthest final box point per 15-degree direction over ``n`` random bang-bang throws (module docstring)."""
    from problems.design import START, box_jump, design_simulator

    rng = np.random.default_rng(seed)
    sim = design_simulator(dict(zip(("arm1", "arm2"), lengths, strict=True)), torque=torque,
                           motor_damping=motor_damping)
    x0 = np.zeros(sim.nx)
    x0[:5] = START
    bins, jumps = {}, 0

    class _Dyn:  # box_jump reads nq and dt from a design dynamics' base simulator
        base, dt = sim, sim.dt

    for _ in range(n):
        k = int(rng.integers(2, 6))
        switch = np.sort(rng.integers(0, 350, k))
        switch[0] = 0
        levels = rng.choice([-torque, -torque / 2, 0.0, torque / 2, torque], (k, 3))
        us = np.zeros((500, 3))
        for t, u in zip(switch, levels, strict=True):
            us[t:] = u
        try:
            xs = sim.rollout(x0, us)
        except Exception:  # noqa: BLE001 - a diverging throw is no reach
            continue
        if box_jump(_Dyn, xs) > 5e-3:
            jumps += 1
            continue
        p = xs[-1, :2] - START[:2]
        d, a = float(np.hypot(*p)), int(np.degrees(np.arctan2(p[1], p[0])) // 15 * 15)
        if d > bins.get(a, (0.0,))[0]:
            bins[a] = (round(d, 2), (p + START[:2]).round(2).tolist())
    return {"design": list(lengths), "throws": n, "seed": seed, "box_jumps_discarded": jumps,
            "farthest_by_direction_deg": dict(sorted(bins.items()))}


def continuation(design: str, target, seed: int, time_limit: float, step: float, step_time: float,
                 contact: str = "lcp", motor_damping: float = 0.0):
    """Target continuation along the ray of ``target`` (module docstring); yields one dict per stage."""
    import problems
    from problems.design import NOMINAL_LENGTH, fixed_design_ocp
    from solvers import solve

    t0 = time.perf_counter()
    start = np.asarray(target, dtype=float)
    sol = solve(fixed_design_ocp(target=tuple(start), contact=contact, motor_damping=motor_damping), seed=seed,
                time_limit=time_limit, verbose=False)
    dist = float(np.linalg.norm(sol.xs[-1, :2] - start))
    yield {"stage": "fixed cem-ddp", "target": start.tolist(), "distance": dist, "time": round(time.perf_counter() - t0, 1)}
    us = sol.us
    if design == "co":
        dyn = problems.load("catapult-design", target=tuple(start), contact=contact,
                            motor_damping=motor_damping).dynamics
        us = np.vstack([dyn.control_of([NOMINAL_LENGTH] * dyn.k)[None], us])
    ray, k = start / np.linalg.norm(start), 1
    while dist <= 0.01:
        goal = start + ray * step * k
        ocp = (problems.load("catapult-design", target=tuple(goal), contact=contact, motor_damping=motor_damping)
               if design == "co" else fixed_design_ocp(target=tuple(goal), contact=contact, motor_damping=motor_damping))
        sol = solve(ocp, "ddp", us_init=us, time_limit=step_time, verbose=False)
        dist = float(np.linalg.norm(sol.xs[-1, :2] - goal))
        out = {"stage": f"ddp {k}", "target": goal.round(4).tolist(), "range": round(float(np.linalg.norm(goal)), 3),
               "distance": dist, "status": str(sol.status), "time": round(time.perf_counter() - t0, 1)}
        if design == "co":
            m = ocp.metrics(sol.xs, sol.us)
            out.update(lengths=[m["length_arm1"], m["length_arm2"]], box_jump=m["box_jump"])
        yield out
        us, k = sol.us, k + 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--design", default="fixed", help="fixed | co | l1,l2")
    p.add_argument("--targets", nargs="+", default=None, help="x,y ...")
    p.add_argument("--continuation", type=float, default=0.0, help="STEP (m): target continuation")
    p.add_argument("--step-time", type=float, default=15.0, help="DDP's time per continuation stage (s)")
    p.add_argument("--frontier", type=int, default=0, help="N random bang-bang throws instead of solves")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--time", type=float, default=40.0)
    p.add_argument("--method", default=None, help="a method name (default: the problem's own)")
    p.add_argument("--contact", default="lcp")
    p.add_argument("--torque", type=float, default=250.0)
    p.add_argument("--bounds", default=None, help="lower,upper (m) for the co-design")
    p.add_argument("--options", default="{}", help="solver options as JSON, e.g. '{\"lead\": 1}'")
    p.add_argument("--motor-damping", type=float, default=0.0,
                   help="N m s on the arm joints (0: the undamped family these studies measured; 25: the registered one)")
    a = p.parse_args(argv)
    if a.frontier:
        lengths = [0.25, 0.25] if a.design == "fixed" else [float(v) for v in a.design.split(",")]
        for seed in a.seeds:
            print(json.dumps(random_frontier(lengths, a.frontier, seed, a.torque, a.motor_damping)), flush=True)
        return 0
    if not a.targets:
        p.error("--targets is required (or --frontier N)")
    if a.continuation:
        for t in a.targets:
            for seed in a.seeds:
                for out in continuation(a.design, [float(v) for v in t.split(",")], seed, a.time, a.continuation,
                                        a.step_time, a.contact, a.motor_damping):
                    print(json.dumps({"design": a.design, "seed": seed, **out}), flush=True)
        return 0
    bounds = None if a.bounds is None else tuple(float(v) for v in a.bounds.split(","))
    for t in a.targets:
        target = [float(v) for v in t.split(",")]
        for seed in a.seeds:
            out = run(a.design, target, seed, a.time, a.method, a.contact, a.torque, bounds, json.loads(a.options),
                      a.motor_damping)
            print(json.dumps({**out, "options": a.options}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
