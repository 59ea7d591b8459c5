"""Physical parameters by name and the exact parameter Jacobian of one step (issue 14, first part).

``Fp`` is checked against central differences through ``with_parameters`` (:func:`trajopt.numdiff.
parameter_jacobian_fd`, step 1e-6) for every parameter kind, in free motion, sticking, sliding, deep
penetration (the position correction) and at a joint limit with implicit damping, on a free-flyer, under LCP
and NCP (and relaxed contact); then closed forms (a sliding cube's distance against friction and mass, a pendulum's acceleration
against its mass, COM and inertia) and bad inputs.

Tolerance: per parameter block, ``|Fp - FD| <= rtol * max(1, |FD|)`` with ``rtol = 1e-6`` (central
differences of unit-scale steps are good to ~1e-9; the contact solves, re-run cold on each perturbed
system, add their own tolerance); flat patches (a box resting on four coplanar corners, a statically
indeterminate contact) get ``1e-5``, where the state Jacobians' own finite-difference error is of the
same size (``Fx`` of the resting cube: 6e-4 on entries of 1e3).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import problems
from dynamics import ModelBuilder, Simulator
from problems.cartpole import pendulum_simulator
from problems.inverse import cube_simulator
from trajopt.numdiff import parameter_jacobian_fd

G = 9.81


def assert_blocks(sim, Fp, F, names, rtol):
    off = 0
    for n in names:
        s = sim.parameter_size(n)
        a, b = Fp[:, off:off + s], F[:, off:off + s]
        err = np.abs(a - b).max()
        assert err <= rtol * max(1.0, np.abs(b).max()), f"{n}: |Fp - FD| = {err:.3g}, |FD| = {np.abs(b).max():.3g}"
        off += s
    assert off == Fp.shape[1] == F.shape[1]


def check_fd(sim, x, u, names=None, rtol=1e-6, h=1e-6):
    names = sim.parameter_names() if names is None else names
    # fresh workspaces: no warm start from an earlier call (the relaxed solve's answer depends on its start
    # at round-off)
    xn, Fx, Fu, Fp = sim.step_derivatives(x, u, params=names, data=sim.create_data())
    assert Fp.shape == (sim.ndx, sim.parameter_size(names))
    # x+, Fx, Fu are those of the call without params, bit for bit
    xn0, Fx0, Fu0 = sim.step_derivatives(x, u, data=sim.create_data())
    assert np.array_equal(xn, xn0) and np.array_equal(Fx, Fx0) and np.array_equal(Fu, Fu0)
    sim.step(x, u)  # the default workspace holds this step's contact state for the caller
    F = parameter_jacobian_fd(sim, x, u, names, h=h)
    assert_blocks(sim, Fp, F, names, rtol)
    return Fp, F


def cube_state(z, v=(0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0)):
    return np.r_[0.0, 0.0, z, 0.0, 0.0, 0.0, 1.0, v, w]


NONE = np.zeros(0)


@pytest.fixture(scope="module", params=["lcp", "ncp"])
def cube(request):
    return cube_simulator(contact=request.param, friction=0.5)


def test_names_sizes_values(cube):
    names = cube.parameter_names()
    assert names == ["friction", "mass:root_body1", "com:root_body1", "inertia:root_body1", "placement:root"]
    assert cube.parameter_size(names) == 1 + 1 + 3 + 6 + 6
    p = cube.get_parameters(names)
    # 1 kg, 0.2 m cube: I = m a^2 / 6 on the diagonal (xx, xy, yy, xz, yz, zz)
    i = 0.2 ** 2 / 6
    np.testing.assert_allclose(p, [0.5, 1.0, 0, 0, 0, i, 0, i, 0, 0, i, 0, 0, 0, 0, 0, 0], atol=1e-15)
    new = cube.with_parameters(["mass:root_body1", "friction"], [2.0, 0.3])
    assert new.get_parameters(["mass:root_body1", "friction"]).tolist() == [2.0, 0.3]
    assert cube.get_parameters(["mass:root_body1", "friction"]).tolist() == [1.0, 0.5]  # original unchanged
    # inertia about the COM is kept when the mass changes
    np.testing.assert_array_equal(new.get_parameters("inertia:root_body1"), cube.get_parameters("inertia:root_body1"))


@pytest.mark.parametrize("case", ["sliding", "sticking", "free", "deep"])
def test_cube_fd(cube, case):
    x = {"sliding": cube_state(0.1 - 2e-5, v=(1.0, 0.3, 0.0)),
         "sticking": cube_state(0.1 - 2e-5),
         "free": cube_state(0.5, v=(1.0, 0.0, -0.5), w=(1.0, 0.5, -0.3)),
         # 3 mm deep: the position correction acts (phi < -slop)
         "deep": cube_state(0.1 - 3e-3, v=(0.5, 0.0, 0.0))}[case]
    check_fd(cube, x, NONE, rtol=1e-6 if case == "free" else 1e-5)
    if case == "deep":
        assert cube._data.contact.correction is not None


def test_tilted_cube_sliding_on_an_edge(cube):
    """Two contacts (an edge), not a flat patch: the tight tolerance."""
    q = cube_state(0.0)[:7]
    import pinocchio as pin

    R = pin.rpy.rpyToMatrix(0.3, 0.0, 0.0)
    q[3:7] = pin.Quaternion(R).coeffs()
    h = 0.1 * (np.cos(0.3) + np.sin(0.3))  # lowest corner on the ground
    q[2] = h - 2e-5
    x = np.r_[q, 1.0, 0.2, 0.0, 0.0, 0.0, 0.0]
    cube.step(x, NONE)
    assert len(cube.contacts) == 2
    check_fd(cube, x, NONE, rtol=1e-6)


def arm_simulator(contact):
    """Two revolute links (y axis) with position limits and implicit joint damping, the second pressed
    against its lower limit by gravity; the tip sphere over the ground."""
    b = ModelBuilder("arm")
    j1 = b.add_joint("revolute", name="j1", axis="y", lower=-2.0, upper=2.0, effort=50.0)
    b.add_body(j1, mass=1.2, box=(0.05, 0.05, 0.4), offset=(0, 0, -0.2))
    j2 = b.add_joint("revolute", name="j2", parent=j1, axis="y", placement=(0, 0, -0.4), lower=0.0, upper=1.5,
                     effort=50.0)
    b.add_body(j2, mass=0.8, box=(0.04, 0.04, 0.3), offset=(0, 0, -0.15))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=1e-3, contact=contact, joint_damping=[0.3, 0.5])


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_joint_limit_with_damping(contact):
    sim = arm_simulator(contact)
    x = np.array([0.7, 0.0, 0.4, -0.3])  # j2 at its lower limit, moving into it
    sim.step(x, np.zeros(2))
    assert len(sim.contacts.limit_impulses) and sim.contacts.limit_impulses.max() > 0
    check_fd(sim, x, np.array([0.5, -0.2]))


def test_free_motion_arm():
    sim = arm_simulator("lcp")
    check_fd(sim, np.array([0.3, 0.8, 1.0, -2.0]), np.array([0.5, -0.2]))


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_ur5_box_pressing(contact):
    from problems.manipulators import ur5_box_bench, ur5_box_press_state, ur5_box_simulator

    sim = ur5_box_simulator(contact=contact)
    x = ur5_box_press_state(sim)
    u, _ = ur5_box_bench(sim, x)
    check_fd(sim, x, u, rtol=1e-5)  # the box rests flat on its four corners


@pytest.mark.slow
@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_go1_standing(contact):
    from problems.legged import go1_standing_simulator, go1_standing_state

    sim = go1_standing_simulator(contact=contact)
    x = go1_standing_state(sim)
    x[sim.nq:sim.nq + 3] = (0.05, 0.0, 0.0)  # the base moving: feet sliding
    check_fd(sim, x, np.zeros(sim.nu), rtol=1e-5)


def test_go1_standing_subset():
    """The default suite's Go1 case: friction and one leg's parameters (the whole set is ``slow``)."""
    from problems.legged import go1_standing_simulator, go1_standing_state

    sim = go1_standing_simulator(contact="lcp")
    x = go1_standing_state(sim)
    names = ["friction", "mass:FL_calf", "com:FL_calf", "inertia:FL_thigh", "placement:FL_calf_joint",
             "placement:root_joint"]
    check_fd(sim, x, np.zeros(sim.nu), names, rtol=1e-5)


# -- closed forms -------------------------------------------------------------------------------------
def trajectory_parameter_sensitivity(sim, x0, us, names):
    """``d x_T / d p`` (ndx, np) by chaining one-step Jacobians: ``S_{t+1} = Fx S_t + Fp``."""
    x = x0
    S = np.zeros((sim.ndx, sim.parameter_size(names)))
    for u in us:
        x, Fx, Fu, Fp = sim.step_derivatives(x, u, params=names)
        S = Fx @ S + Fp
    return x, S


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_sliding_cube_friction_and_mass(contact):
    """A cube sliding at v0 with friction mu: v_t = v0 - mu g t dt, x_T = v0 T dt - mu g dt^2 T (T + 1) / 2
    (semi-implicit Euler), so d x_T/d mu = -g dt^2 T (T + 1) / 2 and nothing depends on the mass."""
    sim = cube_simulator(contact=contact, friction=0.5)
    dt, T, v0 = sim.dt, 100, 1.0
    x0 = cube_state(0.1, v=(v0, 0.0, 0.0))
    names = ["friction", "mass:root_body1"]
    xT, S = trajectory_parameter_sensitivity(sim, x0, np.zeros((T, 0)), names)
    assert abs(xT[0] - (v0 * T * dt - 0.5 * G * dt ** 2 * T * (T + 1) / 2)) < 1e-9
    np.testing.assert_allclose(S[0, 0], -G * dt ** 2 * T * (T + 1) / 2, rtol=1e-9)
    np.testing.assert_allclose(S[sim.nv, 0], -G * dt * T, rtol=1e-9)  # d v_T / d mu
    assert np.abs(S[:, 1]).max() < 1e-12  # the path does not depend on the mass


def test_pendulum_acceleration_closed_form():
    """A link hinged about y, COM ``c = (0, 0, -l)``, at angle theta from rest: ``alpha = -m g l sin(theta) /
    (I_yy + m l^2)``; one step gives ``v+ = dt alpha``, ``q+ = dt^2 alpha``. Derivatives in closed form."""
    sim = pendulum_simulator(dt=0.01)
    names = [n for n in sim.parameter_names() if n.split(":")[0] in ("mass", "com", "inertia")]
    assert len(names) == 3
    m = sim.get_parameters(names[0])[0]
    c = sim.get_parameters(names[1])
    Iyy = sim.get_parameters(names[2])[2]
    l = -c[2]
    th, dt = 0.6, sim.dt
    s, D = np.sin(th), Iyy + m * l * l
    _, _, _, Fp = sim.step_derivatives(np.array([th, 0.0]), np.zeros(1), params=names)
    dalpha = np.zeros(10)
    dalpha[0] = -G * l * s * Iyy / D ** 2  # mass
    dalpha[3] = m * G * s * (Iyy - m * l * l) / D ** 2  # com z: l = -c_z
    dalpha[6] = m * G * l * s / D ** 2  # inertia yy (index 2 of xx, xy, yy, ...)
    for k in (0, 3, 6):
        np.testing.assert_allclose(Fp[1, k], dt * dalpha[k], rtol=1e-10, err_msg=str(k))
        np.testing.assert_allclose(Fp[0, k], dt * dt * dalpha[k], rtol=1e-10, err_msg=str(k))
    # I_xx, I_zz and the products of inertia do not move a y hinge
    np.testing.assert_allclose(Fp[:, [4, 5, 7, 8, 9]], 0.0, atol=1e-14)


@pytest.mark.parametrize("contact", ["lcp", "ncp", "relaxed"])
def test_impulse_jacobians_fd(contact):
    """A sphere sliding on the ground (one contact: unique impulses): ``dlam/dx`` and ``dlam/dp`` against
    central differences of the re-solved step, under the LCP, the NCP and relaxed contact (the NCP's cone
    relaxed, kappa a weight times 0.1 mm)."""
    b = ModelBuilder("ball")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=0.5, sphere=0.1)
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=0.4,
                    contact="ncp" if contact == "relaxed" else contact)
    if contact == "relaxed":
        sim = sim.with_smoothing(1e-3)
    x = cube_state(0.1 - 1e-5, v=(0.8, -0.3, 0.0), w=(0.0, 0.0, 2.0))
    names = ["friction", "mass:root_body1", "placement:root"]
    out = sim.step_derivatives(x, NONE, params=names, impulses=True)
    assert len(out) == 5
    imp = out[4]
    assert imp.nc == 1 and imp.rows == 3 and imp.lam.shape == (3,)

    def lam(s, xx):
        s.step(xx, NONE)
        return s.contacts.impulses.ravel()

    # relaxed: the barrier curves over its 0.1 mm scale, so h = 1e-6 m leaves a truncation error of 1e-5 relative
    # (measured: it falls 100x per 10x smaller h)
    h = 1e-7 if contact == "relaxed" else 1e-6
    Fd = np.empty((3, sim.ndx))
    for k in range(sim.ndx):
        e = np.zeros(sim.ndx)
        e[k] = h
        Fd[:, k] = (lam(sim, sim.state_integrate(x, e)) - lam(sim, sim.state_integrate(x, -e))) / (2 * h)
    np.testing.assert_allclose(imp.dlam_dx, Fd, atol=1e-6 * max(1, np.abs(Fd).max()))
    p0 = sim.get_parameters(names)
    Fd = np.empty((3, p0.size))
    for k in range(p0.size):
        e = np.zeros(p0.size)
        e[k] = h
        Fd[:, k] = (lam(sim.with_parameters(names, p0 + e), x) - lam(sim.with_parameters(names, p0 - e), x)) / (2 * h)
    np.testing.assert_allclose(imp.dlam_dp, Fd, atol=1e-6 * max(1, np.abs(Fd).max()))
    # without params: (x+, Fx, Fu, impulses)
    out = sim.step_derivatives(x, NONE, impulses=True)
    assert len(out) == 4 and out[3].dlam_dp is None
    if contact == "relaxed":  # a second call on one relaxed state differs at round-off, with or without params
        np.testing.assert_allclose(out[3].dlam_dx, imp.dlam_dx, rtol=1e-12, atol=1e-12 * np.abs(imp.dlam_dx).max())
    else:
        np.testing.assert_array_equal(out[3].dlam_dx, imp.dlam_dx)


def test_impulses_with_controls_at_a_limit():
    sim = arm_simulator("lcp")
    x = np.array([0.7, 0.0, 0.4, -0.3])
    u = np.array([0.5, -0.2])
    _, _, _, imp = sim.step_derivatives(x, u, impulses=True)
    assert imp.nc == 0 and imp.lam.shape == (1,)  # the limit row only
    h = 1e-6
    for k in range(2):
        e = np.zeros(2)
        e[k] = h
        sim.step(x, u + e)
        lp = sim.contacts.limit_impulses.copy()
        sim.step(x, u - e)
        lm = sim.contacts.limit_impulses.copy()
        np.testing.assert_allclose(imp.dlam_du[:, k], (lp - lm) / (2 * h), rtol=1e-6, atol=1e-12)


# -- bad input --------------------------------------------------------------------------------------
def test_bad_parameters():
    from dynamics.simulator import ModelError

    sim = cube_simulator(contact="lcp")
    with pytest.raises(ValueError, match="unknown parameter 'mass:nothing'"):
        sim.get_parameters(["mass:nothing"])
    with pytest.raises(ValueError, match="listed twice"):
        sim.get_parameters(["friction", "friction"])
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(3,\)"):
        sim.with_parameters("com:root_body1", [0.0, 0.0])
    with pytest.raises(ValueError, match="'com:root_body1' has non-finite"):
        sim.with_parameters("com:root_body1", [0.0, np.nan, 0.0])
    # a mass of 0 is the model check's to judge (a massless link is valid): the cube's free joint then moves nothing
    with pytest.raises(ModelError, match=r"with parameter mass:root_body1 = 0.0: .*carries no body with mass"):
        sim.with_parameters("mass:root_body1", [0.0])
    with pytest.raises(ValueError, match=r"'mass:root_body1': a mass must be >= 0 kg, got -1.0$"):
        sim.with_parameters("mass:root_body1", [-1.0])  # a plain number, not numpy's np.float64(-1.0)
    with pytest.raises(ValueError, match=r"values must be 1 number for parameters"):
        sim.with_parameters("mass:root_body1", "heavy")
    for text in ("1.0", ["1.0"], np.array(["1.0"]), b"1"):  # text NumPy would parse: refused as for the state
        with pytest.raises(ValueError, match=r"values must be 1 number for parameters .*\((str|bytes|elements of)"):
            sim.with_parameters("mass:root_body1", text)
    # the model's own checks (here a free body with no rotational inertia: a singular mass matrix) name the
    # parameters that were set
    with pytest.raises(ModelError, match=r"with parameter inertia:root_body1 = \[0.0, .*singular"):
        sim.with_parameters("inertia:root_body1", [0.0] * 6)
    with pytest.raises(ModelError, match=r"mass:root_body1 = 1e\+300: .*span more than 4.5e\+12 times"):
        sim.with_parameters("mass:root_body1", [1e300])  # the other cause of a singular mass matrix, named too
    with pytest.raises(ValueError, match="'friction' must be >= 0"):
        sim.with_parameters("friction", [-0.1])
    with pytest.raises(ValueError, match="'inertia:root_body1'.*not positive semi-definite"):
        sim.with_parameters("inertia:root_body1", [1.0, 0.0, -1.0, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="'inertia:root_body1'.*triangle inequality"):
        sim.with_parameters("inertia:root_body1", [1.0, 0.0, 1.0, 0.0, 0.0, 3.0])
    with pytest.raises(ValueError, match="unknown parameter"):
        sim.step_derivatives(cube_state(0.5), NONE, params=["inertia"])
    # a negative moment within the round-off tolerance of the PSD test: was Pinocchio's unnamed "The 3d inertia
    # should be positive"
    with pytest.raises(ValueError, match=r"'inertia:root_body1'.*negative moment about an axis \(xx, yy, zz"):
        sim.with_parameters("inertia:root_body1", [-1e-20, 0.0, 1.0, 0.0, 0.0, 1.0])
    # a placement beyond 10 km: was taken, and the step's Jacobians overflowed (inf, NaN) without an error
    with pytest.raises(ModelError, match=r"placement:root = \[1e\+100, .*joint 'root' is placed 1e\+100 m from its parent"):
        sim.with_parameters("placement:root", [1e100, 0.0, 0.0, 0.0, 0.0, 0.0])
    # a COM as far: was taken, and the step then said only that the simulation diverged
    with pytest.raises(ModelError, match=r"com:root_body1 = \[1e\+160, .*centre of mass 1e\+160 m from its joint; "
                                         r"at most 10000 m"):
        sim.with_parameters("com:root_body1", [1e160, 0.0, 0.0])
    # of a long list only the entries that changed, not every name and the whole vector
    names = sim.parameter_names()
    values = sim.get_parameters(names)
    values[names.index("mass:root_body1")] = 1e300
    with pytest.raises(ModelError, match=r"with parameter mass:root_body1 = 1e\+300: the mass matrix is singular") as err:
        sim.with_parameters(names, values)
    assert str(err.value).startswith("with parameter mass:root_body1 = 1e+300: ")  # no other name or value
    # complex numbers: NumPy cut them to their real part with a ComplexWarning at most
    with pytest.raises(ValueError, match=r"values must be 1 number .*complex"):
        sim.with_parameters("friction", [0.5 + 3j])
    with pytest.raises(ValueError, match=r"values must be 1 number .*complex"):  # NumPy's complex64 is no complex
        sim.with_parameters("friction", np.array([np.complex64(0.5 + 3j)], dtype=object))
    with pytest.raises(ValueError, match=r"(?s)state x must be an array of numbers .*complex128"):
        sim.step(cube_state(0.5).astype(complex), NONE)
    assert sim.get_parameters("mass:root_body1")[0] == 1.0


def test_a_model_with_a_joint_placed_too_far_is_refused():
    """The model-level check behind the placements: finite and within MAX_JOINT_OFFSET of the parent."""
    from dynamics.simulator import MAX_JOINT_OFFSET, ModelError, validate_model

    b = ModelBuilder("far")
    j = b.add_joint("revolute", name="hinge")
    b.add_body(j, mass=1.0, sphere=0.1)
    model, _ = b.build()
    validate_model(model)
    model.jointPlacements[j] = pin.SE3(np.eye(3), np.array([0.0, 2 * MAX_JOINT_OFFSET, 0.0]))
    with pytest.raises(ModelError, match=r"joint 'hinge' is placed 20000 m from its parent joint; at most 10000 m"):
        validate_model(model)
    M = pin.SE3.Identity()
    M.translation = np.array([np.nan, 0.0, 0.0])
    model.jointPlacements[j] = M
    with pytest.raises(ModelError, match="joint 'hinge' has a non-finite placement"):
        validate_model(model)


@pytest.fixture(scope="module", params=["lcp", "ncp"])
def relaxed_cube(request):
    """The cube under relaxed contact: the boxed LCP's pyramid (one barrier per tangent row) or the NCP's cone
    (one per contact), kappa a weight times a 0.1 mm hover, forces fading out over 5 mm."""
    return cube_simulator(contact=request.param, friction=0.5).with_smoothing(1e-3, distance=5e-3)


@pytest.mark.parametrize("case", ["sliding", "resting", "hovering", "spinning", "deep"])
def test_relaxed_cube_fd(relaxed_cube, case):
    """Relaxed contact: the residual reads the distances (hovering: the pair within the smoothing distance,
    not touching) and the friction coefficient through the barrier's radius."""
    x = {"sliding": cube_state(0.1 - 2e-5, v=(1.0, 0.3, 0.0)),
         "resting": cube_state(0.1),
         "hovering": cube_state(0.1 + 2e-3, v=(0.3, 0.0, -0.2)),
         "spinning": cube_state(0.1 - 1e-5, v=(0.2, 0.0, 0.0), w=(0.0, 0.0, 3.0)),
         "deep": cube_state(0.1 - 3e-3, v=(0.5, 0.0, 0.0))}[case]
    # h = 1e-7: the barrier at small kappa curves hard (the central difference's error, ~h^2, is 0.03 on
    # entries of 700 at h = 1e-6 and 3e-4 at 1e-7)
    Fp, F = check_fd(relaxed_cube, x, NONE, rtol=1e-6, h=1e-7)
    state = relaxed_cube._data.contact
    assert state.adapter.name == "relaxed" and state.lam[0] > 0
    if case in ("sliding", "spinning"):  # friction acts: the friction column moves the state
        assert np.abs(Fp[:, 0]).max() > 1e-3
    if case == "hovering":  # no contact yet, but the barrier's force (and its parameter derivative) is there
        assert np.abs(Fp[:, 1:]).max() > 1e-6


def test_relaxed_tilted_cube_and_arm_limit():
    """An edge contact (two corners) and a joint limit with placements of both joints, under relaxed contact."""
    import pinocchio as pin

    sim = cube_simulator(contact="ncp", friction=0.5).with_smoothing(1e-3)
    q = cube_state(0.0)[:7]
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.3, 0.0, 0.0)).coeffs()
    q[2] = 0.1 * (np.cos(0.3) + np.sin(0.3)) - 2e-5
    check_fd(sim, np.r_[q, 1.0, 0.2, 0.0, 0.0, 0.0, 0.0], NONE, rtol=1e-6, h=1e-7)
    arm = arm_simulator("lcp").with_smoothing(1e-2)
    x = np.array([0.7, 0.0, 0.4, -0.3])
    arm.step(x, np.zeros(2))
    assert arm._data.contact is not None and arm._data.contact.adapter.name == "relaxed"
    check_fd(arm, x, np.array([0.5, -0.2]))


def test_relaxed_ur5_box():
    from problems.manipulators import ur5_box_bench, ur5_box_press_state, ur5_box_simulator

    sim = ur5_box_simulator(contact="ncp").with_smoothing(1e-2)
    x = ur5_box_press_state(sim)
    u, _ = ur5_box_bench(sim, x)
    check_fd(sim, x, u, rtol=1e-5)


def test_relaxed_friction_column_slows_a_sliding_block():
    """A cube sliding along x under relaxed contact: the friction column (the barrier radius ``s = mu lam_n``
    moving with mu) against differences of mu, and its sign: more friction, less speed."""
    sim = cube_simulator(contact="lcp", friction=0.5).with_smoothing(1e-3)
    x = cube_state(0.1 - 2e-5, v=(1.0, 0.0, 0.0))
    _, _, _, Fp = sim.step_derivatives(x, NONE, params=["friction"])
    h = 1e-6
    xp = sim.with_parameters("friction", [0.5 + h]).step(x, NONE)
    xm = sim.with_parameters("friction", [0.5 - h]).step(x, NONE)
    fd = (xp - xm) / (2 * h)
    np.testing.assert_allclose(Fp[sim.nv:sim.nv + 3, 0], fd[sim.nq:sim.nq + 3], rtol=1e-6, atol=1e-9)
    # more friction slows the block: dv_x+/dmu < 0
    assert Fp[sim.nv, 0] < 0


def test_penalty_contact_is_not_covered_yet():
    sim = cube_simulator(contact="penalty")
    with pytest.raises(NotImplementedError, match="penalty"):
        sim.step_derivatives(cube_state(0.1 - 1e-5), NONE, params=["friction"])


def test_empty_parameter_list_keeps_the_tuple():
    """``params=[]`` is a list of no names: ``Fp`` (ndx, 0) in its slot, not a 3-tuple (callers unpack four; a
    sensitivity with only start-state unknowns, ``parameter_sensitivity(sim, x0, us, (), initial=E)``, failed
    with "not enough values to unpack") nor the StepImpulses in Fp's place with ``impulses=True``."""
    from trajopt.sensitivity import parameter_sensitivity

    sim = cube_simulator(contact="lcp")
    for z in (0.5, 0.1 - 1e-5):  # in flight, and resting on the ground
        x = cube_state(z, v=(1.0, 0.0, 0.0))
        out = sim.step_derivatives(x, NONE, params=[])
        assert len(out) == 4 and out[3].shape == (sim.ndx, 0)
        assert all(np.array_equal(a, b) for a, b in zip(out, sim.step_derivatives(x, NONE)))  # the same numbers
        out = sim.step_derivatives(x, NONE, params=[], impulses=True)
        assert len(out) == 5 and out[3].shape == (sim.ndx, 0)
        imp = out[4]
        assert imp.dlam_dp.shape == (len(imp.lam), 0)
        assert sim.step_derivatives(x, NONE, impulses=True)[3].dlam_dp is None  # no params: None, as documented
    E = np.zeros((sim.ndx, sim.nv))
    E[sim.nv:] = np.eye(sim.nv)
    xs, S = parameter_sensitivity(sim, cube_state(0.5), np.zeros((3, 0)), (), initial=E)
    assert S.shape == (4, sim.ndx, sim.nv)


def test_names_and_values_of_the_wrong_type():
    """Names that are not a name or an ordered sequence of names, and values that are not numbers, are named
    (were: "'NoneType' object is not iterable", "could not convert string to float: 'abc'" without the
    parameter, None read as NaN; a set was taken in an arbitrary order)."""
    sim = cube_simulator(contact="lcp")
    for bad in (None, 3, {"friction"}, {"friction": 0.5}, b"friction"):  # bytes were read byte by byte
        with pytest.raises(TypeError, match="parameter names must be a name or a sequence of names"):
            sim.get_parameters(bad)
    with pytest.raises(TypeError, match="unordered"):
        sim.with_parameters({"friction", "mass:root_body1"}, [0.5, 1.0])
    with pytest.raises(TypeError, match="parameter names must be"):
        sim.step_derivatives(cube_state(0.5), NONE, params=3)
    for bad in (None, "abc", [0.5, "x"]):
        with pytest.raises(ValueError, match=r"values must be 1 number for parameters \[\('friction', 1\)\]"):
            sim.with_parameters("friction", bad)
    assert sim.get_parameters(("friction", "mass:root_body1")).tolist() == [0.5, 1.0]
    assert sim.get_parameters(np.array(["friction"])).tolist() == [0.5]


def test_a_point_mass_inertia_round_trips():
    """A point mass (zero rotational inertia) is a valid body for the simulator (validate_model: positive
    semi-definite), so with_parameters takes its own inertia back; it raised 'not positive definite' on
    ``sim.with_parameters("inertia:bob", sim.get_parameters("inertia:bob"))``. A zero inertia that leaves the
    mass matrix singular (a free body) is still refused, by the simulator's model check."""
    import pinocchio as pin

    from dynamics import ModelError

    m = pin.Model()
    j = m.addJoint(0, pin.JointModelRY(), pin.SE3.Identity(), "hinge")
    m.appendBodyToJoint(j, pin.Inertia(1.0, np.array([0.0, 0.0, -0.5]), np.zeros((3, 3))), pin.SE3.Identity())
    m.addBodyFrame("bob", j, pin.SE3.Identity(), 0)
    sim = Simulator(m, dt=1e-3)
    new = sim.with_parameters("inertia:bob", sim.get_parameters("inertia:bob"))
    x = np.array([0.3, 0.0])
    np.testing.assert_array_equal(new.step(x, np.zeros(1)), sim.step(x, np.zeros(1)))
    with pytest.raises(ValueError, match="'inertia:bob'.*not positive semi-definite"):
        sim.with_parameters("inertia:bob", [1e-3, 0.0, -1e-3, 0.0, 0.0, 1e-3])
    cube = cube_simulator(contact="lcp")
    with pytest.raises(ModelError, match="singular"):
        cube.with_parameters("inertia:root_body1", np.zeros(6))


@pytest.mark.parametrize("path", ["compiled", "reference"])
@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_friction_column_at_zero_friction_is_the_one_sided_derivative(contact, path, monkeypatch):
    """A frictionless cube sliding on the ground (1 m/s along x, 0.5 along y): from mu = 0+ friction slows it, so
    the friction column equals a forward difference (the boxed LCP closes its friction rows' box at mu = 0 and
    used to drop the column: 0 against -0.11). A cube resting without slip: no friction acts at first order, 0."""
    from dynamics import parameters as P

    from .test_contact import cube_sim

    if path == "reference":
        monkeypatch.setattr(P, "_core", None)
    sim = cube_sim(mu=0.0, contact=contact)
    u = np.zeros(sim.nu)
    for slip in ((1.0, 0.5), (0.0, 0.0)):
        x = sim.neutral_state()
        x[2] = 0.1 - 1e-4
        x[sim.nq:sim.nq + 2] = slip
        xn, _, _, Fp = sim.step_derivatives(x, u, params=["friction"])
        h = 1e-7
        fd = sim.state_difference(xn, sim.with_parameters("friction", [h]).step(x, u)) / h
        np.testing.assert_allclose(Fp[:, 0], fd, rtol=1e-5, atol=1e-7, err_msg=f"{contact} slip {slip}")
        if slip[0]:
            assert np.abs(Fp[:, 0]).max() > 1e-2


def test_names_from_an_iterator_give_the_same_columns_as_a_list():
    """An iterator of names is read once: it used to be used up by the cache key, caching an empty list of blocks
    under its names, which later list calls then got (Fp with no columns)."""
    from problems.inverse import cube_simulator

    sim = cube_simulator()
    x = sim.neutral_state()
    x[2] = 0.3
    a = sim.step_derivatives(x, np.zeros(0), params=iter(["friction", "mass:root_body1"]))
    b = sim.step_derivatives(x, np.zeros(0), params=["friction", "mass:root_body1"])
    assert a[3].shape == b[3].shape == (sim.ndx, 2)


def test_planar_placements_out_of_the_plane():
    """The catapult's placement columns out of the plane (linear z, angular x, y) are 0 (its bodies are symmetric
    about the plane, so the planar motion is even in them; an asymmetric system's tilts act: the test below), the
    in-plane ones are not; with_parameters refuses to turn an axis out of the plane, naming the
    parameter, and takes a linear z increment (the motion stays planar; its central difference is Fp's 0)."""
    from dynamics.simulator import ModelError
    from trajopt.bench import bench_state

    ocp = problems.load("catapult")
    sim = ocp.dynamics
    x, u = bench_state(ocp)
    names = [n for n in sim.parameter_names() if n.startswith("placement:")]
    Fp = sim.step_derivatives(x, u, params=names)[3].reshape(sim.ndx, len(names), 6)
    assert np.all(Fp[:, :, 2:5] == 0.0) and np.abs(Fp[:, 1:, [0, 1, 5]]).max() > 1.0
    with pytest.raises(ModelError, match=rf"with parameter {names[1]} = \[0.0, 0.0, 0.0, 0.01, .*out of the xy plane"):
        sim.with_parameters(names[1], [0.0, 0.0, 0.0, 0.01, 0.0, 0.0])
    # a linear z increment keeps the motion planar and is taken: the central difference through with_parameters
    # agrees with Fp's zero column (the motion is even in z), as the in-plane columns agree with theirs
    name = names[-1]
    h = 1e-6
    for k in (0, 1, 2):
        e = np.zeros(6)
        e[k] = h
        plus, minus = sim.with_parameters(name, e).step(x, u), sim.with_parameters(name, -e).step(x, u)
        fd = sim.state_difference(minus, plus) / (2 * h)
        assert np.abs(fd - Fp[:, -1, k]).max() <= 1e-5 * max(1.0, np.abs(Fp[:, -1, k]).max()), k


def test_planar_tilt_columns_of_an_asymmetric_system():
    """Tilting a planar joint's axis (placement angular x, y) moves the step at first order when a body it carries
    is not symmetric about the plane (its COM off the plane): those columns are then not 0, and they are the 3-D
    dynamics' derivative -- central differences on the same model stepped as a 3-D system without contact agree,
    as does the planar simulator in flight. The inertial entries out of the plane stay 0 (com z; inertia but
    zz), in contact too."""
    from dynamics import Simulator
    from trajopt.bench import bench_state

    ocp = problems.load("catapult")
    sim = ocp.dynamics
    x, u = bench_state(ocp)
    links = ["com:arm1_body2", "com:arm2_body3", "com:arm3_body4"]
    values = sim.get_parameters(links).reshape(-1, 3)
    values[:, 2] = [0.04, -0.07, 0.1]  # the COMs off the plane
    asym = sim.with_parameters(links, values.ravel())
    inertial = [n for n in sim.parameter_names() if n.split(":")[0] in ("com", "inertia")]
    Fi = asym.step_derivatives(x, u, params=inertial)[3]
    assert asym.contacts is not None and len(asym.contacts.points) > 0  # the box on the bat
    off = 0
    for name in inertial:
        out = [2] if name.startswith("com:") else [0, 1, 2, 3, 4]
        assert np.all(Fi[:, off + np.array(out)] == 0.0), name
        assert np.abs(Fi[:, off:off + 3 + 3 * name.startswith("inertia:")]).max() > 0.0 or "projectile" in name, name
        off += 3 if name.startswith("com:") else 6
    names = ["placement:arm2", "placement:arm3"]
    # linear z moves nothing in the plane, in contact too: 0, as the central difference through with_parameters
    Fz = asym.step_derivatives(x, u, params=names)[3].reshape(sim.ndx, 2, 6)
    assert np.all(Fz[:, :, 2] == 0.0) and np.abs(Fz[:, :, [0, 1, 5]]).max() > 1.0
    e = np.zeros(12)
    e[8] = 1e-6  # placement:arm3's z
    fd = asym.state_difference(asym.with_parameters(names, -e).step(x, u), asym.with_parameters(names, e).step(x, u))
    assert np.abs(fd).max() / 2e-6 <= 1e-6
    rng = np.random.default_rng(3)
    xf = x.copy()
    xf[1] += 2.0  # the box 2 m up, the arm off the ground and its joint limits: in flight
    xf[2:5] = 0.3
    xf[sim.nq:] = rng.normal(size=sim.nv)
    uf = rng.normal(size=sim.nu)
    spatial = Simulator(asym.model, dt=sim.dt, actuated=["arm1", "arm2", "arm3"])  # no geometry: 3-D, no contact
    Fp = spatial.step_derivatives(xf, uf, params=names)[3]
    np.testing.assert_allclose(asym.step_derivatives(xf, uf, params=names)[3], Fp, rtol=1e-12, atol=1e-12)
    assert len(asym.contacts.points) == 0 and len(asym.contacts.limit_impulses) == 0
    assert np.abs(Fp.reshape(sim.ndx, 2, 6)[:, :, 3:5]).max() > 1e-2  # the tilts act
    h = 1e-6
    for c in range(12):
        e = np.zeros(12)
        e[c] = h
        fd = spatial.state_difference(spatial.with_parameters(names, -e).step(xf, uf),
                                      spatial.with_parameters(names, e).step(xf, uf)) / (2 * h)
        assert np.abs(fd - Fp[:, c]).max() <= 1e-6 * max(1.0, np.abs(Fp[:, c]).max()), c


def _ball_and_slide():
    """A pendulum on a spherical joint (0.6 m up) carrying a prismatic link along its axis, whose tip sphere
    (radius 5 cm) can touch the ground at z = 0; COMs off the axes, unequal inertias, a limited slide."""
    import coal

    m, g = pin.Model(), pin.GeometryModel()
    j1 = m.addJoint(0, pin.JointModelSpherical(), pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.6])), "ball")
    m.appendBodyToJoint(j1, pin.Inertia(1.0, np.array([0.02, 0.01, -0.25]), np.diag([0.02, 0.025, 0.01])),
                        pin.SE3.Identity())
    m.addBodyFrame("link1", j1, pin.SE3.Identity(), 0)
    j2 = m.addJoint(j1, pin.JointModelPZ(), pin.SE3(np.eye(3), np.array([0.0, 0.03, -0.5])), "slide")
    m.appendBodyToJoint(j2, pin.Inertia(0.5, np.array([0.0, 0.0, -0.05]), np.diag([0.003, 0.004, 0.002])),
                        pin.SE3.Identity())
    m.addBodyFrame("link2", j2, pin.SE3.Identity(), 0)
    m.lowerPositionLimit[-1], m.upperPositionLimit[-1] = -0.2, 0.2
    g.addGeometryObject(pin.GeometryObject("tip", j2, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1])),
                                           coal.Sphere(0.05)))
    return m, g


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_spherical_joint_in_contact_every_parameter_fd(contact):
    """Every parameter's Fp column (mass, COM, inertia of both links, both placements -- the spherical joint's
    and the slide's --, friction) against central differences through with_parameters, the tip sphere pressed
    1 mm into the ground at a tilted ball joint, under LCP and NCP: the spherical joint (a quaternion
    configuration) is nowhere else among the parameter tests."""
    m, g = _ball_and_slide()
    sim = Simulator(m, geometry=g, dt=1e-3, ground=0.0, friction=0.6, contact=contact)
    names = sim.parameter_names()
    p0 = sim.get_parameters(names)
    rng = np.random.default_rng(1)
    data, gdata = sim.model.createData(), pin.GeometryData(g)
    for _ in range(2):
        q = pin.neutral(sim.model)
        q[:4] = pin.Quaternion(pin.exp3(rng.normal(0.0, 0.15, 3))).coeffs()
        for s in np.linspace(-0.2, 0.2, 401):  # slide until the sphere is 1 mm in
            q[4] = s
            pin.forwardKinematics(sim.model, data, q)
            pin.updateGeometryPlacements(sim.model, data, g, gdata)
            if gdata.oMg[0].translation[2] - 0.05 < -0.001:
                break
        x = np.concatenate([q, rng.normal(0.0, 0.3, sim.nv)])
        u = rng.normal(0.0, 1.0, sim.nu)
        Fp = sim.step_derivatives(x, u, params=names)[3]
        assert len(sim.contacts.points) == 1 and np.abs(sim.contacts.impulses).max() > 0  # pressed
        h = 1e-6
        for k in range(len(p0)):
            e = np.zeros(len(p0))
            e[k] = h
            fd = sim.state_difference(sim.with_parameters(names, p0 - e).step(x, u),
                                      sim.with_parameters(names, p0 + e).step(x, u)) / (2 * h)
            assert np.abs(fd - Fp[:, k]).max() <= 1e-6 * max(1.0, np.abs(fd).max()), (names, k)


def test_parameters_round_trip_with_a_massless_link():
    """The half-cheetah's root composite carries a massless link (mass 0, as MJCF bodies with several joints make):
    with_parameters(names, get_parameters(names)) gives the same simulator for every name (it refused the 0 mass,
    so no parameter list holding it could be set back), and that mass can be raised from 0, its column (one-sided)
    against a forward difference."""
    from trajopt.bench import bench_state

    ocp = problems.load("half-cheetah")
    sim = ocp.dynamics
    x, u = bench_state(ocp)
    names = sim.parameter_names()
    massless = [n for n in names if n.startswith("mass:") and sim.get_parameters([n])[0] == 0.0]
    assert massless == ["mass:rootxy"]
    same = sim.with_parameters(names, sim.get_parameters(names))
    np.testing.assert_array_equal(same.step(x, u), sim.step(x, u))
    Fp = sim.step_derivatives(x, u, params=massless)[3]
    h = 1e-7
    fd = sim.state_difference(sim.step(x, u), sim.with_parameters(massless, [h]).step(x, u)) / h
    assert np.abs(fd - Fp[:, 0]).max() <= 1e-4 * max(1.0, np.abs(fd).max())


def test_a_workspace_stepped_by_a_sibling_simulator_gives_this_simulators_step():
    """A workspace of the same sizes made or last stepped by another simulator (with_parameters) is taken with its
    caches dropped: its last contact state held the other's friction per row, which the next contact solve with
    the same contacts reused (ur5-box pushing the box: every output off, Fx by 1e3), and its kept solves hold the
    other's velocities at the same (x, u). Found by a bad-input battery (2026-11-28)."""
    ocp = problems.load("ur5-box")
    sim = ocp.dynamics
    us = np.random.default_rng(1).normal(scale=2.0, size=(201, sim.nu))
    xs = sim.rollout(ocp.x0, us)
    x, u = xs[200], us[200]
    ref = sim.step_derivatives(x, u, params=["friction"], data=sim.create_data())
    assert len(sim.contacts.impulses) > 0  # a state in contact
    for names, values in ((["friction"], [0.05]), (["mass:forearm_link"], 2.0 * sim.get_parameters("mass:forearm_link"))):
        other = sim.with_parameters(names, values)
        d = other.create_data()
        other.step(x, u, data=d)  # its contact state and its kept solve at (x, u)
        theirs = other.step_derivatives(x, u, params=["friction"], data=d)
        assert max(np.abs(a - b).max() for a, b in zip(theirs, ref, strict=True)) > 1e-6  # the other step differs
        ours = sim.step_derivatives(x, u, params=["friction"], data=d)
        for a, b in zip(ours, ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
        assert np.array_equal(sim.step(x, u, data=d), ref[0])
        assert np.array_equal(other.step(x, u, data=d), theirs[0])  # and back


def _two_link_model(first: str, second: str, frame: str | None):
    """Two pendulum links on joints ``first`` and ``second`` (masses 1 and 2 kg); the first carries a body frame
    ``frame`` (None: none)."""
    m = pin.Model()
    j1 = m.addJoint(0, pin.JointModelRY(), pin.SE3.Identity(), first)
    m.appendBodyToJoint(j1, pin.Inertia(1.0, np.array([0, 0, -0.5]), np.eye(3) * 0.01), pin.SE3.Identity())
    if frame is not None:
        m.addBodyFrame(frame, j1, pin.SE3.Identity(), 0)
    j2 = m.addJoint(j1, pin.JointModelRY(), pin.SE3(np.eye(3), np.array([0, 0, -1.0])), second)
    m.appendBodyToJoint(j2, pin.Inertia(2.0, np.array([0, 0, -0.5]), np.eye(3) * 0.02), pin.SE3.Identity())
    return m


def test_every_body_has_its_own_parameter_names():
    """A joint without a body frame is named by the joint; where that name is another joint's link (a model built
    in code), both take '@<joint>': every body's mass, COM and inertia can be read and set (parameter_names()
    listed 'mass:b' twice, and the second link's could not be reached). Joints of the same name are refused."""
    from dynamics.simulator import ModelError

    sim = Simulator(_two_link_model("a", "b", frame="b"))
    names = sim.parameter_names()
    assert len(set(names)) == len(names)
    assert [n for n in names if n.startswith("mass:")] == ["mass:b@a", "mass:b@b"]
    np.testing.assert_array_equal(sim.get_parameters(["mass:b@a", "mass:b@b"]), [1.0, 2.0])
    heavier = sim.with_parameters(["mass:b@b"], [3.0])
    assert heavier.model.inertias[2].mass == 3.0 and heavier.model.inertias[1].mass == 1.0
    np.testing.assert_array_equal(sim.with_parameters(names, sim.get_parameters(names)).get_parameters(names),
                                  sim.get_parameters(names))
    # no clash: the names as they were
    plain = Simulator(_two_link_model("a", "c", frame="b"))
    assert [n for n in plain.parameter_names() if n.startswith("mass:")] == ["mass:b", "mass:c"]
    with pytest.raises(ModelError, match=r"joints 1 and 2 are both named 'a': joint names must be unique"):
        Simulator(_two_link_model("a", "a", frame=None))


def test_a_workspace_of_other_actuation_or_margins_is_made_anew_and_a_report_does_not_take_it():
    """What else a workspace holds of its maker (a review of the adoption above): its torque buffer, where a
    simulator actuating other joints left its controls (the double cartpole actuated at one pole, then stepped on by
    one actuated at the other: 353 off), and its collision requests' margins (a cube falling at 30 m/s 2 cm above the
    ground, stepped with margin 0 on a workspace made with 5 cm: 4 contacts for none, 10 m/s off). Reading the
    contacts of a workspace another simulator stepped on is refused rather than taking it over."""
    base = problems.load("double-cartpole").dynamics
    poles = list(base.model.names)[2:]
    a, b = (Simulator(base.model, dt=base.dt, actuated=[p]) for p in poles)
    x = np.zeros(a.nx)
    x[:a.nq] = 0.1
    d = a.create_data()
    a.step(x, [100.0], data=d)
    np.testing.assert_array_equal(b.step(x, [0.0], data=d), b.step(x, [0.0], data=b.create_data()))

    def cube(margin):
        sim = cube_simulator(contact="lcp")
        return Simulator(sim.model, geometry=sim.geometry, dt=1e-3, ground=0.0, friction=0.5, contact="lcp",
                         margin=margin)

    wide, tight = cube(0.05), cube(0.0)
    x = cube_state(0.1 + 0.02)
    x[wide.nq + 2] = -30.0
    d = wide.create_data()
    ref = tight.step(x, NONE, data=tight.create_data())
    np.testing.assert_array_equal(tight.step(x, NONE, data=d), ref)
    assert len(tight.contact_report(d).impulses) == 0
    wide.step(x, NONE, data=d)
    assert len(wide.contact_report(d).impulses) > 0
    with pytest.raises(ValueError, match="data= was last stepped by another simulator"):
        tight.contact_report(d)
    assert len(wide.contact_report(d).impulses) > 0  # still the workspace of the simulator that stepped on it
