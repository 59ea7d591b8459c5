"""Restitution: Newton's impact law on the normal rows and its exact step Jacobian (the bounce Jacobian).

Closed forms for a ball of radius ``R`` on a vertical prismatic joint over the ground (``z`` its lowest
point). Semi-implicit Euler conserves ``E~ = v v_f / 2 + g z`` (``v_f = v - g dt``) in free flight, and
an impact step that starts at height ``phi_b`` with velocity ``-V`` leaves with ``v+ = e V`` (the target
``c_n >= -e c_n^-`` on the pre-step velocity), so with ``V (V + g dt) = 2 g (h - phi_b)`` the next apex is::

    z_apex = e^2 h + (1 - e^2) phi_b + e (1 - e) V dt / 2      (up to g dt^2 from the apex's sampling)

and ``0 <= phi_b < (V + g dt) dt`` (the impact step is the one whose free motion would cross the ground),
so ``|z_apex - e^2 h| <= (1 - e^2)(V + g dt) dt + e (1 - e) V dt / 2 + g dt^2`` (2.8 mm for e = 0.5 from
h = 0.5 m at dt = 1 ms; 0 + g dt^2 at e = 1).
"""

from __future__ import annotations

import numpy as np
import pytest

import problems
from dynamics import ModelBuilder, Simulator
from trajopt.numdiff import parameter_jacobian_fd, step_jacobians_fd

R, G, DT = 0.1, 9.81, 1e-3


def ball(e, *, contact="lcp", friction=0.0, joint="prismatic", **options):
    """A 1 kg ball of radius R on a vertical prismatic joint (or a free flyer) over the ground z = 0."""
    b = ModelBuilder("ball")
    j = b.add_joint(joint, name="ball", axis="z")
    b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=DT, ground=0.0, friction=friction, contact=contact,
                     restitution=e, **options)


def drop(sim, h, steps):
    xs = sim.rollout(np.array([h + R, 0.0]), np.zeros((steps, sim.nu)))
    return xs[:, 0] - R, xs[:, 1]


@pytest.mark.parametrize("contact", ["lcp", "ncp", "relaxed"])
@pytest.mark.parametrize("e", [0.5, 0.8, 1.0])
def test_a_dropped_ball_rebounds_to_e_squared_h(e, contact):
    h = 0.5
    options = {"smoothing": 1e-6} if contact == "relaxed" else {}
    z, v = drop(ball(e, contact=contact, **options), h, 700 + int(700 * e))
    k = int(np.flatnonzero(v[1:] > 0)[0])  # the impact step: from xs[k] to xs[k + 1]
    phi_b, V = z[k], -v[k]
    assert 0.0 <= phi_b < (V + G * DT) * DT
    apex = z[k + 1:][: int(np.flatnonzero(v[k + 1:] <= 0)[0]) + 1].max()
    if contact != "relaxed":  # the hard models: v+ = e V exactly, then the closed form
        assert v[k + 1] == pytest.approx(e * V, rel=1e-12)
        predicted = e * e * h + (1 - e * e) * phi_b + e * (1 - e) * V * DT / 2
        assert abs(apex - predicted) <= G * DT**2
    bound = (1 - e * e) * (V + G * DT) * DT + e * (1 - e) * V * DT / 2 + G * DT**2
    assert abs(apex - e * e * h) <= bound  # relaxed: its ~kappa/phi force at 1e-6 J moves nothing visible


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_bounce_jacobian_is_minus_e(contact):
    """At an impact step of a ball on the ground: dv+/dv- = -e, dq+/dv- = -e dt, dq+/dq = 1, dv+/dq = 0
    (the gap allowance is replaced by the bounce, so the landing height no longer enters v+)."""
    e = 0.7
    sim = ball(e, contact=contact)
    x, u = np.array([R + 1e-3, -3.0]), np.zeros(sim.nu)
    xn, Fx, Fu = sim.step_derivatives(x, u)
    assert xn[1] == pytest.approx(3.0 * e, rel=1e-12)
    assert np.allclose(Fx, [[1.0, -e * DT], [0.0, -e]], rtol=0, atol=1e-12)
    fd = step_jacobians_fd(sim, x, u)
    assert np.abs(Fx - fd.Fx).max() < 1e-8 and np.abs(Fu - fd.Fu).max() < 1e-8
    assert np.abs(Fx - [[1.0, DT], [0.0, 1.0]]).max() > 0.5  # not the free-flight Jacobian


FREE_STATES = {  # free-flying ball 1 mm above the ground, falling at 3 m/s, sliding and spinning
    "sticking": (1.0, [0.3, 0.1, -3.0, 0.5, -2.0, 0.1]),
    "sliding": (0.05, [1.0, 0.3, -3.0, 0.5, -2.0, 0.1]),
}


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("case", sorted(FREE_STATES))
def test_impact_jacobians_with_friction_match_ridders(contact, case):
    """All step Jacobians of an impact with friction and a tangential velocity, on a free flyer, against
    Ridders' extrapolation: within 3 of its own error estimates plus 1e-8 (LCP) or 1e-6 (NCP: its
    iterative solve stops at a tolerance, which limits the finite differences; 8e-8 measured when sliding,
    2e-8 with e = 0; test_ncp.py allows 1e-6 too)."""
    e, (mu, vel) = 0.7, FREE_STATES[case]
    sim = ball(e, contact=contact, friction=mu, joint="free")
    x = np.zeros(sim.nx)
    x[2], x[6], x[7:] = R + 1e-3, 1.0, vel
    u = np.zeros(sim.nu)
    xn, Fx, Fu = sim.step_derivatives(x, u)
    state = sim.create_data()
    sim.step(x, u, data=state)
    Jn = state.contact.J[0]
    assert Jn @ xn[7:] == pytest.approx(-e * (Jn @ x[7:]), rel=1e-9)  # c_n+ = -e c_n-: an impact step
    fd = step_jacobians_fd(sim, x, u, method="ridders")
    assert fd.Fx_err.max() < 1e-4  # the estimate is informative
    assert np.all(np.abs(Fx - fd.Fx) <= 3 * fd.Fx_err + (1e-8 if contact == "lcp" else 1e-6))
    assert Fx[8, 8] == pytest.approx(-e, abs=1e-9)  # d vz+ / d vz- along the bouncing normal


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_frictionless_elastic_bounces_conserve_energy(contact):
    """e = 1, 10 bounces from 0.5 m: the physical energy stays within 1% (0.3% measured: semi-implicit
    Euler's own g dt v / 2 oscillation), the discrete invariant E~ to round-off, every apex at h."""
    h = 0.5
    z, v = drop(ball(1.0, contact=contact), h, 6600)
    apexes = np.flatnonzero((v[:-1] > 0) & (v[1:] <= 0)) + 1
    assert len(apexes) >= 10
    energy = 0.5 * v**2 + G * z
    assert np.abs(energy / (G * h) - 1).max() < 0.01
    invariant = 0.5 * v[:-1] * (v[:-1] - G * DT) + G * z[:-1]
    assert np.abs(invariant / (G * h) - 1).max() < 1e-12
    assert np.abs(z[apexes[:10]] - h).max() <= G * DT**2


def test_inelastic_default_is_todays_step():
    """e = 0 keeps the fused compiled step and today's numbers; restitution drops the fused step; e > 0
    without any impact (Go1 holding its stance: no foot approaches faster than the threshold) gives the
    Python reference path's numbers bit for bit, rollout and Jacobians. (Before/after hashes of catapult
    and go1-hold rollouts and Jacobians, both paths: scripts/hash_rollouts.py.)"""
    cat = problems.load("catapult", horizon=300).dynamics
    us = np.random.default_rng(0).uniform(-300, 300, (300, cat.nu))
    x0 = problems.load("catapult").x0
    kw = dict(cat._options)
    same = Simulator(cat.model, geometry=cat.geometry, **dict(kw, restitution=0.0))
    assert (cat.contact_model.fused is None) == (same.contact_model.fused is None)
    assert np.array_equal(cat.rollout(x0, us), same.rollout(x0, us))
    bouncy = Simulator(cat.model, geometry=cat.geometry, **dict(kw, restitution=0.5))
    assert bouncy.contact_model.fused is None
    assert not np.array_equal(cat.rollout(x0, us), bouncy.rollout(x0, us))  # the box lands on the floor

    go1 = problems.load("go1-hold", horizon=40)
    sim = go1.dynamics
    elastic = Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, restitution=1.0))
    assert elastic.contact_model.fused is None
    sim.contact_model.fused = None  # the Python reference path of the same step
    a = sim.rollout_derivatives(go1.x0, go1.us_init)
    b = elastic.rollout_derivatives(go1.x0, go1.us_init)
    for p, q in zip(a, b):
        assert np.array_equal(p, q)


def test_restitution_per_pair():
    b = ModelBuilder("two")
    j1 = b.add_joint("prismatic", name="a", axis="z")
    b.add_body(j1, mass=1.0, sphere=R)
    j2 = b.add_joint("prismatic", name="b", axis="z", placement=(1.0, 0.0, 0.0))
    b.add_body(j2, mass=1.0, sphere=R)
    model, geom = b.build()
    names = [o.name for o in geom.geometryObjects]
    sim = Simulator(model, geometry=geom, dt=DT, ground=0.0, friction=0.0, restitution={(names[1], "ground"): 0.5})
    xs = sim.rollout(np.array([0.6, 0.6, 0.0, 0.0]), np.zeros((400, sim.nu)))
    assert xs[-1, 2] == 0.0 and xs[-1, 3] > 0.5  # the first ball rests, the second bounced (1.57 m/s up)
    assert sorted(sim.contact_model.restitution.tolist()) == [0.0, 0.0, 0.5]  # a-ground, b-ground, a-b


@pytest.mark.parametrize("bad, match", [
    (-0.1, r"restitution must be a number in \[0, 1\]"),
    (1.5, r"restitution must be a number in \[0, 1\]"),
    (float("nan"), r"restitution must be a number in \[0, 1\]"),
    ("0.5", r"restitution must be a number in \[0, 1\]"),
    ({("ball_body1", "floor"): 0.5}, r"no collision object named \['floor'\]"),
    ({("ball_body1", "ground"): 2.0}, r"restitution\[.*\] must be a number in \[0, 1\]"),
    ({("ball_body1",): 0.5}, r"\(nameA, nameB\) keys"),
])
def test_bad_restitution_is_refused_at_construction(bad, match):
    with pytest.raises(ValueError, match=match):
        ball(bad)


def test_bad_threshold_and_non_colliding_pair_are_refused():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="restitution_threshold must be a finite speed"):
            ball(0.5, restitution_threshold=bad)
    b = ModelBuilder("two")
    for i in range(2):
        j = b.add_joint("prismatic", name=f"j{i}", axis="z", placement=(i, 0.0, 0.0))
        b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    names = [o.name for o in geom.geometryObjects]
    with pytest.raises(ValueError, match="not a collision pair"):
        Simulator(model, geometry=geom, ground=0.0, self_collision=False, restitution={tuple(names): 0.5})


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_parameter_jacobians_at_an_impact(contact):
    """Every parameter kind (friction, restitution, inertial, the free joint's placement) at a bouncing, sliding,
    spinning impact step against central differences through with_parameters (which keeps the restitution).
    The placement's rotation turns the pre-step velocity the impact target e J_n(q) v reads: its column needs
    that term (without it: 56 off, against 8.5e3 the largest entry)."""
    sim = ball(0.7, contact=contact, friction=0.4, joint="free")
    assert sim.with_parameters(["friction"], [0.3]).contact_model.restitution is not None
    x = np.zeros(sim.nx)
    x[2], x[6], x[7:] = R + 1e-3, 1.0, (8.0, 0.0, -2.0, 0.0, 3.0, 1.0)  # slides and spins through the impact
    u = np.zeros(sim.nu)
    names = sim.parameter_names()
    assert {n.split(":")[0] for n in names} == {"friction", "restitution", "mass", "com", "inertia", "placement"}
    _, _, _, Fp = sim.step_derivatives(x, u, params=names)
    fd = parameter_jacobian_fd(sim, x, u, names)
    assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
    assert np.abs(Fp[:, 0]).max() > 1e-3  # friction acts at this step


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_placement_jacobians_of_a_swinging_arm_at_an_impact(contact):
    """A two-link arm (revolute joints about y, 0.5 m links) whose tip ball strikes the ground with e = 0.6: the
    second joint's placement moves the tip and turns its velocity, so the impact target e J_n(q) v moves with it.
    Fp of both joints' placements and the inertial parameters against central differences, at the impact step."""
    b = ModelBuilder("arm")
    j1 = b.add_joint("revolute", name="shoulder", axis="y", placement=(0.0, 0.0, 1.0))
    b.add_body(j1, mass=1.0, capsule=(0.03, 0.5), offset=(0.0, 0.0, -0.25), collision=False)
    j2 = b.add_joint("revolute", name="elbow", axis="y", parent=j1, placement=(0.0, 0.0, -0.5))
    b.add_body(j2, mass=0.5, sphere=R, offset=(0.0, 0.0, -0.5))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=DT, ground=0.0, friction=0.3, contact=contact, restitution=0.6)
    # the tip at (-0.5 sin(a) - 0.5 sin(a + b), 1 - 0.5 cos(a) - 0.5 cos(a + b)) (about y, x = -0.438 here); both
    # links hanging put it at 0 m height, so a swing of a = 0.45 rad puts the ball's bottom 1 mm above the ground,
    # moving down and sideways
    a = np.arccos((1.0 - R - 1e-3) / 1.0)  # one straight link of 1 m: the tip's centre at height R + 1 mm
    x = np.array([a, 0.0, -3.0, 0.5])
    u = np.zeros(sim.nu)
    sim.step(x, u)
    assert len(sim.contacts) == 1
    impact = sim._workspace(None).contact.impact  # the tip strikes at 1.2 m/s: an impact row
    assert impact is not None and impact.e.tolist() == [0.6]
    names = [n for n in sim.parameter_names() if not n.startswith("friction") and not n.startswith("restitution")]
    _, _, _, Fp = sim.step_derivatives(x, u, params=names)
    fd = parameter_jacobian_fd(sim, x, u, names)
    assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
    elbow = names.index("placement:elbow")
    assert np.abs(Fp[:, elbow:elbow + 6]).max() > 1.0
