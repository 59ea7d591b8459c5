"""Analytical step Jacobians against finite differences at seeded random states."""

from __future__ import annotations

import numpy as np
import pytest

from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd

from .conftest import random_control, random_state


def test_jacobians_match_central_differences(any_sim):
    name, sim = any_sim
    rng = np.random.default_rng(1234)
    tol = fd_tolerance()
    for _ in range(5):
        x, u = random_state(sim, rng), random_control(sim, rng)
        x_next, Fx, Fu = sim.step_derivatives(x, u, data=sim.create_data())
        assert np.array_equal(x_next, sim.step(x, u, data=sim.create_data())), name  # the same x+, bit for bit
        fd = step_jacobians_fd(sim, x, u)
        scale = max(1.0, np.abs(Fx).max(), np.abs(Fu).max(initial=0.0))
        assert max_relative_error(Fx, fd.Fx) < tol * scale, name
        assert max_relative_error(Fu, fd.Fu) < tol * scale, name


def test_jacobians_match_ridders_below_1e6(any_sim):
    name, sim = any_sim
    rng = np.random.default_rng(99)
    x, u = random_state(sim, rng), random_control(sim, rng)
    _, Fx, Fu = sim.step_derivatives(x, u)
    ref = step_jacobians_fd(sim, x, u, method="ridders")
    assert max_relative_error(Fx, ref.Fx) < 1e-6, name
    assert max_relative_error(Fu, ref.Fu) < 1e-6, name


def test_free_flyer_jacobian_is_not_euclidean():
    """On a rotating free body, dq+/dq differs from the identity-based Euclidean guess."""
    from .conftest import free_body_simulator

    sim = free_body_simulator(dt=0.05)
    rng = np.random.default_rng(3)
    x = random_state(sim, rng, v_scale=3.0)
    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    nv = sim.nv
    assert np.abs(Fx[:nv, :nv] - np.eye(nv)).max() > 1e-2  # the group structure matters here
    fd = step_jacobians_fd(sim, x, np.zeros(0))
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * max(1.0, np.abs(Fx).max())


def test_checker_detects_a_wrong_jacobian(any_sim):
    """The comparison used above fails on a perturbed Jacobian (it can fail)."""
    name, sim = any_sim
    rng = np.random.default_rng(5)
    x, u = random_state(sim, rng), random_control(sim, rng)
    _, Fx, _ = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    Fx_bad = Fx.copy()
    Fx_bad[-1, 0] += 1e-4
    assert max_relative_error(Fx_bad, fd.Fx) > fd_tolerance() * max(1.0, np.abs(Fx).max())


def _cube_on_the_ground(contact):
    """A 1 kg cube (0.2 m) on the ground, and two states with different contacts: sliding flat on its
    four bottom corners, and tilted, falling onto one corner."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    b = ModelBuilder("cube")
    b.add_body(b.add_joint("free", name="root"), mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    smoothing = {"smoothing": 1e-3} if contact == "relaxed" else {}
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=0.5, contact=contact, **smoothing)
    flat = sim.neutral_state()
    flat[2] = 0.0999  # 0.1 mm deep
    flat[sim.nq:sim.nq + 3] = (1.0, 0.3, -0.2)
    tilted = sim.neutral_state()
    tilted[:sim.nq] = pin.integrate(model, tilted[:sim.nq], np.array([0.0, 0.0, 0.1, 0.3, 0.2, 0.0]))
    tilted[sim.nq + 2] = -0.5
    return sim, flat, tilted


@pytest.mark.parametrize("contact", ["lcp", "ncp", "relaxed"])
def test_workspaces_are_independent(contact):
    """Two knots' workspaces stepping different contact states (a cube sliding on four corners, one
    landing on one corner), interleaved step by step, give bit for bit what each gives alone, and each
    keeps its own contacts and counters: no warm start, kept solve or contact report crosses over."""
    sim, flat, tilted = _cube_on_the_ground(contact)
    u = np.zeros(0)
    steps = 5

    def alone(x):
        d, out = sim.create_data(), []
        for _ in range(steps):
            sim.step(x, u, data=d)
            out.append(sim.step_derivatives(x, u, data=d))  # reuses the kept contact solve of the step
            x = out[-1][0]
        return out, sim.contact_model.report(d.contact), d.stats

    (ref_flat, flat_report, flat_stats), (ref_tilted, tilted_report, tilted_stats) = alone(flat), alone(tilted)
    assert len(flat_report.points) == 4 and len(tilted_report.points) == 1  # different contact states
    other = sim.create_data()
    got_flat, got_tilted = [], []
    x1, x2 = flat, tilted
    for _ in range(steps):  # both steps, then both Jacobians: a forward pass, then a backward pass
        sim.step(x1, u)  # the default workspace: sim.contacts, sim.warm_start_stats
        sim.step(x2, u, data=other)
        got_flat.append(sim.step_derivatives(x1, u))
        got_tilted.append(sim.step_derivatives(x2, u, data=other))
        x1, x2 = got_flat[-1][0], got_tilted[-1][0]
    for got, ref in ((got_flat, ref_flat), (got_tilted, ref_tilted)):
        for a, b in zip(got, ref, strict=True):
            for p, q in zip(a, b, strict=True):
                assert np.array_equal(p, q), contact
    assert len(sim.contacts.points) == 4 and np.array_equal(sim.contacts.points, flat_report.points)
    assert np.array_equal(sim.contact_model.report(other.contact).points, tilted_report.points)
    # each workspace warm-starts from its own last solve only, and counts its own solves
    assert sim.warm_start_stats == flat_stats and other.stats == tilted_stats
    assert flat_stats["contact_steps"] == steps and flat_stats["warm_hits"] > 0


def test_returned_arrays_are_not_views_into_workspace():
    from problems.cartpole import cartpole_simulator

    sim = cartpole_simulator(2)
    rng = np.random.default_rng(0)
    x, u = random_state(sim, rng), random_control(sim, rng)
    xn, Fx, Fu = sim.step_derivatives(x, u)
    keep = (xn.copy(), Fx.copy(), Fu.copy())
    sim.step_derivatives(random_state(sim, rng), random_control(sim, rng))
    sim.step(random_state(sim, rng), random_control(sim, rng))
    for p, q in zip(keep, (xn, Fx, Fu), strict=True):
        assert np.array_equal(p, q)


@pytest.mark.parametrize("method", ["central", "ridders"])
def test_fd_checker_on_a_linear_system(method):
    """On a known linear map the finite-difference checker is exact (to round-off)."""

    class Linear:
        nx = ndx = 3
        nu = 2
        A = np.array([[1.0, 0.1, 0.0], [0.0, 1.0, 0.1], [0.2, 0.0, 0.9]])
        Bm = np.array([[0.0, 1.0], [0.5, 0.0], [1.0, -1.0]])

        def step(self, x, u):
            return self.A @ x + self.Bm @ u

        def step_derivatives(self, x, u):
            return self.step(x, u), self.A, self.Bm

        def state_integrate(self, x, dx):
            return x + dx

        def state_difference(self, x0, x1):
            return x1 - x0

    lin = Linear()
    fd = step_jacobians_fd(lin, np.ones(3), np.ones(2), method=method)
    assert np.allclose(fd.Fx, lin.A, atol=1e-9)
    assert np.allclose(fd.Fu, lin.Bm, atol=1e-9)


def _sphere_on_sphere(contact: str):
    """A ball of radius 0.08 (free) 0.5 mm from a sphere of radius 0.1 at the end of a swinging arm, both
    approaching, spinning, sliding: a sphere-sphere contact row within the margin. Returns (sim, x, u)."""
    from dynamics import ModelBuilder, Simulator

    b = ModelBuilder("hit")
    a = 0.2
    tip = np.array([-0.8 * np.sin(a), 0.0, 1 - 0.8 * np.cos(a)])
    j1 = b.add_joint("revolute", name="swing", axis="y", placement=(0.0, 0.0, 1.0))
    b.add_body(j1, mass=1.0, sphere=0.1, offset=(0.0, 0.0, -0.8))
    j2 = b.add_joint("free", name="ball", placement=(0.3, 0.05, 0.0))
    b.add_body(j2, mass=0.4, sphere=0.08)
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    d = np.array([-1.0, 0.3, 0.2]) / np.linalg.norm([-1.0, 0.3, 0.2])
    x = np.zeros(sim.nx)
    x[0], x[1:4], x[7] = a, tip + d * (0.18 + 5e-4) - [0.3, 0.05, 0.0], 1.0
    x[8], x[9:15] = 3.0, [1.0, 0.2, 0.3, 2.0, -1.0, 0.5]
    return sim, x, np.zeros(sim.nu)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_two_moving_spheres_in_contact(contact):
    """Between two spheres the normal is the line of their centres and turns as either centre moves (Contacts.gap):
    Fx and the placement and inertial columns of Fp against central differences, a swinging arm's sphere striking
    a free ball. Before, the normal turned with one body only: the q-columns were off by up to 127 (of 645, 0.197
    relative), frictionless too (found by a review, 2026-11-27)."""
    from trajopt.numdiff import parameter_jacobian_fd

    sim, x, u = _sphere_on_sphere(contact)
    sim.step(x, u)
    report = sim.contacts
    assert len(report) == 1
    gap = sim._workspace(None).contact.geo.contacts.gap
    assert gap[0] == pytest.approx(0.1805, abs=1e-9)  # |c_A - c_B| = 0.1 + 0.08 + 0.5 mm
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    scale = max(1.0, np.abs(Fx).max())
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * scale
    names = ["placement:swing", "placement:ball", "mass:ball_body2", "com:swing_body1"]
    Fp = sim.step_derivatives(x, u, params=names)[3]
    assert np.abs(Fp - parameter_jacobian_fd(sim, x, u, names)).max() <= 1e-6 * scale


@pytest.mark.parametrize("case", ["sphere-sphere", "capsule-ball", "ball-capsule", "capsule-capsule",
                                  "capsule-end-ball", "cylinder-side-ball", "ball-cylinder-side",
                                  "cylinder-side-capsule", "capsule-cylinder-side", "cylinder-cylinder-sides"])
def test_round_pair_geometry_compiled_numba_and_numpy_agree(case):
    """The centre line's derivatives (dn, dp, dD; with a capsule's slides) in the three implementations: the
    compiled core, the numba kernels and tests/reference_kinematics.py."""
    import pinocchio as pin

    from contact.kinematics import ContactKinematics

    from .reference_kinematics import ReferenceKinematics

    sim, x, u = _sphere_on_sphere("lcp") if case == "sphere-sphere" else _round_pair(case, "lcp")
    sim.step(x, u)
    c = sim._workspace(None).contact.geo.contacts
    data = sim.model.createData()
    pin.computeJointJacobians(sim.model, data, x[:sim.nq])
    pin.updateFramePlacements(sim.model, data)
    compiled = ContactKinematics(sim.model).geometry(data, c)
    numba = ContactKinematics(sim.model, compiled=False).geometry(data, c)
    numpy_ = ReferenceKinematics(sim.model).geometry(data, c)
    for f in ("J", "D", "dD", "dp"):
        assert np.allclose(getattr(compiled, f), getattr(numba, f), rtol=0, atol=1e-12), f
        assert np.allclose(getattr(numba, f), getattr(numpy_, f), rtol=0, atol=1e-12), f
    assert np.abs(compiled.dD).max() > 0.1  # the normal turns (the free body's translation turns it)


ROUND_PAIRS = {  # (the arm's shape, the free body's shape, where along the arm capsule's axis, the free axis)
    "capsule-ball": ("capsule", "sphere", 0.05, None),
    "ball-capsule": ("sphere", "capsule", 0.0, (0.0, 0.0, 1.0)),
    "capsule-capsule": ("capsule", "capsule", -0.04, (0.3, 0.2, 1.0)),
    "capsule-end-ball": ("capsule", "sphere", -0.2, None),
    "cylinder-side-ball": ("cylinder", "sphere", 0.05, None),
    "ball-cylinder-side": ("sphere", "cylinder", 0.0, (0.0, 0.0, 1.0)),
    "cylinder-side-capsule": ("cylinder", "capsule", -0.04, (0.3, 0.2, 1.0)),
    "capsule-cylinder-side": ("capsule", "cylinder", -0.04, (0.3, 0.2, 1.0)),
    "cylinder-cylinder-sides": ("cylinder", "cylinder", -0.04, (0.3, 0.2, 1.0)),
}


def _round_pair(case: str, contact: str):
    """A round shape at the end of a swinging arm (a capsule lies along the arm's x) against a free round body
    0.5 mm from it, approaching, sliding along the capsule and spinning. ``case``: ROUND_PAIRS. (sim, x, u)."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    arm_shape, free_shape, along, free_axis = ROUND_PAIRS[case]
    r_arm, r_free = 0.05, 0.08 if free_shape == "sphere" else 0.04
    rod = {"capsule": "capsule", "cylinder": "cylinder"}
    b = ModelBuilder("hit")
    a = 0.2
    j1 = b.add_joint("revolute", name="swing", axis="y", placement=(0.0, 0.0, 1.0))
    turn = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # local z along the arm's x
    b.add_body(j1, mass=1.0, offset=(0.0, 0.0, -0.8), rotation=turn,
               **({rod[arm_shape]: (r_arm, 0.3)} if arm_shape in rod else {"sphere": r_arm}))
    j2 = b.add_joint("free", name="free")
    b.add_body(j2, mass=0.4, **({rod[free_shape]: (r_free, 0.2)} if free_shape in rod else {"sphere": r_free}))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    tip = np.array([-0.8 * np.sin(a), 0.0, 1 - 0.8 * np.cos(a)])
    ax = np.array([np.cos(a), 0.0, -np.sin(a)])  # the arm capsule's axis (world)
    end = 0.15 if arm_shape in rod else 0.0
    core = tip + np.clip(along, -end, end) * ax  # the arm core's closest point
    d = np.array([0.2, 1.0, 0.1]) - ax * (np.array([0.2, 1.0, 0.1]) @ ax)
    if abs(along) > end:  # beyond the capsule's end: the line from its end cap's centre (the swing pushes it on)
        d = d / np.linalg.norm(d) + (along - np.clip(along, -end, end)) * 4.0 * ax
    d /= np.linalg.norm(d)
    R = np.eye(3)
    if free_axis is not None:  # the free capsule's axis across d (its closest point: its centre)
        zb = np.array(free_axis) - d * (np.array(free_axis) @ d)
        zb /= np.linalg.norm(zb)
        xb = np.cross(d, zb)
        R = np.column_stack((xb, d, zb))
    x = np.zeros(sim.nx)
    x[0], x[1:4] = a, core + d * (r_arm + r_free + 5e-4)
    x[4:8] = pin.Quaternion(R).coeffs()
    x[8] = 3.0
    x[9:12] = R.T @ (-d + 0.3 * ax)  # the free joint's velocity is in its own frame: approaching, sliding
    x[12:15] = [2.0, -1.0, 0.5]
    return sim, x, np.zeros(sim.nu)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("case", list(ROUND_PAIRS))
def test_round_shapes_in_contact(case, contact):
    """Capsules against round shapes that move, and a ball, a capsule or a cylinder on a cylinder's side: the normal
    is the line of the cores' closest points, which slide along a capsule's (or the cylinder's) segment
    (Contacts.slide; fixed at a capsule's end). Fx and the placement columns of Fp against central differences.
    Before: one body carried the normal and a capsule's point centre was body-fixed; Fx was 4e-3 relative off on
    capsule-ball (38 of 9.3e3), a ball on the cylinder's side 4.3e-7 (a tolerance of 7.3e-9), and until 2026-11-27
    a capsule or cylinder on a cylinder's side 2.1e-7 - 2.9e-6 (Fp 4.5e-3 - 5.1e-2; coal's patch, two points for
    the crossing cylinders)."""
    sim, x, u = _round_pair(case, contact)
    sim.step(x, u)
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    c = sim._workspace(None).contact.geo.contacts
    slides = int(np.abs(c.slide[0, :3]).sum() > 0) + int(np.abs(c.slide[0, 3:]).sum() > 0)
    assert slides == {"capsule-ball": 1, "ball-capsule": 1, "capsule-capsule": 2, "capsule-end-ball": 0,
                      "cylinder-side-ball": 1, "ball-cylinder-side": 1, "cylinder-side-capsule": 2,
                      "capsule-cylinder-side": 2, "cylinder-cylinder-sides": 2}[case]
    _assert_fx_and_placement_columns_match_differences(sim, x, u)


def _assert_fx_and_placement_columns_match_differences(sim, x, u):
    """Fx and the placement columns of Fp (the arm's swing joint, the free body) against central differences."""
    from trajopt.numdiff import parameter_jacobian_fd

    _, Fx, _ = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    scale = max(1.0, np.abs(Fx).max())
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * scale
    names = ["placement:swing", "placement:free"]
    Fp = sim.step_derivatives(x, u, params=names)[3]
    assert np.abs(Fp - parameter_jacobian_fd(sim, x, u, names)).max() <= 1e-6 * scale


def _rim_pair(case: str, tilt: float, contact: str):
    """A ball against a cylinder's rim, 0.5 mm apart along the rim's normal ``n = cos(tilt) u + sin(tilt) a_end``
    (``u`` the rim point's radial direction, ``a_end`` the axis out of that end), approaching, sliding along the
    rim and spinning. ``case``: ``"cylinder-rim-ball"`` (the arm of :func:`_round_pair` carries the cylinder, a free
    ball meets its far end's rim) or ``"ball-cylinder-rim"`` (the arm carries the ball, a free cylinder's rim meets
    it). Returns (sim, x, u, rho): rho the ball centre's distance from the cylinder's axis."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    r_ball, R, h = (0.08, 0.05, 0.15) if case == "cylinder-rim-ball" else (0.05, 0.04, 0.1)
    b = ModelBuilder("rim")
    a = 0.2
    j1 = b.add_joint("revolute", name="swing", axis="y", placement=(0.0, 0.0, 1.0))
    turn = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # local z along the arm's x
    arm = {"cylinder": (R, 2 * h)} if case == "cylinder-rim-ball" else {"sphere": r_ball}
    b.add_body(j1, mass=1.0, offset=(0.0, 0.0, -0.8), rotation=turn, **arm)
    j2 = b.add_joint("free", name="free")
    b.add_body(j2, mass=0.4, **({"sphere": r_ball} if case == "cylinder-rim-ball" else {"cylinder": (R, 2 * h)}))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    tip = np.array([-0.8 * np.sin(a), 0.0, 1 - 0.8 * np.cos(a)])
    ax = np.array([np.cos(a), 0.0, -np.sin(a)])  # the arm's axis (world)
    gap = r_ball + 5e-4
    x = np.zeros(sim.nx)
    x[0], x[8] = a, 3.0
    if case == "cylinder-rim-ball":
        a_end = -ax  # the arm cylinder's far (-z) end
        u = np.array([0.2, 1.0, 0.1]) - ax * (np.array([0.2, 1.0, 0.1]) @ ax)
        u /= np.linalg.norm(u)
        n = np.cos(tilt) * u + np.sin(tilt) * a_end
        rim = tip + h * a_end + R * u
        Rf, centre, v = np.eye(3), rim + gap * n, -n  # the free ball approaches the rim
    else:
        a_end = np.array([0.3, 0.2, 1.0]) / np.linalg.norm([0.3, 0.2, 1.0])  # the free cylinder's +z end
        u = np.cross(a_end, [1.0, 0.0, 0.0])
        u /= np.linalg.norm(u)
        n = np.cos(tilt) * u + np.sin(tilt) * a_end
        rim = tip - gap * n
        centre = rim - R * u - h * a_end
        Rf, v = np.column_stack((np.cross(u, a_end), u, a_end)), n  # the free cylinder approaches the ball
    x[1:4] = centre
    x[4:8] = pin.Quaternion(Rf).coeffs()
    x[9:12] = Rf.T @ (v + 0.3 * np.cross(n, a_end))  # the free joint's velocity is in its own frame
    x[12:15] = [2.0, -1.0, 0.5]
    return sim, x, np.zeros(sim.nu), R + gap * np.cos(tilt)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("tilt", [0.3, 1.0])
@pytest.mark.parametrize("case", ["cylinder-rim-ball", "ball-cylinder-rim"])
def test_ball_on_a_cylinder_rim(case, tilt, contact):
    """A ball beyond a cylinder's end and outside its radius touches the rim circle: the normal is the line from the
    rim's closest point, which slides along the rim's tangent at R / rho of the relative tangential velocity
    (Contacts.slide sqrt(R / rho) (a x u) on the cylinder's side). Fx and the placement columns of Fp against central
    differences. Before (2026-11-27), coal's normal carried by the cylinder: Fx 2.6e-6 - 2.9e-4 relative off, the
    placement columns up to 0.24."""
    sim, x, u, rho = _rim_pair(case, tilt, contact)
    sim.step(x, u)
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    c = sim._workspace(None).contact.geo.contacts
    assert np.isclose(c.phi[0], 5e-4, rtol=0, atol=1e-12)
    # slides in (point body, normal body) order: the ball carries the point, the cylinder's rim slides
    R = 0.05 if case == "cylinder-rim-ball" else 0.04
    assert np.isclose(np.linalg.norm(c.slide[0, 3:]), np.sqrt(R / rho), rtol=1e-12) and not c.slide[0, :3].any()
    _assert_fx_and_placement_columns_match_differences(sim, x, u)


@pytest.mark.parametrize("other", ["cylinder", "capsule"])
def test_a_rod_crossing_just_past_a_cylinder_end_touches_it_once(other):
    """A rod crossing a cylinder (0.7 rad) 1 mm off its side, slid just past the cylinder's end (s - h from 0 to
    1e-4 m: its rim, coal's patch): every contact point within the margin of the cylinder itself. coal's patch of two
    cylinders there held a second point on the rod's far rim, 6.5 cm from the cylinder with a plane distance of 1 mm
    (0.024 of the step's 0.13 normal impulse: a spurious torque; the angular velocity after one step jumped by
    0.8 rad/s across s = h); found by a review of the centre-line change, 2026-11-27."""
    import pinocchio as pin

    from contact.detection import CollisionScene
    from dynamics import ModelBuilder, Simulator

    def distance(x):  # of x to the cylinder (axis z through the origin), outside it
        radial, out = np.hypot(x[0], x[1]) - R, abs(x[2]) - h
        return np.hypot(radial, out) if radial > 0 and out > 0 else max(radial, out)

    R, h, r2, h2 = 0.04, 0.1, 0.03, 0.15
    b = ModelBuilder("cross", gravity=(0.0, 0.0, 0.0))
    j = b.add_joint("free", name="j0")
    b.add_body(j, mass=1.0, cylinder=(R, 2 * h))
    j = b.add_joint("free", name="j1")
    b.add_body(j, mass=1.0, **{other: (r2, 2 * h2)})
    model, geom = b.build()
    scene = CollisionScene(model, geom, ground=-5.0, margin=5e-3)
    a2 = np.array([0.0, np.sin(0.7), np.cos(0.7)])
    rot = np.column_stack((np.cross([1.0, 0.0, 0.0], a2), [1.0, 0.0, 0.0], a2))

    def q_at(ds):
        return np.r_[0, 0, 0, 0, 0, 0, 1.0, R + r2 + 1e-3, 0.0, h + ds, pin.Quaternion(rot).coeffs()]

    data = model.createData()
    for ds in (0.0, 1e-9, 1e-7, 1e-5, 1e-4):
        for detect in (scene.detect, scene._detect_reference):
            c = detect(model, data, scene.create_data(), q_at(ds))
            assert len(c) >= 1
            for x in c.points:
                assert distance(x) <= 5e-3, (ds, c.points)
    # one step on each side of s = h: the same motion (the line before, coal's one point after)
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact="lcp")
    w = []
    for ds in (-1e-7, 1e-7):
        x = np.r_[q_at(ds), np.zeros(6), 0, -0.5, 0, 0, 0, 0]  # the rod moves towards the cylinder (its local -y)
        w.append(sim.step(x, np.zeros(0))[-3:])
    assert np.abs(w[0] - w[1]).max() < 1e-3, w


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("rod", ["capsule", "cylinder"])
def test_a_rod_across_a_cylinder_rim(rod, contact):
    """A capsule, or a cylinder by its side, across the rim of a free cylinder's end, 0.5 mm from it along the rim's
    normal n = (cos 0.6 u + sin 0.6 a), approaching and spinning: the normal is the line between the segment's and
    the rim circle's closest points (the segment's point sliding along its axis, the rim's along its tangent scaled
    by sqrt(R / rho): the kernels' two-slide system holds with it). Fx and the placement columns of Fp against
    central differences. Before (2026-11-27), coal's normal, carried by one body: Fx up to O(1) off on 11 of 40
    random such poses (found by a review)."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    R, h, r2, h2 = 0.04, 0.1, 0.03, 0.15
    b = ModelBuilder("rim-rod")
    j = b.add_joint("free", name="swing")  # the cylinder (named as _assert_...'s placements expect)
    b.add_body(j, mass=1.0, cylinder=(R, 2 * h))
    j = b.add_joint("free", name="free")
    b.add_body(j, mass=0.5, **{rod: (r2, 2 * h2)})
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    n = np.array([np.cos(0.6), 0.0, np.sin(0.6)])  # out of the rim point (R, 0, h)
    t = np.array([0.0, 1.0, 0.0])  # the rim's tangent there
    axis = np.cos(0.3) * t + np.sin(0.3) * np.cross(n, t)  # the rod's axis, normal to n
    centre = np.array([R, 0.0, h]) + (r2 + 5e-4) * n
    rot = np.column_stack((np.cross(n, axis), n, axis))
    x = np.zeros(sim.nx)
    x[:7] = [0, 0, 0, 0, 0, 0, 1]
    x[7:10], x[10:14] = centre, pin.Quaternion(rot).coeffs()
    x[14:20] = [0.1, 0.0, 0.0, 0.5, -0.3, 0.2]
    x[20:23] = rot.T @ (-0.8 * n + 0.2 * axis)  # approaching, sliding along the rod
    x[23:26] = [1.0, -0.5, 2.0]
    sim.step(x, np.zeros(0))
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    c = sim._workspace(None).contact.geo.contacts
    assert c.gap[0] != 0.0 and np.isclose(c.phi[0], 5e-4, rtol=0, atol=1e-9)
    rho = R + (r2 + 5e-4) * np.cos(0.6)
    slides = sorted([np.linalg.norm(c.slide[0, :3]), np.linalg.norm(c.slide[0, 3:])])
    assert np.allclose(slides, [np.sqrt(R / rho), 1.0], rtol=1e-9)  # the rim's scaled tangent, the rod's axis
    _assert_fx_and_placement_columns_match_differences(sim, x, np.zeros(0))


@pytest.mark.parametrize("rod", ["capsule", "cylinder"])
def test_a_rod_lying_across_a_cylinder_end(rod):
    """A long thin rod lying across a free cylinder's end along a chord, tilted by up to 2 mrad, its lower rim
    crossing 0.2-1 mm above: two near-equal minima of its distance to the rim circle, one per crossing. Every
    sampled local minimum is refined (the best sample alone sat in the higher crossing's basin on 3 of 12 such
    poses, which the cap-face test then refused: coal's two-point patch, Fx 4e-2 - 0.39 off; found by a review),
    so each pose is a rim contact with exact Jacobians (Fx against central differences)."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    rng = np.random.default_rng(11)
    R, h, r2, h2 = 0.04, 0.1, 0.01, 0.3
    b = ModelBuilder("chord")
    j = b.add_joint("free", name="swing")
    b.add_body(j, mass=1.0, cylinder=(R, 2 * h))
    j = b.add_joint("free", name="free")
    b.add_body(j, mass=1.0, **{rod: (r2, 2 * h2)})
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-50.0, friction=0.3, contact="lcp")
    a, u, v = np.eye(3)[2], np.eye(3)[0], np.eye(3)[1]
    for _ in range(12):
        c, tilt, gap = rng.uniform(-0.8, 0.8), rng.uniform(-2e-3, 2e-3), rng.uniform(2e-4, 1e-3)
        axis = (v + tilt * a) / np.linalg.norm(v + tilt * a)
        centre = h * a + c * R * u + rng.uniform(-0.2, 0.2) * h2 * axis
        ys = np.sqrt(R * R - (c * R) ** 2)  # the chord's rim crossings at y = +-ys
        lower = min((centre + s * axis)[2] for s in ((ys - centre[1]) / axis[1], (-ys - centre[1]) / axis[1]))
        centre = centre + (h + r2 + gap - lower) * a
        rot = np.column_stack((u, np.cross(axis, u), axis))
        x = np.r_[0, 0, 0, 0, 0, 0, 1, centre, pin.Quaternion(rot).coeffs(), rng.normal(0, 0.3, 3),
                  rng.normal(0, 2, 3), rng.normal(0, 0.3, 3) + rot.T @ (-0.5 * a), rng.normal(0, 2, 3)]
        sim.step(x, np.zeros(0))
        c_ = sim._workspace(None).contact.geo.contacts
        assert len(c_.gap) == 1 and c_.gap[0] != 0.0, (c, tilt, c_.gap)
        # the smallest error over three difference steps: the largest crosses a friction mode's edge on some poses
        _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
        err = min(np.abs(Fx - (fd := step_jacobians_fd(sim, x, np.zeros(0), h=step).Fx)).max()
                  / max(1.0, np.abs(fd).max()) for step in (6.06e-6, 1e-6, 1e-7))
        assert err <= 1e-6, (c, tilt, err)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("face", ["box", "cylinder"])
def test_a_tilted_cylinder_rim_on_a_face(face, contact):
    """A free cylinder tilted by 0.2 - 1.2 rad, its lower rim 0.5 mm above the top face of a free box or a free
    cylinder's cap face, approaching, sliding and spinning: the contact is the rim's lowest point along the face's
    normal (sliding on the rim as the normal turns: Contacts.axis), as on the ground; nearly flat (0.01 rad, 0), four
    points fixed on its rim. Fx and the placement columns of Fp against central differences. Before (2026-11-28),
    coal's witness point taken as fixed on the rim: Fx 7e-4 to 6e-2 off (LCP and NCP, both faces)."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    rng = np.random.default_rng(5)
    R2, h2 = 0.04, 0.1
    b = ModelBuilder("rim-face")
    j = b.add_joint("free", name="swing")  # the face's body (named as the placements below expect)
    b.add_body(j, mass=1.0, **({"box": (0.3, 0.3, 0.1)} if face == "box" else {"cylinder": (0.12, 0.1)}))
    j = b.add_joint("free", name="free")
    b.add_body(j, mass=0.5, cylinder=(R2, 2 * h2))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    names = ["placement:swing", "placement:free"]
    pushed = 0
    for beta in (*rng.uniform(0.2, 1.2, 3), 0.01, 0.0):  # tilted: its rim's lowest point; nearly flat: its disk
        turn = rng.uniform(0.0, 2 * np.pi)
        a = np.array([np.sin(beta) * np.cos(turn), np.sin(beta) * np.sin(turn), np.cos(beta)])
        e1 = np.array([np.cos(turn), np.sin(turn), 0.0]) if beta == 0.0 else np.cross(a, [0.0, 0.0, 1.0])
        e1 /= np.linalg.norm(e1)
        rot = np.column_stack((e1, np.cross(a, e1), a))
        down = np.array([0.0, 0.0, -1.0]) + a * a[2]  # the lower rim point's direction from the lower end's centre
        low = -h2 * a + (R2 * down / np.linalg.norm(down) if beta > 0.0 else 0.0)
        centre = np.r_[rng.uniform(-0.04, 0.04, 2), 0.05 + 5e-4] - low
        x = np.r_[0, 0, 0, 0, 0, 0, 1, centre, pin.Quaternion(rot).coeffs(), rng.normal(0, 0.3, 6),
                  rot.T @ (np.array([0.1, 0.05, -0.8]) + rng.normal(0, 0.1, 3)), rng.normal(0, 0.5, 3)]
        sim.step(x, np.zeros(0))
        c = sim._workspace(None).contact.geo.contacts
        if beta > 0.1:
            assert len(c) == 1 and np.allclose(c.axis[0], a) and np.isclose(c.phi[0], 5e-4, rtol=0, atol=1e-9)
        else:  # four points fixed on its rim (no axis), the lowest 0.5 mm above
            assert len(c) == 4 and not c.axis.any() and not c.radius.any() and np.isclose(c.phi.min(), 5e-4)
        pushed += int(sim.contacts.impulses[:, 0].max() > 0)
        _assert_fx_and_fp_exact(sim, x, names)
    assert pushed >= 3, pushed  # most poses hit the face in the step


def _assert_fx_and_fp_exact(sim, x, names):
    """Fx and the columns ``names`` of Fp at ``x`` (no controls) within 1e-6 (relative to max(1, max |Fx|)) of central
    differences: the smallest error over four difference steps (three for Fp), since the largest can cross a
    friction mode's edge, and NCP's slip near sticking curves so sharply that the difference's own error is 2e-4 at
    1e-7 on some poses."""
    from trajopt.numdiff import parameter_jacobian_fd

    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    scale = max(1.0, np.abs(Fx).max())
    steps = (6.06e-6, 1e-6, 1e-7, 3e-8)
    err = min(np.abs(Fx - step_jacobians_fd(sim, x, np.zeros(0), h=step).Fx).max() for step in steps)
    assert err <= 1e-6 * scale, err
    Fp = sim.step_derivatives(x, np.zeros(0), params=names)[3]
    err = min(np.abs(Fp - parameter_jacobian_fd(sim, x, np.zeros(0), names, h=step)).max() for step in steps[1:])
    assert err <= 1e-6 * scale, err


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_a_tilted_disk_on_the_corners_of_a_smaller_face(contact):
    """A can (radius 4 cm) tilted by 0.05 - 0.3 rad over a free box whose top face (3 x 2 cm) lies wholly under its
    disk, 0.5 mm above the face's highest corner, approaching, sliding and spinning: its lowest rim point is beyond
    the face, so the disk carries the normal and the face's corners under it are the points (box vertices against
    the disk's plane: exact). Fx and the placement columns of Fp against central differences."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    rng = np.random.default_rng(11)
    b = ModelBuilder("post")
    j = b.add_joint("free", name="swing")
    b.add_body(j, mass=1.0, box=(0.03, 0.02, 0.1))
    j = b.add_joint("free", name="free")
    b.add_body(j, mass=0.3, cylinder=(0.04, 0.12))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact=contact)
    names = ["placement:swing", "placement:free"]
    corners = np.array([[sx * 0.015, sy * 0.01, 0.05] for sx in (-1, 1) for sy in (-1, 1)])
    pushed = 0
    for beta in rng.uniform(0.05, 0.3, 6):
        turn = rng.uniform(0.0, 2 * np.pi)
        a = np.array([np.sin(beta) * np.cos(turn), np.sin(beta) * np.sin(turn), np.cos(beta)])
        e1 = np.cross(a, [0.0, 0.0, 1.0])
        e1 /= np.linalg.norm(e1)
        rot = np.column_stack((e1, np.cross(a, e1), a))
        bottom = np.r_[rng.uniform(-0.003, 0.003, 2), 0.05]  # the lower disk's centre, over the face's
        low = min((bottom - c) @ a for c in corners)  # the nearest corner's distance below the disk's plane
        bottom[2] += (5e-4 - low) / a[2]  # now 0.5 mm
        centre = bottom + 0.06 * a
        x = np.r_[0, 0, 0, 0, 0, 0, 1, centre, pin.Quaternion(rot).coeffs(), rng.normal(0, 0.3, 6),
                  rot.T @ (np.array([0.1, 0.05, -0.8]) + rng.normal(0, 0.1, 3)), rng.normal(0, 0.5, 3)]
        sim.step(x, np.zeros(0))
        c = sim._workspace(None).contact.geo.contacts
        assert len(c) >= 1 and np.all(c.normal_body == 2) and not c.axis.any(), (c.points, c.normal_body)
        assert np.allclose(np.abs(c.normals @ a), 1.0) and np.isclose(c.phi.min(), 5e-4, rtol=0, atol=1e-9), c.phi
        pushed += int(sim.contacts.impulses[:, 0].max() > 0)
        _assert_fx_and_fp_exact(sim, x, names)
    assert pushed >= 3, pushed
