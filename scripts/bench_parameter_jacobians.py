"""The parameter Jacobians' cost with the parameter lists the registered problems use (``trajopt bench --params``
times friction alone, the inertial parameters and all of them): step_derivatives(x, u, params=names) over
step_derivatives(x, u) at the same (x, u), on a new workspace per call (fresh: the contact solve included) and on
one that has just taken the step and keeps its solve (kept: a solver's backward pass, the step untimed). Issue
14's target: <= 1.5x.

    python scripts/bench_parameter_jacobians.py

Cases: catapult-design's two designed links (placements, masses, COMs, inertias: 32 columns) at its bench state,
ur5-sysid's inertial parameters (no contact), cube-throw's friction (in flight), and the masses and friction of
go1-hold, talos-standing and ur5-box at their bench states (in contact).
"""

import numpy as np

import problems
from problems.design import design_parameters
from trajopt.bench import bench_state, time_step_derivatives


def ratios(dyn, x, u, names, min_time=0.2):
    t0f, t0k, t1f, t1k = (time_step_derivatives(dyn, x, u, setting, min_time=min_time, **kw)
                          for kw in ({}, {"params": names}) for setting in ("fresh", "kept"))
    return t1f / t0f, t1k / t0k, int(dyn.parameter_size(names)), t0k * 1e6


def cases():
    design = problems.load("catapult-design")
    base = design.dynamics.base
    xd, ud = bench_state(design)
    yield "catapult-design, its 2 links", base, xd[:base.nx], ud, design_parameters(["arm1", "arm2"])
    sysid = problems.load("ur5-sysid")
    yield "ur5-sysid, inertial", sysid.dynamics, *sysid.info["bench_state"], sysid.info["names"]
    cube = problems.load("cube-throw")
    yield "cube-throw, friction", cube.dynamics, *bench_state(cube), ["friction"]
    for name in ("go1-hold", "talos-standing", "ur5-box"):
        ocp = problems.load(name)
        masses = [n for n in ocp.dynamics.parameter_names() if n.startswith("mass:")]
        yield f"{name}, masses", ocp.dynamics, *bench_state(ocp), masses
        yield f"{name}, friction", ocp.dynamics, *bench_state(ocp), ["friction"]


if __name__ == "__main__":
    for label, dyn, x, u, names in cases():
        fresh, kept, npar, t0 = ratios(dyn, np.asarray(x, float), np.asarray(u, float), names)
        print(f"{label:34s} {npar:4d} columns  fresh {fresh:.2f}x  kept {kept:.2f}x  (state Jacobians kept {t0:.1f} us)")
