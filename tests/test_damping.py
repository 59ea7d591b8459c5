"""Implicit joint damping (issue 12): MuJoCo's Euler scheme ``(M + dt D)(v_f - v) = dt (tau - b - D v)``.

Closed forms on one damped joint (stable and monotone at any ``d dt / m``), the step against a
hand-built ``(M + dt D)`` solve, step Jacobians against central differences (free motion, springs,
contact, a joint limit), zero damping unchanged, and (slow) one step against MuJoCo's own.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pinocchio as pin
import pytest

from dynamics import ModelBuilder, SimulationError, Simulator
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd

from .models import three_bar_chain


def _check_jacobians(sim, x, u, h=None, factor=10.0):
    x_next, Fx, Fu = sim.step_derivatives(x, u)
    assert np.allclose(x_next, sim.step(x, u), rtol=1e-12, atol=1e-12)
    fd = step_jacobians_fd(sim, x, u, h=h)
    scale = max(1.0, np.abs(Fx).max(), np.abs(Fu).max(initial=0.0))
    err_x, err_u = max_relative_error(Fx, fd.Fx), max_relative_error(Fu, fd.Fu)
    assert err_x < factor * fd_tolerance() * scale, err_x
    assert err_u < factor * fd_tolerance() * scale, err_u
    return Fx, Fu


# -- 1. one damped joint: closed form ------------------------------------------------------
def _one_joint(kind, mass, armature=0.0):
    """A 0.2 m cube of ``mass`` on one prismatic (x) or revolute (z) joint, no gravity, no geometry.
    Returns ``(model, inertia along the joint)``."""
    b = ModelBuilder("one", gravity=(0.0, 0.0, 0.0))
    j = b.add_joint(kind, name="j", axis="x" if kind == "prismatic" else "z")
    b.add_body(j, mass=mass, box=(0.2, 0.2, 0.2), collision=False)
    model, _ = b.build()
    model.armature = np.full(1, armature)
    inertia = mass if kind == "prismatic" else mass * (0.2 ** 2 + 0.2 ** 2) / 12
    return model, inertia + armature


@pytest.mark.parametrize("kind", ["prismatic", "revolute"])
@pytest.mark.parametrize("ratio", [0.1, 2.5, 273.0])  # d dt / m: explicit Euler is unstable above 2
def test_one_damped_joint_decays_as_the_closed_form(kind, ratio):
    dt, v0, T = 2e-3, 1.5, 100  # 274^-100 = 1e-244: no underflow to 0
    model, m = _one_joint(kind, 0.7, armature=0.0 if kind == "prismatic" else 0.01)
    d = ratio * m / dt
    sim = Simulator(model, dt=dt, joint_damping=d)
    assert sim.damping == "implicit"  # the default
    xs = sim.rollout(np.array([0.3, v0]), np.zeros((T, 1)))
    k = np.arange(T + 1)
    v_exact = v0 / (1.0 + dt * d / m) ** k
    assert np.abs(xs[:, 1] - v_exact).max() <= 1e-12 * v0
    q_exact = 0.3 + dt * np.concatenate(([0.0], np.cumsum(v_exact[1:])))
    assert np.abs(xs[:, 0] - q_exact).max() <= 1e-12
    assert np.all(xs[1:, 1] > 0) and np.all(np.diff(xs[:, 1]) < 0)  # monotone decay, no sign flip
    assert np.array_equal(sim.model.armature, model.armature)  # the user's model is not touched


def test_explicit_damping_is_kept_for_comparison_and_blows_up_where_implicit_does_not():
    dt, v0, m = 2e-3, 1.5, 0.7
    model, m = _one_joint("prismatic", m)
    d = 273.0 * m / dt
    explicit = Simulator(model, dt=dt, joint_damping=d, damping="explicit")
    x1 = explicit.step(np.array([0.0, v0]), np.zeros(1))
    assert x1[1] == pytest.approx(v0 * (1.0 - dt * d / m), rel=1e-12)  # v (1 - d dt / m) = -272 v
    with pytest.raises(SimulationError):
        explicit.rollout(np.array([0.0, v0]), np.zeros((50, 1)))
    implicit = Simulator(model, dt=dt, joint_damping=d)
    assert np.abs(implicit.rollout(np.array([0.0, v0]), np.zeros((50, 1)))[:, 1]).max() == v0


def test_bad_damping_option_is_named():
    model, _ = _one_joint("prismatic", 1.0)
    with pytest.raises(ValueError, match=r"damping must be 'implicit' .* or 'explicit'.*got 'semi'"):
        Simulator(model, joint_damping=1.0, damping="semi")
    with pytest.raises(ValueError, match=r"joint_damping\[0\] = -1.0 .* must be finite and >= 0"):
        Simulator(model, joint_damping=-1.0)


def test_the_option_reaches_mjcf_loading_and_with_smoothing(tmp_path):
    path = tmp_path / "slider.xml"
    path.write_text("""<mujoco><option gravity="0 0 0"/><worldbody><body name="b">
      <joint name="s" type="slide" axis="1 0 0" damping="500"/><geom type="box" size="0.1 0.1 0.1" mass="1"/>
      </body></worldbody></mujoco>""")
    with pytest.raises(ValueError, match="damping must be 'implicit'"):
        Simulator.from_mjcf(path, damping="implicitly")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = Simulator.from_mjcf(path, dt=0.01)  # d dt / m = 5
        explicit = Simulator.from_mjcf(path, dt=0.01, damping="explicit")
    x = np.array([0.0, 1.0])
    assert sim.step(x, np.zeros(0))[1] == pytest.approx(1.0 / 6.0, rel=1e-12)
    assert explicit.step(x, np.zeros(0))[1] == pytest.approx(-4.0, rel=1e-12)
    assert explicit.with_smoothing(0.0).damping == "explicit"


# -- 2. a chain against a hand-built (M + dt D) solve ---------------------------------------
def _chain(floating=False, limits=False):
    """Three links with a sphere at the tip, armature 0.02 on the first revolute joint (tests/models.py)."""
    return three_bar_chain(floating=floating, limits=limits, tip_sphere=True, armature=0.02)


@pytest.mark.parametrize("floating", [False, True])
def test_step_equals_the_damped_mass_matrix_solve(floating):
    model, _ = _chain(floating)
    nv, dt = model.nv, 0.01
    rng = np.random.default_rng(7)
    D = rng.uniform(0.5, 30.0, nv)
    D[nv - 2] = 0.0  # an undamped joint among damped ones
    K = np.zeros(nv)
    K[nv - 1] = 5.0
    r = np.zeros(nv)
    r[nv - 1] = 0.2
    sim = Simulator(model, dt=dt, joint_damping=D, joint_stiffness=K, spring_reference=r, joint_limits=False)
    data = model.createData()
    for _ in range(3):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        q = pin.normalize(model, q)
        v, u = rng.standard_normal(nv), rng.standard_normal(sim.nu)
        tau = sim.B @ u
        M = pin.crba(model, data, q).copy()
        M = np.triu(M) + np.triu(M, 1).T  # includes the model's own armature
        bias = pin.rnea(model, data, q, v, np.zeros(nv)).copy()
        spring = np.zeros(nv)
        spring[nv - 1] = -K[nv - 1] * (q[model.nq - 1] - r[nv - 1])
        v_f = v + np.linalg.solve(M + dt * np.diag(D), dt * (tau - bias - D * v + spring))
        x1 = sim.step(np.concatenate((q, v)), u)
        assert np.abs(x1[model.nq:] - v_f).max() <= 1e-12 * max(1.0, np.abs(v_f).max())
        assert np.abs(x1[:model.nq] - pin.integrate(model, q, dt * v_f)).max() <= 1e-12


# -- 3. Jacobians against central differences ------------------------------------------------
@pytest.mark.parametrize("floating", [False, True])
def test_jacobians_free_motion_with_springs_and_damping(floating):
    model, _ = _chain(floating)
    nv = model.nv
    D = np.linspace(0.5, 4.0, nv)
    K = np.zeros(nv)
    K[nv - 3:] = [3.0, 0.0, 7.0]
    sim = Simulator(model, dt=0.01, joint_damping=D, joint_stiffness=K, spring_reference=0.1, joint_limits=False)
    rng = np.random.default_rng(11)
    for _ in range(3):
        q = pin.normalize(model, pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)))
        x = np.concatenate((q, rng.standard_normal(nv)))
        Fx, _ = _check_jacobians(sim, x, rng.standard_normal(sim.nu))
    # the damping is in them: the explicit scheme's Jacobians differ
    explicit = Simulator(model, dt=0.01, joint_damping=D, joint_stiffness=K, spring_reference=0.1,
                         joint_limits=False, damping="explicit")
    assert np.abs(explicit.step_derivatives(x, np.zeros(sim.nu))[1] - sim.step_derivatives(x, np.zeros(sim.nu))[1]
                  ).max() > 1e-3


def test_jacobians_free_motion_with_stiff_damping():
    """d dt / I in the hundreds (the dm_control fingertips' 273): Jacobians still exact."""
    model, I = _one_joint("revolute", 0.7)
    model2, _ = _chain()
    sim = Simulator(model2, dt=2e-3, joint_damping=[2.0, 50.0, 300.0], joint_limits=False)
    rng = np.random.default_rng(5)
    x = np.concatenate((rng.uniform(-1, 1, 3), 3 * rng.standard_normal(3)))
    Fx, _ = _check_jacobians(sim, x, rng.standard_normal(3))
    # single joint at d dt / I = 273: dv+/dv = 1 / (1 + 273)
    one = Simulator(model, dt=2e-3, joint_damping=273.0 * I / 2e-3)
    _, Fx1, Fu1 = one.step_derivatives(np.array([0.1, 1.0]), np.zeros(1))
    assert Fx1[1, 1] == pytest.approx(1.0 / 274.0, rel=1e-12)
    assert Fu1[1, 0] == pytest.approx(2e-3 / (I * 274.0), rel=1e-12)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_jacobians_in_contact_damped_arm_on_the_ground(contact):
    """The chain's tip sphere resting and sliding on the ground, damped joints (the last one beyond
    explicit Euler's stability bound) and a spring."""
    model, geom = _chain()
    # tip at z = 1 - 0.9 - 0.05 = 0.05 when hanging straight down
    sim = Simulator(model, geometry=geom, dt=0.005, ground=0.07, friction=0.6, contact=contact,
                    joint_damping=[3.0, 1.0, 20.0], joint_stiffness=[0.0, 0.0, 2.0], joint_limits=False)
    minv = sim.inverse_mass_matrix(np.zeros(3))
    assert minv[2, 2] * 20.0 * sim.dt > 6.0  # d dt / I_eff: explicit damping oscillates and grows
    x0 = np.array([0.4, 0.1, -0.5, 0.0, 0.0, 0.0])
    explicit = Simulator(model, geometry=geom, **dict(sim._options, damping="explicit"))
    with pytest.raises(SimulationError):
        explicit.rollout(x0, np.zeros((400, 3)))
    xs = sim.rollout(x0, np.zeros((400, 3)))
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0  # it rests on the ground
    rng = np.random.default_rng(2)
    checked = 0
    for t in (300, 399):
        x = xs[t].copy()
        x[3:] += 0.2 * rng.standard_normal(3)  # pushing, sliding
        u = rng.standard_normal(3)
        sim.step(x, u)
        if len(sim.contacts) and sim.contacts.impulses[0, 0] > 0:
            _check_jacobians(sim, x, u, h=1e-7, factor=1e3)
            checked += 1
    assert checked >= 1


def test_jacobians_damped_leg_in_contact_floating():
    """A free-flyer body with a damped three-link leg standing on its tip."""
    model, geom = _chain(floating=True)
    sim = Simulator(model, geometry=geom, dt=0.005, ground=0.0, friction=0.8,
                    joint_damping=[0, 0, 0, 0, 0, 0, 20.0, 5.0, 1.0], joint_limits=False)
    x0 = sim.neutral_state()
    x0[2] = 0.05 + 0.9  # the tip sphere (0.95 below the root) touches z = 0
    x1 = sim.step(x0, np.zeros(sim.nu))
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    rng = np.random.default_rng(4)
    x = x1.copy()
    x[sim.nq:] += 0.05 * rng.standard_normal(sim.nv)
    x[sim.nq + 2] = -0.05  # pressed into the ground
    x_next = sim.step(x, np.zeros(sim.nu))
    assert len(sim.contacts) == 1 and sim.contacts.impulses[0, 0] > 0
    # the impulse acts through the same damped operator: (M + dt D)(v+ - v) = dt (tau - b - D v) + J^T lambda
    state = sim._data.contact  # the J and impulses of that step
    q, v, D = x[:sim.nq], x[sim.nq:], sim.joint_damping
    data = model.createData()
    M = pin.crba(model, data, q).copy()
    M = np.triu(M) + np.triu(M, 1).T
    bias = pin.rnea(model, data, q, v, np.zeros(sim.nv)).copy()
    lhs = (M + sim.dt * np.diag(D)) @ (x_next[sim.nq:] - v)
    rhs = sim.dt * (-bias - D * v) + state.J.T @ state.lam
    assert np.abs(lhs - rhs).max() < 1e-12 * max(1.0, np.abs(rhs).max())
    _check_jacobians(sim, x, rng.standard_normal(sim.nu), h=1e-7, factor=1e3)


def test_jacobians_at_a_joint_limit_with_damping():
    model, _ = _chain(limits=True)
    sim = Simulator(model, dt=0.01, joint_damping=[1.0, 2.0, 40.0], joint_stiffness=[0.0, 0.0, 1.0])
    x = np.array([0.2, -0.1, 0.8 - 1e-5, 0.3, 0.5, 2.0])  # the last joint at its upper limit, moving into it
    sim.step(x, np.zeros(3))
    lim = sim.contacts.limit_impulses
    assert len(lim) == 1 and lim[0] > 0  # the limit pushes back
    _check_jacobians(sim, x, np.array([0.1, -0.2, 0.3]), h=1e-7, factor=1e3)


# -- 4. zero damping: nothing changes --------------------------------------------------------
@pytest.mark.parametrize("name", ["catapult", "go1-hold"])
def test_zero_damping_is_bit_for_bit_the_explicit_step(name):
    import problems

    ocp = problems.load(name)
    sim = ocp.dynamics
    assert not np.any(sim.joint_damping)
    other = Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, damping="explicit"))
    rng = np.random.default_rng(0)
    x = ocp.x0.copy()
    for _ in range(5):
        u = 0.1 * rng.standard_normal(sim.nu)
        a, b = sim.step_derivatives(x, u), other.step_derivatives(x, u)
        for p, q in zip(a, b, strict=True):
            assert np.array_equal(p, q)
        assert np.array_equal(sim.step(x, u), other.step(x, u))
        x = a[0]


# -- 5. MuJoCo's own Euler step --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["manipulator", "cheetah"])
def test_one_step_matches_mujoco_euler_without_constraints(name):
    """MuJoCo's Euler integrator treats joint damping implicitly, ``(M + dt D) dv = dt f``: with
    constraints disabled (no contact, no limits) one step from random states matches it."""
    mujoco = pytest.importorskip("mujoco")
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")
    mj = mujoco.MjModel.from_xml_path(path)
    mj.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    mj.opt.timestep = 2e-3
    md = mujoco.MjData(mj)
    assert mj.actuator_biastype.max() == 0 or name == "manipulator"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = Simulator.from_mjcf(path, dt=2e-3, joint_limits=False, ground=None, load_geometry=False,
                                  actuated=[])
    assert np.abs(sim.joint_damping).max() > 0
    ref = np.array([sim.mjcf.ref.get(sim.model.names[j], 0.0) for j in range(1, sim.model.njoints)])
    rng = np.random.default_rng(0)
    for _ in range(3):
        mujoco.mj_resetData(mj, md)
        md.qpos[:] = mj.qpos0 + 0.3 * rng.standard_normal(mj.nq)
        md.qvel[:] = rng.standard_normal(mj.nv)
        x = np.concatenate((md.qpos - ref, md.qvel))
        mujoco.mj_step(mj, md)
        x1 = sim.step(x, np.zeros(0))
        assert np.abs(x1[sim.nq:] - md.qvel).max() < 1e-9 * max(1.0, np.abs(md.qvel).max())
        assert np.abs(x1[:sim.nq] - (md.qpos - ref)).max() < 1e-9
