"""The compiled collision detection (cpp/src/detection.cpp) against the Python reference.

``CollisionScene.detect`` runs the core's ``Detector`` when the core is available;
``CollisionScene._detect_reference`` is the Python implementation. Both must give the same
contacts: points, normals and distances to 1e-12, every integer array exactly, in the same order.

coal warm-starts GJK from the previous call on the same ``GeometryData`` (its witness points
move by ~1e-12 with that history), so the two paths each get their own ``GeometryData`` fed the
same sequence of configurations.
"""

from __future__ import annotations

import sys
import os

import coal
import numpy as np
import pinocchio as pin
import pytest

import problems
from contact import core
from contact.detection import CollisionScene
from dynamics import ModelBuilder, Simulator

sys.path.insert(0, os.path.dirname(__file__))
from test_mesh_collision import HALF, _box_mesh, _bvh, _prism, _scene_with as _mesh_scene, _uv_sphere  # noqa: E402
from test_rods import LENGTH, R, rod_model  # noqa: E402

pytestmark = pytest.mark.skipif(core.module is None, reason=f"the compiled core is not available: {core.reason}")

FLOATS = ("points", "normals", "phi", "radius", "axis", "gap", "slide")
INTS = ("body_a", "body_b", "normal_body", "point_body", "pair")


def compare(scene: CollisionScene, model: pin.Model, qs) -> tuple[int, float]:
    """Detect at every ``q`` both ways; returns (contacts seen, largest float difference)."""
    assert scene._detector is not None
    data_ref, data_new = model.createData(), model.createData()
    gd_ref, gd_new = scene.create_data(), scene.create_data()
    seen, worst = 0, 0.0
    for q in qs:
        ref = scene._detect_reference(model, data_ref, gd_ref, q)
        new = scene.detect(model, data_new, gd_new, q)
        for f in FLOATS + INTS:
            a, b = getattr(ref, f), getattr(new, f)
            assert a.shape == b.shape and a.dtype == b.dtype, (f, a.shape, b.shape, a.dtype, b.dtype)
            if f in INTS:
                assert np.array_equal(a, b), (f, a, b)
            elif a.size:
                err = float(np.abs(a - b).max())
                assert err <= 1e-12, (f, err, a, b)
                worst = max(worst, err)
        # forward kinematics ran on the caller's data
        assert np.array_equal(data_ref.oMi[model.njoints - 1].homogeneous, data_new.oMi[model.njoints - 1].homogeneous)
        seen += len(ref)
    return seen, worst


def _states(name):
    """(simulator, states): a rollout under random controls, one under the problem's own guess, x0."""
    ocp = problems.load(name)
    sim = ocp.dynamics
    rng = np.random.default_rng(7)
    if hasattr(ocp, "rollout"):
        lo, hi = np.maximum(ocp.u_lower, -1.0), np.minimum(ocp.u_upper, 1.0)
        xs = [ocp.rollout(ocp.us_init + rng.uniform(lo, hi, (ocp.horizon, ocp.nu))), ocp.rollout(ocp.us_init)]
    else:  # an inverse problem: from its bench state
        x0 = ocp.info["bench_state"][0]
        xs = [sim.rollout(x0, rng.uniform(-1.0, 1.0, (300, sim.nu))), sim.rollout(x0, np.zeros((300, sim.nu)))]
    return sim, np.vstack(xs)


def _contact_problems():
    out = []
    for name in problems.names():
        cm = getattr(problems.load(name).dynamics, "contact_model", None)
        if cm is not None and cm.scene.npairs:
            out.append(name)
    return out


CONTACT_PROBLEMS = _contact_problems()


def test_the_contact_problems_are_all_there():
    assert {"catapult", "jump-worm", "half-cheetah", "ur5-box", "go1-hold", "go1-jump", "go1-standing",
            "talos-standing", "cube-throw"} <= set(CONTACT_PROBLEMS)


@pytest.mark.parametrize("name", CONTACT_PROBLEMS)
def test_registered_problems(name):
    sim, xs = _states(name)
    seen, _ = compare(sim.contact_model.scene, sim.model, xs[:, :sim.nq])
    assert seen > 0


def _free_q(model, z, rot=(0.0, 0.0, 0.0), xy=(0.0, 0.0)):
    return pin.integrate(model, np.r_[xy, z, 0, 0, 0, 1.0], np.r_[0, 0, 0, rot])


def _sweep(model, z0, rots, dz=(-2e-3, -1e-6, 0.0, 1e-7, 1e-4, 2e-3, 0.05)):
    """Configurations around the resting height z0: penetrating, touching, within the margin, away."""
    return [_free_q(model, z0 + d, rot, xy=(0.1 * d, -0.2)) for rot in rots for d in dz]


ROTS = [(0, 0, 0), (0, 0, 0.7), (1e-5, 0, 0), (0.02, -0.01, 0.3), (0.3, 0.0, 0.0), (0.5, 0.4, 0.1)]


def _body_on(shape_kw, floor=None):
    """A free body (``shape_kw`` for add_body) over the ground z = 0, or over a static floor."""
    b = ModelBuilder("body")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, **shape_kw)
    if floor == "box":
        b.add_static_box("floor", (2, 2, 0.2), (0, 0, -0.1))
    model, geom = b.build()
    return model, CollisionScene(model, geom, ground=None if floor else 0.0, margin=5e-3)


@pytest.mark.parametrize("floor", [None, "box"])
@pytest.mark.parametrize("shape", ["box", "sphere", "capsule", "cylinder"])
def test_primitives_on_the_ground_and_on_a_box(shape, floor):
    kw = {"box": dict(box=tuple(2 * HALF)), "sphere": dict(sphere=0.05), "capsule": dict(capsule=(R, LENGTH)),
          "cylinder": dict(cylinder=(R, LENGTH))}[shape]
    model, scene = _body_on(kw, floor)
    z0 = {"box": HALF[2], "sphere": 0.05, "capsule": R, "cylinder": R}[shape]
    lying = (np.pi / 2, 0, 0) if shape in ("capsule", "cylinder") else (0, 0, 0)
    qs = _sweep(model, z0, [np.add(lying, r) for r in ROTS])
    if shape in ("capsule", "cylinder"):  # standing on an end
        z1 = LENGTH / 2 + (R if shape == "capsule" else 0.0)
        qs += _sweep(model, z1, ROTS)
    seen, _ = compare(scene, model, qs)
    assert seen > 0
    if shape == "box" and floor is None:  # a box flat on the ground: its 4 corners
        c = scene.detect(model, model.createData(), scene.create_data(), _free_q(model, HALF[2]))
        assert len(c) == 4 and np.allclose(c.phi, 0.0)


def test_rods_lying_on_the_ground():
    for shape in ("capsule", "cylinder"):
        model, geometry = rod_model(shape)
        scene = CollisionScene(model, geometry, ground=0.0, margin=5e-3)
        qs = _sweep(model, R, ROTS) + _sweep(model, LENGTH / 2, [(0, np.pi / 2, 0), (0, np.pi / 2 + 1e-7, 0)])
        seen, _ = compare(scene, model, qs)
        assert seen > 0
        c = scene.detect(model, model.createData(), scene.create_data(), _free_q(model, R))
        assert len(c) == 2 and (shape == "capsule" or np.abs(c.axis).sum() > 0)


def test_box_on_a_box_face_to_face_and_two_free_boxes():
    b = ModelBuilder("boxes")
    j1 = b.add_joint("free", name="a")
    b.add_body(j1, mass=1.0, box=(0.2, 0.2, 0.2))
    j2 = b.add_joint("free", name="b")
    b.add_body(j2, mass=1.0, box=(0.1, 0.3, 0.1))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=0.0, margin=5e-3)
    free = _one_free()
    qa = np.r_[0, 0, 0.1, 0, 0, 0, 1.0]
    # b stacked on a: face on face (turned about z), barely tilted, on an edge; penetrating to away
    qs = [np.r_[qa, pin.integrate(free, np.r_[0.02, -0.01, 0.25 + d, 0, 0, 0, 1.0], np.r_[0, 0, 0, rot])]
          for d in (-1e-3, 0.0, 1e-6, 2e-3) for rot in ROTS]
    rng = np.random.default_rng(3)
    for _ in range(60):  # random poses near each other
        qr = pin.integrate(free, qa, rng.normal(0, 0.05, 6))
        qb = pin.integrate(free, np.r_[0, 0, 0.25, 0, 0, 0, 1.0], rng.normal(0, 1, 6) * [0.04, 0.04, 0.02, 0.6, 0.6, 3])
        qs.append(np.r_[qr, qb])
    seen, _ = compare(scene, model, qs)
    assert seen > 0
    c = scene.detect(model, model.createData(), scene.create_data(), qs[len(ROTS)])  # touching, face on face
    assert len(c) == 8 and np.sum(c.body_b == 1) == 4  # a on the ground and b on a, 4 corners each



def _one_free():
    m = pin.Model()
    m.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    return m


@pytest.mark.parametrize("mesh", ["box", "prism4", "prism6", "prism24", "bulge", "ball"])
def test_mesh_hulls_on_the_ground(mesh):
    V, F = {"box": lambda: _box_mesh(), "prism4": lambda: _prism(4), "prism6": lambda: _prism(6),
            "prism24": lambda: _prism(24), "bulge": lambda: _prism(24, bulge=5e-4),
            "ball": lambda: _uv_sphere(0.02)}[mesh]()
    model, scene = _mesh_scene(_bvh(V, F))
    z0 = -np.min(V[:, 2])
    rots = ROTS + [(0, 0, 0.37), (np.pi / 2, 0, 0), (np.pi / 2 + 0.01, 0, 0.2)]
    seen, _ = compare(scene, model, _sweep(model, z0, rots))
    assert seen > 0


@pytest.mark.parametrize("kind", ["mesh box on a box", "ball on a mesh box", "mesh ball on a box",
                                  "mesh box on a mesh box"])
def test_meshes_against_primitives(kind):
    from test_mesh_collision import _against_primitives

    sim, rest = _against_primitives(kind)
    scene, model = sim.contact_model.scene, sim.model
    qs = _sweep(model, rest, ROTS + [(0, 0, 0.37)])
    xs = sim.rollout(np.r_[0, 0, rest + 0.01, 0, 0, 0, 1, 0.3, 0.1, 0, 0.2, -0.1, 0.5], np.zeros((200, 0)))
    seen, _ = compare(scene, model, qs + list(xs[:, :sim.nq]))
    assert seen > 0


def test_mesh_box_over_the_edge_of_a_box():
    """A hull on a box face near the face's edge: its vertices over the face (within the margin) only, or
    coal's contact when the lowest one is off the face."""
    from test_mesh_collision import _against_primitives

    sim, rest = _against_primitives("mesh box on a box")
    scene, model = sim.contact_model.scene, sim.model
    edge = 1.0 - HALF[0]  # the floor's face ends at x = 1
    qs = [_free_q(model, rest + dz, rot, xy=(edge + dx, 0.3)) for dx in (-0.01, -1e-4, 0.0, 5e-4, 2e-3, 4e-3, 6e-3,
                                                                        0.05, 0.099, 0.1005, 0.15)
          for dz in (-1e-4, 0.0, 1e-4) for rot in ((0, 0, 0), (0, 0, 0.2), (0, 0.01, 0), (0, -0.01, 0))]
    seen, _ = compare(scene, model, qs)
    assert seen > 0


def test_planar_scene_with_rods_and_boxes():
    """A planar body (x, y, rotation about z) with a capsule and a box on the ground y = 0."""
    b = ModelBuilder("planar", gravity=(0.0, -9.81, 0.0))
    j = b.add_joint("planar", name="root")
    b.add_body(j, mass=1.0, capsule=(0.05, 0.3), rotation=(0, np.pi / 2, 0))
    b.add_body(j, mass=1.0, box=(0.2, 0.1, 0.3), offset=(0.3, 0, 0))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=0.0, up=(0, 1, 0), planar=True, margin=5e-3,
                           self_collision=False)
    qs = [np.r_[x, y, np.cos(a), np.sin(a)] for x in (0.0, 0.2) for y in (0.0499, 0.05, 0.051, 0.06)
          for a in (0.0, 1e-6, 0.05, -0.3)]
    qs = [q[:model.nq] for q in qs]
    seen, _ = compare(scene, model, qs)
    assert seen > 0


def test_solo_meshes():
    from dynamics import example_robot_urdf

    path = example_robot_urdf("solo12").replace("solo12.urdf", "solo.urdf")
    sim = Simulator.from_urdf(path, floating_base=True, ground=0.0)
    x0 = sim.neutral_state()
    x0[2] = 0.4
    xs = sim.rollout(x0, np.random.default_rng(0).normal(0, 0.3, (400, sim.nu)))
    seen, _ = compare(sim.contact_model.scene, sim.model, xs[::2, :sim.nq])
    assert seen > 0


@pytest.mark.parametrize("shape, floor", [("box", None), ("box", "box"), ("sphere", None), ("sphere", "box"),
                                          ("capsule", "box")])  # (a capsule on the ground has no coal patch)
def test_retry_path_and_its_error(monkeypatch, shape, floor):
    """The retry with tighter GJK tolerances (coal's first patch rejected in both paths: no natural state
    of the registered problems reaches it with GJK_TOLERANCE), and the error when that fails too."""
    import contact.detection as det

    kw = {"box": dict(box=tuple(2 * HALF)), "sphere": dict(sphere=0.05), "capsule": dict(capsule=(R, LENGTH))}[shape]
    model, scene = _body_on(kw, floor)
    z0 = {"box": HALF[2], "sphere": 0.05, "capsule": R}[shape]
    qs = _sweep(model, z0, ROTS)
    valid_normal = det._valid_normal
    monkeypatch.setattr(det, "_valid", lambda p: valid_normal(p) and all(
        np.all(np.abs(p.getPoint(i)) < 1e6) for i in range(p.size())))
    monkeypatch.setattr(det, "_valid_normal", lambda p: False)
    scene._detector.test_reject = 1
    seen, _ = compare(scene, model, qs)
    assert seen > 0
    monkeypatch.setattr(det, "_valid", lambda p: False)
    scene._detector.test_reject = 2
    q = _free_q(model, z0)
    with pytest.raises(RuntimeError) as ref:
        scene._detect_reference(model, model.createData(), scene.create_data(), q)
    with pytest.raises(RuntimeError) as new:
        scene.detect(model, model.createData(), scene.create_data(), q)
    assert str(new.value) == str(ref.value) and "collision detection failed between" in str(ref.value)


def test_bad_input_is_named():
    model, scene = _body_on(dict(box=tuple(2 * HALF)))
    data, gd = model.createData(), scene.create_data()
    with pytest.raises(ValueError, match="q has size 3, the model has nq = 7"):
        scene._detector.detect(model, data, gd, np.zeros(3))
    with pytest.raises(TypeError, match="expected a pinocchio.Model"):
        scene._detector.detect(data, data, gd, np.zeros(7))
    with pytest.raises(TypeError, match="expected a pinocchio.GeometryData"):
        scene._detector.detect(model, data, model, _free_q(model, 0.05))
    b = ModelBuilder("two")
    b.add_body(b.add_joint("free", name="a"), mass=1.0, sphere=0.1)
    b.add_body(b.add_joint("free", name="b"), mass=1.0, sphere=0.1)
    other = CollisionScene(*b.build(), ground=0.0)  # 3 objects, 3 pairs
    with pytest.raises(ValueError, match="gdata does not belong"):
        scene._detector.detect(model, data, other.create_data(), _free_q(model, 0.05))


def test_no_core_means_no_detector(monkeypatch):
    monkeypatch.setattr(core, "module", None)
    monkeypatch.setattr(core, "_warned", True)
    model, scene = _body_on(dict(sphere=0.05))
    assert scene._detector is None
    c = scene.detect(model, model.createData(), scene.create_data(), _free_q(model, 0.05))
    assert len(c) == 1


@pytest.mark.parametrize("cylinder_first", [True, False])
def test_a_ball_at_a_cylinder_rim(cylinder_first):
    """A ball beyond a cylinder's end plane: outside the radius on the rim (the centre line to the rim circle, its
    slide sqrt(R / rho) along the rim's tangent), inside it on the cap face (the face's normal); both ways, at random
    azimuths, tilts and distances (-1 .. 4 mm)."""
    rng = np.random.default_rng(5)
    R_cyl, h, r = 0.04, 0.1, 0.06
    b = ModelBuilder("rim")
    for i, shape in enumerate(("cylinder", "sphere") if cylinder_first else ("sphere", "cylinder")):
        j = b.add_joint("free", name=f"j{i}")
        b.add_body(j, mass=1.0, **({"sphere": r} if shape == "sphere" else {"cylinder": (R_cyl, 2 * h)}))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
    free = _one_free()
    qs, rims, faces = [], 0, 0
    for _ in range(40):
        qc = pin.integrate(free, np.r_[0, 0, 0, 0, 0, 0, 1.0], rng.normal(0, 1, 6) * [0, 0, 0, 1, 1, 1])
        Mc = pin.XYZQUATToSE3(qc)
        a, e = Mc.rotation[:, 2], rng.choice([-1.0, 1.0])  # the axis and the end the ball meets
        phase = rng.uniform(0, 7)
        u = Mc.rotation[:, 0] * np.cos(phase) + Mc.rotation[:, 1] * np.sin(phase)  # radial
        if rng.uniform() < 0.75:  # the rim: the normal between the radial direction and the axis
            tilt = rng.uniform(0.05, 1.5)
            n = np.cos(tilt) * u + np.sin(tilt) * e * a
            centre = Mc.translation + e * h * a + R_cyl * u + (r + rng.uniform(-1e-3, 4e-3)) * n
            rims += 1
        else:  # the cap face, within the radius
            centre = Mc.translation + e * h * a + rng.uniform(0, 0.9) * R_cyl * u + (r + 1e-3) * e * a
            faces += 1
        qb = np.r_[centre, pin.Quaternion(pin.exp3(rng.normal(0, 1, 3))).coeffs()]
        qs.append(np.r_[qc, qb] if cylinder_first else np.r_[qb, qc])
    seen, _ = compare(scene, model, qs)
    assert seen == len(qs) and rims > 20 and faces > 5
    data, gd = model.createData(), scene.create_data()
    lines = sum(int(scene.detect(model, data, gd, q).gap[0] != 0.0) for q in qs)
    assert lines == rims  # the rim's centre line; the cap face's normal carried by the cylinder (gap 0)


@pytest.mark.parametrize("rod", ["capsule", "cylinder"])
def test_a_rod_at_a_cylinder_rim(rod):
    """A capsule or a cylinder crossing beyond a cylinder's end at random angles, outside its radius (the rim: the
    segment-circle closest points, _rod_rim) or over its cap face: both detectors agree, and the rim gives lines."""
    rng = np.random.default_rng(8)
    R, h, r2, h2 = 0.04, 0.1, 0.03, 0.15
    b = ModelBuilder("rim-rod")
    for i, (shape, dims) in enumerate((("cylinder", (R, 2 * h)), (rod, (r2, 2 * h2)))):
        j = b.add_joint("free", name=f"j{i}")
        b.add_body(j, mass=1.0, **{shape: dims})
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
    free = _one_free()
    qs = []
    for _ in range(60):
        qc = pin.integrate(free, np.r_[0, 0, 0, 0, 0, 0, 1.0], rng.normal(0, 1, 6) * [0, 0, 0, 1, 1, 1])
        Mc = pin.XYZQUATToSE3(qc)
        a, e = Mc.rotation[:, 2], rng.choice([-1.0, 1.0])
        phase = rng.uniform(0, 7)
        u = Mc.rotation[:, 0] * np.cos(phase) + Mc.rotation[:, 1] * np.sin(phase)
        tilt = rng.uniform(-0.4, 1.4)  # below 0: the rod's point over the cap face
        n = np.cos(tilt) * u + np.sin(tilt) * e * a
        t = np.cross(a, u)
        axis = np.cos(rng.uniform(0, 1.2)) * t + np.sin(rng.uniform(0, 1.2)) * np.cross(n, t)
        axis /= np.linalg.norm(axis)
        rim = Mc.translation + e * h * a + R * u
        centre = rim + (r2 + rng.uniform(-1e-3, 4e-3)) * n + rng.uniform(-0.5, 0.5) * h2 * axis
        x2 = np.cross(axis, [1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.cross(axis, [0.0, 1.0, 0.0])
        x2 /= np.linalg.norm(x2)
        rot = np.column_stack((x2, np.cross(axis, x2), axis))
        qs.append(np.r_[qc, centre, pin.Quaternion(rot).coeffs()])
    seen, _ = compare(scene, model, qs)
    data, gd = model.createData(), scene.create_data()
    lines = sum(int(np.any(scene.detect(model, data, gd, q).gap != 0.0)) for q in qs)
    assert seen > 40 and lines > 20, (seen, lines)


def test_round_shapes_against_each_other():
    """Spheres, capsules and cylinders on two free bodies, near and touching, at random poses: the centre line
    (normal, gap, slides: contact/detection.py _line_cores and its compiled twin; a ball on a cylinder's side, cap
    or rim; a capsule or a cylinder on a cylinder's side, or coal's patch at its ends) both ways."""
    rng = np.random.default_rng(11)
    free = _one_free()
    for shapes in (("sphere", "sphere"), ("capsule", "sphere"), ("sphere", "capsule"), ("capsule", "capsule"),
                   ("cylinder", "sphere"), ("sphere", "cylinder"), ("capsule", "cylinder"), ("cylinder", "capsule"),
                   ("cylinder", "cylinder")):
        b = ModelBuilder("round")
        for i, shape in enumerate(shapes):
            j = b.add_joint("free", name=f"j{i}")
            b.add_body(j, mass=1.0, **({"sphere": 0.06} if shape == "sphere" else {shape: (0.04, 0.2)}))
        model, geom = b.build()
        scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
        qa = np.r_[0, 0, 0, 0, 0, 0, 1.0]
        qs = []
        for _ in range(40):
            qb = pin.integrate(free, np.r_[0, 0, 0.1, 0, 0, 0, 1.0], rng.normal(0, 1, 6) * [0.05, 0.05, 0.01, 2, 2, 2])
            qs.append(np.r_[pin.integrate(free, qa, rng.normal(0, 0.3, 6) * [0, 0, 0, 1, 1, 1]), qb])
        seen, _ = compare(scene, model, qs)
        assert seen > 0, shapes


@pytest.mark.parametrize("face", ["box", "cylinder"])
def test_a_cylinder_rim_on_a_face(face):
    """A cylinder over a box's top face or a cylinder's cap face at random tilts (0 - 1.5 rad: standing on its end,
    tilted, lying on its side), its lower rim from 1 mm inside to 4 mm above the face, anywhere from the face's
    middle to past its edge: both detectors agree; a rim over the face is its lowest rim points (Contacts.axis), a
    nearly flat disk points fixed on its rim (past a box's edge, with its rim's crossings of it), a tilted rim past
    the edge coal's patch (neither with an axis); the face's body carries its exact normal under a rim (coal's carries
    noise), and so does a cylinder's cap face under a ball or a capsule's end."""
    rng = np.random.default_rng(3)
    R2, h2, half = 0.04, 0.05, 0.15
    b = ModelBuilder("rim-face")
    j = b.add_joint("free", name="j0")
    b.add_body(j, mass=1.0, **({"box": (2 * half, 2 * half, 0.1)} if face == "box" else {"cylinder": (half, 0.1)}))
    j = b.add_joint("free", name="j1")
    b.add_body(j, mass=1.0, cylinder=(R2, 2 * h2))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
    qs = []
    for _ in range(80):
        beta = [0.0, 1e-7, np.pi / 2, *rng.uniform(0.05, 1.5, 5)][rng.integers(8)]
        turn = rng.uniform(0.0, 2 * np.pi)
        a = np.array([np.sin(beta) * np.cos(turn), np.sin(beta) * np.sin(turn), np.cos(beta)])
        e1 = np.cross(a, [1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.cross(a, [0.0, 1.0, 0.0])
        e1 /= np.linalg.norm(e1)
        rot = np.column_stack((e1, np.cross(a, e1), a))
        down = np.array([0.0, 0.0, -1.0]) + a * a[2]
        low = -h2 * a + (R2 * down / np.linalg.norm(down) if np.linalg.norm(down) > 1e-9 else 0.0)
        where = rng.uniform(0.0, 1.3) * half * np.array([np.cos(turn + 1), np.sin(turn + 1)])
        centre = np.r_[where, 0.05 + rng.uniform(-1e-3, 4e-3)] - low
        qs.append(np.r_[0, 0, 0, 0, 0, 0, 1, centre, pin.Quaternion(rot).coeffs()])
    seen, _ = compare(scene, model, qs)
    data, gd = model.createData(), scene.create_data()
    found = [scene.detect(model, data, gd, q) for q in qs]
    rims = sum(int(np.any(c.axis != 0.0)) for c in found)
    others = sum(int(len(c) > 0 and not np.any(c.axis != 0.0)) for c in found)
    assert seen > 60 and rims > 25 and others > 5, (seen, rims, others)
    for c in found:  # a rim on the face: the face's body carries its exact normal, z (j0 at the identity)
        rim = np.any(c.axis != 0.0, axis=1)
        assert np.all(c.normal_body[rim] == 1) and np.all(c.point_body[rim] == 2)
        assert np.allclose(c.normals[rim], [0.0, 0.0, 1.0], rtol=0, atol=1e-12)
    if face == "cylinder":  # a ball and a capsule's end on the cap face: the cap's axis, exactly
        for shape, dims, z in (("sphere", 0.03, 0.03), ("capsule", (0.03, 0.1), 0.08)):
            b = ModelBuilder("on-cap")
            j = b.add_joint("free", name="j0")
            b.add_body(j, mass=1.0, cylinder=(half, 0.1))
            j = b.add_joint("free", name="j1")
            b.add_body(j, mass=1.0, **{shape: dims})
            model, geom = b.build()
            scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
            qs = [np.r_[0, 0, 0, 0, 0, 0, 1, rng.uniform(-0.05, 0.05, 2), 0.05 + z + d,
                        pin.Quaternion(pin.rpy.rpyToMatrix(*rng.normal(0, 0.1, 3))).coeffs()]
                  for d in (-1e-3, 0.0, 1e-4, 2e-3) for _ in range(3)]
            seen, _ = compare(scene, model, qs)
            assert seen >= len(qs)
            for q in qs:
                c = scene.detect(model, model.createData(), scene.create_data(), q)
                assert np.allclose(np.abs(c.normals), [0.0, 0.0, 1.0], rtol=0, atol=1e-12), c.normals


def _face_and_can(name, can=(0.04, 0.12), **face):
    """``(model, geometry, scene)``: a free body of shape ``face`` (``box=`` or ``cylinder=`` sizes, 1 kg, joint 1)
    and a free can (cylinder of ``can`` = (radius, length), 1 kg, joint 2); the scene's ground far below, margin
    5 mm."""
    b = ModelBuilder(name)
    j = b.add_joint("free", name="j0")
    b.add_body(j, mass=1.0, **face)
    j = b.add_joint("free", name="j1")
    b.add_body(j, mass=1.0, cylinder=can)
    model, geom = b.build()
    return model, geom, CollisionScene(model, geom, ground=-5.0, margin=5e-3)


def _cans_on_a_face(rng, count, tilts, spread):
    """``count`` configurations of :func:`_face_and_can`'s bodies: the face's body at the origin turned at random,
    the can nearly flat on its top (z = 0.05 in its frame; tilted by one of ``tilts`` times a normal draw about each
    of two axes, turned at random about its own), its disk's centre within ``spread`` of the top's middle and 1 mm
    into to 3 mm above it."""
    qs = []
    for _ in range(count):
        rb = pin.rpy.rpyToMatrix(*rng.normal(0, 0.5, 3))
        tilt = rng.choice(tilts)
        rc = rb @ pin.rpy.rpyToMatrix(tilt * rng.normal(), tilt * rng.normal(), rng.uniform(0, 6))
        centre = rb @ np.r_[rng.uniform(-spread, spread, 2), 0.05] + rc[:, 2] * (0.06 + rng.uniform(-1e-3, 3e-3))
        qs.append(np.r_[0, 0, 0, pin.Quaternion(rb).coeffs(), centre, pin.Quaternion(rc).coeffs()])
    return qs


@pytest.mark.parametrize("face", ["box", "cylinder"])
def test_a_cylinder_disk_overhanging_a_small_face(face):
    """A can (radius 4 cm) nearly flat (0 - 0.04 rad) on a free box's face smaller than its disk (5 x 3 cm) or on a
    free cylinder's cap (radius 3 or 6 cm: smaller or larger than the disk), anywhere from centred to past the
    border: both detectors agree, the disk held by the corners of its overlap with the face (the face's corners or
    cap points under it, the rim's crossings of the border, its own rim points over the face)."""
    rng = np.random.default_rng(1)
    found = []
    for size in ((0.03,) if face == "box" else (0.03, 0.06)):
        model, geom, scene = _face_and_can("post", **({"box": (0.05, 0.03, 0.1)} if face == "box" else
                                                       {"cylinder": (size, 0.1)}))
        qs = _cans_on_a_face(rng, 200, [0.0, 1e-4, 0.01, 0.04], 0.05)
        seen, _ = compare(scene, model, qs)
        data, gd = model.createData(), scene.create_data()
        counts, over, corners, toward = [], 0, 0, 0
        for q in qs:
            c = scene.detect(model, data, gd, q)
            counts.append(len(c))
            rb = pin.Quaternion(q[3:7]).toRotationMatrix()
            a = rb.T @ pin.Quaternion(q[10:14]).toRotationMatrix()[:, 2]  # the can's axis in the post's frame
            local = rb.T @ q[7:10] - 0.06 * a  # its lower disk's centre there
            low = local[2] - 0.05 - 0.04 * np.hypot(*a[:2])  # its rim's lowest point above the top
            inside = np.all(np.abs(local[:2]) < (0.025, 0.015)) if face == "box" else np.hypot(*local[:2]) < size
            if a[2] > np.cos(0.01) and inside and low >= 0.0 and len(c):  # nearly flat, over the top: the exact
                over += 1  # normal of the top, or between two cylinders of either disk (coal's patch: its own)
                axes = [rb[:, 2]] + ([pin.Quaternion(q[10:14]).toRotationMatrix()[:, 2]] if face == "cylinder" else [])
                assert np.all(np.abs(c.normals @ np.column_stack(axes)).max(axis=1) > 1.0 - 1e-12), c.normals
                if face == "box" and np.all(np.abs(local[:2]) < 0.005):  # the top under the disk: its 4 corners
                    corners += 1
                    xy = np.sort(np.abs((c.points - q[:3]) @ rb[:, :2]), axis=0)
                    assert len(c) == 4 and np.allclose(xy, [[0.025, 0.015]] * 4, rtol=0, atol=1e-12), c.points
                off = np.hypot(*local[:2])
                if face == "cylinder" and size < 0.04 and 1e-6 < off < 0.04 - size and rb[2, 2] > 0.0:
                    # the post's cap under the disk, the can on top: its 4 rim points and the one toward the can's
                    # axis (where an off-centre can tips), the can's cap carrying the normal
                    toward += 1
                    xy = (c.points - q[:3]) @ rb[:, :2]
                    assert len(c) == 5 and np.allclose(np.hypot(*xy.T), size, rtol=0, atol=1e-12), c.points
                    assert np.allclose(xy[-1], size * local[:2] / off, rtol=0, atol=1e-12), (xy, local)
        found.append(counts)
        assert over > 10 and (face == "cylinder" or corners > 0) and (face == "box" or size > 0.04 or toward > 0), (over, toward)
        assert seen > 200, seen
    # parts of five or more points: the overlap's corners besides the disk's four rim points
    assert all(sum(c >= 5 for c in counts) > 10 for counts in found), [np.bincount(c) for c in found]


@pytest.mark.parametrize("upper, lower", [("can", "post"), ("can", "can"), ("ball", "post"), ("capsule", "can")])
def test_round_shapes_sunk_end_to_end_are_not_side_by_side(upper, lower):
    """A can, ball or capsule over a post's or can's cap, their axes parallel or tilted by up to 0.05 rad, sunk by
    1e-5 to 1 cm into it or 0.1 mm above, anywhere over the cap (or beside it): both detectors agree, and no contact
    reads a distance below the separation along the contact's normal, coal's or either axis (their signed distance
    is the largest over all directions). Before (2026-11-28), two parallel cylinders end to end whose segments
    overlapped had their closest points anywhere along the overlap and read as side by side: a can sunk 1e-5 into a
    30 cm post read -0.34 m, and a step threw it up 7 cm or turned it by 0.8 rad (72 of 295 such poses)."""
    from contact.detection import _extent

    shapes = {"can": coal.Cylinder(0.04, 0.12), "post": coal.Cylinder(0.3, 0.2), "ball": coal.Sphere(0.05),
              "capsule": coal.Capsule(0.04, 0.2)}
    model, geom = pin.Model(), pin.GeometryModel()
    for i, name in enumerate((upper, lower)):
        j = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), f"j{i}")
        model.appendBodyToJoint(j, pin.Inertia.FromSphere(1.0, 0.05), pin.SE3.Identity())
        geom.addGeometryObject(pin.GeometryObject(name, j, pin.SE3.Identity(), shapes[name]))
    scene = CollisionScene(model, geom, ground=None, margin=5e-3)
    sA, sB = shapes[upper], shapes[lower]

    def separation(MA, MB, e):  # min over A of e . x - max over B
        return -_extent(sA, MA, -e) - _extent(sB, MB, e)

    rng = np.random.default_rng(3)
    qs, poses = [], []
    for _ in range(300):
        tilt = rng.choice([0.0, 0.0, 1e-3, 0.05])
        rb = pin.rpy.rpyToMatrix(*rng.normal(0, 0.3, 3))
        ra = rb @ pin.rpy.rpyToMatrix(tilt * rng.normal(), tilt * rng.normal(), rng.uniform(0, 6))
        MB = pin.SE3(rb, np.zeros(3))
        MA = pin.SE3(ra, rb @ np.r_[rng.uniform(-1.2, 1.2, 2) * float(sB.radius), 0.0])
        target = rng.choice([-1e-2, -1e-3, -1e-5, 1e-4])  # A's separation along B's axis
        MA.translation = MA.translation + (target - separation(MA, MB, rb[:, 2])) * rb[:, 2]
        qs.append(np.r_[pin.SE3ToXYZQUAT(MA), pin.SE3ToXYZQUAT(MB)])
        poses.append((MA, MB))
    seen, _ = compare(scene, model, qs)
    data, gd = model.createData(), scene.create_data()
    checked = 0
    for q, (MA, MB) in zip(qs, poses):
        c = scene.detect(model, data, gd, q)
        if not len(c):
            continue
        checked += 1
        dirs = [c.normals[0], MA.rotation[:, 2], MB.rotation[:, 2]]
        best = max(separation(MA, MB, s * e) for e in dirs for s in (1.0, -1.0))
        assert c.phi.min() >= best - 1e-6, (c.phi, best, c.normals)
    assert seen > 150 and checked > 150, (seen, checked)


def test_a_cylinder_on_its_side_across_a_box_face():
    """A log (cylinder 3 cm x 40 cm) on its side across a free box's top face (8 x 12 cm, turned at random), tilted
    by up to 0.3 rad, turned about the vertical at random, anywhere from over the face to past its edges, 1 mm into to
    3 mm above it: both detectors agree; where the log is over the face, it rests on its lowest line's part over the
    face (two points within the face, its exact normal), at their exact distances along it."""
    rng = np.random.default_rng(5)
    model, geom, scene = _face_and_can("log", can=(0.03, 0.4), box=(0.08, 0.12, 0.1))
    qs = []
    for _ in range(300):
        rb = pin.rpy.rpyToMatrix(*rng.normal(0, 0.3, 3))
        tilt = rng.choice([0.0, 1e-3, 0.05, 0.3])
        rl = rb @ pin.rpy.rpyToMatrix(0.0, 0.0, rng.uniform(0, 6)) @ pin.rpy.rpyToMatrix(tilt * rng.normal(),
                                                                                      np.pi / 2, 0.0)
        # the log's lowest line over the top's point c (in the box's frame), then raised along the top's normal
        c = np.r_[rng.uniform(-0.1, 0.1, 2), 0.05]
        u = rl[:, 2] - (rl[:, 2] @ rb[:, 2]) * rb[:, 2]
        low = 0.2 * abs(rl[:, 2] @ rb[:, 2]) + 0.03 * np.linalg.norm(np.cross(rl[:, 2], rb[:, 2]))
        centre = rb @ c + (low + rng.uniform(-1e-3, 3e-3)) * rb[:, 2] + rng.uniform(-0.15, 0.15) * u
        qs.append(np.r_[0, 0, 0, pin.Quaternion(rb).coeffs(), centre, pin.Quaternion(rl).coeffs()])
    seen, _ = compare(scene, model, qs)
    data, gd = model.createData(), scene.create_data()
    across = 0
    for q in qs:
        c = scene.detect(model, data, gd, q)
        rb = pin.Quaternion(q[3:7]).toRotationMatrix()
        if len(c) != 2 or not np.allclose(c.normals, rb[:, 2], rtol=0, atol=1e-12) or np.any(c.radius == 0.0):
            continue
        local = (c.points - q[:3]) @ rb  # the points in the box's frame: on its top, within it
        if np.all(np.abs(local[:, :2]) <= (0.04 + 1e-12, 0.06 + 1e-12)) and np.any(
                np.isclose(np.abs(local[:, :2]), (0.04, 0.06), rtol=0, atol=1e-12)):
            across += 1  # a part clipped at the face's edges
            assert np.allclose(c.phi, local[:, 2] - 0.05, rtol=0, atol=1e-12), (c.phi, local)
    assert seen > 300 and across > 20, (seen, across)


@pytest.mark.parametrize("up", [(0.0, 0.0, 0.0), (0.0, np.nan, 1.0), (0.0, 1.0)])
def test_the_up_axis_must_be_a_nonzero_3_vector(up):
    """A scene's ``up`` (the ground's normal, which of two disks is on top) is checked before anything is built:
    before (2026-11-28), a zero one without a ground was taken and one with a ground divided by zero."""
    model, geom, _ = _face_and_can("up", box=(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="up must be a nonzero finite 3-vector"):
        CollisionScene(model, geom, ground=0.0, up=up)


def test_a_cylinder_disk_over_a_box_edge():
    """A can nearly flat (0 - 0.06 rad) on a rotated free box's top face, anywhere from its middle to past its edges
    and corners: both detectors agree, the disks overhanging an edge held by their rim's points over the face and
    its crossings of the edges (parts of up to 4 fixed and 4 crossing points), and the tilted ones whose lowest rim
    point is beyond the face by the face's border under the disk (the disk carrying the normal)."""
    rng = np.random.default_rng(0)
    model, geom, scene = _face_and_can("edge", box=(0.3, 0.2, 0.1))
    qs = _cans_on_a_face(rng, 300, [0.0, 1e-4, 0.02, 0.06], 0.2)
    seen, _ = compare(scene, model, qs)
    data, gd = model.createData(), scene.create_data()
    parts = [scene.detect(model, data, gd, q) for q in qs]
    counts = [len(c) for c in parts]
    assert seen > 300 and sum(c >= 5 for c in counts) > 10, (seen, np.bincount(counts))
    # a tilted disk whose lowest rim point is beyond the face, on the face's border: the can's disk carries the
    # normal (its axis), the box's corners and edges the points
    border = sum(len(c) > 0 and np.all(c.normal_body == 2) and
                 np.allclose(np.abs(c.normals @ pin.Quaternion(q[10:14]).toRotationMatrix()[:, 2]), 1.0, atol=1e-12)
                 for c, q in zip(parts, qs))
    assert border > 10, border


def test_a_normal_that_contradicts_coal_distance_is_replaced():
    """Two shapes touching exactly can get from coal a distance of 0 with any normal. An 8 cm cube resting on a
    5 cm square post (a state of a rollout) got one 45 deg off the vertical, read along the post's side face (phi
    -0.035 m, a box thrown off the post); a can lying across a free box's top edge got a horizontal one (phi
    -0.15 m). The normal is replaced by the direction parting the shapes most among their face normals and edge
    crossings (CollisionScene._consistent): the cube stands on the post's top along +z at phi 0 by its 4 corners,
    the can on the box's top along +z at phi >= 0. Both detectors agree."""
    b = ModelBuilder("box-on-post")
    b.add_static_box("post", (0.05, 0.05, 0.2), (0.0, 0.0, -0.1))
    b.add_body(b.add_joint("free", name="box"), mass=0.3, box=(0.08, 0.08, 0.08))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=None, margin=5e-3)
    q = np.array([9.999999998880559e-03, 1.000000000112240e-02, 4.000000000399950e-02, 8.633997310560200e-12,
                  8.674759888064109e-12, -7.020719936343496e-19, 1.0])
    gd = scene.create_data()
    pin.computeCollisions(model, model.createData(), scene.geometry, gd, q, False)
    pin.computeContactPatches(scene.geometry, gd)
    assert abs(gd.contactPatchResults[0].getContactPatch(0).getNormal()[2]) < 0.5  # coal's, at this state
    c = scene.detect(model, model.createData(), scene.create_data(), q)
    assert len(c) == 4 and np.allclose(c.normals, [0, 0, 1], rtol=0, atol=1e-12) and np.abs(c.phi).max() < 1e-11
    assert np.allclose(np.sort(np.abs(c.points[:, :2]), axis=0), 0.025, rtol=0, atol=1e-9)  # the post's corners
    compare(scene, model, [q])

    b = ModelBuilder("can-on-box")
    b.add_body(b.add_joint("free", name="lower"), mass=2.0, box=(0.3, 0.3, 0.1))
    b.add_body(b.add_joint("free", name="can"), mass=0.3, cylinder=(0.04, 0.12))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=-0.1, margin=5e-3)
    q = np.array([-1.7106113229300819e-04, -1.9431794651183656e-20, -5.0000000000000003e-02,
                  -2.7313348705798355e-19, 7.5984682955411070e-18, -1.4576297813867368e-20, 1.0,
                  1.2837940106083989e-01, -2.9143386104532568e-19, 4.0001797621515553e-02, -1.1537052477774367e-17,
                  7.0713640850137749e-01, 9.9226919148308065e-19, 7.0707715263030024e-01])
    c = scene.detect(model, model.createData(), scene.create_data(), q)
    on_box = c.body_a == 2
    assert on_box.sum() == 2 and np.allclose(c.normals[on_box], [0, 0, 1], rtol=0, atol=1e-12)
    assert c.phi.min() > -1e-12, c.phi
    compare(scene, model, [q])


def test_a_box_on_a_thin_post():
    """An 8 cm cube over a 1.5 cm cylinder post, turned about the vertical, nearly flat (0 - 1e-4 rad), its centre
    anywhere up to 1.2 post radii out, touching to 1 mm above: both detectors agree, and a flat cube whose centre is
    off the post's axis stands on the post's four rim points and its rim point toward the cube's centre."""
    rng = np.random.default_rng(3)
    b = ModelBuilder("box-on-post")
    b.geometry.addGeometryObject(pin.GeometryObject("post", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                    coal.Cylinder(0.015, 0.2)))
    b.add_body(b.add_joint("free", name="box"), mass=0.3, box=(0.08, 0.08, 0.08))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=None, margin=5e-3)
    qs = []
    for _ in range(200):
        tilt = rng.choice([0.0, 0.0, 1e-4])
        R = pin.rpy.rpyToMatrix(tilt * rng.normal(), tilt * rng.normal(), rng.uniform(-3, 3))
        r, a = 0.015 * rng.uniform(0.0, 1.2), rng.uniform(-3, 3)
        qs.append(np.r_[r * np.cos(a), r * np.sin(a), 0.04 + rng.uniform(0.0, 1e-3), pin.Quaternion(R).coeffs()])
    seen, _ = compare(scene, model, qs)
    toward = 0
    for q in qs:
        c = scene.detect(model, model.createData(), scene.create_data(), q)
        if len(c) == 5 and q[3] == 0.0 and q[4] == 0.0:
            x = c.points[4, :2]  # the fifth: on the rim, toward the centre
            assert abs(np.linalg.norm(x) - 0.015) < 1e-12 and x @ q[:2] > 0.0
            assert abs(x[0] * q[1] - x[1] * q[0]) < 1e-12
            toward += 1
    assert seen > 600 and toward > 100, (seen, toward)


@pytest.mark.parametrize("floor", ["table", "cap"])
def test_a_capsule_lying_on_a_face(floor):
    """A capsule (R x LENGTH) lying on a static box's top or a cylinder's cap (top at z = 0), tilted up to 0.1 rad,
    turned about the vertical, anywhere from the middle to past the edge, 1 mm into to 3 mm above it: both detectors
    agree, and where both ends are over the face it touches at each end's hemisphere point, along the face's normal,
    at that point's own height."""
    rng = np.random.default_rng(11)
    model, geometry = rod_model("capsule", floor)
    scene = CollisionScene(model, geometry, ground=None, margin=5e-3)
    edge = 1.0 if floor == "table" else 0.3
    qs = []
    for _ in range(200):
        tilt = rng.choice([0.0, 1e-4, 0.01, 0.1]) * rng.normal()
        R_ = pin.rpy.rpyToMatrix(0.0, 0.0, rng.uniform(-3, 3)) @ pin.rpy.rpyToMatrix(0.0, tilt, 0.0)  # along x
        centre = np.r_[rng.uniform(-1.1, 1.1, 2) * edge / np.sqrt(2), 0.0]
        centre[2] = R + abs(np.sin(tilt)) * LENGTH / 2 + rng.uniform(-1e-3, 3e-3)  # the lower end that high
        qs.append(np.r_[centre, pin.Quaternion(R_).coeffs()])
    seen, _ = compare(scene, model, qs)
    ends = 0
    for q in qs:
        c = scene.detect(model, model.createData(), scene.create_data(), q)
        a = pin.Quaternion(q[3:7]).toRotationMatrix()[:, 0]  # the capsule's axis (rod_model: along x)
        tips = [q[:3] + s * LENGTH / 2 * a for s in (-1, 1)]
        over = all(abs(t[0]) < edge and abs(t[1]) < edge if floor == "table" else np.hypot(*t[:2]) < edge
                   for t in tips)
        if over and len(c) == 2:
            assert np.allclose(c.normals, [0, 0, 1], rtol=0, atol=1e-12) and np.allclose(c.radius, -R)
            assert np.allclose(np.sort(c.phi), np.sort([t[2] - R for t in tips]), rtol=0, atol=1e-12)
            ends += 1
    assert seen > 200 and ends > 30, (seen, ends)


def test_a_hull_overhanging_a_post():
    """An octagonal prism (a mesh's hull) over a 5 cm square post, turned about the vertical, nearly flat (0 - 1e-3
    rad), its centre up to 2 cm off the post's axis, touching to 1 mm above: both detectors agree, and a flat prism
    stands on its vertices over the post's top and the post's corners under it (points over the corners, at the
    prism's bottom)."""
    from test_mesh_collision import _prism_on_post

    sim = _prism_on_post()
    model, scene = sim.model, sim.contact_model.scene
    rng = np.random.default_rng(4)
    qs = []
    for _ in range(200):
        tilt = rng.choice([0.0, 0.0, 1e-3])
        R_ = pin.rpy.rpyToMatrix(tilt * rng.normal(), tilt * rng.normal(), rng.uniform(-3, 3))
        qs.append(np.r_[rng.uniform(-0.02, 0.02, 2), 0.04 + rng.uniform(0.0, 1e-3), pin.Quaternion(R_).coeffs()])
    seen, _ = compare(scene, model, qs)
    corners = 0
    for q in qs:
        c = scene.detect(model, model.createData(), scene.create_data(), q)
        if q[3] == 0.0 and q[4] == 0.0 and len(c):
            on = np.all(np.isclose(np.abs(c.points[:, :2]), 0.025, rtol=0, atol=1e-12), axis=1)
            assert np.allclose(c.phi[on], q[2] - 0.04, rtol=0, atol=1e-12)
            corners += int(on.sum())
    assert seen > 600 and corners > 200, (seen, corners)


@pytest.mark.parametrize("rod", ["capsule", "cylinder"])
def test_a_rod_lying_across_a_post(rod):
    """A capsule or can lying across a 1.5 cm cylinder post's cap along a chord, level or tilted by up to 1e-4 rad,
    turned about the vertical, touching it (to 1e-9 m) or 1 mm above: both detectors agree; touching, the rod rests on
    the rim contact at one end of the chord and on its lowest point over the other end, along the post's axis, at
    that point's own height."""
    rng = np.random.default_rng(8)
    b = ModelBuilder("across")
    b.geometry.addGeometryObject(pin.GeometryObject("post", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                    coal.Cylinder(0.015, 0.2)))
    b.add_body(b.add_joint("free", name="rod"), mass=0.3, **{rod: (0.04, 0.12)})
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=None, margin=5e-3)
    qs = []
    for _ in range(200):
        tilt = rng.choice([0.0, 1e-4]) * rng.normal()
        R_ = pin.rpy.rpyToMatrix(0.0, 0.0, rng.uniform(-3, 3)) @ pin.rpy.rpyToMatrix(0.0, np.pi / 2 + tilt, 0.0)
        xy = rng.uniform(-0.008, 0.008, 2)
        lift = rng.choice([0.0, 1e-3]) + rng.uniform(-1e-9, 1e-9)
        qs.append(np.r_[xy, 0.04 + 0.06 * abs(np.sin(tilt)) + lift, pin.Quaternion(R_).coeffs()])
    seen, _ = compare(scene, model, qs)
    chords = 0
    for q in qs:
        c = scene.detect(model, model.createData(), scene.create_data(), q)
        if len(c) == 2 and c.gap[0] != 0.0 and c.gap[1] == 0.0:  # a rim contact, then the chord's other end
            assert c.phi[0] <= 1e-7 and np.allclose(c.normals[1], [0, 0, 1], rtol=0, atol=1e-12)
            # over the rim (a tilted can's lowest point is off its segment's by r sin(tilt) along the rod)
            assert abs(c.phi[1] - c.points[1, 2]) < 1e-12 and abs(np.hypot(*c.points[1, :2]) - 0.015) < 1e-5
            chords += 1
    assert seen > 200 and chords > 30, (seen, chords)


def test_a_hull_flush_on_a_post_of_its_footprint():
    """A box-shaped mesh (collides as its hull) standing flush on a static box post of the same footprint, level,
    touching to 1e-9 m, turned by at most 1e-9 rad: both detectors agree, and it stands on its own four bottom
    corners only (the post's corners under it are those same points: not added twice, which made the contact
    problem degenerate; a review)."""
    b = ModelBuilder("flush")
    b.add_static_box("post", (0.2, 0.3, 0.2), (0.0, 0.0, -0.1))
    b.add_body(b.add_joint("free", name="crate"), mass=1.0, box=(0.2, 0.3, 0.1), collision=False)
    b.geometry.addGeometryObject(pin.GeometryObject("crate", 1, pin.SE3.Identity(), _bvh(*_box_mesh())))
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=None, margin=5e-3)
    rng = np.random.default_rng(9)
    qs = [np.r_[rng.uniform(-1e-9, 1e-9, 2), HALF[2] + rng.uniform(-1e-9, 1e-9),
                pin.Quaternion(pin.rpy.rpyToMatrix(*rng.uniform(-1e-9, 1e-9, 3))).coeffs()] for _ in range(50)]
    compare(scene, model, qs)
    for q in qs:
        c = scene.detect(model, model.createData(), scene.create_data(), q)
        assert len(c) == 4, c.points
