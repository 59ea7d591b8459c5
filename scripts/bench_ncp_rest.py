"""NCP vs LCP at rest on legged robots (issue 12: "NCP solve time at rest <= 1 ms per step").

For each robot: the neutral configuration (joints clamped into their limits) lowered onto
the ground z = 0, held by joint PD torques around it plus gravity compensation, settled
for ``SETTLE`` steps with the LCP; at that rest state ``sim.step`` and
``sim.step_derivatives`` are timed with contact="ncp" and contact="lcp" on fresh
simulators (warm starts from repeated steps at the same state), in one run, so the ratios
compare. ``--profile ROBOT`` prints a cProfile of NCP steps instead.

    PYTHONPATH=/work/wt-ncp python scripts/bench_ncp_rest.py [--robots laikago go1 ...]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats

import numpy as np
import pinocchio as pin

from dynamics import Simulator
from dynamics.robots import example_robot_data_share
from trajopt.bench import time_call

ROBOTS = {
    "laikago": "laikago_description/urdf/laikago.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "a1": "a1_description/urdf/a1.urdf",
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",
}
SETTLE = 800


def load(name: str, contact: str) -> Simulator:
    path = os.path.join(example_robot_data_share(), "example-robot-data", "robots", ROBOTS[name])
    return Simulator.from_urdf(path, floating_base=True, ground=0.0, friction=0.8, contact=contact, name=name)


def controller(sim: Simulator, q_ref: np.ndarray, kp: float = 60.0, kd: float = 2.0):
    """Joint PD around ``q_ref`` plus gravity compensation, clipped to the torque limits."""
    model, data = sim.model, sim.model.createData()
    dofs = sim.actuated_dofs

    def u_of(x):
        q, v = x[: sim.nq], x[sim.nq:]
        g = pin.computeGeneralizedGravity(model, data, q)
        dq = pin.difference(model, q, q_ref)
        u = g[dofs] + kp * dq[dofs] - kd * v[dofs]
        return np.clip(u, sim.u_lower, sim.u_upper)

    return u_of


def rest_state(name: str):
    """(x, u) at rest on the ground (see the module docstring)."""
    sim = load(name, "lcp")
    q = sim.neutral_state()[: sim.nq].copy()
    data, gdata = sim.model.createData(), sim.contact_model.scene.create_data()
    q[2] += 1.0
    contacts = sim.contact_model.scene.detect(sim.model, data, gdata, q)
    lift = 1.0 if len(contacts) == 0 else 0.0
    # lower the base until the lowest contact point touches: detection within the margin only,
    # so bisect on the base height
    lo, hi = q[2] - 2.0, q[2]
    for _ in range(60):
        q[2] = 0.5 * (lo + hi)
        c = sim.contact_model.scene.detect(sim.model, data, gdata, q)
        if len(c) and c.phi.min() < 0:
            lo = q[2]
        else:
            hi = q[2]
    q[2] = hi
    del lift
    u_of = controller(sim, q.copy())
    x = np.concatenate((q, np.zeros(sim.nv)))
    for _ in range(SETTLE):
        x = sim.step(x, u_of(x))
    return x, u_of(x)


def bench(names, min_time=0.2):
    rows = []
    for name in names:
        x, u = rest_state(name)
        rec = {"robot": name}
        for contact in ("ncp", "lcp"):
            sim = load(name, contact)
            sim.step(x, u)
            rep = sim.contacts
            rec[f"{contact}_step_ms"] = 1e3 * time_call(lambda: sim.step(x, u), min_time=min_time)
            rec[f"{contact}_deriv_ms"] = 1e3 * time_call(lambda: sim.step_derivatives(x, u), min_time=min_time)
            st = sim.warm_start_stats
            rec[f"{contact}_warm"] = f"{st['warm_hits']}/{st['contact_steps']}"
            if contact == "ncp":
                sol = sim._data.contact.solution
                rec["nc"] = len(rep)
                rec["modes"] = np.bincount(np.asarray(rep.modes), minlength=4).tolist()
                rec["ncp_its"] = sol.iterations
                rec["vmax"] = float(np.abs(x[sim.nq:]).max())
        rows.append(rec)
        print(f"{name:8s} nc={rec['nc']:2d} modes(b,st,sl,sat)={rec['modes']} |v|={rec['vmax']:.1e}  "
              f"step ncp {rec['ncp_step_ms']:7.3f} ms  lcp {rec['lcp_step_ms']:6.3f} ms  "
              f"ratio {rec['ncp_step_ms'] / rec['lcp_step_ms']:5.2f}   "
              f"deriv ncp {rec['ncp_deriv_ms']:7.3f} ms  lcp {rec['lcp_deriv_ms']:6.3f} ms  "
              f"ratio {rec['ncp_deriv_ms'] / rec['lcp_deriv_ms']:5.2f}   warm ncp {rec['ncp_warm']} "
              f"its {rec['ncp_its']}", flush=True)
    return rows


def profile(name, n=200):
    x, u = rest_state(name)
    sim = load(name, "ncp")
    sim.step(x, u)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        sim.step(x, u)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
    print(sim.warm_start_stats)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", nargs="*", default=list(ROBOTS))
    ap.add_argument("--profile")
    a = ap.parse_args()
    if a.profile:
        profile(a.profile)
    else:
        bench(a.robots)
