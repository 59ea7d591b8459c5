"""Speculative margins (``Simulator(speculative=True)``, :class:`contact.detection.CollisionScene`): each collision
pair's margin grows to ``dt (s_A + s_B)``, ``s`` a bound on the speed of a body's points at the step's free
velocity, so a pair that can close its gap within the step is in the contact problem before it does.

Closed forms: a ball 3 cm above the ground falling at 17 m/s with dt = 2 ms crosses the 5 mm margin in one step;
with speculative margins it lands on the surface in that step (its gap closes exactly: the bias is the gap) and
rests there from the next, without
them it ends the step ``0.03 - dt (17 + g dt)`` = 4.04 mm deep. The margins themselves against their formula, the
compiled detector against the Python one, and the step's Jacobians against central differences at the landing."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from contact import core
from dynamics import ModelBuilder, Simulator
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd

R, DT, G = 0.05, 2e-3, 9.81


def ball(contact="lcp", speculative=True, friction=0.5):
    b = ModelBuilder("ball")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=DT, ground=0.0, friction=friction, contact=contact,
                     speculative=speculative)


def falling(gap=0.03, vz=-17.0, vx=0.0, w=(0.0, 0.0, 0.0)):
    return np.concatenate(([0.0, 0.0, R + gap, 0.0, 0.0, 0.0, 1.0, vx, 0.0, vz], w))


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_a_fast_ball_lands_on_the_surface_in_the_step_it_reaches_it(contact):
    x = falling()
    sim = ball(contact)
    landed = sim.step(x, np.zeros(0))
    # on the surface, having moved the gap in the step (v+ = -gap / dt), then at rest there (inelastic)
    assert abs(landed[2] - R) <= 1e-12 and np.isclose(landed[9], -0.03 / DT, rtol=1e-12)
    rest = sim.step(landed, np.zeros(0))
    assert abs(rest[2] - R) <= 1e-12 and abs(rest[9]) <= 1e-12
    sunk = ball(contact, speculative=False).step(x, np.zeros(0))
    assert np.isclose(sunk[2] - R, 0.03 - DT * (17.0 + G * DT), rtol=0, atol=1e-12)  # free flight: 4.04 mm deep


def test_each_pairs_margin_covers_its_bodies_motion_in_the_step():
    """Two free bodies (a ball and a box, off their joints' origins) above the ground: every pair's margin is
    max(margin, d_A + d_B) with d = dt s + 1.5 dt^2 |w| s, s = |v| + |w| reach (a body on a free joint: its own
    twist is its chain's), in the compiled and the Python detectors alike; without a velocity it is the margin; a
    scene that is not speculative keeps the margin."""
    b = ModelBuilder("two")
    j = b.add_joint("free", name="a")
    b.add_body(j, mass=1.0, sphere=0.05, offset=(0.1, 0.0, 0.0))
    j = b.add_joint("free", name="b")
    b.add_body(j, mass=1.0, box=(0.1, 0.2, 0.3), offset=(0.0, 0.05, 0.0))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=DT, ground=0.0, speculative=True)
    scene = sim.contact_model.scene
    rng = np.random.default_rng(3)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    q[2] = q[9] = 5.0  # far above the ground and apart: no contact, only the margins
    q[7] = 10.0
    v = rng.normal(0, 20, model.nv)
    data = model.createData()
    pin.forwardKinematics(model, data, q, v)
    travel = []
    for obj in scene.geometry.geometryObjects:
        j = obj.parentJoint
        if j == 0:
            travel.append(0.0)
            continue
        g = obj.geometry
        g.computeLocalAABB()
        reach = np.linalg.norm(obj.placement.act(np.asarray(g.aabb_center))) + g.aabb_radius
        w = np.linalg.norm(data.v[j].angular)
        s = np.linalg.norm(data.v[j].linear) + w * reach
        travel.append(DT * s + 1.5 * DT * DT * w * s)
    expected = [max(5e-3, travel[p.first] + travel[p.second]) for p in scene.geometry.collisionPairs]
    assert max(expected) > 0.05  # the velocities matter here
    detectors = [scene._detect_reference] + ([scene.detect] if scene._detector is not None else [])
    for detect in detectors:
        gd = scene.create_data()
        detect(model, model.createData(), gd, q, v, DT)
        got = [r.security_margin for r in gd.collisionRequests]
        assert np.allclose(got, expected, rtol=1e-12, atol=0), (detect, got, expected)
        detect(model, model.createData(), gd, q)  # no velocity: the margin again
        assert all(r.security_margin == 5e-3 for r in gd.collisionRequests)
    plain = Simulator(model, geometry=geom, dt=DT, ground=0.0).contact_model.scene
    gd = plain.create_data()
    plain.detect(model, model.createData(), gd, q, v, DT)
    assert all(r.security_margin == 5e-3 for r in gd.collisionRequests)


@pytest.mark.skipif(core.module is None, reason="the compiled core is not available")
def test_the_compiled_and_python_detectors_agree_with_speculative_margins():
    sim = ball()
    scene, model = sim.contact_model.scene, sim.model
    rng = np.random.default_rng(1)
    for _ in range(30):
        x = falling(gap=rng.uniform(0.0, 0.05), vz=rng.uniform(-30, 0), vx=rng.uniform(-5, 5),
                    w=rng.normal(0, 20, 3))
        v = x[7:]
        data_ref, data_new = model.createData(), model.createData()
        gd_ref, gd_new = scene.create_data(), scene.create_data()
        ref = scene._detect_reference(model, data_ref, gd_ref, x[:7], v, DT)
        new = scene.detect(model, data_new, gd_new, x[:7], v, DT)
        assert len(ref) == len(new)
        for f in ("points", "normals", "phi"):
            assert np.allclose(getattr(ref, f), getattr(new, f), rtol=0, atol=1e-12)
        assert [r.security_margin for r in gd_ref.collisionRequests] == pytest.approx(
            [r.security_margin for r in gd_new.collisionRequests], rel=1e-14)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("state", ["straight down", "sliding and spinning"])
def test_jacobians_of_the_landing_step(contact, state):
    """The step that lands the fast ball (its contact found by the speculative margin, 3 cm away) against central
    differences: the margin moves with v, the contact set does not."""
    x = falling() if state == "straight down" else falling(vx=2.0, w=(1.0, -3.0, 2.0))
    sim = ball(contact)
    sim.step(x, np.zeros(0))
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    fd = step_jacobians_fd(sim, x, np.zeros(0))
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * max(1.0, np.abs(Fx).max())


def test_speculative_must_be_a_bool():
    with pytest.raises(TypeError, match="speculative must be True or False"):
        ball(speculative="yes")


def test_a_robot_whose_gripper_strikes_the_ground_fast_stays_out_of_it():
    """The battery's known failure (tests/test_battery.py, erd/alex_nub_hands: the unactuated upper body topples
    and its gripper strikes the ground at ~17 m/s just before 1 s, 28.6 mm deep in one 2 ms step, 9.9 mm at 1 s)
    with speculative margins: within the battery's 5 mm at 1 s. Measured 2026-11-27: 0.009 mm at 1 s, deepest
    contact 2.6 mm (the step's constraints are linear in v+, its links' paths are not), 0.38 against 0.24 ms per
    step (10.4 contacts per step against 8.2)."""
    from .test_battery import DROP, DT, DURATION, MAX_SINK, _load, _lowest_point, _urdf_cases

    case = next((c for c in _urdf_cases() if c.id == "erd/alex_nub_hands"), None)
    if case is None:
        pytest.skip("example-robot-data's alex_nub_hands is not installed")
    kind, path, floating = case.values[0]
    probe = _load(kind, path, floating, dt=DT)
    x = probe.default_state()
    up = np.array([0.0, 0.0, 1.0])
    ground = _lowest_point(probe, x[:probe.nq], up) - DROP
    sim = _load(kind, path, floating, dt=DT, ground=ground, speculative=True)
    for _ in range(round(DURATION / DT)):
        x = sim.step(x, np.zeros(sim.nu))
    assert ground - _lowest_point(sim, x[:sim.nq], up) <= MAX_SINK


def _two_balls(speculative, dt):
    b = ModelBuilder("two")
    for name in ("A", "B"):
        j = b.add_joint("free", name=name)
        b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, speculative=speculative)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_a_ball_struck_towards_the_ground_lands_on_it(contact):
    """Ball A falls at 20 m/s onto ball B hanging 6 mm above the ground (outside the 5 mm margin, at rest): the
    A-B impulse sends B down within the step, which its free velocity (0) did not foresee. The step solves again
    with the margins of its own velocities: B lands on the ground (without: 13.5 mm deep); found by a review."""
    x = np.zeros(26)
    x[:7] = [0, 0, 3 * R + 0.007, 0, 0, 0, 1]
    x[7:14] = [0, 0, R + 0.006, 0, 0, 0, 1]
    x[16] = -20.0
    for speculative, depth in ((True, 0.0), (False, -0.0135)):
        sim = _two_balls(speculative, DT)
        sim = Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, contact=contact))
        y = sim.step(x, np.zeros(0))
        assert np.isclose(y[9] - R, depth, rtol=0, atol=1e-4), (speculative, y[9] - R)
        assert y[2] - y[9] >= 2 * R - 1e-9  # A never enters B


def test_a_chain_links_margin_counts_every_joint_that_moves_it():
    """A three-link arm turning (W, -2W, W): its last link's twist at q is zero (s = 0 at q), yet its points move
    2 L (1 - cos W dt) in the step along the joint-space path. Its margin sums each joint's own motion times the
    distance to the link's points: the wall 5.5 mm away is in the problem (it was not before; found by a review).
    (The step's constraint is linear in v+: at W dt = 0.2 rad a link can still end a few mm inside, which the
    position correction removes.)"""
    L, W = 0.5, 50.0
    counts = []
    for speculative in (False, True):
        b = ModelBuilder("arm3", gravity=(0.0, 0.0, 0.0))
        j1 = b.add_joint("revolute", axis="z", name="j1")
        b.add_body(j1, mass=1.0, sphere=0.01, offset=(L / 2, 0, 0), collision=False)
        j2 = b.add_joint("revolute", axis="z", name="j2", parent="j1", placement=(L, 0, 0))
        b.add_body(j2, mass=1.0, sphere=0.01, offset=(L / 2, 0, 0), collision=False)
        j3 = b.add_joint("revolute", axis="z", name="j3", parent="j2", placement=(L, 0, 0))
        b.add_body(j3, mass=1.0, sphere=R)
        b.add_static_box("wall", (0.2, 0.4, 0.4), (2 * L - R - 0.0055 - 0.1, 0.0, 0.0))
        model, geom = b.build()
        sim = Simulator(model, geometry=geom, dt=DT, speculative=speculative, joint_limits=False)
        y = sim.step(np.array([0, 0, 0, W, -2 * W, W], float), np.zeros(sim.nu))
        counts.append(len(sim.contacts))
        data = model.createData()
        pin.forwardKinematics(model, data, y[:3])
        inside = (2 * L - R - 0.0055) - (data.oMi[3].translation[0] - R)
        if speculative:
            assert inside <= 1e-3, inside  # free flight: 4.5 mm inside
    assert counts == [0, 1]


def test_bad_input_to_speculative_margins():
    from contact.detection import CollisionScene

    sim = ball()
    scene, model = sim.contact_model.scene, sim.model
    q = falling()[:7]
    for v, dt, match in ((np.full(6, np.nan), DT, "finite velocity"), (np.zeros(5), DT, "shape"),
                         (np.zeros(6), -1.0, "dt must be"), (np.zeros(6), np.inf, "dt must be")):
        for detect in (scene.detect, scene._detect_reference):
            with pytest.raises(ValueError, match=match):
                detect(model, model.createData(), scene.create_data(), q, v, dt)
    with pytest.raises(TypeError, match="speculative must be True or False"):
        CollisionScene(model, sim.geometry, ground=0.0, speculative="no")
    for options in ({"contact": "penalty"}, {"integrator": "bdf2"}):
        with pytest.raises(ValueError, match="speculative=True applies to hard"):
            Simulator(model, geometry=sim.geometry, dt=DT, ground=0.0, speculative=True, **options)
    b = ModelBuilder("paddle")
    j = b.add_joint("revolute", axis="y", name="hinge")
    b.add_body(j, mass=1.0, box=(0.1, 0.1, 0.1))
    model2, geom2 = b.build()
    import coal

    geom2.addGeometryObject(pin.GeometryObject("floor_on_hinge", j, pin.SE3.Identity(),
                                               coal.Halfspace(np.array([0.0, 0.0, 1.0]), -1.0)))
    with pytest.raises(ValueError, match="bounded shapes on moving bodies: 'floor_on_hinge'"):
        CollisionScene(model2, geom2, speculative=True)
    plain = ball(speculative=False)
    with pytest.raises(ValueError, match="speculative margins"):
        plain.step(falling(), np.zeros(0), data=sim.create_data())
