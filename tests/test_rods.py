"""Capsules and cylinders lying on the ground: two contact points from one collision pair.

coal's contact patch of a rod lying on a plane flattens both points onto the deepest
one's plane, so the raised end of a slightly tilted rod was reported at the lower
end's depth and its distance did not move with the tilt: the step Jacobian's tilt
column was off by 1/dt (gymnasium's hopper foot). The scene now computes each end's
point and distance itself (contact.detection.CollisionScene._rod_on_flat).
"""

from __future__ import annotations

import numpy as np
import coal
import pinocchio as pin
import pytest

from contact.detection import CollisionScene
from dynamics import Simulator
from dynamics.build import ModelBuilder
from trajopt import max_relative_error, step_jacobians_fd

R, LENGTH = 0.05, 0.4  # radius and axis length (m); the rod's axis is the world x axis at rest


def rod_model(shape, floor="ground"):
    """A free 1 kg capsule or cylinder lying along x; ``floor`` "table" or "cap" adds a static support whose top is
    at z = 0 (a 2 m box, a cylinder of radius 0.3 m), for a simulator without ground."""
    b = ModelBuilder(shape)
    if floor == "table":
        b.add_static_box("table", (2.0, 2.0, 0.2), (0.0, 0.0, -0.1))
    elif floor == "cap":
        b.geometry.addGeometryObject(pin.GeometryObject("cap", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                        coal.Cylinder(0.3, 0.2)))
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, rotation=(0, np.pi / 2, 0), **{shape: (R, LENGTH)})
    return b.build()


def rod_state(model, z=R, v=(0, 0, 0), w=(0, 0, 0), rot=(0, 0, 0)):
    q = pin.integrate(model, np.r_[0, 0, z, 0, 0, 0, 1.0], np.r_[0, 0, 0, rot])
    return np.r_[q, v, w]


@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_each_end_of_a_tilted_rod_has_its_own_distance(shape):
    model, geometry = rod_model(shape)
    scene = CollisionScene(model, geometry, ground=0.0, margin=5e-3)
    data, gdata = model.createData(), scene.create_data()
    for tilt in (0.0, 1e-5, 1e-3, 0.01):
        x = rod_state(model, z=R - 5e-5, rot=(0, tilt, 0))
        c = scene.detect(model, data, gdata, x[:7])
        assert len(c) == 2
        # The +x end's centre goes down by (L/2) sin(tilt) (a rotation about y), the -x end's up. A
        # capsule touches at R below its end's centre; a cylinder at its rim's lowest point, R cos(tilt)
        # below it.
        s = np.sin(tilt) * LENGTH / 2
        rim = R * (1 - np.cos(tilt)) if shape == "cylinder" else 0.0
        expected = np.sort([-5e-5 - s + rim, -5e-5 + s + rim])
        assert np.allclose(np.sort(c.phi), expected, atol=1e-12), (tilt, c.phi, expected)
        assert np.allclose(c.phi, c.points[:, 2], atol=1e-12)
    # Tilted beyond the margin (5 mm): only the lower end.
    c = scene.detect(model, data, gdata, rod_state(model, z=R, rot=(0, 0.05, 0))[:7])
    assert len(c) == 1 and c.points[0, 0] > 0


STATES = {
    "resting": dict(),
    "resting 0.05 mm deep": dict(z=R - 5e-5),
    "sliding": dict(v=(0.3, 0.1, 0.0)),
    "sliding and spinning": dict(v=(0.3, 0.1, 0.0), w=(0.0, 0.0, 0.5)),
    "rolling": dict(v=(0.0, 0.2, 0.0), w=(-4.0, 0.0, 0.0)),
    "tilted, one end lifted": dict(rot=(0.0, 0.005, 0.0), v=(0.1, 0.0, -0.05)),
    "tilted and rolled": dict(rot=(0.3, 0.005, 0.1), v=(0.1, 0.0, -0.05)),
}


SLIDING = ("sliding", "sliding and spinning")
# Central-difference step 1e-7, not the default 6e-6: at the sticking states the default step's
# truncation error is 1.2e-6 of the largest entry (dv_x/dtilt = -50 vs -50.0012), for two spheres
# in the same pose as much as for a rod; with 1e-7 it is 2e-8.
H = 1e-7


def _errors(shape, contact, names, floor="ground"):
    model, geometry = rod_model(shape, floor)
    sim = Simulator(model, geometry=geometry, dt=1e-3, ground=0.0 if floor == "ground" else None, friction=0.5,
                    contact=contact)
    errors = {}
    for name in names:
        x = rod_state(model, **STATES[name])
        _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
        assert len(sim.contacts) == 2 and sim.contacts.impulses[:, 0].sum() > 0, name
        errors[name] = max_relative_error(Fx, step_jacobians_fd(sim, x, np.zeros(0), h=H).Fx)
    return errors


@pytest.mark.parametrize("contact", ["ncp", "lcp"])
@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_lying_rod_step_jacobians_match_central_differences(shape, contact):
    names = [k for k in STATES if contact == "lcp" or k not in SLIDING]
    errors = _errors(shape, contact, names)
    # Before the fix: 1.0 (resting: an absolute error of 1/dt = 1000 in the tilt column).
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("contact", ["ncp", "lcp"])
@pytest.mark.parametrize("floor", ["table", "cap"])
def test_a_capsule_lying_on_a_face_has_exact_jacobians_and_the_grounds_motion(floor, contact):
    """A capsule lying on a static box's top or a cylinder's cap (their top at z = 0) touches it, as the ground, at
    each end's hemisphere point with its own distance (CollisionScene._capsule_on_face): its step Jacobians match
    central differences (the non-sliding states under NCP, as on the ground), and released with one end raised by
    0.01 or 0.05 rad it comes down flat as on the ground, state for state to 1e-9. Before (2026-11-28), coal's patch
    flattened both ends onto the lower one's plane: released at 0.01 rad it rested with that end 0.96 mm up."""
    names = [k for k in STATES if contact == "lcp" or k not in SLIDING]
    errors = _errors("capsule", contact, names, floor)
    assert max(errors.values()) < 1e-6, errors
    model, geometry = rod_model("capsule", floor)
    sim = Simulator(model, geometry=geometry, dt=1e-3, ground=None, friction=0.5, contact=contact)
    model_g, geometry_g = rod_model("capsule")
    ground = Simulator(model_g, geometry=geometry_g, dt=1e-3, ground=0.0, friction=0.5, contact=contact)
    for tilt in (0.01, 0.05):
        x = rod_state(model, z=R + np.sin(tilt) * LENGTH / 2, rot=(0, tilt, 0))
        xs, xg = sim.rollout(x, np.zeros((600, 0))), ground.rollout(x, np.zeros((600, 0)))
        assert np.abs(xs - xg).max() < 1e-9
        assert abs(xs[-1, 2] - R) < 1e-6 and np.abs(xs[-1, 7:]).max() < 1e-6 and np.abs(xs[-1, 3:6]).max() < 1e-9


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("post", [0.015, 0.03])
@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_a_rod_lying_across_a_thin_post_rests(shape, post, contact):
    """A capsule or can (radius 4 cm, 12 cm) released level and touching across the cap of a static cylinder post
    of radius 1.5 or 3 cm, its centre (3, 4) mm off the post's axis: it rests there, level and still, on the two ends
    of the chord it lies along (the rim contact of the cores' line, and the rod's lowest point over the other end).
    Before (2026-11-28), on the one rim contact alone it rocked without end (0.1 rad/s, turned by 6e-3 rad)."""
    b = ModelBuilder("across")
    b.geometry.addGeometryObject(pin.GeometryObject("post", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                    coal.Cylinder(post, 0.2)))
    b.add_body(b.add_joint("free", name="rod"), mass=0.3, **{shape: (0.04, 0.12)})
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=None, friction=0.5, contact=contact)
    lying = pin.Quaternion(pin.rpy.rpyToMatrix(0.0, np.pi / 2, 0.0)).coeffs()
    xs = sim.rollout(np.r_[0.003, 0.004, 0.04, lying, np.zeros(6)], np.zeros((1500, 0)))
    assert len(sim.contacts.phi) == 2
    assert np.abs(xs[:, :7] - np.r_[0.003, 0.004, 0.04, lying]).max() < 1e-9 and np.abs(xs[-200:, 7:]).max() < 1e-9


@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_lying_rod_sliding_ncp_jacobians(shape):
    """Failed (xfail) until the NCP's Newton polished its answer: stopped at its tolerance, the impulses sat
    ~1e-9 off the exact solution, so a difference with h = 1e-7 saw no friction-direction change
    (dw_x+/dw_x = 1.000 against the analytic 0.971, which h = 1e-4..1e-6 confirmed): the FD was blind,
    the Jacobian right."""
    errors = _errors(shape, "ncp", SLIDING)
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_lying_rod_rests_still(shape):
    model, geometry = rod_model(shape)
    sim = Simulator(model, geometry=geometry, dt=1e-3, ground=0.0, friction=0.5, contact="ncp")
    xs = sim.rollout(rod_state(model, z=R + 1e-3), np.zeros((600, 0)))
    assert abs(xs[-1, 2] - R) < 1e-6 and np.abs(xs[-1, 7:]).max() < 1e-6
    assert np.allclose(xs[-1, 3:7], [0, 0, 0, 1], atol=1e-9)


@pytest.mark.parametrize("floor", ["ground", "box", "cylinder"])
@pytest.mark.parametrize("tilt", [0.0, 1e-3, 0.02, 0.1, 0.3])
def test_a_can_tipped_on_a_face_settles_on_its_disk(floor, tilt):
    """A can (cylinder 4 cm x 12 cm) released tipped on its rim on the ground, a static box's top face or a free
    heavy cylinder's cap face comes down and rests flat on its disk, its centre at half its height, still. Before
    (2026-11-28): on the box and the cap, coal's patch carried the tipped disk's own normal (released at 0.1 rad it
    stopped at 0.0076 rad, 0.3 mm up; at 0.02 rad it stayed there); on the ground, one sliding rim point let it rock
    without end (0.05 rad/s a second after its release at 1e-3 or 0.02 rad)."""
    b = ModelBuilder("can")
    if floor == "box":
        b.add_static_box("floor", (2, 2, 0.2), (0, 0, -0.1))
    elif floor == "cylinder":
        j = b.add_joint("free", name="base")
        b.add_body(j, mass=50.0, cylinder=(0.3, 0.2))
    j = b.add_joint("free", name="can")
    b.add_body(j, mass=0.3, cylinder=(0.04, 0.12))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground={"box": None, "ground": 0.0}.get(floor, -0.2),
                    friction=0.5, contact="lcp")
    x = np.zeros(sim.nx)
    k = 7 if floor == "cylinder" else 0
    if floor == "cylinder":
        x[:7] = [0, 0, -0.1, 0, 0, 0, 1]
    x[k:k + 3] = [0.0, 0.0, 0.06 * np.cos(tilt) + 0.04 * np.sin(tilt) + 1e-4]
    x[k + 3:k + 7] = pin.Quaternion(pin.rpy.rpyToMatrix(tilt, 0.0, 0.0)).coeffs()
    x = sim.rollout(x, np.zeros((1500, 0)))[-1]
    up = pin.Quaternion(x[k + 3:k + 7]).toRotationMatrix()[:, 2]
    assert np.arccos(min(up[2], 1.0)) < 1e-6
    base = x[2] + 0.1 if floor == "cylinder" else 0.0  # the cap face's height
    assert abs(x[k + 2] - base - 0.06) < 1e-5
    assert np.abs(x[sim.nq + (6 if floor == "cylinder" else 0):]).max() < 1e-3


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("tilt", [0.0, 0.01, 0.3])
def test_a_standing_cylinder_step_jacobians(tilt, contact):
    """A cylinder on its end on the ground, 0.5 mm above it, flat, nearly flat (0.01 rad: four points fixed on its
    rim) or tilted (0.3 rad: its rim's sliding lowest point), approaching, sliding and spinning: Fx against central
    differences (the smallest error over three difference steps: the largest can cross a friction mode's edge)."""
    b = ModelBuilder("can")
    j = b.add_joint("free", name="can")
    b.add_body(j, mass=0.3, cylinder=(0.04, 0.12))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=0.5, contact=contact)
    rot = pin.rpy.rpyToMatrix(tilt, 0.0, 0.0)
    x = np.r_[0.0, 0.0, 0.06 * np.cos(tilt) + 0.04 * np.sin(tilt) + 5e-4, pin.Quaternion(rot).coeffs(),
              rot.T @ np.array([0.2, 0.1, -0.8]), 0.3, -0.2, 1.0]
    sim.step(x, np.zeros(0))
    c = sim._workspace(None).contact.geo.contacts
    assert len(c) == (1 if tilt > 0.1 else 4) and np.isclose(c.phi.min(), 5e-4) and sim.contacts.impulses.max() > 0
    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    err = min(max_relative_error(Fx, step_jacobians_fd(sim, x, np.zeros(0), h=h).Fx) for h in (6.06e-6, 1e-6, 1e-7))
    assert err < 1e-6, err


def _can_on(support, name="support"):
    """A simulator (LCP, friction 0.5, 1 ms, no ground) of a free can (cylinder 4 cm x 12 cm, 0.3 kg) and a static
    support: a box of ``support`` = ("box", size, centre) or a cylinder of ("cylinder", radius, length, centre)."""
    b = ModelBuilder(name)
    if support[0] == "box":
        b.add_static_box(name, support[1], support[2])
    else:
        _, radius, length, centre = support
        b.geometry.addGeometryObject(pin.GeometryObject(name, 0, pin.SE3(np.eye(3), np.asarray(centre, dtype=float)),
                                                        coal.Cylinder(radius, length)))
    j = b.add_joint("free", name="can")
    b.add_body(j, mass=0.3, cylinder=(0.04, 0.12))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=1e-3, ground=None, friction=0.5, contact="lcp")


def _assert_flat_and_still(xs, height=0.06):
    """The can's rollout ``xs`` ends upright (to 1e-6 rad), its centre at ``height``, still over its last 200 steps."""
    up = pin.Quaternion(xs[-1][3:7]).toRotationMatrix()[:, 2]
    assert np.arccos(min(up[2], 1.0)) < 1e-6 and abs(xs[-1][2] - height) < 1e-6
    assert np.abs(xs[-200:, 7:]).max() < 1e-6


@pytest.mark.parametrize("yaw", [0.0, 0.785])
@pytest.mark.parametrize("cx", [0.97, 0.99, 1.01])
def test_a_can_at_a_table_edge(cx, yaw):
    """A can (radius 4 cm) standing on a 2 m static box whose edge is at x = 1, its centre at cx: over the face
    (its disk overhanging the edge by 1 - 3 cm) it stays, flat and still, held by its rim's points over the face and
    where its rim crosses the edge; beyond the edge it tips off. Before (2026-11-28), the overhanging disk fell back
    to coal's patch and a can with its centre 1 cm inside the edge fell off (a review)."""
    sim = _can_on(("box", (2, 2, 0.2), (0, 0, -0.1)), "table")
    x = np.r_[cx, 0.0, 0.06 + 1e-4, pin.Quaternion(pin.rpy.rpyToMatrix(0.0, 0.0, yaw)).coeffs(), np.zeros(6)]
    xs = sim.rollout(x, np.zeros((1000, 0)))
    if cx < 1.0:
        _assert_flat_and_still(xs)
    else:
        assert xs[-1][2] < -0.1  # off the table


@pytest.mark.parametrize("yaw", [0.0, 0.785])
@pytest.mark.parametrize("post, cx, stays", [
    ("box", 0.01, True), ("box", 0.02, True), ("box", 0.03, False),
    ("small cap", 0.01, True), ("small cap", 0.025, True), ("small cap", 0.04, False),
    ("large cap", 0.27, True), ("large cap", 0.29, True), ("large cap", 0.31, False)])
def test_a_can_on_a_post(post, cx, stays, yaw):
    """A can (radius 4 cm) standing on a static post whose top is smaller than its disk (a 5 cm square box, a
    cylinder of radius 3 cm) or on the edge of a large one (a cylinder of radius 30 cm), its centre at cx: over the
    top it stays, flat and still, held by the corners of the overlap of its disk and the top (the top's corners or
    cap points under it, its rim's crossings of the border, its rim points over the top); beyond it, it tips off.
    Before (2026-11-28), coal's patch: on the box it stayed tilted (0.013 rad at cx = 1 cm) or fell (2 cm), and
    at the large cap's edge it fell with its centre 1 cm inside (and at 3 cm stayed tilted, still rocking)."""
    support = (("box", (0.05, 0.05, 0.2), (0, 0, -0.1)) if post == "box" else
               ("cylinder", 0.03 if post == "small cap" else 0.3, 0.2, (0.0, 0.0, -0.1)))
    sim = _can_on(support, "post")
    x = np.r_[cx, 0.0, 0.06 + 1e-4, pin.Quaternion(pin.rpy.rpyToMatrix(0.0, 0.0, yaw)).coeffs(), np.zeros(6)]
    xs = sim.rollout(x, np.zeros((1000, 0)))
    if stays:
        _assert_flat_and_still(xs)
    else:
        assert xs[-1][2] < -0.1  # off the post


@pytest.mark.parametrize("angle", [0.0, 0.3, 0.785])
@pytest.mark.parametrize("frac, stays", [(0.9, True), (1.15, False)])
def test_a_can_off_centre_on_a_thin_post(frac, stays, angle):
    """A can (radius 4 cm) standing on a static cylinder post of radius 1.5 cm, the post's whole cap under its disk,
    its centre ``frac`` of the post's radius out at ``angle`` from the post's x axis: over the cap it stays, flat and
    still, in every direction; beyond it, it tips off. The post holds it by its four rim points and the rim point
    toward the can's axis. Before (2026-11-28), by the four alone: it fell at 0.85 of the post's radius at 0.3 and
    0.785 rad (between two of those points) and stayed only along them."""
    sim = _can_on(("cylinder", 0.015, 0.2, (0.0, 0.0, -0.1)), "post")
    x = np.r_[frac * 0.015 * np.cos(angle), frac * 0.015 * np.sin(angle), 0.06 + 1e-4, 0, 0, 0, 1, np.zeros(6)]
    xs = sim.rollout(x, np.zeros((1000, 0)))
    if stays:
        _assert_flat_and_still(xs)
    else:
        assert xs[-1][2] < -0.1  # off the post


@pytest.mark.parametrize("angle, yaw", [(0.0, 0.0), (0.3, 0.5), (0.785, 0.0)])
@pytest.mark.parametrize("frac, stays", [(0.9, True), (1.15, False)])
def test_a_box_off_centre_on_a_thin_post(frac, stays, angle, yaw):
    """An 8 cm cube (0.3 kg) standing on a static cylinder post of radius 1.5 cm, turned by ``yaw`` about the
    vertical, its centre ``frac`` of the post's radius out at ``angle``: over the cap it stays, flat and still; beyond
    it, it tips off. The post holds it by its four rim points and the rim point toward the cube's centre. Before
    (2026-11-28), by the four alone: it fell at 0.75 of the post's radius between two of them (a battery)."""
    b = ModelBuilder("box-on-post")
    b.geometry.addGeometryObject(pin.GeometryObject("post", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                    coal.Cylinder(0.015, 0.2)))
    b.add_body(b.add_joint("free", name="box"), mass=0.3, box=(0.08, 0.08, 0.08))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=None, friction=0.5, contact="lcp")
    quat = pin.Quaternion(pin.rpy.rpyToMatrix(0.0, 0.0, yaw)).coeffs()
    x = np.r_[frac * 0.015 * np.cos(angle), frac * 0.015 * np.sin(angle), 0.04 + 1e-4, quat, np.zeros(6)]
    xs = sim.rollout(x, np.zeros((1000, 0)))
    if stays:
        _assert_flat_and_still(xs, height=0.04)
    else:
        assert xs[-1][2] < -0.1  # off the post


@pytest.mark.parametrize("radius", [0.3, 0.03])
@pytest.mark.parametrize("depth", [1e-5, 1e-3])
def test_a_can_sunk_into_a_post_comes_straight_out(depth, radius):
    """A can (radius 4 cm) released upright ``depth`` into the cap of a static post (radius 30 or 3 cm), 5 mm off
    its axis: it is pushed straight out as from a table (the same heights, step by step, to 1e-9), upright and at
    its x, y, and comes to rest on the cap. Before (2026-11-28), two parallel cylinders end to end whose segments
    overlapped read as side by side (-0.34 m from the large post's side): one step threw the can up by 7 mm, turned
    it by 0.77 rad and set it spinning at 1 rad/s."""
    x = np.r_[0.003, 0.004, 0.06 - depth, 0, 0, 0, 1, np.zeros(6)]
    xs = _can_on(("cylinder", radius, 0.2, (0.0, 0.0, -0.1)), "post").rollout(x, np.zeros((400, 0)))
    table = _can_on(("box", (2, 2, 0.2), (0, 0, -0.1)), "table").rollout(x, np.zeros((400, 0)))
    assert np.abs(xs[:, 2] - table[:, 2]).max() < 1e-9
    assert np.abs(xs[:, :2] - x[:2]).max() < 1e-9 and np.abs(xs[:, 3:6]).max() < 1e-9
    _assert_flat_and_still(xs)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_a_box_rocks_on_a_log_as_a_rolling_block(contact):
    """A cube (half height h = 4 cm) released level on a static log (a cylinder on its side, R = 5 cm, 40 cm long,
    friction 1), its centre e = 1 mm off the log's top line: it rolls without slipping on the log, rocking between
    level and the tilt where its centre of mass is back at its start height, (R + h) cos t + (R t - e) sin t = R + h
    (0.206647 rad; measured 0.206650); centred it stays still. The log rests on the cube's face by its lowest line
    where that is over the face (_clip_to_face). Before (2026-11-28): the log's axis faced the cube's side, whose
    face read the log's far end 0.237 m deep, and the cube was thrown up 16 mm and spun at 8.6 rad/s; then on coal's
    witness points (3e-8 of noise) it rocked to 0.20670, drifted centred (3e-4 rad in 0.7 s) and fell under NCP."""
    from scipy.optimize import brentq

    R, h, e = 0.05, 0.04, 0.001
    b = ModelBuilder("log")
    b.geometry.addGeometryObject(pin.GeometryObject("log", 0, pin.SE3(pin.rpy.rpyToMatrix(0.0, np.pi / 2, 0.0),
                                                                      np.r_[0.0, 0.0, -R]), coal.Cylinder(R, 0.4)))
    j = b.add_joint("free", name="cube")
    b.add_body(j, mass=1.0, box=(2 * h, 2 * h, 2 * h))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=None, friction=1.0, contact=contact)
    turn = brentq(lambda t: (R + h) * np.cos(t) + (R * t - e) * np.sin(t) - (R + h), 0.05, 0.5)
    for off in (0.0, e):
        xs = sim.rollout(np.r_[0.0, off, h, 0, 0, 0, 1, np.zeros(6)], np.zeros((700, 0)))
        tilt = np.array([np.arctan2(-pin.Quaternion(s[3:7]).toRotationMatrix()[2, 1],
                                    pin.Quaternion(s[3:7]).toRotationMatrix()[2, 2]) for s in xs])
        if off:
            assert abs(tilt.max() - turn) < 1e-5 and tilt.min() > -1e-9, (tilt.min(), tilt.max(), turn)
        else:
            assert np.abs(tilt).max() < 1e-9 and np.abs(xs[:, 7:]).max() < 1e-9
        assert xs[:, 2].max() < h + 1e-8 and np.abs(xs[:, 0]).max() < 1e-9


@pytest.mark.parametrize("support, cx, tilt", [
    ("table", 0.985, 0.05), ("table", 0.985, -0.05), ("table", 0.97, 0.1), ("table", 0.985, 0.02),
    ("post", 0.01, 0.02), ("post", 0.01, 0.1)])
def test_a_can_tipped_over_an_edge_settles_flat(support, cx, tilt):
    """A can (radius 4 cm) released tipped (pitch ``tilt``, its +x side down when positive) with its centre of mass
    inside the edge of a table (at x = 1) or over a 5 cm post: it comes down and stays flat and still. Tipped toward
    the edge, or over the post, its lowest rim point is beyond the face and its disk rests on the face's edge (the
    face's corners under the disk and the edges' points below its rim, against the disk: _border_under_disk); and a
    disk resting exactly on an edge can get any normal from coal, so the box's face its axis faces is tried too.
    Before (2026-11-28): on the post it stayed tilted (0.02 rad, still: coal's patch), on the table it fell off
    (-0.05 rad: coal's normal at the edge, 0.98 horizontal, read a 0.98 m penetration) or lay down on its side."""
    sim = _can_on(("box", (2, 2, 0.2) if support == "table" else (0.05, 0.05, 0.2), (0, 0, -0.1)), "edge")
    rot = pin.rpy.rpyToMatrix(0.0, tilt, 0.0)
    x = np.r_[cx, 0.0, 0.06 * np.cos(tilt) + 0.04 * np.sin(abs(tilt)) + 1e-4, pin.Quaternion(rot).coeffs(), np.zeros(6)]
    _assert_flat_and_still(sim.rollout(x, np.zeros((1500, 0))))


@pytest.mark.parametrize("radius", [0.002, 0.01])
def test_a_thin_cylinder_lying_on_the_ground_touches_at_both_ends(radius):
    """A cylinder of radius 2 mm or 1 cm, 20 cm long, lying 0.1 mm above the ground (margin 5 mm): one point at
    each end's rim. A first rule for "nearly flat on its disk" (the rim's far side within the margin) took a rod
    thinner than half the margin for a standing one, whatever its tilt: four points on one end, none on the other
    (a review)."""
    b = ModelBuilder("thin")
    j = b.add_joint("free", name="rod")
    b.add_body(j, mass=0.1, rotation=(0, np.pi / 2, 0), cylinder=(radius, 0.2))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=0.5, contact="lcp")
    sim.step(np.r_[0.0, 0.0, radius + 1e-4, 0, 0, 0, 1, np.zeros(6)], np.zeros(0))
    c = sim._workspace(None).contact.geo.contacts
    assert len(c) == 2 and np.allclose(np.sort(c.points[:, 0]), [-0.1, 0.1]) and np.allclose(c.phi, 1e-4)
