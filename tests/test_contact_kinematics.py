"""Contact kinematics: the dJ/dq contractions and collision-geometry terms vs finite differences."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from contact.detection import CollisionScene
from contact.kinematics import ContactKinematics
from dynamics import ModelBuilder, Simulator, example_robot_urdf

from .reference_kinematics import ReferenceKinematics


def _free_box():
    b = ModelBuilder("box")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1, box=(0.2, 0.3, 0.1))
    return b.build()


def _planar_arm_and_box():
    b = ModelBuilder("arm", gravity=(0, -9.81, 0))
    a = b.add_joint("revolute", name="a1", axis="z")
    b.add_body(a, mass=1, box=(0.5, 0.05, 0.05), offset=(0.25, 0, 0))
    a2 = b.add_joint("revolute", name="a2", parent="a1", axis="z", placement=(0.5, 0, 0))
    b.add_body(a2, mass=1, box=(0.5, 0.05, 0.05), offset=(0.25, 0, 0))
    p = b.add_joint("translation2d", name="proj")
    b.add_body(p, mass=1, box=(0.1, 0.1, 0.1))
    return b.build()


MODELS = {
    "free box": lambda: (_free_box()[0], 1),
    "ur5": lambda: (Simulator.from_urdf(example_robot_urdf("ur5"), load_geometry=False).model, 6),
    "planar arm": lambda: (_planar_arm_and_box()[0], 2),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_support_mask_identities(name):
    """d(J6^T w)/dq and d(J6 v)/dq from S_k x S_i on the support mask equal finite differences."""
    model, jid = MODELS[name]()
    kin, data = ReferenceKinematics(model), model.createData()
    rng = np.random.default_rng(1)
    q = pin.integrate(model, pin.neutral(model), rng.uniform(-1, 1, model.nv))

    def J6(q):
        pin.computeJointJacobians(model, data, q)
        return pin.getJointJacobian(model, data, jid, pin.ReferenceFrame.WORLD).copy()

    w, v = rng.standard_normal(6), rng.standard_normal(model.nv)
    A, B = kin.dJTw_dq(J6(q), w), kin.dJv_dq(J6(q), v)
    h = 1e-6
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = h
        Jp, Jm = J6(pin.integrate(model, q, e)), J6(pin.integrate(model, q, -e))
        assert np.allclose(A[:, k], (Jp.T @ w - Jm.T @ w) / (2 * h), atol=1e-8)
        assert np.allclose(B[:, k], (Jp @ v - Jm @ v) / (2 * h), atol=1e-8)


def _scene(kind):
    if kind == "tilted box on ground":
        model, geom = _free_box()
        sc = CollisionScene(model, geom, ground=0.0, margin=0.05)
        q = pin.neutral(model)
        q[2] = 0.06
        return model, sc, pin.integrate(model, q, np.array([0, 0, 0, 0.05, 0.08, 0.3])), False
    if kind == "sphere on ground":
        b = ModelBuilder("ball")
        j = b.add_joint("free", name="root")
        b.add_body(j, mass=1, sphere=0.1, offset=(0.02, 0, 0))
        model, geom = b.build()
        sc = CollisionScene(model, geom, ground=0.0, margin=0.05)
        q = pin.neutral(model)
        q[2] = 0.099
        return model, sc, pin.integrate(model, q, np.array([0, 0, 0, 0.3, 0.2, 0.1])), False
    if kind == "tilted capsule on ground":
        b = ModelBuilder("capsule")
        j = b.add_joint("free", name="root")
        b.add_body(j, mass=1, capsule=(0.05, 0.3), rotation=(0.0, np.pi / 2, 0.0))
        model, geom = b.build()
        sc = CollisionScene(model, geom, ground=0.0, margin=0.05)
        q = pin.neutral(model)
        q[2] = 0.04
        return model, sc, pin.integrate(model, q, np.array([0, 0, 0, 0.2, 0.1, 0.3])), False
    model, geom = _planar_arm_and_box()  # box resting on a rotated moving link: the normal turns
    sc = CollisionScene(model, geom, margin=0.02, planar=True)
    q = np.array([0.1, 0.2, 0.8, 0.0])
    data = model.createData()
    pin.forwardKinematics(model, data, q)
    q[2:] = data.oMi[2].act(np.array([0.3, 0.025 + 0.05 - 0.001, 0]))[:2]
    return model, sc, q, True


@pytest.mark.parametrize("kind", ["tilted box on ground", "sphere on ground", "tilted capsule on ground",
                                  "box on a moving link"])
def test_contact_jacobian_derivatives_with_geometry_terms(kind):
    """d(J^T lambda)/dq, d(J v)/dq and dphi/dq = J_n against finite differences of re-detected contacts."""
    model, sc, q, planar = _scene(kind)
    data, gdata = model.createData(), sc.create_data()
    kin = ContactKinematics(model, planar=planar)

    def geo(q):
        c = sc.detect(model, data, gdata, q)
        pin.computeJointJacobians(model, data, q)
        return kin.geometry(data, c)

    g0 = geo(q)
    nc = len(g0.contacts)
    assert nc >= 1
    if kind == "box on a moving link":
        assert g0.contacts.normal_body[0] != 0  # the normal is carried by the moving link
    rng = np.random.default_rng(0)
    lam, v = rng.standard_normal(g0.J.shape[0]), rng.standard_normal(model.nv)
    A, B = kin.force_derivative(g0, lam), kin.velocity_derivative(g0, v)
    h = 1e-6
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = h
        gp, gm = geo(pin.integrate(model, q, e)), geo(pin.integrate(model, q, -e))
        assert len(gp.contacts) == len(gm.contacts) == nc
        assert np.allclose(A[:, k], (gp.J.T @ lam - gm.J.T @ lam) / (2 * h), atol=1e-8)
        assert np.allclose(B[:, k], (gp.J @ v - gm.J @ v) / (2 * h), atol=1e-8)
        assert np.allclose(g0.J[:: kin.rows, k], (gp.contacts.phi - gm.contacts.phi) / (2 * h), atol=1e-8)


def test_tilted_box_corners_have_their_own_distances():
    """coal's patch flattens all points onto one plane; the scene gives each corner its own phi."""
    model, geom = _free_box()
    sc = CollisionScene(model, geom, ground=0.0, margin=5e-3)
    data, gdata = model.createData(), sc.create_data()
    q = pin.integrate(model, np.r_[0, 0, 0.05, 0, 0, 0, 1.0], np.array([0, 0, 0, 1e-3, 0, 0]))
    c = sc.detect(model, data, gdata, q)
    assert len(c) == 4
    R = pin.Quaternion(q[3:7]).matrix()
    corners = [R @ np.array([sx * 0.1, sy * 0.15, -0.05]) + q[:3] for sx in (-1, 1) for sy in (-1, 1)]
    assert np.allclose(sorted(c.phi), sorted(p[2] for p in corners), atol=1e-12)
    assert len(set(np.round(c.phi, 12))) == 2  # the raised and the lowered pair of corners


@pytest.mark.parametrize("kind", ["tilted box on ground", "sphere on ground", "box on a moving link"])
def test_compiled_kernels_equal_the_numpy_reference(kind):
    model, sc, q, planar = _scene(kind)
    data, gdata = model.createData(), sc.create_data()
    fast, ref = ContactKinematics(model, planar=planar), ReferenceKinematics(model, planar=planar)
    c = sc.detect(model, data, gdata, q)
    pin.computeJointJacobians(model, data, q)
    gf, gr = fast.geometry(data, c), ref.geometry(data, c)
    for name in ("J", "D", "dD", "dp", "J6A", "J6B"):
        assert np.allclose(getattr(gf, name), getattr(gr, name), atol=1e-13), name
    rng = np.random.default_rng(3)
    lam, v = rng.standard_normal(gf.J.shape[0]), rng.standard_normal(model.nv)
    assert np.allclose(fast.force_derivative(gf, lam), ref.force_derivative(gr, lam), atol=1e-12)
    assert np.allclose(fast.velocity_derivative(gf, v), ref.velocity_derivative(gr, v), atol=1e-12)


def test_3d_frames_of_the_kernel_on_random_normals():
    """Tangent construction and its derivative for arbitrary normals (3-D scenes)."""
    model, _ = _free_box()
    fast, ref = ContactKinematics(model), ReferenceKinematics(model)
    data = model.createData()
    rng = np.random.default_rng(5)
    q = pin.integrate(model, pin.neutral(model), rng.uniform(-1, 1, 6))
    pin.computeJointJacobians(model, data, q)
    from contact.detection import Contacts

    nc = 6
    n = rng.standard_normal((nc, 3))
    n /= np.linalg.norm(n, axis=1)[:, None]
    ones = np.ones(nc, dtype=np.intp)
    c = Contacts(rng.standard_normal((nc, 3)), n, np.zeros(nc), ones, 0 * ones, ones, 0 * ones,
                 rng.uniform(-0.1, 0.1, nc), np.arange(nc))
    gf, gr = fast.geometry(data, c), ref.geometry(data, c)
    for name in ("J", "D", "dD", "dp"):
        assert np.allclose(getattr(gf, name), getattr(gr, name), atol=1e-12), name
    D = gf.D
    assert np.allclose(np.einsum("cij,cik->cjk", D, D), np.eye(3))  # orthonormal frames


def test_convex_hull_contacts_match_a_box():
    """A convex hull with a box's vertices gives the box's contacts and exact derivatives."""
    import coal

    def build(convex: bool):
        b = ModelBuilder("hull")
        j = b.add_joint("free", name="root")
        b.add_body(j, mass=1, box=(0.2, 0.3, 0.1))
        model, geom = b.build()
        if convex:
            pts = [np.array([sx * 0.1, sy * 0.15, sz * 0.05]) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
            geom.geometryObjects[0].geometry = coal.Convex.convexHull(pts, False, "")
        return model, CollisionScene(model, geom, ground=0.0, margin=0.01)

    out = {}
    for convex in (False, True):
        model, sc = build(convex)
        q = pin.integrate(model, np.r_[0, 0, 0.05, 0, 0, 0, 1.0], np.array([0, 0, 0, 2e-3, -1e-3, 0.2]))
        data, gdata = model.createData(), sc.create_data()
        c = sc.detect(model, data, gdata, q)
        order = np.lexsort(c.points.T)
        out[convex] = (c.points[order], c.phi[order])
        kin = ContactKinematics(model)

        def J_of(qq):
            cc = sc.detect(model, data, gdata, qq)
            pin.computeJointJacobians(model, data, qq)
            return kin.geometry(data, cc)

        g = J_of(q)
        lam = np.random.default_rng(0).standard_normal(g.J.shape[0])
        A = kin.force_derivative(g, lam)
        h = 1e-6
        for k in range(6):
            e = np.zeros(6)
            e[k] = h
            gp, gm = J_of(pin.integrate(model, q, e)), J_of(pin.integrate(model, q, -e))
            assert np.allclose(A[:, k], (gp.J.T @ lam - gm.J.T @ lam) / (2 * h), atol=1e-8)
    assert len(out[True][1]) == 4
    assert np.allclose(out[True][0], out[False][0], atol=1e-12)
    assert np.allclose(out[True][1], out[False][1], atol=1e-12)
