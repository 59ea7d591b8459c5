"""Trajectory sensitivities: adjoint = forward mode = central differences, through contact."""

from __future__ import annotations

import numpy as np

import problems
from trajopt.sensitivity import adjoint_gradient, forward_sensitivity, trajectory_jacobians


def _short_catapult():
    """30 steps with the projectile resting on the floor and the arm away from its limits."""
    ocp = problems.load("catapult", horizon=30)
    ocp.x0 = ocp.x0.copy()
    ocp.x0[:5] = (1.0, -0.525, np.deg2rad(45), np.deg2rad(30), np.deg2rad(45))
    rng = np.random.default_rng(0)
    us = rng.uniform(-20, 20, (30, ocp.nu))
    return ocp, us


def test_adjoint_equals_forward_mode_and_central_differences_on_a_short_catapult():
    ocp, us = _short_catapult()
    sim = ocp.dynamics
    cost, g_x0, g_u = adjoint_gradient(ocp, us)
    assert abs(cost - ocp.cost(ocp.rollout(us), us)) < 1e-12
    jac = trajectory_jacobians(sim, ocp.x0, us)
    xT, S, dU = forward_sensitivity(sim, ocp.x0, us, jac)
    # The catapult's cost is the terminal loss plus a control term: chain the terminal gradient forward.
    Lx = ocp.terminal_cost.derivatives(xT).Lx
    g_u_fwd = np.einsum("i,itk->tk", Lx, dU) + np.array([ocp.running(t).derivatives(jac.xs[t], us[t]).Lu
                                                         for t in range(ocp.horizon)])
    assert np.allclose(g_u, g_u_fwd, rtol=1e-10, atol=1e-12)
    assert np.allclose(g_x0, S.T @ Lx, rtol=1e-10, atol=1e-12)
    # Central differences of the re-simulated cost.
    h = 1e-6
    for t, k in [(0, 0), (10, 1), (29, 2)]:
        e = np.zeros_like(us)
        e[t, k] = h
        fd = (ocp.cost(ocp.rollout(us + e), us + e) - ocp.cost(ocp.rollout(us - e), us - e)) / (2 * h)
        assert abs(fd - g_u[t, k]) <= 1e-6 * max(1.0, abs(fd))
    for i in (1, 2, 6):
        dx = np.zeros(sim.ndx)
        dx[i] = h
        xp, xm = sim.state_integrate(ocp.x0, dx), sim.state_integrate(ocp.x0, -dx)
        fd = (ocp.cost(sim.rollout(xp, us), us) - ocp.cost(sim.rollout(xm, us), us)) / (2 * h)
        assert abs(fd - g_x0[i]) <= 1e-6 * max(1.0, abs(fd))
    assert sim.warm_start_stats["contact_steps"] > 0  # the chain went through contact


def test_forward_sensitivity_on_a_free_flyer_in_the_tangent_space():
    from tests.conftest import free_body_simulator

    sim = free_body_simulator(dt=1e-2)
    x0 = sim.neutral_state()
    x0[sim.nq:] = [0.3, -0.2, 0.5, 1.0, -2.0, 0.5]
    us = np.zeros((20, 0))
    xT, S, _ = forward_sensitivity(sim, x0, us)
    h = 1e-6
    for i in range(sim.ndx):
        dx = np.zeros(sim.ndx)
        dx[i] = h
        col = (sim.state_difference(xT, sim.rollout(sim.state_integrate(x0, dx), us)[-1])
               - sim.state_difference(xT, sim.rollout(sim.state_integrate(x0, -dx), us)[-1])) / (2 * h)
        assert np.allclose(S[:, i], col, atol=1e-7)


def test_impulse_sensitivity_matches_finite_differences_through_a_landing():
    """A ball (one contact: its motion is determinate) is thrown, lands, slides and rolls."""
    from trajopt.sensitivity import impulse_sensitivity

    from .test_contact import sphere_sim

    sim = sphere_sim(mu=0.3, contact="ncp")
    x0 = sim.neutral_state()
    x0[2] = 0.15
    x0[sim.nq:] = (1.2, 0.4, 0.5, 2.0, -1.0, 3.0)
    us = np.zeros((200, 0))
    xT, D = impulse_sensitivity(sim, x0, us)
    Minv = sim.inverse_mass_matrix(x0[: sim.nq])
    h = 1e-6
    for i in range(6):
        p = np.zeros(sim.nv)
        p[i] = h
        xp, xm = x0.copy(), x0.copy()
        xp[sim.nq:] += Minv @ p
        xm[sim.nq:] -= Minv @ p
        col = (sim.state_difference(xT, sim.rollout(xp, us)[-1]) - sim.state_difference(xT, sim.rollout(xm, us)[-1])) / (2 * h)
        assert np.allclose(D[:, i], col, atol=1e-6 * max(1.0, np.abs(col).max()))
    assert sim.warm_start_stats["contact_steps"] > 0


def test_a_jac_of_another_rollout_is_refused():
    """forward_sensitivity and impulse_sensitivity returned the given jac's rollout (other start, other
    horizon) as the answer for x0 and us, and adjoint_gradient raised an IndexError deep in its sweep."""
    import pytest

    from trajopt.sensitivity import impulse_sensitivity

    ocp, us = _short_catapult()
    sim, x0 = ocp.dynamics, ocp.x0
    jac = trajectory_jacobians(sim, x0, us)
    np.testing.assert_array_equal(forward_sensitivity(sim, x0, us, jac)[1], forward_sensitivity(sim, x0, us)[1])
    moved = x0.copy()
    moved[0] += 0.1
    with pytest.raises(ValueError, match="jac was computed from another start state"):
        forward_sensitivity(sim, moved, us, jac)
    with pytest.raises(ValueError, match="jac was computed from another start state"):
        impulse_sensitivity(sim, moved, us, jac)
    with pytest.raises(ValueError, match=r"jac covers 30 steps but us has 5 .*trajectory_jacobians\(dyn, x0, us\)"):
        forward_sensitivity(sim, x0, us[:5], jac)
    other = us.copy()
    other[3] += 1.0
    with pytest.raises(ValueError, match="jac was computed under other controls than us"):
        adjoint_gradient(ocp, other, jac=jac)
    with pytest.raises(ValueError, match="jac covers 5 steps but us has 30"):
        adjoint_gradient(ocp, us, jac=trajectory_jacobians(sim, x0, us[:5]))
    with pytest.raises(TypeError, match="jac must be a TrajectoryJacobians .* got tuple without xs, Fx, Fu"):
        forward_sensitivity(sim, x0, us, jac=(jac.xs, jac.Fx))
    with pytest.raises(TypeError, match="controls us must be an array of numbers, got None"):
        forward_sensitivity(sim, x0, None, jac)
