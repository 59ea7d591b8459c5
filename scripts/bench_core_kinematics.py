"""The compiled contact kinematics and implicit kernels (cpp/src/kinematics.cpp) against their Python
reference (numba / numpy), function by function, and ``sim.step_derivatives`` with all of them on the
reference path vs compiled, in one process (issue 13).

On catapult and go1-hold at the problem's bench state (in contact), and the position correction on a
box 3 cm in the ground. Best of repeated ``timeit`` runs; the step_derivatives rows alternate the two
paths (7 rounds, the minimum of each).

    CONTACTRAJ_CORE_PATH=/path/to/contactraj_core....so python scripts/bench_core_kinematics.py
"""

from __future__ import annotations

import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import problems  # noqa: E402
from contact import core  # noqa: E402
from tests.test_contact import cube_sim, cube_state  # noqa: E402

ad = sys.modules["contact.adapter"]


def best(f, n=2000, r=7):
    return min(timeit.repeat(f, number=n, repeat=r)) / n * 1e6


def report(label, f_new, f_old, n=2000):
    a, b = best(f_old, n), best(f_new, n)
    print(f"  {label:36s} reference {a:8.2f} us   compiled {b:8.2f} us   x{a / b:5.2f}", flush=True)


def step_derivatives(sim, x, u):
    kin = sim.contact_model.kin
    f = lambda: sim.step_derivatives(x, u)  # noqa: E731
    res = {"reference": [], "compiled": []}
    saved = (kin.core, ad._core)
    try:
        for _ in range(7):
            for mode in res:
                kin.core, ad._core = (None, None) if mode == "reference" else saved
                res[mode].append(best(f, 300, 3))
    finally:
        kin.core, ad._core = saved
    a, b = min(res["reference"]), min(res["compiled"])
    print(f"  {'sim.step_derivatives':36s} reference {a:8.2f} us   compiled {b:8.2f} us   x{a / b:5.2f}")


def main():
    if core.module is None:
        sys.exit(f"the compiled core is not available: {core.reason}")
    for name in ("catapult", "go1-hold"):
        ocp = problems.load(name)
        sim, cm = ocp.dynamics, ocp.dynamics.contact_model
        x, u = ocp.info["bench_state"]
        u = np.asarray(u) if np.size(u) == sim.nu else ocp.us_init[0]
        xn = sim.step(x, u)
        st, kin, d = sim._data.contact, cm.kin, sim._data.pin
        c, v = st.geo.contacts, xn[sim.nq:]
        print(f"{name}: nv {sim.nv}, {len(c)} contacts x {cm.rows} rows, {st.layout.nlim} limit rows")
        g, lam = kin.geometry(d, c), st.lam[:st.m_contact]
        report("geometry", lambda: kin.geometry(d, c), lambda: kin._reference_geometry(d, c))
        report("force_derivative", lambda: kin.force_derivative(g, lam),
               lambda: kin._reference_force_derivative(g, lam))
        report("velocity_derivative", lambda: kin.velocity_derivative(g, v),
               lambda: kin._reference_velocity_derivative(g, v))
        G = np.random.default_rng(0).standard_normal((sim.nv, 2 * sim.nv + sim.nu))
        dJv, slope = kin.velocity_derivative(g, v), st.bias_slope / sim.dt
        report("fixed_impulse_velocity_derivative",
               lambda: ad.fixed_impulse_velocity_derivative(st.J, G, st.normal_rows, slope, dJv),
               lambda: ad._reference_fixed_impulse_velocity_derivative(st.J, G, st.normal_rows, slope, dJv))
        lin, dc, dphi = cm._linearized(st, G, v, sim.dt)
        print(f"  (reduced system E {lin.E.shape}, regular {lin.regular})")
        report("velocity_jacobian (adapter)", lambda: ad.velocity_jacobian(lin, dc, dphi, st.MJt, G),
               lambda: ad._reference_velocity_jacobian(lin, dc, dphi, st.MJt, G))
        report("lambda_jacobian", lambda: ad.lambda_jacobian(lin, dc, dphi),
               lambda: ad._reference_lambda_jacobian(lin, dc, dphi))
        step_derivatives(sim, x, u)
    for rot in [(0.0, 0.0, 0.0), (0.02, 0.0, 0.0)]:
        sim = cube_sim(contact="lcp")
        cm = sim.contact_model
        x = cube_state(z=0.07, rot=rot)
        sim.step(x, np.zeros(0))
        st = sim._data.contact
        c = st.correction
        phi = st.geo.contacts.phi[np.asarray(c.rows) // cm.rows]
        print(f"cube 3 cm in the ground: {len(c.rows)} deep rows")
        report("ContactModel._correction", lambda: cm._correction(st.J, st.MJt, c.rows, phi),
               lambda: cm._reference_correction(st.J, st.MJt, c.rows, phi))


if __name__ == "__main__":
    main()
