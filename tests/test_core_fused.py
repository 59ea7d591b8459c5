"""The fused hard-LCP step of the compiled core (``cpp/src/step.cpp``, ``ContactModel.fused``): the contact
solve and the contact velocity Jacobian in one C++ call each give the Python path's states, Jacobians,
impulses, warm starts and position corrections, to 1e-12, along rollouts."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from contact import core
from dynamics import Simulator
from dynamics.contact_step import ContactState, FusedContactState
from trajopt.bench import bench_state

from .test_contact import cube_sim, cube_state, limited_pendulum
from .test_damping import _chain

pytestmark = pytest.mark.skipif(core.module is None or not hasattr(core.module, "FusedLCP"),
                                reason="the compiled core (with FusedLCP) is not available")

TOL = 1e-12


def _reference(sim: Simulator) -> Simulator:
    """The same system on the Python path (the fused step off)."""
    ref = Simulator(sim.model, geometry=sim.geometry, **sim._options)
    ref.contact_model.fused = None
    return ref


def _rel(a, b):
    return float(np.abs(a - b).max(initial=0.0) / max(1.0, float(np.abs(b).max(initial=0.0))))


def _both(sim, ref, x, u, d, dr, e, er):
    """``(a, b, step difference)``: ``step_derivatives`` of the compiled and the reference simulator in their
    workspaces ``d``, ``dr``, and the relative difference of their ``step`` alone (workspaces ``e``, ``er``: their
    own warm starts)."""
    a, b = sim.step_derivatives(x, u, data=d), ref.step_derivatives(x, u, data=dr)
    return a, b, _rel(sim.step(x, u, data=e), ref.step(x, u, data=er))


def _compare(sim, ref, x0, us, *, need_correction=False):
    """Step and step_derivatives along the reference's rollout, each simulator with its own workspace
    (so warm starts carry along the rollout); returns the worst relative difference."""
    assert sim.contact_model.fused is not None and ref.contact_model.fused is None
    d, dr = sim.create_data(), ref.create_data()
    e, er = sim.create_data(), ref.create_data()  # step() alone, its own warm starts
    worst, fused, corrected = 0.0, 0, 0
    x = np.asarray(x0, dtype=float)
    for u in us:
        a, b, ds = _both(sim, ref, x, u, d, dr, e, er)
        worst = max(worst, ds, *(_rel(p, r) for p, r in zip(a, b)))
        assert (d.contact is None) == (dr.contact is None)
        if d.contact is not None:
            assert type(d.contact) is FusedContactState and type(dr.contact) is ContactState
            fused += 1
            s, t = d.contact, dr.contact
            assert s.key == t.key and s.layout == t.layout and s.guessed == t.guessed
            assert s.warm_hit == t.warm_hit
            np.testing.assert_array_equal(s.solution.modes, t.solution.modes)
            np.testing.assert_array_equal(s.solution.signs, t.solution.signs)
            np.testing.assert_array_equal(s.normal_rows, t.normal_rows)
            for name in ("lam", "J", "Minv", "MJt", "bias_slope"):
                worst = max(worst, _rel(getattr(s, name), getattr(t, name)))
            worst = max(worst, _rel(s.problem.A, t.problem.A), _rel(s.problem.b, t.problem.b))
            assert (s.correction is None) == (t.correction is None)
            if s.correction is not None:
                corrected += 1
                np.testing.assert_array_equal(s.correction.rows, t.correction.rows)
                worst = max(worst, _rel(s.correction.dq, t.correction.dq), _rel(s.correction.lam, t.correction.lam))
            if s.geo is not None:
                worst = max(worst, _rel(s.geo.dD, t.geo.dD), _rel(s.geo.contacts.points, t.geo.contacts.points))
        x = b[0]
    assert d.stats == dr.stats and e.stats == er.stats
    assert fused > 0, "no step had contact: the test does not test the fused path"
    if need_correction:
        assert corrected > 0, "no deep row: the position correction was not tested"
    assert worst <= TOL, worst
    return worst


def _controls(sim, T, seed, scale=0.3):
    rng = np.random.default_rng(seed)
    lo = np.nan_to_num(sim.u_lower, neginf=-10.0, posinf=10.0)
    hi = np.nan_to_num(sim.u_upper, neginf=-10.0, posinf=10.0)
    return rng.uniform(lo, hi, (T, sim.nu)) * scale


@pytest.mark.parametrize("name", ["catapult", "jump-worm", "go1-hold", "ur5-box", "talos-standing", "cube-throw"])
def test_registered_problems_along_rollouts(name):
    ocp = problems.load(name)
    sim = ocp.dynamics
    if sim.contact != "lcp":  # cube-throw is an NCP problem: the same scene with the LCP
        sim = Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, contact="lcp"))
    ref = _reference(sim)
    x0 = ocp.x0 if hasattr(ocp, "x0") else bench_state(ocp)[0]
    T = 300 if name == "cube-throw" else 40 if sim.nv > 20 else 60  # the cube starts 5 cm above the floor
    _compare(sim, ref, x0, _controls(sim, T, 0))
    if hasattr(ocp, "us_init"):  # the problem's own initial guess too (a trajectory the optimizer starts from)
        us = np.asarray(ocp.us_init, dtype=float).reshape(-1, sim.nu)[:T]
        _compare(sim, ref, x0, us)


def test_damped_arm_on_the_ground_with_a_spring():
    model, geom = _chain()
    sim = Simulator(model, geometry=geom, dt=0.005, ground=0.07, friction=0.6, contact="lcp",
                    joint_damping=[3.0, 1.0, 20.0], joint_stiffness=[0.0, 0.0, 2.0], joint_limits=False)
    x0 = np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.0])  # the tip sphere 2 cm in the ground
    _compare(sim, _reference(sim), x0, np.random.default_rng(1).standard_normal((60, sim.nu)), need_correction=True)


def test_floating_damped_chain_with_limits_on_the_ground():
    model, geom = _chain(floating=True, limits=True)
    # the tip sphere 2 cm in the ground at q = 0 (on a 45 cm deep start, where the deep rows' least squares
    # has cond 2e5, the products' round-off differences grow to 1.5e-12)
    sim = Simulator(model, geometry=geom, dt=0.005, ground=-0.93, friction=0.8, contact="lcp",
                    joint_damping=[0.0] * 6 + [2.0, 0.5, 5.0])
    q0 = np.zeros(model.nq)
    q0[6] = 1.0
    q0[-1] = 0.79  # near the upper limit 0.8
    x0 = np.concatenate((q0, np.zeros(model.nv)))
    _compare(sim, _reference(sim), x0, np.random.default_rng(2).standard_normal((60, sim.nu)))


@pytest.mark.parametrize("recovery", ["position", "velocity"])
def test_deep_penetration(recovery):
    s = cube_sim()
    sim = Simulator(s.model, geometry=s.geometry, dt=s.dt, ground=0.0, friction=s.friction, contact="lcp",
                    recovery=recovery)
    _compare(sim, _reference(sim), cube_state(z=0.05), np.zeros((40, 0)), need_correction=recovery == "position")


def test_joint_limit_past_and_near_its_bound():
    s = limited_pendulum()
    for recovery in ("position", "velocity"):
        sim = Simulator(s.model, geometry=s.geometry, dt=s.dt, recovery=recovery)
        _compare(sim, _reference(sim), np.array([0.6, 0.0]), np.full((40, 1), 1.0),
                 need_correction=recovery == "position")
        _compare(sim, _reference(sim), np.array([0.45, 2.0]), np.random.default_rng(3).standard_normal((40, 1)))


def test_adjoint_path_and_report_from_a_fused_state():
    """The complementarity-aware Jacobians (kept on the Python path) and sim.contacts read the fused state."""
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    ref = _reference(sim)
    x, u = ocp.x0, np.zeros(sim.nu)
    rng = np.random.default_rng(4)
    adj = rng.standard_normal(sim.ndx)
    for _ in range(3):
        a = sim.step_derivatives(x, u, adjoint=adj)
        b = ref.step_derivatives(x, u, adjoint=adj)
        for p, r in zip(a, b):
            assert _rel(p, r) <= TOL
        ca, cb = sim.contacts, ref.contacts
        for f in ("points", "normals", "phi", "impulses", "modes", "body_a", "body_b", "limit_impulses"):
            assert _rel(np.asarray(getattr(ca, f), float), np.asarray(getattr(cb, f), float)) <= TOL
        x = b[0]
    assert sim.warm_start_stats == ref.warm_start_stats


def test_switching_paths_mid_rollout_keeps_the_warm_start():
    """A fused state is a ContactState to the Python path: turning the fused step off mid-rollout warm-starts
    from it, as from a reference state."""
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    ref = _reference(sim)
    fused = sim.contact_model.fused
    us = _controls(sim, 20, 5)
    xs_ref = ref.rollout(ocp.x0, us)
    x = ocp.x0
    for t, u in enumerate(us):
        sim.contact_model.fused = fused if t % 2 == 0 else None
        x = sim.step(x, u)
        assert _rel(x, xs_ref[t + 1]) <= TOL
    sim.contact_model.fused = fused
    assert sim.warm_start_stats["guesses"] == ref.warm_start_stats["guesses"]


def test_bad_input_is_named():
    ocp = problems.load("catapult")
    sim = ocp.dynamics
    f = sim.contact_model.fused
    d = sim.create_data()
    q = ocp.x0[:sim.nq]
    with pytest.raises(ValueError, match="wrong size"):
        f.solve(sim._step_model, d.pin, d.geom, q[:-1], np.zeros(sim.nv), sim.dt, None)
    with pytest.raises(TypeError, match="pinocchio.Model"):
        f.solve(d.pin, d.pin, d.geom, q, np.zeros(sim.nv), sim.dt, None)
    sim.step_derivatives(ocp.x0, np.zeros(sim.nu), data=d)
    if d.contact is not None:
        nv = sim.nv
        with pytest.raises(ValueError, match="dv_dx must be"):
            f.jacobian(sim._step_model, d.pin, d.contact.core, q, np.zeros(nv), np.zeros(nv), np.zeros(nv), sim.dt,
                       sim.actuated_dofs, np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(nv),
                       np.zeros((nv, nv)), np.zeros((nv, sim.nu)))


def _python_jacobian_of_state(sim, d, x, u, v_next):
    """``(dv+/dx, dv+/du)`` by the Python Jacobian path (no compiled piece) on the contact solution the last
    step on ``d`` holds (a fused state: its J, MJt, problem, modes, signs)."""
    import importlib

    adapter = importlib.import_module("contact.adapter")
    cm, nq, nv = sim.contact_model, sim.nq, sim.nv
    q, v = x[:nq], x[nq:]
    tau = sim._tau(u, d, q, v)
    dvx, dvu = np.zeros((nv, 2 * nv)), np.zeros((nv, sim.nu))
    saved = cm.fused, cm.kin.core, adapter._core
    cm.fused = cm.kin.core = adapter._core = None
    try:
        sim._contact_velocity_jacobian(q, v, tau, v_next, d.contact, d, dvx, dvu)
    finally:
        cm.fused, cm.kin.core, adapter._core = saved
    return dvx, dvu


def test_talos_degenerate_lcp_the_jacobian_follows_the_solution_the_step_found():
    """talos-standing 2 steps into random controls (seed 2, scale 0.3): a flat foot on 4 corners makes the LCP
    degenerate (rank 12 of 24; a corner TIED, lambda = w = 0), and which corner carries the 0.0104 impulse
    is decided by Lemke's pivoting on the last bits of A = J M^-1 J^T. The fused step's A (Eigen products)
    and the Python path's (numpy's BLAS) differ by ~4e-16, and here the two solves pick different, equally
    valid answers (v+ equal to 1e-11; both accepted by the other problem's test), so the step Jacobians
    differ by 2e-6 relative (dv+/dq: two elements of the generalized Jacobian at a kink; central differences
    disagree with both by 1.6e3). What must hold whichever side is picked: the fused Jacobian is the Python
    Jacobian of the fused solution (to 1e-12), and the two solutions solve each other's problem."""
    from contact.lcp import BoxedLCP, lcp_residual

    ocp = problems.load("talos-standing")
    sim = ocp.dynamics
    ref = _reference(sim)
    us = _controls(sim, 3, 2)
    x = np.asarray(ocp.x0, dtype=float)
    for t in range(2):
        x = ref.step(x, us[t])
    u = us[2]
    d, dr = sim.create_data(), ref.create_data()
    a, b = sim.step_derivatives(x, u, data=d), ref.step_derivatives(x, u, data=dr)
    s, t = d.contact, dr.contact
    assert type(s) is FusedContactState and type(t) is ContactState
    nv = sim.nv
    dvx, dvu = _python_jacobian_of_state(sim, d, x, u, a[0][sim.nq:])
    assert _rel(a[1][nv:], dvx) <= TOL and _rel(a[2][nv:], dvu) <= TOL
    assert _rel(a[0], b[0]) <= 1e-10
    for sol, other in ((s.solution, t.problem), (t.solution, s.problem)):
        p = BoxedLCP(A=other.A, b=other.b, normal_of=other.normal_of, mu=other.mu)
        assert lcp_residual(p, sol.lam) <= 1e-12 * max(1.0, float(np.abs(sol.lam).max()))
    if np.array_equal(s.solution.modes, t.solution.modes) and np.array_equal(s.solution.signs, t.solution.signs):
        for p, r in zip(a, b):
            assert _rel(p, r) <= TOL
