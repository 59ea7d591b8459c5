"""Trajectory sensitivities with respect to physical parameters (issue 14, second part).

``d x_t / d p`` chained from the step's ``Fx`` and ``Fp`` (:func:`trajopt.sensitivity.parameter_sensitivity`)
against central differences of whole rollouts through ``with_parameters`` (a new system per evaluation), on
short rollouts through free flight and contact (a tilted, spinning cube that lands on a corner and slides on
an edge; an arm at a joint limit), under LCP, NCP and relaxed contact; the adjoint gradient against forward mode.

Tolerance: ``|S - FD| <= 1e-5 max(1, |FD|)`` per parameter block over the compared knots (central differences
with step 1e-6 of rollouts that go through contact, each re-solved cold).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from problems.inverse import cube_simulator
from trajopt.sensitivity import (parameter_adjoint_gradient, parameter_sensitivity, parameter_trajectory_jacobians)

RTOL = 1e-5


def steps(sim, names, h):
    """The central-difference step of each parameter entry: ``h``, and ``h / 10`` on inertias (entries of
    ~1e-2 kg m^2, whose second derivatives make a step of 1e-6 already truncate at ~1e-4 relative)."""
    return np.concatenate([np.full(sim.parameter_size(n), h / 10 if n.startswith("inertia:") else h) for n in names])


def rollout_fd(sim, x0, us, names, knots, *, h=1e-6, initial_rows=()):
    """Central differences of ``x_t`` (t in ``knots``) w.r.t. ``names`` (through ``with_parameters``) and the
    tangent coordinates ``initial_rows`` of ``x0``: (len(knots), ndx, np + k)."""
    p0 = sim.get_parameters(names)
    hs = steps(sim, names, h)
    cols = []
    for k in range(p0.size):
        e = np.zeros(p0.size)
        e[k] = hs[k]
        xp = sim.with_parameters(names, p0 + e).rollout(x0, us)
        xm = sim.with_parameters(names, p0 - e).rollout(x0, us)
        cols.append([sim.state_difference(xm[t], xp[t]) / (2 * hs[k]) for t in knots])
    for i in initial_rows:
        dx = np.zeros(sim.ndx)
        dx[i] = h
        xp = sim.rollout(sim.state_integrate(x0, dx), us)
        xm = sim.rollout(sim.state_integrate(x0, -dx), us)
        cols.append([sim.state_difference(xm[t], xp[t]) / (2 * h) for t in knots])
    return np.array(cols).transpose(1, 2, 0)


def assert_close(S, F, blocks):
    """Per block of columns ``(name, start, stop)``: ``|S - F| <= RTOL max(1, |F|)``."""
    for name, a, b in blocks:
        err = np.abs(S[..., a:b] - F[..., a:b]).max()
        scale = max(1.0, np.abs(F[..., a:b]).max())
        assert err <= RTOL * scale, f"{name}: |S - FD| = {err:.3g}, |FD| = {scale:.3g}"


def blocks_of(sim, names, extra=0):
    out, off = [], 0
    for n in names:
        s = sim.parameter_size(n)
        out.append((n, off, off + s))
        off += s
    if extra:
        out.append(("x0", off, off + extra))
    return out


def tumbling_cube_start(sim):
    """A cube tilted 0.3 rad about x and 0.2 about y, 1 cm above the ground, thrown sideways with spin: it
    lands on a corner within ~40 ms and then slides on an edge/corner."""
    q = sim.neutral_state()[:sim.nq]
    R = pin.rpy.rpyToMatrix(0.3, 0.2, 0.0)
    q[3:7] = pin.Quaternion(R).coeffs()
    corners = np.array([[sx, sy, sz] for sx in (-.1, .1) for sy in (-.1, .1) for sz in (-.1, .1)]) @ R.T
    q[2] = 0.01 - corners[:, 2].min()
    return np.r_[q, 1.0, 0.3, -0.2, 0.5, -1.0, 2.0]


@pytest.mark.parametrize("contact", ["lcp", "ncp", "relaxed"])
def test_cube_tumbling_and_sliding_matches_central_differences(contact):
    if contact == "relaxed":  # the cone's barrier, forces fading out over 2 mm
        sim = cube_simulator(contact="ncp", friction=0.5).with_smoothing(1e-2, distance=2e-3)
    else:
        sim = cube_simulator(contact=contact, friction=0.5)
    x0 = tumbling_cube_start(sim)
    T = 100  # NCP: a corner, then an edge (after ~110 steps the cube lies flat, statically indeterminate)
    us = np.zeros((T, 0))
    names = ["friction", "mass:root_body1", "com:root_body1", "inertia:root_body1"]
    E = np.zeros((sim.ndx, sim.nv))
    E[sim.nv:] = np.eye(sim.nv)  # the initial twist as extra unknowns
    xs, S = parameter_sensitivity(sim, x0, us, names, initial=E)
    assert S.shape == (T + 1, sim.ndx, sim.parameter_size(names) + sim.nv)
    assert np.abs(S[0, :, :-sim.nv]).max() == 0.0 and np.array_equal(S[0, :, -sim.nv:], E)
    np.testing.assert_array_equal(xs, sim.rollout(x0, us))
    # the rollout went through free flight and contact
    sim.step(xs[5], us[5])
    assert len(sim.contacts) == 0
    sim.step(xs[T - 1], us[T - 1])
    assert len(sim.contacts) > 0
    knots = [10, 50, T]
    F = rollout_fd(sim, x0, us, names, knots, initial_rows=range(sim.nv, sim.ndx))
    assert_close(S[knots], F, blocks_of(sim, names, sim.nv))
    assert np.abs(S[T, :, 0]).max() > 1e-3  # friction matters: the cube slid


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_arm_at_a_joint_limit_with_placements(contact):
    from .test_parameters import arm_simulator

    sim = arm_simulator(contact)
    x0 = np.array([0.7, 0.0, 0.4, -0.3])  # j2 at its lower limit, moving into it
    rng = np.random.default_rng(3)
    us = rng.uniform(-2.0, 2.0, (60, 2))
    names = ["mass:j1_body1", "com:j2_body2", "inertia:j2_body2", "placement:j2"]
    xs, S = parameter_sensitivity(sim, x0, us, names)
    sim.step(xs[0], us[0])
    assert len(sim.contacts.limit_impulses)  # the limit stops the second link at first
    knots = [20, 60]
    F = rollout_fd(sim, x0, us, names, knots)
    assert_close(S[knots], F, blocks_of(sim, names))


def test_adjoint_equals_forward_mode():
    """The adjoint gradient of a catapult cost (the box resting on the floor, pushed by the arm) w.r.t.
    friction, a mass and a COM equals the forward chain, and central differences."""
    import problems

    ocp = problems.load("catapult", horizon=30)
    ocp.x0 = ocp.x0.copy()
    ocp.x0[:5] = (1.0, -0.525, np.deg2rad(45), np.deg2rad(30), np.deg2rad(45))
    us = np.random.default_rng(0).uniform(-20, 20, (30, ocp.nu))
    sim = ocp.dynamics
    names = ["friction", "mass:projectile_body1", "com:arm2_body3"]
    jac = parameter_trajectory_jacobians(sim, ocp.x0, us, names)
    cost, g_x0, g_u, g_p = parameter_adjoint_gradient(ocp, us, names, jac=jac)
    xs, S = parameter_sensitivity(sim, ocp.x0, us, names, jac=jac)
    Lx = ocp.terminal_cost.derivatives(xs[-1]).Lx
    np.testing.assert_allclose(g_p, S[-1].T @ Lx, rtol=1e-10, atol=1e-12)
    assert abs(cost - ocp.cost(ocp.rollout(us), us)) < 1e-12
    p0, h = sim.get_parameters(names), 1e-6
    for k in (0, 1, 3):
        e = np.zeros(p0.size)
        e[k] = h
        costs = []
        for s in (1, -1):
            xs_k = sim.with_parameters(names, p0 + s * e).rollout(ocp.x0, us)
            costs.append(ocp.cost(xs_k, us))
        fd = (costs[0] - costs[1]) / (2 * h)
        assert abs(fd - g_p[k]) <= 1e-6 * max(1.0, abs(fd)), (k, fd, g_p[k])
    assert np.abs(g_p).max() > 0


def test_bad_input():
    sim = cube_simulator()
    x0 = sim.neutral_state()
    with pytest.raises(ValueError, match="unknown parameter 'mass:nothing'"):
        parameter_sensitivity(sim, x0, np.zeros((3, 0)), ["mass:nothing"])
    with pytest.raises(ValueError, match="controls have shape"):
        parameter_sensitivity(sim, x0, np.zeros((3, 2)), ["friction"])
    with pytest.raises(ValueError, match="initial"):
        parameter_sensitivity(sim, x0, np.zeros((3, 0)), ["friction"], initial=np.eye(3))

    class NoParameters:
        nx = ndx = nu = 1

    with pytest.raises(TypeError, match="no physical parameters"):
        parameter_trajectory_jacobians(NoParameters(), np.zeros(1), np.zeros((2, 1)), ["friction"])


def _first_bottom_crossing(xs, dtheta, dt):
    """``(t, dt/dp)``: the time of the pendulum's first passage through the bottom (linear interpolation inside
    the step) and its derivative, ``-(d theta/dp) / theta_dot`` there, from the sensitivity ``dtheta`` (T+1,) of
    the angle to a parameter."""
    k = int(np.flatnonzero(xs[:, 0] <= 0.0)[0])  # first knot past the bottom
    a = xs[k - 1, 0] / (xs[k - 1, 0] - xs[k, 0])
    theta_dot = (xs[k, 0] - xs[k - 1, 0]) / dt
    return (k - 1 + a) * dt, -((1 - a) * dtheta[k - 1] + a * dtheta[k]) / theta_dot


def test_pendulum_period_against_com_depth():
    """Closed form: a rod pendulum's quarter period ``t_q = pi/2 sqrt((I_C + m c^2) / (m g c))`` (small
    swings; ``c`` the COM's depth below the hinge) moves with ``c`` as ``dt_q/dc = t_q/2 (2 m c / (I_C + m c^2)
    - 1/c)``, the inertia about the COM held. The crossing time's derivative from the sensitivity against it."""
    from problems.cartpole import pendulum_simulator

    g, dt = 9.81, 1e-4
    sim = pendulum_simulator(dt=dt)
    name = [n for n in sim.parameter_names() if n.startswith("com:")]
    m = sim.get_parameters([n for n in sim.parameter_names() if n.startswith("mass:")])[0]
    c = -sim.get_parameters(name)[2]
    Iyy = sim.get_parameters([n for n in sim.parameter_names() if n.startswith("inertia:")])[2]
    tq = np.pi / 2 * np.sqrt((Iyy + m * c * c) / (m * g * c))
    dtq_dc = tq / 2 * (2 * m * c / (Iyy + m * c * c) - 1 / c)
    xs, S = parameter_sensitivity(sim, np.array([1e-3, 0.0]), np.zeros((int(1.2 * tq / dt), 1)), name)
    t_cross, dt_dcz = _first_bottom_crossing(xs, S[:, 0, 2], dt)  # the com's z entry: c = -c_z
    assert abs(t_cross - tq) < 2 * dt  # the period itself (symplectic Euler's phase lag is O(dt))
    np.testing.assert_allclose(-dt_dcz, dtq_dc, rtol=1e-5)  # measured: 7e-8


@pytest.mark.parametrize("length", [0.5, 1.0, 2.0])
def test_pendulum_period_against_length(length):
    """The issue's closed form: a uniform rod (``w x w x L``, mass m) hinged at its end has quarter period
    ``t_q = pi/2 sqrt((L^2/3 + w^2/12) 2 / (g L))`` for small swings. A length change moves its COM depth
    (``c = L/2``: ``d com_z / dL = -1/2``) and its inertia about the COM (``I_xx = I_yy = m (L^2 + w^2)/12``:
    ``d/dL = m L / 6``), so ``d t_q / dL`` is the sensitivity to those parameters chained with ``dp/dL``.
    Against the closed form's derivative, at three lengths."""
    from problems.cartpole import POLE_WIDTH, pendulum_simulator

    g, dt, w = 9.81, 1e-4, POLE_WIDTH
    sim = pendulum_simulator(dt=dt, length=length)
    m = sim.get_parameters("mass:hinge_body1")[0]
    names = ["com:hinge_body1", "inertia:hinge_body1"]
    dp_dL = np.zeros(9)
    dp_dL[2] = -0.5                   # com z
    dp_dL[3] = dp_dL[5] = m * length / 6  # inertia xx, yy (xx, xy, yy, xz, yz, zz)

    def tq(L):
        return np.pi / 2 * np.sqrt((L * L / 3 + w * w / 12) * 2 / (g * L))

    dtq_dL = (tq(length * (1 + 1e-6)) - tq(length * (1 - 1e-6))) / (2e-6 * length)  # of the closed form
    xs, S = parameter_sensitivity(sim, np.array([1e-3, 0.0]), np.zeros((int(1.2 * tq(length) / dt), 1)), names)
    t_cross, dt_dL = _first_bottom_crossing(xs, S[:, 0, :] @ dp_dL, dt)
    assert abs(t_cross - tq(length)) < 2 * dt
    np.testing.assert_allclose(dt_dL, dtq_dL, rtol=1e-5)


def test_sensitivity_input_errors_are_named():
    """A start state of the wrong size, and a ``jac=`` made for other parameters, are refused naming them."""
    from problems.cartpole import pendulum_simulator

    sim = pendulum_simulator()
    names = sim.parameter_names()[:1]
    us = np.zeros((3, sim.nu))
    with pytest.raises(ValueError, match=r"x0 has shape \(3,\), expected"):
        parameter_trajectory_jacobians(sim, np.zeros(3), us, names)
    jac = parameter_trajectory_jacobians(sim, np.zeros(sim.nx), us, names)
    other = sim.parameter_names()[1:2]
    with pytest.raises(ValueError, match="jac holds the Jacobians of parameters"):
        parameter_sensitivity(sim, np.zeros(sim.nx), us, other, jac=jac)
    assert parameter_sensitivity(sim, np.zeros(sim.nx), us, names, jac=jac)[1].shape == (4, sim.ndx, 1)


def _pendulum_case(T=5):
    """A pendulum, a start state, controls, the mass's name and a small OCP over it (fast: no contact)."""
    from problems.cartpole import pendulum_simulator
    from trajopt.costs import ControlCost, StateCost
    from trajopt.ocp import OCP

    sim = pendulum_simulator()
    x0 = np.array([0.3, 0.1])
    us = np.linspace(-0.5, 0.5, T)[:, None]
    ocp = OCP(sim, x0, T, ControlCost(sim, 1e-2), StateCost(sim, np.zeros(sim.nx)))
    return sim, x0, us, "mass:hinge_body1", ocp


def _all_three(sim, x0, us, ocp):
    """The three entry points that take ``params``, as functions of it."""
    return [lambda p: parameter_trajectory_jacobians(sim, x0, us, p),
            lambda p: parameter_sensitivity(sim, x0, us, p),
            lambda p: parameter_adjoint_gradient(ocp, us, p)]


@pytest.mark.parametrize("bad", [None, 3, b"mass:hinge_body1", 2.5])
def test_params_that_are_not_names_are_refused_naming_params(bad):
    sim, x0, us, mass, ocp = _pendulum_case()
    for f in _all_three(sim, x0, us, ocp):
        with pytest.raises(TypeError, match=r"params must be a parameter name or a sequence of names"):
            f(bad)


def test_a_single_name_still_works():
    sim, x0, us, mass, ocp = _pendulum_case()
    xs1, S1 = parameter_sensitivity(sim, x0, us, mass)
    xs2, S2 = parameter_sensitivity(sim, x0, us, [mass])
    np.testing.assert_array_equal(S1, S2)
    assert parameter_trajectory_jacobians(sim, x0, us, mass).params == (mass,)
    np.testing.assert_array_equal(parameter_adjoint_gradient(ocp, us, mass)[3],
                                  parameter_adjoint_gradient(ocp, us, (mass,))[3])


@pytest.mark.parametrize("kind", [set, frozenset])
def test_a_set_of_names_is_refused_as_unordered(kind):
    sim, x0, us, mass, ocp = _pendulum_case()
    for f in _all_three(sim, x0, us, ocp):
        with pytest.raises(TypeError, match=r"params must be .*unordered"):
            f(kind([mass, "com:hinge_body1"]))


def test_a_jac_of_the_wrong_type_is_refused_naming_jac():
    from trajopt.sensitivity import trajectory_jacobians

    sim, x0, us, mass, ocp = _pendulum_case()
    for bad in (object(), trajectory_jacobians(sim, x0, us)):  # the latter has no Fp nor params
        with pytest.raises(TypeError, match=r"jac must be a ParameterJacobians"):
            parameter_sensitivity(sim, x0, us, [mass], jac=bad)
        with pytest.raises(TypeError, match=r"jac must be a ParameterJacobians"):
            parameter_adjoint_gradient(ocp, us, [mass], jac=bad)


def test_a_jac_of_another_rollout_is_refused_naming_it():
    """Another start state, horizon or controls, or a Jacobian of the wrong size: refused, naming ``jac``."""
    from trajopt.sensitivity import ParameterJacobians

    sim, x0, us, mass, ocp = _pendulum_case()
    jac = parameter_trajectory_jacobians(sim, x0, us, [mass])
    other_x0 = np.array([0.5, 0.0])
    with pytest.raises(ValueError, match=r"jac .*start state.*x0"):
        parameter_sensitivity(sim, other_x0, us, [mass], jac=jac)
    with pytest.raises(ValueError, match=r"jac .*start state.*x0"):
        parameter_adjoint_gradient(ocp, us, [mass], x0=other_x0, jac=jac)
    longer = np.zeros((7, 1))
    with pytest.raises(ValueError, match=r"jac covers 5 steps.*us has 7"):
        parameter_sensitivity(sim, x0, longer, [mass], jac=jac)
    short = parameter_trajectory_jacobians(sim, x0, us[:3], [mass])
    with pytest.raises(ValueError, match=r"jac covers 3 steps.*us has 5"):
        parameter_adjoint_gradient(ocp, us, [mass], jac=short)
    with pytest.raises(ValueError, match=r"jac .*other controls.*us"):
        parameter_sensitivity(sim, x0, us + 1.0, [mass], jac=jac)
    with pytest.raises(ValueError, match=r"jac .*other controls.*us"):
        parameter_adjoint_gradient(ocp, us + 1.0, [mass], jac=jac)
    no_columns = ParameterJacobians(jac.xs, jac.Fx, jac.Fu, jac.Fp[:, :, :0], (mass,))
    with pytest.raises(ValueError, match=r"jac\.Fp has 0 columns.*parameter_size"):
        parameter_sensitivity(sim, x0, us, [mass], jac=no_columns)
    with pytest.raises(ValueError, match=r"jac\.Fp has 0 columns.*parameter_size"):
        parameter_adjoint_gradient(ocp, us, [mass], jac=no_columns)
    bad_Fx = ParameterJacobians(jac.xs, jac.Fx[:, :1], jac.Fu, jac.Fp, (mass,))
    with pytest.raises(ValueError, match=r"jac\.Fx has shape \(5, 1, 2\), expected"):
        parameter_sensitivity(sim, x0, us, [mass], jac=bad_Fx)
    # the right jac (and one built by hand, without the controls, as problems.sysid builds one) is used
    cost, _, _, g_p = parameter_adjoint_gradient(ocp, us, [mass], jac=jac)
    assert cost == parameter_adjoint_gradient(ocp, us, [mass])[0]
    by_hand = ParameterJacobians(jac.xs, jac.Fx, jac.Fu, jac.Fp, (mass,))
    np.testing.assert_array_equal(parameter_sensitivity(sim, x0, us, [mass], jac=by_hand)[1],
                                  parameter_sensitivity(sim, x0, us, [mass])[1])


def test_initial_is_checked_naming_it_before_the_rollout(monkeypatch):
    sim, x0, us, mass, ocp = _pendulum_case()

    def no_rollout(*args, **kwargs):
        raise AssertionError("rolled out before checking initial")

    monkeypatch.setattr(sim, "step_derivatives", no_rollout)
    with pytest.raises(ValueError, match=r"initial .*non-finite"):
        parameter_sensitivity(sim, x0, us, [mass], initial=np.full((sim.ndx, 1), np.nan))
    with pytest.raises(TypeError, match=r"initial .*must be an array of numbers"):
        parameter_sensitivity(sim, x0, us, [mass], initial="ab")
    with pytest.raises(ValueError, match=r"initial .*has shape \(3,\), expected \(2, k\)"):
        parameter_sensitivity(sim, x0, us, [mass], initial=np.zeros(3))


def test_names_as_a_0d_array_and_bool_controls_as_the_simulator_takes_them():
    """params=np.array("friction") raised "iteration over a 0-d array" (the simulator takes it); boolean
    controls were taken as 0 and 1 (the simulator refuses them)."""
    import problems
    from trajopt.sensitivity import parameter_trajectory_jacobians

    ocp = problems.load("catapult", horizon=3)
    sim, x0, us = ocp.dynamics, ocp.x0, np.zeros((3, ocp.nu))
    a = parameter_trajectory_jacobians(sim, x0, us, np.array("friction"))
    b = parameter_trajectory_jacobians(sim, x0, us, "friction")
    assert a.params == b.params == ("friction",)
    np.testing.assert_array_equal(a.Fp, b.Fp)
    with pytest.raises(TypeError, match="controls us must be an array of numbers, got ndarray of dtype bool"):
        parameter_trajectory_jacobians(sim, x0, np.zeros((3, sim.nu), dtype=bool), "friction")
