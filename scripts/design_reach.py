"""Reachability study for ``catapult-design`` (issue 14): where can the box be at the last step?

Each run solves one target with one method and seed and prints one JSON line: the design (``fixed`` at
0.25 m, given lengths ``l1,l2``, or ``co`` for the co-design), the target, the box's final point, its distance to
the target, the lengths used and the time. A far target along a ray measures the frontier in that direction
(the method's best reachable point closest to it); a grid of targets along rays measures which are hit.

    python scripts/design_reach.py --design fixed --targets 4,3 8,6 --seeds 0 1 --time 40
    python scripts/design_reach.py --design co --targets 4.5,3.5 --seeds 0
    python scripts/design_reach.py --design 0.33,0.33 --targets 4.5,3.5 --method cem-gn
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def run(design: str, target, seed: int, time_limit: float, method: str, contact: str, torque: float,
        bounds=None, options=None) -> dict:
    import problems
    from problems.design import DESIGN_TORQUE, fixed_design_ocp
    from solvers import solve

    t0 = time.perf_counter()
    if design == "co":
        kw = {} if bounds is None else {"bounds": bounds}
        ocp = problems.load("catapult-design", target=tuple(target), contact=contact, torque=torque, **kw)
        sol = solve(ocp, method, seed=seed, time_limit=time_limit, verbose=False, **(options or {}))
        n = ocp.dynamics.nsim
        lengths = sol.xs[-1, n:n + ocp.dynamics.k].tolist()
        extra = ocp.info["final_metrics"](sol.xs, sol.us)
    else:
        lengths = [0.25, 0.25] if design == "fixed" else [float(v) for v in design.split(",")]
        ocp = fixed_design_ocp(target=tuple(target), lengths=lengths, contact=contact,
                               torque=torque if torque else DESIGN_TORQUE)
        sol = solve(ocp, method, seed=seed, time_limit=time_limit, verbose=False, **(options or {}))
        extra = {}
    end = sol.xs[-1, :2]
    return {"design": design, "method": method or "default", "contact": contact, "seed": seed, "time_limit": time_limit,
            "target": list(map(float, target)), "final": end.round(5).tolist(),
            "distance": float(np.linalg.norm(end - np.asarray(target))), "lengths": [round(v, 5) for v in lengths],
            "time": round(time.perf_counter() - t0, 1), "status": str(sol.status),
            **{k: v for k, v in extra.items() if k in ("release", "design_link_contacts")}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--design", default="fixed", help="fixed | co | l1,l2")
    p.add_argument("--targets", nargs="+", required=True, help="x,y ...")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--time", type=float, default=40.0)
    p.add_argument("--method", default=None, help="a method name (default: the problem's own)")
    p.add_argument("--contact", default="lcp")
    p.add_argument("--torque", type=float, default=250.0)
    p.add_argument("--bounds", default=None, help="lower,upper (m) for the co-design")
    p.add_argument("--options", default="{}", help="solver options as JSON, e.g. '{\"lead\": 1}'")
    a = p.parse_args(argv)
    bounds = None if a.bounds is None else tuple(float(v) for v in a.bounds.split(","))
    for t in a.targets:
        target = [float(v) for v in t.split(",")]
        for seed in a.seeds:
            out = run(a.design, target, seed, a.time, a.method, a.contact, a.torque, bounds, json.loads(a.options))
            print(json.dumps({**out, "options": a.options}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
