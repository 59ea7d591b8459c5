"""Where one step_derivatives goes, per problem at trajopt bench's state, in one process (the machine is shared:
compare within a run): the whole call on a fresh workspace (contact solve included), the same reusing the kept
solve of step(x, u) (no detection, no solve), step alone, and Pinocchio's computeABADerivatives (the bench's
ratio), plus the compiled call itself without the Python wrapper.

    python scripts/profile_step_derivatives.py [problems...]
"""
from __future__ import annotations

import sys

import numpy as np
import pinocchio as pin

import problems
from trajopt.bench import bench_state, time_call


def main(names):
    for name in names:
        ocp = problems.load(name)
        sim = ocp.dynamics
        x, u = bench_state(ocp)
        q, v = x[:sim.nq].copy(), x[sim.nq:].copy()
        d = sim.create_data()
        kept = sim.create_data()
        sim.step(x, u, data=kept)
        dd = sim.model.createData()
        tau = sim.B @ u

        def t(f):
            return time_call(f, min_time=0.2, repeat=5) * 1e6

        r = {"fresh": t(lambda: sim.step_derivatives(x, u, data=d)),
             "kept": t(lambda: sim.step_derivatives(x, u, data=kept)),
             "step": t(lambda: sim.step(x, u, data=d)),
             "pin ABAd": t(lambda: pin.computeABADerivatives(sim.model, dd, q, v, tau))}
        fs = sim._fused_step
        if fs is not None and hasattr(fs, "step_derivatives"):
            out, Fx, Fu = np.empty(sim.nx), np.empty((sim.ndx, sim.ndx)), np.empty((sim.ndx, sim.nu))
            kv, ks = kept.kept[x.tobytes() + u.tobytes()]
            ks = None if ks is None else ks.core
            r["C++ call kept"] = t(lambda: fs.step_derivatives(kept.pin, kept.geom, x, u, None, kv, ks, out, Fx, Fu))
        print(f"{name:15s} " + "  ".join(f"{k} {val:6.1f}us" for k, val in r.items())
              + f"   fresh/ABAd {r['fresh'] / r['pin ABAd']:.2f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["catapult", "go1-hold", "ur5-box", "talos-standing"])
