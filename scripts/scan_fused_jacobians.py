#!/usr/bin/env python
"""Fused (cpp/src/step.cpp) vs reference step Jacobians on every registered contact problem under random
controls (seeds 0..SEEDS-1, scales 0.3 and 1; T = 40 steps, 300 for the cube problems, whose cube starts in the
air; NCP problems run with contact="lcp", as tests/test_core_fused.py does). ref = the pure Python path
(fused None, kin.core None, adapter._core None); "mode splits" = steps where the two LCP solves picked different
active sets (degenerate LCPs: the choice follows the last bits of A); "same state" = the Python Jacobian
path run on the fused step's own contact solution (the Jacobian translation alone, apart from the solve).
Usage: SEEDS=3 python scripts/scan_fused_jacobians.py [problem ...]"""

import sys
import numpy as np
import problems
import importlib
import warnings

from dynamics import Simulator
from trajopt.bench import bench_state

adapter = importlib.import_module("contact.adapter")

warnings.simplefilter("ignore")


def rel(a, b):
    return float(np.abs(a - b).max(initial=0.0) / max(1.0, float(np.abs(b).max(initial=0.0))))


names = sys.argv[1:] or problems.names()
T = 40
SEEDS = range(int(__import__("os").environ.get("SEEDS", "3")))
for name in names:
    ocp = problems.load(name)
    sim = ocp.dynamics
    if getattr(sim, "contact", "none") == "none":
        continue
    if not isinstance(sim, Simulator):  # e.g. catapult-design's augmented step over rebuilt catapults
        print(name, "not a Simulator: skipped")
        continue
    if sim.contact != "lcp":
        sim = Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, contact="lcp"))
    if sim.contact_model.fused is None:
        print(name, "no fused path")
        continue
    ref = Simulator(sim.model, geometry=sim.geometry, **sim._options)
    ref.contact_model.fused = None
    ref.contact_model.kin.core = None
    cm = sim.contact_model
    x0 = ocp.x0 if hasattr(ocp, "x0") else bench_state(ocp)[0]
    lo = np.nan_to_num(sim.u_lower, neginf=-10.0, posinf=10.0)
    hi = np.nan_to_num(sim.u_upper, neginf=-10.0, posinf=10.0)
    worst = worst_same_modes = worst_trans = worst_vnext_split = 0.0
    steps = contact_steps = split = 0
    where = None
    for seed in SEEDS:
        for scale in (0.3, 1.0):
            us = np.random.default_rng(seed).uniform(lo, hi, (300 if name.startswith("cube") else T, sim.nu)) * scale
            d, dr = sim.create_data(), ref.create_data()
            x = np.asarray(x0, float).copy()
            for t, u in enumerate(us):
                try:
                    a = sim.step_derivatives(x, u, data=d)
                    saved = adapter._core
                    adapter._core = None
                    try:
                        b = ref.step_derivatives(x, u, data=dr)
                    finally:
                        adapter._core = saved
                except Exception as e:
                    print("  ", name, seed, scale, t, "stopped:", type(e).__name__, str(e)[:80])
                    break
                steps += 1
                e = max(rel(p, r) for p, r in zip(a, b))
                if e > worst:
                    worst, where = e, (seed, scale, t)
                if d.contact is not None:
                    contact_steps += 1
                    s, r_ = d.contact, dr.contact
                    same = np.array_equal(s.solution.modes, r_.solution.modes) and np.array_equal(
                        s.solution.signs, r_.solution.signs
                    )
                    if same:
                        worst_same_modes = max(worst_same_modes, e)
                    else:
                        split += 1
                        worst_vnext_split = max(worst_vnext_split, rel(a[0], b[0]))
                    # the Python Jacobian path on the fused state
                    nq, nv = sim.nq, sim.nv
                    q, v = x[:nq], x[nq:]
                    tau = sim._tau(u, d, q, v)
                    dvx = np.zeros((nv, 2 * nv))
                    dvu = np.zeros((nv, sim.nu))
                    fz, kc, ac = cm.fused, cm.kin.core, adapter._core
                    cm.fused = None
                    cm.kin.core = None
                    adapter._core = None
                    try:
                        sim._contact_velocity_jacobian(q, v, tau, a[0][nq:], s, d, dvx, dvu)
                    finally:
                        cm.fused, cm.kin.core, adapter._core = fz, kc, ac
                    worst_trans = max(worst_trans, rel(a[1][nv:], dvx), rel(a[2][nv:], dvu))
                x = b[0]
    print(
        f"{name:15s} steps {steps:4d} contact {contact_steps:4d} | fused vs ref max rel {worst:.1e} at {where} | "
        f"equal modes: {worst_same_modes:.1e} | mode splits {split} (v+ {worst_vnext_split:.1e}) | "
        f"fused vs Python Jacobian on the same state {worst_trans:.1e}",
        flush=True,
    )
