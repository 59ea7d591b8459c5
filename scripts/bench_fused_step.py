"""The fused whole step (``Simulator._fused_step``, cpp/src/fused_step.cpp) against the Python path, in one process.

Per problem: ``sim.step`` at ``trajopt bench``'s state with the fused step on and off (off = the Python glue
around the fused contact solve, as before the fused step), and ``rollout`` of the problem's initial guess per
step (fresh workspace each call, as ``trajopt bench``): the compiled loop, a Python loop of the fused ``step``,
and the Python path. Interleaved rounds, best of each: the machine is shared and absolute times swing 2x, so
compare within one run.

    python scripts/bench_fused_step.py [problems...]      (default: catapult go1-hold jump-worm half-cheetah)
"""

from __future__ import annotations

import sys

import numpy as np

import problems
from trajopt.bench import bench_state, time_call


def main(names):
    for name in names:
        ocp = problems.load(name)
        sim = ocp.dynamics
        fs = sim._fused_step
        if fs is None:
            print(f"{name}: no fused step (contact model {sim.contact!r}, or the core is missing)")
            continue
        x, u = bench_state(ocp)
        us = np.asarray(ocp.us_init, float).reshape(-1, sim.nu)
        T = len(us)

        def loop():
            d, xx = sim.create_data(), ocp.x0
            for uu in us:
                xx = sim.step(xx, uu, data=d)

        def roll():
            sim.rollout(ocp.x0, us, data=sim.create_data())

        res = {k: [] for k in ("step fused", "step python", "rollout loop", "rollout py-loop", "rollout python")}
        for _ in range(3):
            sim._fused_step = fs
            res["step fused"].append(time_call(lambda: sim.step(x, u), min_time=0.3, repeat=10))
            res["rollout loop"].append(time_call(roll, min_time=0.5, repeat=5) / T)
            res["rollout py-loop"].append(time_call(loop, min_time=0.5, repeat=5) / T)
            sim._fused_step = None
            res["step python"].append(time_call(lambda: sim.step(x, u), min_time=0.3, repeat=10))
            res["rollout python"].append(time_call(roll, min_time=0.5, repeat=5) / T)
        sim._fused_step = fs
        m = {k: min(v) * 1e6 for k, v in res.items()}
        print(f"{name:14s} step: fused {m['step fused']:6.2f}us python {m['step python']:6.2f}us "
              f"({m['step fused'] / m['step python']:.2f}x)   rollout per step (T={T}): compiled loop "
              f"{m['rollout loop']:6.2f}us, Python loop of fused steps {m['rollout py-loop']:6.2f}us, python "
              f"{m['rollout python']:6.2f}us ({m['rollout loop'] / m['rollout python']:.2f}x)")


if __name__ == "__main__":
    main(sys.argv[1:] or ["catapult", "go1-hold", "jump-worm", "half-cheetah"])
