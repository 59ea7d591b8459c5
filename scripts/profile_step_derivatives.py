"""Where one step_derivatives goes, per problem at trajopt bench's state, in one process (the machine is shared:
compare within a run): the whole call on a fresh workspace (contact solve included), the same reusing the kept
solve of step(x, u) (no detection, no solve), step alone, and Pinocchio's computeABADerivatives (the bench's
ratio), plus the compiled call itself without the Python wrapper.

``--params``: also the same two kept calls with every parameter of the problem (``params=sim.parameter_names()``,
the compiled call given the parameter plan), and the ratios with and without the Python around the compiled call
(``trajopt bench --params`` times the first, per call on a new workspace).

    python scripts/profile_step_derivatives.py [--params] [problems...]
"""
from __future__ import annotations

import sys

import numpy as np
import pinocchio as pin

import problems
from trajopt.bench import bench_state, time_call


def main(names, params=False):
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
            entry = kept.kept.get(x.tobytes() + u.tobytes())  # none without contact: nothing to keep
            args = ((sim._fused_previous(kept), None, None) if entry is None
                    else (None, entry[0], None if entry[1] is None else entry[1].core))
            r["C++ call kept"] = t(lambda: fs.step_derivatives(kept.pin, kept.geom, x, u, *args, out, Fx, Fu))
            if params and sim.parameter_names():
                from dynamics import parameters

                names = sim.parameter_names()
                plan = parameters._workspace(sim).plan(sim, parameters.resolve(sim, names))
                Fp = np.empty((sim.ndx, sim.parameter_size(names)))
                r["kept all"] = t(lambda: sim.step_derivatives(x, u, data=kept, params=names))
                r["C++ call kept all"] = t(lambda: fs.step_derivatives(kept.pin, kept.geom, x, u, *args, out, Fx, Fu,
                                                                      plan, Fp))
        line = f"{name:15s} " + "  ".join(f"{k} {val:6.1f}us" for k, val in r.items())
        line += f"   fresh/ABAd {r['fresh'] / r['pin ABAd']:.2f}x"
        if "kept all" in r:
            line += (f"   all/state kept {r['kept all'] / r['kept']:.2f}x, C++ call alone "
                     f"{r['C++ call kept all'] / r['C++ call kept']:.2f}x")
        print(line, flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--params"]
    main(args or ["catapult", "go1-hold", "ur5-box", "talos-standing"], params="--params" in sys.argv[1:])
