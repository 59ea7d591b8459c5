"""The step with contact (LCP): closed-form physics and Jacobians against finite differences."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynamics import ModelBuilder, Simulator
from trajopt import max_relative_error, step_jacobians_fd

G = 9.81


def cube_sim(*, mu=0.5, dt=1e-3, duplicate=False, side=0.2, contact="lcp"):
    """A 1 kg cube (side 0.2 m, its own box inertia) on a free-flyer, ground at z = 0."""
    b = ModelBuilder("cube")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(side, side, side))
    if duplicate:  # the same collision box twice: every contact appears twice
        b.geometry.addGeometryObject(pin.GeometryObject("dup", j, pin.SE3.Identity(), b.geometry.geometryObjects[0].geometry))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=mu, contact=contact)


def sphere_sim(*, mu=0.5, dt=1e-3, contact="lcp"):
    """A 1 kg ball of radius 0.1 m on a free-flyer, ground at z = 0."""
    b = ModelBuilder("ball")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, sphere=0.1)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=mu, contact=contact)


def limited_pendulum(dt=1e-3):
    b = ModelBuilder("limited")
    j = b.add_joint("revolute", name="hinge", axis="y", lower=-0.5, upper=0.5, effort=10.0)
    b.add_body(j, mass=1.0, box=(0.05, 0.05, 1.0), offset=(0, 0, -0.5), collision=False)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt)


def cube_state(z=0.1, v=(0, 0, 0), w=(0, 0, 0), rot=(0, 0, 0), xy=(0.0, 0.0)):
    sim = cube_sim()
    q = pin.integrate(sim.model, np.r_[xy[0], xy[1], z, 0, 0, 0, 1.0], np.r_[0, 0, 0, rot])
    return np.r_[q, v, w]


@pytest.fixture(scope="module")
def cube():
    return cube_sim()


def test_resting_cube_stays_still(cube):
    xs = cube.rollout(cube_state(), np.zeros((1000, 0)))
    assert np.abs(xs[:, 2] - 0.1).max() < 1e-9  # no sinking, no jitter
    assert np.abs(xs[:, 7:]).max() < 1e-8
    rep = cube.contacts
    assert len(rep) == 4 and np.allclose(rep.normals, [0, 0, 1])
    assert rep.impulses[:, 0].sum() == pytest.approx(1.0 * G * cube.dt, rel=1e-9)
    assert np.allclose(rep.impulses[:, 0], rep.impulses[0, 0])  # least-norm: equal shares


@pytest.mark.parametrize("mu, v0", [(0.5, 1.0), (0.3, 2.0)])
def test_sliding_cube_decelerates_at_mu_g_and_stops_at_closed_form_distance(mu, v0):
    sim = cube_sim(mu=mu)
    n = int(1.3 * v0 / (mu * G) / sim.dt)
    xs = sim.rollout(cube_state(v=(v0, 0, 0)), np.zeros((n, 0)))
    vx = xs[:, 7]
    k = np.arange(n + 1)
    moving = v0 - mu * G * sim.dt * k > 0
    assert np.allclose(vx[moving], v0 - mu * G * sim.dt * k[moving], atol=1e-9)
    assert np.abs(vx[~moving]).max() < 1e-9
    # Stopping distance v0^2 / (2 mu g), up to the one-step discretization (v0 dt).
    assert xs[-1, 0] == pytest.approx(v0**2 / (2 * mu * G), abs=v0 * sim.dt)
    assert np.abs(xs[:, 2] - 0.1).max() < 1e-9


def test_frictionless_slide_keeps_its_speed():
    sim = cube_sim(mu=0.0)
    xs = sim.rollout(cube_state(v=(1.5, -0.5, 0)), np.zeros((500, 0)))
    assert np.allclose(xs[:, 7], 1.5, atol=1e-12) and np.allclose(xs[:, 8], -0.5, atol=1e-12)
    assert np.abs(xs[:, 2] - 0.1).max() < 1e-9


def test_dropped_cube_lands_without_bouncing_or_penetrating():
    sim = cube_sim()
    xs = sim.rollout(cube_state(z=0.3), np.zeros((600, 0)))
    assert xs[:, 2].min() > 0.1 - 1e-9
    assert np.abs(xs[-1, 7:]).max() < 1e-8 and xs[-1, 2] == pytest.approx(0.1, abs=1e-9)


def test_warm_start_holds_along_a_slide():
    sim = cube_sim()
    sim.rollout(cube_state(v=(1.0, 0, 0)), np.zeros((300, 0)))
    st = sim.warm_start_stats
    assert st["contact_steps"] == 300 and st["warm_hits"] >= 0.9 * st["guesses"]


def _check(sim, x, u, tol=1e-6):
    """Analytical vs central differences. Contact modes switch within ~g dt^2 of a
    resting state, so the reference takes small steps (h ~ 6e-6), not Ridders' 1e-3."""
    _, Fx, Fu = sim.step_derivatives(x, u)
    ref = step_jacobians_fd(sim, x, u, method="central")
    err = max(max_relative_error(Fx, ref.Fx), max_relative_error(Fu, ref.Fu))
    assert err < tol, err
    return sim.contacts


STATES = {
    "free flight": dict(z=0.4, v=(1.0, 0.2, -0.3), w=(0.5, -0.2, 0.3)),
    "resting": dict(),
    "sliding": dict(v=(1.0, 0.3, 0.0), w=(0, 0, 0.4)),
    "separating": dict(z=0.102, v=(0.2, 0.0, 1.0)),
    "sliding with spin": dict(v=(-0.4, 0.7, 0.0), w=(0, 0, 2.0)),
    "on an edge": dict(z=0.1 * np.sqrt(2), rot=(np.pi / 4, 0, 0), v=(0.3, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(STATES))
def test_cube_jacobians_match_central_differences(cube, name):
    rep = _check(cube, cube_state(**STATES[name]), np.zeros(0))
    if name in ("free flight", "separating"):
        assert len(rep) == 0 or np.all(rep.impulses == 0)
    else:
        assert len(rep) >= 2 and rep.impulses[:, 0].sum() > 0


def test_sphere_sliding_and_spinning_jacobians():
    sim = sphere_sim()
    x = np.r_[0, 0, 0.1, 0, 0, 0, 1.0, 0.8, -0.2, 0, 1.0, 3.0, -0.5]
    rep = _check(sim, x, np.zeros(0))
    assert len(rep) == 1 and rep.impulses[0, 0] > 0


def test_joint_limit_jacobians_and_physics():
    sim = limited_pendulum()
    x = np.array([0.5, 0.3])  # at the upper limit, pushing into it
    rep = _check(sim, x, np.array([2.0]))
    assert rep.limit_impulses.size == 1 and rep.limit_impulses[0] > 0
    xs = sim.rollout(np.array([0.0, 3.0]), np.zeros((1000, 1)))
    assert xs[:, 0].max() <= 0.5 + 1e-9 and xs[:, 0].min() >= -0.5 - 1e-9


@pytest.mark.parametrize("case", ["duplicate contacts", "zero friction", "coplanar"])
def test_degenerate_contacts_never_give_nan(case):
    sim = cube_sim(duplicate=case == "duplicate contacts", mu=0.0 if case == "zero friction" else 0.5)
    rng = np.random.default_rng(7)
    for _ in range(10):
        x = cube_state(v=tuple(rng.uniform(-1, 1, 3) * [1, 1, 0.1]), w=(0, 0, rng.uniform(-1, 1)))
        xn, Fx, Fu = sim.step_derivatives(x, np.zeros(0))
        assert np.all(np.isfinite(xn)) and np.all(np.isfinite(Fx))
    if case == "duplicate contacts":
        assert len(sim.contacts) == 8
    xs = sim.rollout(cube_state(v=(0.5, 0, 0)), np.zeros((200, 0)))
    assert np.all(np.isfinite(xs)) and np.abs(xs[:, 2] - 0.1).max() < 1e-9



# -- the same closed forms under the Coulomb cone (contact="ncp") --------------------------------
@pytest.fixture(scope="module")
def ncp_cube():
    return cube_sim(contact="ncp")


def test_ncp_resting_cube_stays_still(ncp_cube):
    xs = ncp_cube.rollout(cube_state(), np.zeros((1000, 0)))
    assert np.abs(xs[:, 2] - 0.1).max() < 1e-9 and np.abs(xs[:, 7:]).max() < 1e-8
    assert ncp_cube.contacts.impulses[:, 0].sum() == pytest.approx(G * ncp_cube.dt, rel=1e-9)


@pytest.mark.parametrize("direction", [(1.0, 0.0), (1.0, 1.0), (-0.3, 0.8)])
def test_ncp_slide_stops_on_a_straight_line_at_the_closed_form_distance(direction):
    """The isotropic cone decelerates at mu g along the slip, whatever its direction."""
    mu, v0 = 0.5, 1.0
    d = np.asarray(direction) / np.linalg.norm(direction)
    sim = cube_sim(mu=mu, contact="ncp")
    n = int(1.3 * v0 / (mu * G) / sim.dt)
    xs = sim.rollout(cube_state(v=(v0 * d[0], v0 * d[1], 0)), np.zeros((n, 0)))
    speed = np.linalg.norm(xs[:, 7:9], axis=1)
    k = np.arange(n + 1)
    moving = v0 - mu * G * sim.dt * k > 0
    assert np.allclose(speed[moving], v0 - mu * G * sim.dt * k[moving], atol=1e-8)
    assert speed[~moving].max() < 1e-8
    travel = xs[-1, :2]
    assert np.linalg.norm(travel) == pytest.approx(v0**2 / (2 * mu * G), abs=v0 * sim.dt)
    assert abs(travel[0] * d[1] - travel[1] * d[0]) < 1e-9  # straight along the initial direction


def test_lcp_pyramid_is_anisotropic_where_the_cone_is_not():
    """Contrast: the LCP's friction box stops a diagonal slide short (its friction reaches sqrt(2) mu)."""
    lcp, ncp = cube_sim(contact="lcp"), cube_sim(contact="ncp")
    x0 = cube_state(v=(1.0, 1.0, 0.0))
    d_lcp = np.linalg.norm(lcp.rollout(x0, np.zeros((400, 0)))[-1, :2])
    d_ncp = np.linalg.norm(ncp.rollout(x0, np.zeros((400, 0)))[-1, :2])
    assert d_ncp == pytest.approx(2.0 / (2 * 0.5 * G), abs=2e-3)
    assert d_lcp < 0.75 * d_ncp


def test_ncp_and_lcp_agree_without_friction():
    x0 = cube_state(v=(0.7, -0.4, 0.0), w=(0, 0, 0.5))
    a = cube_sim(mu=0.0, contact="lcp").rollout(x0, np.zeros((300, 0)))
    b = cube_sim(mu=0.0, contact="ncp").rollout(x0, np.zeros((300, 0)))
    assert np.allclose(a, b, atol=1e-10)


NCP_STATES = {
    "free flight": dict(z=0.4, v=(1.0, 0.2, -0.3), w=(0.5, -0.2, 0.3)),
    "resting": dict(),
    "sticking under an inclined push": dict(v=(1e-3, 5e-4, 0.0)),
    "sliding diagonally": dict(v=(1.0, 0.4, 0.0)),
    "separating": dict(z=0.102, v=(0.2, 0.0, 1.0)),
}


@pytest.mark.parametrize("name", sorted(NCP_STATES))
def test_ncp_cube_jacobians_match_central_differences(ncp_cube, name):
    """(A flat box sliding *with spin* is left out: its four corners share the load in a way the
    law leaves open, and with different slip directions that share changes v+ itself.)"""
    from contact.ncp import NCPMode

    rep = _check(ncp_cube, cube_state(**NCP_STATES[name]), np.zeros(0))
    expected = {"resting": NCPMode.STICKING, "sticking under an inclined push": NCPMode.STICKING,
                "sliding diagonally": NCPMode.SLIDING}.get(name)
    if name == "sliding diagonally":  # four sliding corners: a family of load splits; the NCP returns its
        # canonical vertex (contact.ncp._canonical_vertex): one corner unloaded, three sliding
        assert len(rep) == 4 and sorted(rep.modes) == [NCPMode.BREAKING] + [NCPMode.SLIDING] * 3
    elif expected is not None:
        assert len(rep) == 4 and np.all(rep.modes == expected)


def test_ncp_sphere_rolling_and_sliding_jacobians():
    sim = sphere_sim(contact="ncp")
    x = np.r_[0, 0, 0.1, 0, 0, 0, 1.0, 0.8, -0.2, 0, 1.0, 3.0, -0.5]
    rep = _check(sim, x, np.zeros(0))
    assert len(rep) == 1 and rep.impulses[0, 0] > 0


def test_the_public_contact_accessors():
    """contact_report(data), contact_jacobian(q), contact_rows, planar and collision_geometry: what problems
    read instead of the contact model's and the workspaces' internals."""
    import problems

    sim = cube_sim()
    d = sim.create_data()
    assert len(sim.contact_report(d)) == 0  # no step yet
    v = np.array([0.3, -0.2, -1.0, 0.0, 0.0, 0.0])
    x = np.r_[cube_state()[:7], v]
    sim.step(x, np.zeros(0), data=d)
    rep = sim.contact_report(d)
    assert len(rep) == 4 and rep.impulses[:, 0].min() > 0
    assert len(sim.contacts) == 0  # the default workspace has not stepped: workspaces are separate
    contacts, J = sim.contact_jacobian(x[:7])
    assert sim.contact_rows == 3 and not sim.planar and J.shape == (4 * 3, 6)
    assert np.allclose(np.sort(contacts.points, axis=0), np.sort(rep.points, axis=0))
    c = (J @ v).reshape(4, 3)  # each contact's velocity in its frame: normal first, then the tangents
    assert np.allclose(c[:, 0], -1.0) and np.allclose(np.linalg.norm(c[:, 1:], axis=1), np.hypot(0.3, 0.2))
    far, Jfar = sim.contact_jacobian(np.r_[0, 0, 1.0, 0, 0, 0, 1])
    assert len(far) == 0 and Jfar.shape == (0, 6)
    assert "__ground__" in [o.name for o in sim.collision_geometry.geometryObjects]
    with pytest.raises(ValueError, match=r"configuration q has shape \(3,\), expected \(7,\)"):
        sim.contact_jacobian(np.zeros(3))
    with pytest.raises(ValueError, match="not a workspace of this simulator"):
        sim.contact_report(problems.load("catapult").dynamics.create_data())
    catapult = problems.load("catapult").dynamics
    assert catapult.planar and catapult.contact_rows == 2
    pendulum = problems.load("pendulum").dynamics  # no contact at all
    assert pendulum.contact_report() is None and pendulum.collision_geometry is None
    assert len(pendulum.contact_jacobian(np.zeros(pendulum.nq))[0]) == 0


def test_scene_workspaces_are_configured_and_independent():
    """create_data: each GeometryData has its collision requests configured (contacts on, the scene's margin, GJK's
    tolerance) and its own buffers (they are copies of one configured data): a change to one, or a detection run on
    it, leaves the next ones as new."""
    import problems
    from contact.detection import GJK_TOLERANCE

    sim = problems.load("go1-hold").dynamics
    scene = sim.contact_model.scene
    a, b = scene.create_data(), scene.create_data()
    assert a is not b and len(a.collisionRequests) == scene.npairs > 1
    for gd in (a, b):
        for req in gd.collisionRequests:
            assert req.enable_contact and req.security_margin == scene.margin and req.gjk_tolerance == GJK_TOLERANCE
    a.collisionRequests[0].security_margin = 0.3
    contacts = scene.detect(sim.model, sim.model.createData(), a, sim.neutral_state()[:sim.nq])
    assert len(contacts.points) > 0 and any(r.isCollision() for r in a.collisionResults)  # feet on the ground
    c = scene.create_data()
    for gd in (b, c):
        assert gd.collisionRequests[0].security_margin == scene.margin
        assert not any(r.isCollision() for r in gd.collisionResults)
