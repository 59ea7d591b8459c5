"""Implicit integrators (issue 15): ``Simulator(integrator="bdf1" | "bdf2")``, :mod:`dynamics.integrators`.

Order of convergence on a nonlinear pendulum against an independent DOP853 solution of ``pin.aba``
(BDF1 slope ~1, BDF2 ~2); a stiff spring where semi-implicit Euler diverges and backward Euler's energy
follows its closed form; a stiff spring-damper chain; step Jacobians (Fx, Fu, and BDF2's Fprev) against
central differences on a damped spring chain and a free-flyer body; the bad inputs refused before any step.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import solve_ivp

from dynamics import ModelBuilder, SimulationError, Simulator
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd

from .models import three_bar_chain


def _pendulum():
    """A 1 kg, 0.5 m bar on a hinge (y axis), hanging along -z, gravity 9.81."""
    b = ModelBuilder("pendulum")
    j = b.add_joint("revolute", name="hinge", axis="y")
    b.add_body(j, mass=1.0, box=(0.05, 0.05, 0.5), offset=(0.0, 0.0, -0.25), collision=False)
    return b.build()[0]


def _oscillator():
    """A 0.2 m, 0.7 kg cube on a prismatic joint (x), no gravity, no geometry: inertia 0.7 kg."""
    b = ModelBuilder("oscillator", gravity=(0.0, 0.0, 0.0))
    j = b.add_joint("prismatic", name="slide", axis="x")
    b.add_body(j, mass=0.7, box=(0.2, 0.2, 0.2), collision=False)
    return b.build()[0], 0.7


def _chain(floating=False, limits=False):
    """Three bars on a fixed or free (non-colliding) base, no tip mass (tests/models.py)."""
    return three_bar_chain(floating=floating, limits=limits, root_collision=False)


def _energy(model, data, x, k):
    """Kinetic + gravity + spring energy (springs on the last 3 coordinates, reference 0)."""
    q, v = x[:model.nq], x[model.nq:]
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    return 0.5 * v @ M @ v + pin.computePotentialEnergy(model, data, q) + 0.5 * k @ q[-3:] ** 2


# -- 1. order of convergence -----------------------------------------------------------------
@pytest.mark.parametrize("integrator, order", [("euler", 1), ("bdf1", 1), ("bdf2", 2)])
def test_order_of_convergence_on_a_nonlinear_pendulum(integrator, order):
    """Error at t = 0.5 s from 115 degrees (nonlinear) against DOP853 at 1e-13. Measured slopes: euler
    0.999, bdf1 0.996 (0.992, 0.996, 0.998 per halving), bdf2 2.02 (2.04, 2.02, 2.01); BDF2's rollout
    starts with one BDF1 step, which keeps the order 2."""
    model = _pendulum()
    data = model.createData()
    x0, T = np.array([2.0, 0.0]), 0.5

    def rhs(_, y):
        return [y[1], pin.aba(model, data, y[:1], y[1:], np.zeros(1))[0]]

    ref = solve_ivp(rhs, (0.0, T), x0, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    dts = np.array([0.004, 0.002, 0.001, 0.0005])
    errors = []
    for dt in dts:
        sim = Simulator(model, dt=dt, integrator=integrator, joint_limits=False)
        xs = sim.rollout(x0, np.zeros((round(T / dt), sim.nu)))
        errors.append(np.abs(xs[-1] - ref).max())
    slopes = np.diff(np.log(errors)) / np.diff(np.log(dts))
    assert np.all(np.abs(slopes - order) < 0.06), slopes
    if integrator == "bdf2":
        assert errors[-1] < 2e-5, errors


# -- 2. stiffness ------------------------------------------------------------------------------
@pytest.mark.parametrize("h_omega", [0.5, 20.0])
def test_stiff_spring_backward_euler_energy_closed_form_where_euler_diverges(h_omega):
    """A spring of stiffness ``k`` on mass ``m``, ``omega = sqrt(k / m)``: backward Euler multiplies the
    energy by exactly ``1 / (1 + (h omega)^2)`` per step (dissipative, at any step); semi-implicit Euler
    is stable only for ``h omega < 2``; BDF2 stays bounded and decays."""
    model, m = _oscillator()
    dt, T = 0.01, 60
    k = m * (h_omega / dt) ** 2
    x0 = np.array([0.1, 0.0])
    energy = lambda xs: 0.5 * m * xs[:, 1] ** 2 + 0.5 * k * xs[:, 0] ** 2  # noqa: E731
    bdf1 = Simulator(model, dt=dt, joint_stiffness=k, integrator="bdf1")
    E = energy(bdf1.rollout(x0, np.zeros((T, 1))))
    ratio = 1.0 / (1.0 + h_omega ** 2)
    assert np.allclose(E[1:] / E[:-1], ratio, rtol=1e-9, atol=0.0), E[1:] / E[:-1]
    bdf2 = Simulator(model, dt=dt, joint_stiffness=k, integrator="bdf2")
    E2 = energy(bdf2.rollout(x0, np.zeros((T, 1))))
    assert E2.max() <= E2[0] * (1 + 1e-12) and E2[-1] < 0.5 * E2[0]
    euler = Simulator(model, dt=dt, joint_stiffness=k)
    if h_omega < 2:
        assert energy(euler.rollout(x0, np.zeros((T, 1)))).max() < 2 * E[0]
    else:
        with pytest.raises(SimulationError, match="diverged"):
            euler.rollout(x0, np.zeros((T, 1)))


def test_stiff_spring_damper_chain_stable_where_euler_blows_up():
    """Three hanging bars with springs k = (1e5, 5e4, 2e4) N m/rad and damping 0.5 N m s/rad at dt = 10 ms:
    h omega up to 16 (measured: 4.1, 16.1, 5.8). Euler leaves MAX_VELOCITY at its second step; BDF1 and
    BDF2 never raise the energy above its start and end at rest at the hanging equilibrium."""
    model, _ = _chain()
    data = model.createData()
    k, dt = np.array([1e5, 5e4, 2e4]), 0.01
    x0 = np.array([0.3, -0.2, 0.4, 0.0, 0.0, 0.0])
    opts = dict(dt=dt, joint_stiffness=k, joint_damping=0.5, joint_limits=False)
    with pytest.raises(SimulationError, match="rollout step [01]:"):
        Simulator(model, **opts).rollout(x0, np.zeros((200, 3)))
    for integrator in ("bdf1", "bdf2"):
        xs = Simulator(model, integrator=integrator, **opts).rollout(x0, np.zeros((200, 3)))
        E = np.array([_energy(model, data, x, k) for x in xs])
        assert E.max() <= E[0] * (1 + 1e-12), integrator
        assert np.abs(xs[-1]).max() < 1e-6, (integrator, xs[-1])


def test_mjcf_stiffness_and_damping_reach_the_bdf_step(tmp_path):
    path = tmp_path / "slider.xml"
    path.write_text("""<mujoco><option gravity="0 0 0"/><worldbody><body name="b">
      <joint name="s" type="slide" axis="1 0 0" stiffness="4e4" damping="2"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/></body></worldbody></mujoco>""")
    sim = Simulator.from_mjcf(path, dt=0.01, integrator="bdf1")  # h omega = 2
    x1 = sim.step(np.array([0.1, 0.0]), np.zeros(0))
    # backward Euler by hand: (m + h d + h^2 k) v+ = m v - h k q
    v1 = (0.0 - 0.01 * 4e4 * 0.1) / (1.0 + 0.01 * 2.0 + 1e-4 * 4e4)
    assert x1 == pytest.approx([0.1 + 0.01 * v1, v1], rel=1e-12)


# -- 3. Jacobians -------------------------------------------------------------------------------
class _Fixed:
    """``sim``'s BDF2 step as a one-step map of one argument, the others held: ``x`` -> step(x, u, previous)
    (``wrt="x"``) or ``previous`` -> step(x, u, previous) (``wrt="previous"``), for the FD checker."""

    def __init__(self, sim, x, previous, wrt):
        self.sim, self.x, self.previous, self.wrt = sim, x, previous, wrt
        self.nx, self.ndx, self.nu = sim.nx, sim.ndx, sim.nu
        self.state_integrate, self.state_difference = sim.state_integrate, sim.state_difference

    def step(self, z, u):
        if self.wrt == "x":
            return self.sim.step(z, u, previous=self.previous)
        return self.sim.step(self.x, u, previous=z)


def _spring_chain(floating, integrator, dt=0.01):
    model, _ = _chain(floating)
    nv = model.nv
    k = np.zeros(nv)
    k[nv - 3:] = [300.0, 0.0, 700.0]
    return Simulator(model, dt=dt, integrator=integrator, joint_damping=np.linspace(0.5, 4.0, nv),
                     joint_stiffness=k, spring_reference=0.1, joint_limits=False)


def _random_state(sim, rng):
    """A random configuration in [-1, 1] (normalized), velocities and controls of scale 2 and 1."""
    q = pin.normalize(sim.model, pin.randomConfiguration(sim.model, -np.ones(sim.nq), np.ones(sim.nq)))
    return np.concatenate((q, 2.0 * rng.standard_normal(sim.nv))), rng.standard_normal(sim.nu)


def _tolerance(*arrays, factor=10.0):
    return factor * fd_tolerance() * max(1.0, *(float(np.abs(a).max(initial=0.0)) for a in arrays))


@pytest.mark.parametrize("floating", [False, True], ids=["spring-chain", "free-flyer"])
def test_bdf1_jacobians_match_central_differences(floating):
    sim = _spring_chain(floating, "bdf1")
    rng = np.random.default_rng(3)
    for _ in range(3):
        x, u = _random_state(sim, rng)
        x1, Fx, Fu = sim.step_derivatives(x, u)
        assert np.array_equal(x1, sim.step(x, u))
        fd = step_jacobians_fd(sim, x, u)
        assert max_relative_error(Fx, fd.Fx) < _tolerance(Fx), max_relative_error(Fx, fd.Fx)
        assert max_relative_error(Fu, fd.Fu) < _tolerance(Fu), max_relative_error(Fu, fd.Fu)
    # implicit: backward Euler's Jacobians are not the semi-implicit ones
    euler = _spring_chain(floating, "euler")
    assert np.abs(euler.step_derivatives(x, u)[1] - Fx).max() > 1e-2


@pytest.mark.parametrize("floating", [False, True], ids=["spring-chain", "free-flyer"])
def test_bdf2_jacobians_and_previous_state_jacobian_match_central_differences(floating):
    sim = _spring_chain(floating, "bdf2")
    rng = np.random.default_rng(4)
    for _ in range(3):
        x, u = _random_state(sim, rng)
        prev = sim.state_integrate(x, -0.02 * rng.standard_normal(sim.ndx))
        x1, Fx, Fu, Fprev = sim.step_derivatives(x, u, previous=prev)
        assert np.array_equal(x1, sim.step(x, u, previous=prev))
        fd = step_jacobians_fd(_Fixed(sim, x, prev, "x"), x, u)
        fd_prev = step_jacobians_fd(_Fixed(sim, x, prev, "previous"), prev, u)
        assert max_relative_error(Fx, fd.Fx) < _tolerance(Fx), max_relative_error(Fx, fd.Fx)
        assert max_relative_error(Fu, fd.Fu) < _tolerance(Fu), max_relative_error(Fu, fd.Fu)
        assert max_relative_error(Fprev, fd_prev.Fx) < _tolerance(Fprev), max_relative_error(Fprev, fd_prev.Fx)
    assert np.abs(Fprev).max() > 0.1  # x+ does depend on x-


def test_stiff_jacobians_stay_exact():
    """h omega ~ 16 (the chain above): the Jacobians of a stable step are bounded and exact."""
    model, _ = _chain()
    sim = Simulator(model, dt=0.01, integrator="bdf1", joint_stiffness=[1e5, 5e4, 2e4], joint_damping=0.5,
                    joint_limits=False)
    x, u = np.array([0.3, -0.2, 0.4, 1.0, -2.0, 0.5]), np.array([1.0, 0.0, -1.0])
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    assert max_relative_error(Fx, fd.Fx) < _tolerance(Fx) and max_relative_error(Fu, fd.Fu) < _tolerance(Fu)
    assert np.abs(np.linalg.eigvals(Fx)).max() < 1.0  # a contraction: dissipative and stable


def test_rollouts_and_trajectory_derivatives():
    sim = _spring_chain(True, "bdf1")
    rng = np.random.default_rng(5)
    x0 = sim.neutral_state()
    x0[sim.nq:] = rng.standard_normal(sim.nv)
    us = rng.standard_normal((5, sim.nu))
    xs, Fx, Fu = sim.rollout_derivatives(x0, us)
    assert np.array_equal(xs, sim.rollout(x0, us))
    for t in range(5):
        x1, Fx_t, Fu_t = sim.step_derivatives(xs[t], us[t])
        assert np.array_equal(x1, xs[t + 1]) and np.array_equal(Fx_t, Fx[t]) and np.array_equal(Fu_t, Fu[t])
    xs_next, Fx_k, _ = sim.knot_derivatives(xs, us)
    assert np.array_equal(xs_next, xs[1:]) and np.array_equal(Fx_k, Fx)
    # BDF2: one BDF1 step, then BDF2 from the two last states; or BDF2 from x_{-1} when given
    sim2 = _spring_chain(True, "bdf2")
    xs2 = sim2.rollout(x0, us)
    assert np.array_equal(xs2[1], sim.step(x0, us[0]))
    assert np.array_equal(xs2[3], sim2.step(xs2[2], us[2], previous=xs2[1]))
    xm1 = sim2.state_integrate(x0, -0.01 * rng.standard_normal(sim2.ndx))
    assert np.array_equal(sim2.rollout(x0, us, previous=xm1)[1], sim2.step(x0, us[0], previous=xm1))


# -- 4. bad input, refused before any step ----------------------------------------------------------
def test_unknown_integrator_name_is_refused():
    model = _pendulum()
    with pytest.raises(ValueError, match=r"integrator must be 'euler' .*'bdf1' .*'bdf2', got 'rk4'"):
        Simulator(model, integrator="rk4", joint_limits=False)
    with pytest.raises(ValueError, match="integrator must be"):
        Simulator(model, integrator="BDF2", joint_limits=False)


def test_bdf2_without_a_previous_state_is_refused():
    sim = _spring_chain(False, "bdf2")
    x, u = sim.neutral_state(), np.zeros(sim.nu)
    with pytest.raises(ValueError, match=r"'bdf2' is a two-step method: step needs the previous state"):
        sim.step(x, u)
    with pytest.raises(ValueError, match=r"two-step method: step_derivatives needs the previous state"):
        sim.step_derivatives(x, u)
    with pytest.raises(ValueError, match=r"rollout derivatives need a one-step map .*'bdf2'"):
        sim.rollout_derivatives(x, np.zeros((3, sim.nu)))
    with pytest.raises(ValueError, match=r"knot derivatives need a one-step map"):
        sim.knot_derivatives(np.tile(x, (4, 1)), np.zeros((3, sim.nu)))
    with pytest.raises(ValueError, match=r"previous state has shape"):
        sim.step(x, u, previous=x[:-1])
    for integrator in ("euler", "bdf1"):
        one = _spring_chain(False, integrator)
        with pytest.raises(ValueError, match=rf"previous= is for integrator='bdf2' \(the state before x\); "
                                             rf"integrator='{integrator}' is a one-step method"):
            one.step(x, u, previous=x)
        with pytest.raises(ValueError, match="previous= is for integrator='bdf2'"):
            one.rollout(x, np.zeros((2, sim.nu)), previous=x)


@pytest.mark.parametrize("integrator", ["bdf1", "bdf2"])
def test_bdf_with_contact_or_euler_only_options_is_refused(integrator):
    model, geom = _chain(limits=True)
    for contact in ("lcp", "ncp"):
        with pytest.raises(ValueError, match=rf"integrator='{integrator}' takes compliant contact only, and this "
                                             rf"system has hard contact \(contact='{contact}', .*use "
                                             rf"integrator='euler' with contact='{contact}', or contact='penalty'"):
            Simulator(model, geometry=geom, ground=-1.0, integrator=integrator, contact=contact)
    with pytest.raises(ValueError, match=r"hard contact \(contact='relaxed'.*contact='penalty'"):
        Simulator(model, geometry=geom, ground=-1.0, integrator=integrator, contact="relaxed", smoothing=1e-6)
    with pytest.raises(ValueError, match=rf"integrator='{integrator}' takes compliant contact only"):
        Simulator(model, integrator=integrator)  # the limits on j2 are unilateral constraints
    Simulator(model, integrator=integrator, contact="penalty")  # compliant contact (limits as springs) is taken
    with pytest.raises(ValueError, match=r"damping='explicit' is an option of integrator='euler'"):
        Simulator(model, integrator=integrator, joint_limits=False, joint_damping=1.0, damping="explicit")
    sim = Simulator(model, integrator=integrator, joint_limits=False)
    x, u = sim.neutral_state(), np.zeros(sim.nu)
    kw = dict(previous=x) if integrator == "bdf2" else {}
    with pytest.raises(ValueError, match="complementarity-aware Jacobians .* need contact"):
        sim.step_derivatives(x, u, adjoint=np.zeros(sim.ndx), **kw)
    with pytest.raises(ValueError, match="params= and impulses= are computed for integrator='euler' only"):
        sim.step_derivatives(x, u, params=["mass:j0"], **kw)


def test_ddp_runs_on_bdf1_and_refuses_bdf2_with_the_reason():
    """The one-step protocol: DDP improves the pendulum swing-up under BDF1; BDF2 stops at once, naming why."""
    import dataclasses

    import problems
    from solvers import solve

    ocp = problems.load("pendulum", horizon=60)
    euler = ocp.dynamics
    for integrator in ("bdf1", "bdf2"):
        sim = Simulator(euler.model, geometry=euler.geometry, dt=euler.dt, integrator=integrator)
        sol = solve(dataclasses.replace(ocp, dynamics=sim), method="ddp", max_iter=3, verbose=False)
        if integrator == "bdf1":
            assert sol.history[-1]["cost"] < 0.9 * sol.history[0]["cost"], sol.history
        else:
            assert sol.status.name == "FAILED" and "two-step method" in sol.info["message"], sol.info
