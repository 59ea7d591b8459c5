"""BDF1/BDF2 with compliant contact (issue 15, :mod:`dynamics.integrators` "Contact"): DiffHand's combination.

Closed forms (:mod:`contact.penalty`): a body of mass ``m`` resting on ``n`` contacts sinks to ``phi = w - 2 sqrt(w m
g / (n k))`` when ``m g / (n k) < w`` (the smoothed band), so a 1 kg cube on its 4 corners at the defaults (k 2500
N/m, w 1 mm) rests at ``phi = -0.98091 mm``; at rest the implicit residual is the same balance as Euler's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynamics import ModelBuilder, Simulator
from trajopt.numdiff import step_jacobians_fd

G, R, K, W = 9.81, 0.1, 2500.0, 1e-3


def cube(integrator, dt=1e-3, **kw):
    b = ModelBuilder("cube")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=0.5, contact="penalty", integrator=integrator,
                     **kw)


def ball(integrator, dt):
    b = ModelBuilder("ball")
    j = b.add_joint("prismatic", name="ball", axis="z")
    b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=0.5, contact="penalty", integrator=integrator)


@pytest.mark.parametrize("integrator", ["bdf1", "bdf2"])
@pytest.mark.parametrize("dt", [1e-3, 1e-2])
def test_resting_box_reaches_the_closed_form_depth(integrator, dt):
    depth = W - 2.0 * math.sqrt(W * G / (4 * K))  # -0.98091 mm
    sim = cube(integrator, dt)
    x0 = np.r_[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0, np.zeros(6)]  # touching, no penetration
    xs = sim.rollout(x0, np.zeros((int(round(1.0 / dt)), 0)))
    assert abs(xs[-1, 2] - 0.1 - depth) < 1e-9
    assert np.abs(xs[-1, 7:]).max() < 1e-9
    assert xs[:, 2].min() > 0.1 + depth - 2e-3  # no plunge


def tilted(z, vel=(0.3, 0.1, -0.2, 0.5, -0.3, 0.2)):
    q = np.r_[0.01, 0.0, z, 0.02, 0.01, 0.0, 1.0]
    q[3:7] /= np.linalg.norm(q[3:7])
    return np.r_[q, vel]


# the tilted box's force starts (its lowest corner's gap reaching the 1 mm width, at q+) at z = 0.1 + 7.13 mm
# (bisection, test_jacobian_is_continuous_through_onset): no contact, just inside the band, in it, deeper
HEIGHTS = [0.1 + 8e-3, 0.1 + 7e-3, 0.1 + 6e-3, 0.1 + 4e-3, 0.1 + 1e-3]


@pytest.mark.parametrize("integrator", ["bdf1", "bdf2"])
def test_jacobians_match_ridders_across_contact_onset(integrator):
    """Fx, Fu (and BDF2's Fprev) against Ridders' extrapolation at states from no contact to deep contact,
    within 3 of its error estimate plus 1e-7 of the Jacobian's scale."""
    sim = cube(integrator)
    u = np.zeros(0)
    nforce = 0
    for z in HEIGHTS:
        x = tilted(z)
        kw = {"previous": tilted(z + 1e-4)} if integrator == "bdf2" else {}
        out = sim.step_derivatives(x, u, **kw)
        Fx = out[1]
        if integrator == "bdf1":
            fd = step_jacobians_fd(sim, x, u, method="ridders")
            assert fd.Fx_err.max() < 1e-5
            assert np.all(np.abs(Fx - fd.Fx) <= 3 * fd.Fx_err + 1e-7 * np.abs(fd.Fx).max())
        else:  # central differences through step(x, previous=...) for both arguments; h = 1e-7: the band's
            # curvature gives them a truncation error of ~5e7 h^2 just past onset (measured, h from 1e-4 to 1e-7)
            h = 1e-7
            for which, J in ((0, Fx), (1, out[3])):
                for k in range(sim.ndx):
                    e = np.zeros(sim.ndx)
                    e[k] = h
                    args = [x, kw["previous"]]
                    plus, minus = list(args), list(args)
                    plus[which] = sim.state_integrate(args[which], e)
                    minus[which] = sim.state_integrate(args[which], -e)
                    col = sim.state_difference(sim.step(minus[0], u, previous=minus[1]),
                                               sim.step(plus[0], u, previous=plus[1])) / (2 * h)
                    assert np.abs(J[:, k] - col).max() <= 1e-6 * max(1.0, np.abs(col).max()), (z, which, k)
        free = Simulator(sim.model, dt=sim.dt, integrator=integrator, name="free")
        nforce += not np.allclose(out[0], free.step(x, u, **kw), atol=1e-12)
    assert nforce == 4  # the contact acts on all but the highest state


def test_jacobian_is_continuous_through_onset():
    """The height where the force starts found by bisection; Fx on either side of it differs in proportion to
    the distance (a C^1 force: Lipschitz Jacobians), where a jump would not shrink."""
    sim = cube("bdf1")
    free = Simulator(sim.model, dt=sim.dt, integrator="bdf1", name="free")
    u = np.zeros(0)
    lo, hi = 0.1, 0.12
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if not np.array_equal(sim.step(tilted(mid), u), free.step(tilted(mid), u)) else (lo, mid)
    assert 0.1 + 6e-3 < hi < 0.1 + 8e-3
    gaps = [np.abs(sim.step_derivatives(tilted(hi + eps), u)[1] - sim.step_derivatives(tilted(hi - eps), u)[1]).max()
            for eps in (1e-5, 1e-6, 1e-7)]
    assert gaps[0] > 0.1  # the Jacobian does change over the band (2.7 at 10 um, measured) ...
    assert gaps[1] < 0.15 * gaps[0] and gaps[2] < 0.15 * gaps[1]  # ... in proportion to the distance


def test_bdf2_is_second_order_through_a_contact_onset():
    """A ball dropped from 5 mm into the penalty contact (its force starts, C^1, at 1 mm and rests at 3.9 mm
    deep), 0.1 s: the final height's error against BDF2 at dt = 1/8 ms falls at order 2 for BDF2 (measured
    2.03, 2.05) and 1 for BDF1 (1.02)."""
    T, x0 = 0.1, np.array([R + 5e-3, 0.0])
    ref = ball("bdf2", 1.25e-4).rollout(x0, np.zeros((int(round(T / 1.25e-4)), 1)))[-1, 0]
    for integrator, lo, hi in (("bdf1", 0.85, 1.2), ("bdf2", 1.85, 2.3)):
        err = [abs(ball(integrator, dt).rollout(x0, np.zeros((int(round(T / dt)), 1)))[-1, 0] - ref)
               for dt in (4e-3, 2e-3, 1e-3)]
        orders = np.log2(np.array(err[:-1]) / np.array(err[1:]))
        assert np.all((orders > lo) & (orders < hi)), (integrator, err, orders)
