"""NCP vs LCP at rest on legged robots (issue 12: "NCP solve time at rest <= 1 ms per step").

For each robot: the neutral configuration (joints clamped into their limits) lowered onto
the ground z = 0 and dropped with zero torques for ``SETTLE`` steps of 1 ms (it folds and
comes to rest on its feet, shanks and trunk: several contact points per link). Reported:
the mean / median / max of ``sim.step`` over the last 0.9 s of that drop (coming to rest,
then at rest) with contact="ncp" and with contact="lcp" (each on its own trajectory), and
``sim.step`` / ``sim.step_derivatives`` repeated at the NCP rest state with both models, in
one run, so the ratios compare. ``--profile ROBOT`` prints a cProfile of an NCP drop.

    python scripts/bench_ncp_rest.py [--robots laikago go1 ...]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats

import numpy as np

from dynamics import Simulator
from dynamics.robots import example_robot_data_share
from trajopt.bench import time_call

ROBOTS = {
    "laikago": "laikago_description/urdf/laikago.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "a1": "a1_description/urdf/a1.urdf",
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",
}
SETTLE = 1500


def load(name: str, contact: str) -> Simulator:
    path = os.path.join(example_robot_data_share(), "example-robot-data", "robots", ROBOTS[name])
    return Simulator.from_urdf(path, floating_base=True, ground=0.0, friction=0.8, contact=contact, name=name)


def drop(name: str, contact: str, steps: int = SETTLE):
    """Zero-torque drop from the neutral configuration resting on the ground: the states and the
    seconds of each ``sim.step`` (warm starts from one step to the next, as in a rollout)."""
    import time
    sim = load(name, contact)
    q = sim.neutral_state()[: sim.nq].copy()
    data, gdata = sim.model.createData(), sim.contact_model.scene.create_data()
    lo, hi = q[2] - 2.0, q[2] + 1.0
    for _ in range(60):  # lowest base height without penetration
        q[2] = 0.5 * (lo + hi)
        c = sim.contact_model.scene.detect(sim.model, data, gdata, q)
        if len(c) and c.phi.min() < 0:
            lo = q[2]
        else:
            hi = q[2]
    q[2] = hi
    x, u = np.concatenate((q, np.zeros(sim.nv))), np.zeros(sim.nu)
    ts = np.empty(steps)
    for k in range(steps):
        t0 = time.perf_counter()
        x = sim.step(x, u)
        ts[k] = time.perf_counter() - t0
    return sim, x, u, ts


def bench(names, min_time=0.2, window=(600, SETTLE)):
    """Per robot: mean and max ``step`` over the settling window of its own zero-torque drop (NCP and
    LCP), then ``step`` / ``step_derivatives`` repeated at the NCP rest state with each model."""
    rows = []
    for name in names:
        rec = {"robot": name}
        for contact in ("ncp", "lcp"):
            sim, x, u, ts = drop(name, contact)
            w = ts[window[0]: window[1]] * 1e3
            rec[f"{contact}_window"] = (w.mean(), np.median(w), w.max())
            if contact == "ncp":
                x_rest = x
        for contact in ("ncp", "lcp"):
            sim = load(name, contact)
            x = x_rest
            sim.step(x, u)
            rep = sim.contacts
            rec[f"{contact}_step_ms"] = 1e3 * time_call(lambda: sim.step(x, u), min_time=min_time)
            rec[f"{contact}_deriv_ms"] = 1e3 * time_call(lambda: sim.step_derivatives(x, u), min_time=min_time)
            if contact == "ncp":
                rec["nc"] = len(rep)
                rec["modes"] = np.bincount(np.asarray(rep.modes), minlength=4).tolist()
                rec["vmax"] = float(np.abs(x[sim.nq:]).max())
        rows.append(rec)
        wn, wl = rec["ncp_window"], rec["lcp_window"]
        print(f"{name:8s} drop steps {window[0]}-{window[1]}: ncp mean {wn[0]:.3f} median {wn[1]:.3f} max {wn[2]:6.1f} ms"
              f" | lcp mean {wl[0]:.3f} median {wl[1]:.3f} max {wl[2]:6.1f} ms || at rest nc={rec['nc']} "
              f"modes(b,st,sl,sat)={rec['modes']} |v|={rec['vmax']:.0e}: step ncp {rec['ncp_step_ms']:.3f} "
              f"lcp {rec['lcp_step_ms']:.3f} ms (x{rec['ncp_step_ms'] / rec['lcp_step_ms']:.2f}), derivatives ncp "
              f"{rec['ncp_deriv_ms']:.3f} lcp {rec['lcp_deriv_ms']:.3f} ms "
              f"(x{rec['ncp_deriv_ms'] / rec['lcp_deriv_ms']:.2f})", flush=True)
    return rows


def profile(name):
    pr = cProfile.Profile()
    pr.enable()
    sim, *_ = drop(name, "ncp")
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
