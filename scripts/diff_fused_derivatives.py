"""How far the fused step Jacobians (``FusedStep.step_derivatives``, one C++ call per knot) are from the Python
path's (``Simulator._step_derivatives`` around FusedLCP's solve and Jacobian): per problem, ``rollout_derivatives``
under hash_step_rollouts.py's controls, fused and reference in one process. Prints whether the states are bit
for bit, the largest |dFx|, |dFu| relative to the largest entry, how many knots differ at all, and how many knots
had a position correction / which models are non-Euclidean (the two places Eigen's products replace numpy's).

    python scripts/diff_fused_derivatives.py [problems...]
"""
from __future__ import annotations

import sys

import numpy as np

import problems
from dynamics import Simulator


def controls(ocp, seed=0):
    rng = np.random.default_rng(seed)
    return np.clip(ocp.us_init + rng.normal(0, 0.1, ocp.us_init.shape)
                   * np.where(np.isfinite(ocp.u_upper), ocp.u_upper, 1), ocp.u_lower, ocp.u_upper)


def main(names):
    for name in names:
        ocp = problems.load(name)
        sim = ocp.dynamics
        if sim._fused_step is None:
            print(f"{name}: no fused step")
            continue
        ref = Simulator(sim.model, geometry=sim.geometry, **sim._options)
        ref._fused_step = None
        us = controls(ocp)
        xs, Fx, Fu = sim.rollout_derivatives(ocp.x0, us, data=sim.create_data())
        e = ref.create_data()
        corr = 0
        rF = [np.empty_like(Fx), np.empty_like(Fu)]
        for t in range(len(us)):
            _, a, b = ref.step_derivatives(xs[t], us[t], data=e)
            rF[0][t], rF[1][t] = a, b
            corr += e.contact is not None and e.contact.correction is not None
        xr = ref.rollout_derivatives(ocp.x0, us, data=ref.create_data())
        same_x = np.array_equal(xs, xr[0])
        out = []
        for lbl, a, b in (("Fx", Fx, xr[1]), ("Fu", Fu, xr[2])):
            d = np.abs(a - b)
            scale = np.maximum(1.0, np.abs(b).max(axis=(1, 2)))
            rel = (d.max(axis=(1, 2)) / scale).max(initial=0.0)
            nknots = int((d.max(axis=(1, 2)) > 0).sum())
            out.append(f"{lbl} max|d| {d.max(initial=0.0):.2e} rel {rel:.2e} knots differing {nknots}/{len(us)}")
        print(f"{name:15s} euclidean={sim._euclidean} corrections={corr} states equal={same_x}  " + "  ".join(out))


if __name__ == "__main__":
    main(sys.argv[1:] or ["catapult", "go1-hold", "ur5-box", "jump-worm", "talos-standing"])
