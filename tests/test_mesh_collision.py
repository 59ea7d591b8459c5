"""Mesh collision geometry (as loaded from URDF files) and the mesh paths of URDF files.

Every mesh is written by the test itself (a box as a tiny .obj or ASCII .stl), so
the expected contacts and rest heights are known in closed form.
"""

from __future__ import annotations

import os
import warnings

import coal
import numpy as np
import pinocchio as pin
import pytest

from contact.detection import MAX_PATCH_POINTS, CollisionScene, convexity
from dynamics import Simulator
from dynamics.robots import resolve_mesh_path
from trajopt import max_relative_error, step_jacobians_fd

G = 9.81
HALF = np.array([0.1, 0.15, 0.05])  # half sides of the test box (m)


def _box_mesh(half=HALF):
    """Vertices and outward triangles of a box centred at the origin."""
    V = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float) * half
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    return V, [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]


def write_obj(path, V, F):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(f"v {float(x)!r} {float(y)!r} {float(z)!r}\n" for x, y, z in V)
        f.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in F)


def write_stl(path, V, F):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("solid box\n")
        for tri in F:
            p = V[list(tri)]
            n = np.cross(p[1] - p[0], p[2] - p[0])
            n /= np.linalg.norm(n)
            f.write(f"facet normal {float(n[0])!r} {float(n[1])!r} {float(n[2])!r}\nouter loop\n")
            f.writelines(f"vertex {float(x)!r} {float(y)!r} {float(z)!r}\n" for x, y, z in p)
            f.write("endloop\nendfacet\n")
        f.write("endsolid box\n")


def write_urdf(path, filename, *, mass=1.0, half=HALF):
    """A one-link robot: a box of ``mass`` with its own inertia, colliding through the mesh ``filename``."""
    lx, ly, lz = 2 * np.asarray(half)
    ixx, iyy, izz = mass / 12 * (ly**2 + lz**2), mass / 12 * (lx**2 + lz**2), mass / 12 * (lx**2 + ly**2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"""<robot name="box"><link name="box">
  <inertial><mass value="{mass}"/><inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" iyz="0"/></inertial>
  <collision><geometry><mesh filename="{filename}"/></geometry></collision>
</link></robot>""")
    return str(path)


@pytest.fixture(scope="module")
def mesh_box(tmp_path_factory):
    """A 1 kg box (0.2 x 0.3 x 0.1 m) whose collision is a mesh, free-flying above ground z = 0."""
    root = tmp_path_factory.mktemp("meshbox")
    write_obj(str(root / "meshes" / "box.obj"), *_box_mesh())
    path = write_urdf(str(root / "urdf" / "box.urdf"), "../meshes/box.obj")
    return Simulator.from_urdf(path, floating_base=True, ground=0.0, friction=0.5)


def box_state(z=HALF[2], v=(0, 0, 0), w=(0, 0, 0), rot=(0, 0, 0)):
    model = pin.Model()
    model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    q = pin.integrate(model, np.r_[0, 0, z, 0, 0, 0, 1.0], np.r_[0, 0, 0, rot])
    return np.r_[q, v, w]


def test_mesh_box_lands_and_rests_on_its_four_corners(mesh_box):
    sim = mesh_box
    xs = sim.rollout(box_state(z=0.15), np.zeros((1000, 0)))  # 1 s
    assert xs[:, 2].min() > HALF[2] - 5e-3  # never sinks more than 5 mm
    assert xs[-1, 2] == pytest.approx(HALF[2], abs=1e-6)  # rests at its half height
    assert np.abs(xs[-1, 7:]).max() < 1e-6  # and stays still
    rep = sim.contacts
    assert len(rep) == 4 and np.allclose(rep.normals, [0, 0, 1])
    corners = np.array([(sx * HALF[0], sy * HALF[1]) for sx in (-1, 1) for sy in (-1, 1)])
    P = rep.points[np.lexsort(rep.points.T[::-1])]
    assert np.allclose(P[:, :2], corners, atol=1e-7)  # mesh files are read in single precision
    assert rep.impulses[:, 0].sum() == pytest.approx(1.0 * G * sim.dt, rel=1e-6)
    assert isinstance(sim.contact_model.scene.geometry.geometryObjects[0].geometry, coal.ConvexBase)


def test_mesh_box_slides_at_mu_g(mesh_box):
    sim = mesh_box
    n = 100
    xs = sim.rollout(box_state(v=(1.0, 0, 0)), np.zeros((n, 0)))
    k = np.arange(n + 1)
    assert np.allclose(xs[:, 7], 1.0 - 0.5 * G * sim.dt * k, atol=1e-7)
    assert np.abs(xs[:, 2] - HALF[2]).max() < 1e-7


MESH_STATES = {
    "free flight": dict(z=0.3, v=(1.0, 0.2, -0.3), w=(0.5, -0.2, 0.3)),
    "resting": dict(),
    "sliding": dict(v=(1.0, 0.3, 0.0), w=(0, 0, 0.4)),
    "tilted on an edge": dict(z=np.hypot(HALF[1], HALF[2]) * np.sin(np.arctan2(HALF[2], HALF[1]) + 0.3),
                              rot=(0.3, 0, 0), v=(0.3, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(MESH_STATES))
def test_mesh_box_jacobians_match_central_differences(mesh_box, name):
    sim, x = mesh_box, box_state(**MESH_STATES[name])
    _, Fx, Fu = sim.step_derivatives(x, np.zeros(0))
    ref = step_jacobians_fd(sim, x, np.zeros(0), method="central")
    assert max_relative_error(Fx, ref.Fx) < 1e-6
    if name == "free flight":
        assert len(sim.contacts) == 0
    else:
        assert sim.contacts.impulses[:, 0].sum() > 0
        assert len(sim.contacts) == (2 if name == "tilted on an edge" else 4)


def _prism(sides, radius=0.1, height=0.05, bulge=0.0):
    """A prism with a regular ``sides``-gon section (axis z); ``bulge`` lowers the bottom face's centre."""
    a = 2 * np.pi * np.arange(sides) / sides
    ring = np.c_[radius * np.cos(a), radius * np.sin(a)]
    V = np.r_[np.c_[ring, np.full(sides, -height / 2)], np.c_[ring, np.full(sides, height / 2)],
              [[0, 0, -height / 2 - bulge], [0, 0, height / 2]]]
    b, t = 2 * sides, 2 * sides + 1
    F = []
    for i in range(sides):
        j = (i + 1) % sides
        F += [(b, j, i), (t, sides + i, sides + j), (i, j, sides + j), (i, sides + j, sides + i)]
    return V, F


def _scene_with(shape, margin=5e-3):
    model = pin.Model()
    j = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    model.appendBodyToJoint(j, pin.Inertia.FromBox(1.0, 0.2, 0.2, 0.05), pin.SE3.Identity())
    geom = pin.GeometryModel()
    geom.addGeometryObject(pin.GeometryObject("body", j, pin.SE3.Identity(), shape))
    return model, CollisionScene(model, geom, ground=0.0, margin=margin)


def _bvh(V, F):
    m = coal.BVHModelOBBRSS()
    m.beginModel(len(F), len(V))
    m.addVertices(np.asarray(V, float))
    m.addTriangles(np.asarray(F, dtype=np.int64))
    m.endModel()
    return m


@pytest.mark.parametrize("sides", [4, 6, 24])
def test_flat_face_patch_has_its_extreme_corners(sides):
    """A flat face with many vertices gives at most MAX_PATCH_POINTS of them, spread to its extremes."""
    model, sc = _scene_with(_bvh(*_prism(sides)))
    data, gdata = model.createData(), sc.create_data()
    yaw = 0.37
    q = pin.integrate(model, np.r_[0.2, -0.1, 0.025, 0, 0, 0, 1.0], np.r_[0, 0, 0, 0, 0, yaw])
    c = sc.detect(model, data, gdata, q)
    assert 4 <= len(c) <= MAX_PATCH_POINTS and len(c) == min(sides, 4)
    assert np.allclose(c.phi, 0.0, atol=1e-12) and np.allclose(c.normals, [0, 0, 1])
    r = np.linalg.norm(c.points[:, :2] - [0.2, -0.1], axis=1)
    assert np.allclose(r, 0.1)  # corners of the face, not inner points
    # They surround the centre (the weight cannot tip the body over an edge of the patch):
    # it lies at least r cos(60 deg) inside every edge of their polygon (a hexagon's 4 kept corners).
    from scipy.spatial import ConvexHull

    eq = ConvexHull(c.points[:, :2]).equations
    assert (-(eq[:, :2] @ [0.2, -0.1] + eq[:, 2])).min() >= 0.05 - 1e-12


def test_curved_face_keeps_its_lowest_point():
    """A bottom bulging 0.5 mm: the lowest vertex is a contact, with its own (smaller) distance."""
    model, sc = _scene_with(_bvh(*_prism(24, bulge=5e-4)))
    data, gdata = model.createData(), sc.create_data()
    q = np.r_[0, 0, 0.025 + 5e-4 + 1e-4, 0, 0, 0, 1.0]
    c = sc.detect(model, data, gdata, q)
    low = np.argmin(c.phi)
    assert c.phi[low] == pytest.approx(1e-4, abs=1e-12) and np.allclose(c.points[low], [0, 0, 1e-4], atol=1e-12)
    assert np.allclose(np.delete(c.phi, low), 6e-4, atol=1e-12) and len(c) == MAX_PATCH_POINTS


def _uv_sphere(radius, rings=24, segments=32):
    """A closed UV sphere mesh with poles at +-radius on z."""
    V = [[0, 0, -radius]]
    for i in range(1, rings):
        th = np.pi * i / rings - np.pi / 2
        V += [[radius * np.cos(th) * np.cos(p), radius * np.cos(th) * np.sin(p), radius * np.sin(th)]
              for p in 2 * np.pi * np.arange(segments) / segments]
    V.append([0, 0, radius])
    ring = lambda i, j: 1 + (i - 1) * segments + j % segments  # noqa: E731
    F = [(0, ring(1, j + 1), ring(1, j)) for j in range(segments)]
    for i in range(1, rings - 1):
        for j in range(segments):
            F += [(ring(i, j), ring(i, j + 1), ring(i + 1, j + 1)), (ring(i, j), ring(i + 1, j + 1), ring(i + 1, j))]
    top = len(V) - 1
    F += [(top, ring(rings - 1, j), ring(rings - 1, j + 1)) for j in range(segments)]
    return np.array(V), F


def test_ball_shaped_mesh_rests_on_one_point_like_a_sphere():
    """A round foot (a UV-sphere mesh) touches at its lowest vertex only, as a coal.Sphere does."""
    model, sc = _scene_with(_bvh(*_uv_sphere(0.02)))
    data, gdata = model.createData(), sc.create_data()
    c = sc.detect(model, data, gdata, np.r_[0.1, 0.2, 0.02 + 3e-4, 0, 0, 0, 1.0])
    assert len(c) == 1 and c.phi[0] == pytest.approx(3e-4, abs=1e-12)
    assert np.allclose(c.points[0], [0.1, 0.2, 3e-4], atol=1e-12)


def test_convexity_and_the_warning_for_non_convex_meshes_that_meet_other_bodies():
    V, F = _box_mesh()
    assert convexity(_bvh(V, F)) == pytest.approx(1.0, abs=1e-9)
    # An L of three cubes (a 2 x 2 square missing one): the hull cuts that corner in half, 3.5 / 3.
    cells = [(0, 0), (1, 0), (0, 1)]
    Vs, Fs = [], []
    for i, (cx, cy) in enumerate(cells):
        v, f = _box_mesh(np.array([0.05, 0.05, 0.05]))
        Vs.append(v + [0.1 * cx, 0.1 * cy, 0])
        Fs += [(a + 8 * i, b + 8 * i, c + 8 * i) for a, b, c in f]
    L = _bvh(np.vstack(Vs), Fs)
    assert convexity(L) == pytest.approx(3.5 / 3, rel=1e-9)

    model = pin.Model()
    j1 = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "a")
    j2 = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "b")
    geom = pin.GeometryModel()
    for name, j in (("L_mesh", j1), ("ball", j2)):
        model.addFrame(pin.Frame(name + "_link", j, 0, pin.SE3.Identity(), pin.FrameType.BODY))
    geom.addGeometryObject(pin.GeometryObject("L_mesh", j1, model.getFrameId("L_mesh_link"), pin.SE3.Identity(), L))
    geom.addGeometryObject(pin.GeometryObject("ball", j2, model.getFrameId("ball_link"), pin.SE3.Identity(),
                                              coal.Sphere(0.05)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CollisionScene(model, geom, ground=0.0, self_collision=False)  # the ground only: exact, silent
    with pytest.warns(UserWarning, match=r"'L_mesh' of link 'L_mesh_link' is not convex .*17% larger"):
        CollisionScene(model, geom, ground=0.0, self_collision=True)
    assert isinstance(geom.geometryObjects[0].geometry, coal.BVHModelBase)  # the caller's model is untouched


def _against_primitives(kind):
    """A free body on a static body (no ground), one of the two a mesh; returns (sim, rest height)."""
    from dynamics import ModelBuilder

    b = ModelBuilder(kind)
    j = b.add_joint("free", name="root")
    if kind == "mesh box on a box":
        b.add_body(j, mass=1.0, box=tuple(2 * HALF), collision=False)
        b.geometry.addGeometryObject(pin.GeometryObject("mesh_box", j, pin.SE3.Identity(), _bvh(*_box_mesh())))
        b.add_static_box("floor", (2, 2, 0.2), (0, 0, -0.1))
        rest = HALF[2]
    elif kind == "ball on a mesh box":
        b.add_body(j, mass=1.0, sphere=0.05)
        slab = _bvh(*_box_mesh(np.array([1.0, 1.0, 0.05])))
        b.geometry.addGeometryObject(pin.GeometryObject("floor", 0, pin.SE3(np.eye(3), np.r_[0, 0, -0.05]), slab))
        rest = 0.05
    elif kind == "mesh box on a mesh box":
        b.add_body(j, mass=1.0, box=tuple(2 * HALF), collision=False)
        b.geometry.addGeometryObject(pin.GeometryObject("mesh_box", j, pin.SE3.Identity(), _bvh(*_box_mesh())))
        slab = _bvh(*_box_mesh(np.array([1.0, 1.0, 0.05])))
        b.geometry.addGeometryObject(pin.GeometryObject("floor", 0, pin.SE3(np.eye(3), np.r_[0, 0, -0.05]), slab))
        rest = HALF[2]
    else:  # "mesh ball on a box"
        b.add_body(j, mass=1.0, sphere=0.05, collision=False)
        b.geometry.addGeometryObject(pin.GeometryObject("ball", j, pin.SE3.Identity(), _bvh(*_uv_sphere(0.05))))
        b.add_static_box("floor", (2, 2, 0.2), (0, 0, -0.1))
        rest = 0.05
    model, geom = b.build()
    return Simulator(model, geometry=geom, friction=0.5), rest


@pytest.mark.parametrize("kind", ["mesh box on a box", "ball on a mesh box", "mesh ball on a box",
                                  "mesh box on a mesh box"])
def test_meshes_against_primitives_rest_exactly_with_exact_jacobians(kind):
    sim, rest = _against_primitives(kind)
    xs = sim.rollout(np.r_[0, 0, rest + 0.01, 0, 0, 0, 1, np.zeros(6)], np.zeros((300, 0)))
    assert xs[:, 2].min() > rest - 1e-9 and xs[-1, 2] == pytest.approx(rest, abs=1e-9)
    assert np.abs(xs[-1, 7:]).max() < 1e-8
    assert len(sim.contacts) == (4 if "box on" in kind else 1)
    for v in (np.zeros(6), np.r_[0.5, 0.2, 0, 0, 0, 0.3]):  # resting, sliding
        x = np.r_[xs[-1, :7], v]
        _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
        assert max_relative_error(Fx, step_jacobians_fd(sim, x, np.zeros(0)).Fx) < 1e-6


def test_flat_mesh_is_refused_with_its_name():
    """A zero-thickness mesh has no hull (qhull would crash): a clear error instead."""
    V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    model, geom = pin.Model(), pin.GeometryModel()
    j = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    model.addFrame(pin.Frame("plate_link", j, 0, pin.SE3.Identity(), pin.FrameType.BODY))
    geom.addGeometryObject(pin.GeometryObject("plate", j, model.getFrameId("plate_link"), pin.SE3.Identity(),
                                              _bvh(V, [(0, 1, 2), (1, 3, 2)])))
    with pytest.raises(ValueError, match=r"'plate' of link 'plate_link' is not a solid .*one plane"):
        CollisionScene(model, geom, ground=0.0)


# -- paths ---------------------------------------------------------------------------------------


def _load(path, **kw):
    sim = Simulator.from_urdf(path, floating_base=True, ground=0.0, **kw)
    obj = sim.geometry.geometryObjects[0]
    assert isinstance(obj.geometry, coal.BVHModelBase) and obj.geometry.num_vertices == 8
    return sim


def test_relative_mesh_path_next_to_the_urdf(tmp_path):
    write_stl(str(tmp_path / "robot" / "box.stl"), *_box_mesh())
    _load(write_urdf(str(tmp_path / "robot" / "box.urdf"), "box.stl"))


def test_relative_mesh_path_from_a_folder_above(tmp_path):
    """``meshes/box.obj`` written relative to the package root, the URDF one folder down."""
    write_obj(str(tmp_path / "pkg" / "meshes" / "box.obj"), *_box_mesh())
    _load(write_urdf(str(tmp_path / "pkg" / "urdf" / "box.urdf"), "meshes/box.obj"))


@pytest.mark.parametrize("layout", ["inside the package", "package beside the urdf folder"])
def test_package_paths_found_by_walking_up(tmp_path, layout):
    write_obj(str(tmp_path / "ws" / "my_robot" / "meshes" / "box.obj"), *_box_mesh())
    urdf_dir = tmp_path / "ws" / ("my_robot/urdf" if layout == "inside the package" else "urdf")
    _load(write_urdf(str(urdf_dir / "box.urdf"), "package://my_robot/meshes/box.obj"))


def test_package_triple_slash_is_an_absolute_path(tmp_path):
    mesh = tmp_path / "elsewhere" / "box.obj"
    write_obj(str(mesh), *_box_mesh())
    _load(write_urdf(str(tmp_path / "r" / "box.urdf"), "package://" + str(mesh)))  # package:///tmp/...


def test_stale_absolute_path_found_by_its_tail_next_to_the_file(tmp_path):
    write_obj(str(tmp_path / "r" / "meshes" / "box.obj"), *_box_mesh())
    _load(write_urdf(str(tmp_path / "r" / "urdf" / "box.urdf"), "package:///home/someone/ws/r/meshes/box.obj"))


def test_missing_mesh_names_the_file_and_where_it_looked(tmp_path):
    path = write_urdf(str(tmp_path / "r" / "urdf" / "box.urdf"), "package://my_robot/meshes/nope.stl")
    with pytest.raises(FileNotFoundError) as info:
        Simulator.from_urdf(path)
    msg = str(info.value)
    assert "'package://my_robot/meshes/nope.stl'" in msg and "link 'box'" in msg
    assert os.path.join(str(tmp_path / "r" / "urdf"), "my_robot", "meshes", "nope.stl") in msg
    assert os.path.join(str(tmp_path), "my_robot", "meshes", "nope.stl") in msg
    with pytest.raises(FileNotFoundError, match="looked in"):
        resolve_mesh_path("meshes/nope.obj", path)


# -- a robot with real meshes ---------------------------------------------------------------------


def test_solo_meshes_rest_on_the_ground_without_sinking():
    """example-robot-data's Solo-8 (meshes only) dropped from 0.4 m: after 1 s its hulls sink <= 5 mm."""
    from dynamics import example_robot_urdf

    path = example_robot_urdf("solo12").replace("solo12.urdf", "solo.urdf")
    sim = Simulator.from_urdf(path, floating_base=True, ground=0.0)
    x0 = sim.neutral_state()
    x0[2] = 0.4
    xs = sim.rollout(x0, np.zeros((1000, sim.nu)))
    assert np.all(np.isfinite(xs))
    assert len(sim.contacts) > 0 and sim.contacts.phi.min() > -5e-3
    # The deepest hull vertex, measured independently of the contact detection.
    scene = sim.contact_model.scene
    gdata = pin.GeometryData(scene.geometry)
    pin.updateGeometryPlacements(sim.model, sim.model.createData(), scene.geometry, gdata, xs[-1, :sim.nq])
    lowest = min((np.asarray(o.geometry.points()) @ gdata.oMg[i].rotation.T + gdata.oMg[i].translation)[:, 2].min()
                 for i, o in enumerate(scene.geometry.geometryObjects) if isinstance(o.geometry, coal.ConvexBase))
    assert lowest > -5e-3
    u = np.zeros(sim.nu)
    x = xs[-1].copy()
    # At rest on passive legs a friction mode switches within ~1e-5 of the state: the reference
    # takes a step of 1e-7 there (its round-off on entries ~2e3 is then ~1e-5 relative).
    _, Fx, _ = sim.step_derivatives(x, u)
    assert max_relative_error(Fx, step_jacobians_fd(sim, x, u, method="central", h=1e-7).Fx) < 1e-4
    x[sim.nq: sim.nq + 2] = (0.5, 0.2)  # sliding
    _, Fx, _ = sim.step_derivatives(x, u)
    assert max_relative_error(Fx, step_jacobians_fd(sim, x, u, method="central").Fx) < 1e-6


def _prism_on_post(contact="lcp", post=None):
    """An octagonal prism (radius 4 cm, 8 cm tall, 0.3 kg, a mesh of its 16 corners: collides as its hull; its sides
    facing the post's) over a static 5 x 5 x 20 cm square post, or a cylinder post of radius ``post``, whose top is
    at z = 0, no ground. (With a vertex in the middle of its bottom face, as :func:`_prism` makes, that vertex alone
    held it over the square post.)"""
    from dynamics import ModelBuilder, Simulator

    b = ModelBuilder("prism-on-post")
    if post is None:
        b.add_static_box("post", (0.05, 0.05, 0.2), (0.0, 0.0, -0.1))
    else:  # a cylinder post of radius ``post``
        b.geometry.addGeometryObject(pin.GeometryObject("post", 0, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                                        coal.Cylinder(post, 0.2)))
    j = b.add_joint("free", name="prism")
    b.add_body(j, mass=0.3, cylinder=(0.04, 0.08), collision=False)
    from scipy.spatial import ConvexHull

    a = 2 * np.pi * (np.arange(8) + 0.5) / 8  # sides facing the post's sides; no vertex inside a face
    V = np.array([[0.04 * np.cos(t), 0.04 * np.sin(t), z] for z in (-0.04, 0.04) for t in a])
    F = ConvexHull(V).simplices.copy()
    for f in F:  # outward winding
        if np.cross(V[f[1]] - V[f[0]], V[f[2]] - V[f[0]]) @ V[f[0]] < 0:
            f[1], f[2] = f[2], f[1]
    b.geometry.addGeometryObject(pin.GeometryObject("prism", j, pin.SE3.Identity(), _bvh(V, F)))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=1e-3, ground=None, friction=0.5, contact=contact)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("xy, dz", [((0.01, 0.01), 0.0), ((0.01, 0.01), 1e-4), ((0.003, 0.004), 1e-4), ((0.02, 0.0), 1e-4)])
def test_a_hull_overhanging_a_post_comes_to_rest(xy, dz, contact):
    """The prism released flat, touching or 0.1 mm over the post (its bottom overhangs the post's top on every side),
    its centre off the post's axis: it lands flat and comes to rest (|v| < 1e-6 over the last 100 steps), held by its
    vertices over the post's top and the post's corners under it. Before (2026-11-28), by its vertices over the top
    alone (the post's corners were no contact): centred 1 cm off on the diagonal it rocked without end (0.05 - 0.26
    rad/s, a battery)."""
    sim = _prism_on_post(contact)
    x = np.r_[xy, 0.04 + dz, 0, 0, 0, 1, np.zeros(6)]
    xs = sim.rollout(x, np.zeros((600, 0)))
    assert np.abs(xs[-100:, 7:]).max() < 1e-6 and abs(xs[-1, 2] - 0.04) < 1e-6 and np.abs(xs[-1, 3:6]).max() < 1e-6


def test_a_hull_at_a_cylinder_posts_edge_stays_under_ncp():
    """The prism sunk 1e-5 m into a 30 cm cylinder post's cap at its edge (its centre 2 cm inside the edge, its
    bottom overhanging it by 2 cm), at rest: pushed out, it stays, under NCP as under LCP (|w| < 0.1 rad/s). Before
    (2026-11-28), coal's normal between the hull and the cap's edge could be off the cap's axis; under NCP (its warm
    start) the prism dropped 6.7 mm and turned 0.25 rad in one step, spinning at 2.1 rad/s (a battery); the
    separating-axis check of coal's normal (CollisionScene._consistent) holds it."""
    for contact in ("lcp", "ncp"):
        sim = _prism_on_post(contact, post=0.3)
        x = np.r_[0.28, 0.0, 0.04000000010000804 - 1e-5, 0, 0, 0, 1, np.zeros(6)]
        xs = sim.rollout(x, np.zeros((500, 0)))
        assert np.abs(xs[:, 10:13]).max() < 0.1 and np.abs(xs[-1, 2] - 0.04) < 1e-6, contact
