"""Time of step_derivatives with params= (all inertial parameters; and all parameters) against the state
Jacobians alone, on ur5-box (pressing state) and go1-hold (standing state), LCP. Issue 14's target: <= 1.5x.

    python scripts/bench_parameter_jacobians.py
Best of 5 repeats of the mean over n calls, at the same (x, u) (the state Jacobians reuse the kept contact
solve after the first call, as in a solver's backward pass; so does the params= call).
"""

import time

import numpy as np

from problems.legged import go1_standing_simulator, go1_standing_state
from problems.manipulators import ur5_box_bench, ur5_box_press_state, ur5_box_simulator


def best(f, n=200, repeats=5):
    f()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t) / n)
    return min(out)


def scene(name):
    if name == "ur5-box":
        sim = ur5_box_simulator()
        x = ur5_box_press_state(sim)
        u, _ = ur5_box_bench(sim, x)
    else:
        sim = go1_standing_simulator()
        x = go1_standing_state(sim)
        u = np.zeros(sim.nu)
    return sim, x, u


for name in ("ur5-box", "go1-hold"):
    sim, x, u = scene(name)
    sim.step(x, u)
    inertial = [n for n in sim.parameter_names() if n.split(":")[0] in ("mass", "com", "inertia")]
    everything = sim.parameter_names()
    t0 = best(lambda: sim.step_derivatives(x, u))
    t1 = best(lambda: sim.step_derivatives(x, u, params=inertial))
    t2 = best(lambda: sim.step_derivatives(x, u, params=everything), n=50)
    print(f"{name}: nv {sim.nv}, contacts {len(sim.contacts)}; state Jacobians {t0 * 1e6:.0f} us; "
          f"+ inertial params ({sim.parameter_size(inertial)}) {t1 * 1e6:.0f} us = {t1 / t0:.2f}x; "
          f"+ all params ({sim.parameter_size(everything)}) {t2 * 1e6:.0f} us = {t2 / t0:.2f}x")
