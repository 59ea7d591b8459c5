"""Single-shooting Gauss-Newton: exact reduced derivatives, Newton on LQ, bounds, contact, errors."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from solvers import solve
from solvers.single_shooting_gn import reduced_derivatives
from trajopt.sensitivity import adjoint_gradient, trajectory_jacobians
from trajopt.solution import Status

from .test_ddp import dense_lq_reference, lq_problem


def _dense_lq_hessian(A, B, Q, R, Qf, T):
    n, m = B.shape
    Gam = np.zeros(((T + 1) * n, T * m))
    for t in range(1, T + 1):
        for s in range(t):
            Gam[t * n:(t + 1) * n, s * m:(s + 1) * m] = np.linalg.matrix_power(A, t - 1 - s) @ B
    W = np.kron(np.eye(T + 1), Q)
    W[T * n:, T * n:] = Qf
    return Gam.T @ W @ Gam + np.kron(np.eye(T), R)


def test_reduced_hessian_and_gradient_equal_the_dense_lq_ones():
    ocp, (A, B, x0, Q, R, Qf) = lq_problem(T=12)
    us = np.random.default_rng(3).standard_normal((ocp.horizon, ocp.nu))
    jac = trajectory_jacobians(ocp.dynamics, ocp.x0, us)
    cost, g, H, _ = reduced_derivatives(ocp, jac.xs, us, jac)
    # the costs are 0.5 x'Qx and 0.5 u'Ru: Lxx = Q, Luu = R (no Lxu)
    assert np.allclose(H, _dense_lq_hessian(A, B, Q, R, Qf, ocp.horizon), rtol=1e-12, atol=1e-12)
    c_ref, _, g_ref = adjoint_gradient(ocp, us, jac=jac)
    assert cost == pytest.approx(c_ref) and np.allclose(g, g_ref.ravel(), rtol=1e-12, atol=1e-12)


def test_gn_is_newton_on_a_linear_quadratic_problem():
    ocp, (A, B, x0, Q, R, Qf) = lq_problem()
    ref = dense_lq_reference(A, B, x0, Q, R, Qf, ocp.horizon)
    sol = solve(ocp, method="gn", damping_init=0.0, max_iter=1, verbose=False)
    assert np.allclose(sol.us, ref, atol=1e-9)
    # lam_init: the former name of damping_init, still accepted (not with both)
    assert np.array_equal(solve(ocp, method="gn", lam_init=0.0, max_iter=1, verbose=False).us, sol.us)
    with pytest.raises(ValueError, match="former name of damping_init"):
        solve(ocp, method="gn", lam_init=0.0, damping_init=0.5, max_iter=1, verbose=False)
    again = solve(ocp, method="gn", us_init=sol.us, max_iter=5, verbose=False)
    assert again.status == Status.CONVERGED and again.cost == pytest.approx(sol.cost, rel=1e-12)


def test_reduced_gradient_through_contact_equals_the_adjoint_and_central_differences():
    ocp = problems.load("catapult", horizon=120)
    rng = np.random.default_rng(0)
    us = np.clip(rng.normal(0, 150, (ocp.horizon, ocp.nu)), ocp.u_lower, ocp.u_upper)
    jac = trajectory_jacobians(ocp.dynamics, ocp.x0, us)
    assert ocp.dynamics.warm_start_stats["contact_steps"] > 20  # the box lands on the arm
    _, g, H, _ = reduced_derivatives(ocp, jac.xs, us, jac)
    _, _, g_adj = adjoint_gradient(ocp, us, jac=jac)
    assert np.allclose(g, g_adj.ravel(), rtol=1e-10, atol=1e-14 * np.abs(g).max())
    h = 1e-4
    picks = np.concatenate([np.argsort(-np.abs(g))[:6], rng.choice(g.size, 6, replace=False)])
    for k in picks:
        e = np.zeros(ocp.horizon * ocp.nu)
        e[k] = h
        up, um = us + e.reshape(us.shape), us - e.reshape(us.shape)
        fd = (ocp.cost(ocp.rollout(up), up) - ocp.cost(ocp.rollout(um), um)) / (2 * h)
        assert fd == pytest.approx(g[k], rel=1e-5, abs=1e-6 * np.abs(g).max() + 1e-11)  # FD rounding ~ 1e-11
    assert np.all(np.linalg.eigvalsh(H) > -1e-9 * np.abs(H).max())  # Gauss-Newton: positive semi-definite


def _reachable_catapult():
    """A 300-step catapult whose target is where a known throw puts the box (the arm tosses it,
    then strikes it at about 0.26 s), and a start 20 N m of noise away from that throw."""
    knots = np.array([[-167, -351, -401], [156, 253, 1], [96, 34, 42], [-457, -137, 33], [-235, -143, -245],
                      [-100, 256, -119]], dtype=float)
    T, at = 300, np.array([0, 71, 143, 214, 285, 357])
    throw = np.stack([np.interp(np.arange(T), at, knots[:, j]) for j in range(3)], axis=1)
    target = problems.load("catapult", horizon=T).rollout(throw)[-1, :2].copy()
    ocp = problems.load("catapult", horizon=T, target=target)
    u0 = np.clip(throw + np.random.default_rng(1).normal(0, 20, throw.shape), ocp.u_lower, ocp.u_upper)
    return ocp, u0


def test_gn_brings_the_box_onto_a_reachable_target_through_contact():
    ocp, u0 = _reachable_catapult()
    start = ocp.evaluate(ocp.rollout(u0), u0)["distance_to_target"]
    sol = solve(ocp, method="gn", us_init=u0, max_iter=20, verbose=False)
    end = ocp.evaluate(sol.xs, sol.us)["distance_to_target"]
    assert start > 0.015 and end < 1e-3, (start, end)
    costs = [h["cost"] for h in sol.history]
    assert all(b <= a for a, b in zip(costs, costs[1:]))
    assert np.allclose(ocp.rollout(sol.us), sol.xs)
    assert np.all(sol.us <= ocp.u_upper) and np.all(sol.us >= ocp.u_lower)


def test_the_state_metric_is_what_carries_gn_through_the_strike():
    """Damping measured on the controls (Levenberg) stalls centimetres away on the same problem."""
    ocp, u0 = _reachable_catapult()
    ident = solve(ocp, method="gn", us_init=u0, max_iter=12, metric="identity", verbose=False)
    assert ocp.evaluate(ident.xs, ident.us)["distance_to_target"] > 0.01
    with pytest.raises(ValueError, match="unknown metric 'euclid'"):
        solve(ocp, method="gn", metric="euclid")


def test_gn_refuses_a_horizon_too_long_for_its_dense_hessian():
    ocp = problems.load("pendulum", horizon=200)
    with pytest.raises(ValueError, match="200 controls .* exceed max_controls=100.*Use method 'ddp'"):
        solve(ocp, method="gn", max_controls=100)


def test_cem_then_gn_merges_both_stages():
    ocp = problems.load("pendulum")
    sol = solve(ocp, method="cem-gn", cem_iterations=2, population=8, max_iter=10, verbose=False)  # 100: 7 s
    stages = [h["stage"] for h in sol.history]
    assert stages[:2] == ["cem", "cem"] and set(stages[2:]) == {"gn"}
    assert [h["iteration"] for h in sol.history] == list(range(len(stages)))  # one count over both stages
    assert sol.method == "cem-gn" and sol.cost <= sol.info["cem_cost"]
    assert ocp.evaluate(sol.xs, sol.us)["final_angle_error"] < 0.1


def test_gn_states_are_the_rollout_of_its_controls_bit_for_bit():
    """The states gn returns (and linearizes at) are the rollout whose cost its line search measured:
    the Jacobians' pass gives step's own x+ (it drifted up to 1e-6 on the catapult when the free
    velocity came from computeABADerivatives' ddq instead of pin.aba)."""
    ocp = problems.load("catapult", horizon=120)
    us = np.clip(np.random.default_rng(0).normal(0, 150, (ocp.horizon, ocp.nu)), ocp.u_lower, ocp.u_upper)
    sol = solve(ocp, method="gn", us_init=us, max_iter=2, verbose=False)
    assert sol.history, "gn took no step"
    assert np.array_equal(sol.xs, ocp.rollout(sol.us))
    assert sol.cost == ocp.cost(ocp.rollout(sol.us), sol.us)
