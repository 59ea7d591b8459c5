"""Which time stepping for compliant contact (contact.penalty's docstring): measured, not assumed.

Three schemes of ``v+ = v_f + M^-1 J^T lambda`` with the same force law ``f(phi, c)``:

* explicit-v:   ``lambda = dt f(phi(q), J v)``, v the pre-step velocity -- one evaluation, no solve;
* explicit-vf:  ``lambda = dt f(phi(q), J v_f)`` -- the same with the free velocity (what an adapter sees);
* implicit:     ``lambda = dt f(phi(q), J v+)`` -- the velocity at the end of the step (Newton; the default).

On a 1 kg cube (side 0.2 m, default k, d, w, v_s, mu 0.5) at dt = 1 ms: resting (flat, from phi = 0),
dropped flat from 5 cm or tilted from 10 cm, and sliding at 1 m/s from rest depth, over 1 s (sliding:
0.15 s). Prints the largest speed over the last 10% of the steps, the final depth, or the step at which
the run left the simulator's state bounds. Then the stability limit of the implicit scheme without damping
(the explicit spring): a 1 kg ball on one contact (``m_eff`` = 1 kg), released 1 mm below its resting depth,
oscillates with a bounded amplitude while ``dt < 2 sqrt(m / k)`` = 40 ms and grows beyond.

    python scripts/penalty_schemes.py
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contact.penalty import PenaltyAdapter, PenaltySolution, forces
from dynamics import ModelBuilder, Simulator, SimulationError
from dynamics.contact_step import ContactModel


class ExplicitPenalty(PenaltyAdapter):
    """The same forces at the free velocity ``J v_f`` (``b``), or at ``J v`` (``c_pre``, set by
    :func:`_with_pre_step_velocity` before each solve): one evaluation per step."""

    c_pre = None

    def solve(self, p, guess=None):
        c = p.b if self.c_pre is None else self.c_pre
        lam = p.dt * forces(p, c, derivatives=False)[0]
        return PenaltySolution(lam, p.A @ lam + p.b, 0, 0.0, True)


_original = ContactModel._reference_solve


def _with_pre_step_velocity(self, model, data, gdata, q, v_free, dt, previous, v=None):
    """ContactModel._reference_solve, with ``J v`` handed to an explicit-v adapter first (a cube: no limit rows)."""
    if getattr(self.adapter, "pre_step", False):
        contacts = self.scene.detect(model, data, gdata, q)
        if len(contacts):
            pin.computeJointJacobians(model, data)
            self.adapter.c_pre = self.kin.geometry(data, contacts).J @ v
    return _original(self, model, data, gdata, q, v_free, dt, previous, v)


ContactModel._reference_solve = _with_pre_step_velocity


def cube(dt, scheme):
    b = ModelBuilder("cube")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=0.5, contact="penalty")
    if scheme != "implicit":
        a = sim.contact_model.adapter
        sim.contact_model.adapter = ExplicitPenalty(a.params, a.dt)
        sim.contact_model.adapter.pre_step = scheme == "explicit-v"
    return sim


def state(z, v=(0.0, 0.0, 0.0), rot=(0.0, 0.0, 0.0)):
    quat = pin.Quaternion(pin.exp3(np.asarray(rot, dtype=float))).coeffs()
    return np.r_[0.0, 0.0, z, quat, v, 0.0, 0.0, 0.0]


def run(dt, scheme, x0, steps):
    sim = cube(dt, scheme)
    try:
        xs = sim.rollout(x0, np.zeros((steps, 0)))
    except SimulationError as exc:
        return f"diverged: {str(exc)[:90]}"
    tail = np.abs(xs[-max(10, steps // 10):, 7:]).max()
    return f"max|v| last 10% {tail:9.3g}   final depth {0.1 - xs[-1, 2]: .4e} m   final vx {xs[-1, 7]: .4f}"


if __name__ == "__main__":
    cases = {"resting": (state(0.1), 1000), "dropped 5 cm": (state(0.15), 1000),
             "sliding 1 m/s": (state(0.1 - 0.00098, v=(1.0, 0.0, 0.0)), 150),
             "tilted drop": (state(0.2, rot=(0.3, 0.2, 0.0)), 1000)}
    for dt in (1e-3, 5e-3, 1e-2, 2e-2):
        for name, (x0, steps) in cases.items():
            for scheme in ("explicit-v", "explicit-vf", "implicit"):
                n = int(round(steps * 1e-3 / dt))
                print(f"dt {dt:.0e}  {name:14s} {scheme:11s}: {run(dt, scheme, x0, n)}")
    for dt in (0.030, 0.038, 0.042):
        b = ModelBuilder("ball")
        j = b.add_joint("prismatic", name="ball", axis="z")
        b.add_body(j, mass=1.0, sphere=0.1)
        model, geom = b.build()
        sim = Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=0.0, contact="penalty", contact_damping=0.0)
        rest = 9.81 / sim.contact_model.adapter.params.stiffness  # 3.9 mm: the spring's linear range
        xs = sim.rollout(np.array([0.1 - rest - 1e-3, 0.0]), np.zeros((400, sim.nu)))
        amplitude = np.abs(xs[:, 0] - (0.1 - rest)).max()
        print(f"undamped ball dt {dt * 1e3:.0f} ms (omega dt = {dt * 50:.2f}): oscillation about rest, released "
              f"1 mm off: largest excursion over 400 steps {amplitude * 1e3:.3g} mm")
