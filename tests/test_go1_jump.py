"""go1-jump (problems/legged.py): the problem as stated, its metrics on hand-made trajectories,
its cost derivatives against finite differences, and (slow) its default recipe reaching the target."""

from __future__ import annotations

import numpy as np
import pytest

import problems
import problems.legged as legged
from problems._scene import lowest_point
from trajopt import FunctionCost

TARGET_HEIGHT = 0.45  # m, max_base_height the default recipe must reach
TARGET_FLIGHT = 0.05  # s, flight_time the default recipe must reach


@pytest.fixture(scope="module")
def jump():
    return problems.load("go1-jump")


def test_problem_as_stated(jump):
    sim = jump.dynamics
    assert "go1-jump" in problems.names()
    assert (sim.nq, sim.nv, sim.nu, jump.horizon) == (19, 18, 12, 300)
    assert sim.dt == 1e-3 and sim.contact == "lcp"
    assert np.allclose(jump.u_upper, [23.7, 23.7, 35.55] * 4) and np.allclose(jump.u_lower, -jump.u_upper)
    x_stand = legged.go1_standing_state(sim)
    assert np.array_equal(jump.x0, x_stand) and jump.x0[2] == pytest.approx(0.27383, abs=1e-5)
    assert jump.default_method == "ddp"
    variant = problems.load("go1-jump", horizon=250, contact="ncp")
    assert variant.horizon == 250 and variant.dynamics.contact == "ncp"
    # the initial guess holds the standing pose: nothing moves, no flight
    xs = jump.rollout(jump.us_init)
    m = jump.evaluate(xs, jump.us_init)
    assert m["max_base_height"] == pytest.approx(x_stand[2], abs=1e-6)
    assert m["final_base_height"] == pytest.approx(x_stand[2], abs=1e-6)
    assert m["flight_time"] == 0.0


def test_metrics_on_a_hand_made_trajectory(jump):
    """The standing state lifted 5 cm at steps 10..29 (20 states: 0.02 s of flight), 0.5 cm at
    steps 30..39 (feet up, but under the 1 cm clearance), back on the ground after."""
    sim = jump.dynamics
    T = jump.horizon
    xs = np.tile(jump.x0, (T + 1, 1))
    xs[10:30, 2] += 0.05
    xs[30:40, 2] += 0.005
    xs[-1, 2] += 0.002
    us = np.zeros((T, sim.nu))
    m = jump.evaluate(xs, us)
    assert m["flight_time"] == pytest.approx(20 * sim.dt)
    assert m["max_base_height"] == pytest.approx(jump.x0[2] + 0.05)
    assert m["final_base_height"] == pytest.approx(jump.x0[2] + 0.002)
    assert m["max_joint_speed_ratio"] == 0.0
    # one foot left down (a leg stretched below the others) is not flight
    x = xs[15].copy()
    x[sim.model.joints[sim.model.getJointId("RR_calf_joint")].idx_q] = -0.9  # RR leg stretched: its foot lower
    feet = lowest_point(sim, x[: sim.nq], axis=2, names=legged.GO1_FEET)
    assert feet < legged.GO1_FLIGHT_CLEARANCE
    assert not legged.go1_flight_mask(sim, x[None])[0] and legged.go1_flight_mask(sim, xs[15][None])[0]


def _states(sim, rng):
    """Seeded states around standing: base tilted, moving up and down, joints moving, some
    joints beyond their velocity limits (the speed penalty active)."""
    x0 = legged.go1_standing_state(sim)
    out = []
    for vz in (1.5, -0.7, 0.3):
        dx = np.zeros(sim.ndx)
        dx[:6] = rng.uniform(-0.3, 0.3, 6)
        x = sim.state_integrate(x0, dx)
        v = rng.normal(0.0, 2.0, sim.nv)
        v[:3] = (0.2, -0.1, vz)  # base linear velocity, body frame
        v[6:9] = (35.0, -40.0, 25.0)  # FL hip, thigh, calf: beyond 30.1, 30.1, 20.06 rad/s
        x[sim.nq:] = v
        out.append(x)
    return out


def test_cost_derivatives_match_finite_differences(jump):
    """Gradients of the running and terminal costs against the toolkit's central differences in the
    tangent space (FunctionCost without derivatives); Hessians where they are exact (the apex
    reward's concave curvature is dropped by design: its Lxx is 0)."""
    sim = jump.dynamics
    rng = np.random.default_rng(3)
    u = rng.uniform(-10.0, 10.0, sim.nu)
    for x in _states(sim, rng):
        for cost, uu in ((jump.running(0), u), (jump.terminal_cost, None)):
            d = cost.derivatives(x, uu)
            fd = FunctionCost(sim, cost.value).derivatives(x, uu)
            assert d.L == pytest.approx(cost.value(x, uu))
            scale = max(1.0, np.abs(fd.Lx).max())
            assert np.abs(d.Lx - fd.Lx).max() < 1e-6 * scale
            if uu is not None:
                assert np.allclose(d.Lu, fd.Lu, atol=1e-7)
        apex = legged.base_apex_reward(sim, 1.0)
        assert apex.value(x) == pytest.approx(-legged.base_apex_height(sim, x))
        assert np.abs(apex.derivatives(x).Lx - FunctionCost(sim, apex.value).derivatives(x).Lx).max() < 1e-7
        assert not apex.derivatives(x).Lxx.any()
        speed = legged.joint_speed_penalty(sim, 1.0)
        d, fd = speed.derivatives(x), FunctionCost(sim, speed.value).derivatives(x)
        assert d.L > 0 and np.count_nonzero(np.diag(d.Lxx)) == 3
        assert np.abs(d.Lx - fd.Lx).max() < 1e-6 * np.abs(d.Lx).max()
        assert np.abs(d.Lxx - fd.Lxx).max() < 2e-4  # the FD Hessian differences FD gradients: ~eps L / 1e-10


def test_apex_height_is_ballistic(jump):
    """From a state moving up at v_z, a free flight (no contact, no torque) peaks at the predicted apex."""
    sim = jump.dynamics
    x = jump.x0.copy()
    x[2] += 0.2  # well above the ground
    x[3:7] = [0.0, np.sin(0.15), 0.0, np.cos(0.15)]  # pitched: body-frame velocity != world velocity
    R = np.array([[np.cos(0.3), 0, np.sin(0.3)], [0, 1, 0], [-np.sin(0.3), 0, np.cos(0.3)]])
    x[sim.nq:sim.nq + 3] = R.T @ np.array([0.0, 0.0, 1.2])  # world velocity straight up, 1.2 m/s
    predicted = legged.base_apex_height(sim, x)
    assert predicted == pytest.approx(x[2] + 1.2**2 / (2 * 9.81))
    u = np.zeros(sim.nu)
    top = x[2]
    for _ in range(200):
        x = sim.step(x, u)
        top = max(top, x[2])
    # the base is not the centre of mass: legs swinging in flight move it a little
    assert top == pytest.approx(predicted, abs=5e-3)


@pytest.mark.slow
def test_default_recipe_jumps():
    """``trajopt solve go1-jump`` (no flags): the target within the recipe's time limit."""
    import solvers

    ocp = problems.load("go1-jump")
    sol = solvers.solve(ocp, verbose=False)
    m = ocp.evaluate(sol.xs, sol.us)
    assert m["max_base_height"] >= TARGET_HEIGHT, m
    assert m["flight_time"] >= TARGET_FLIGHT, m
    assert sol.wall_time <= ocp.default_options["time_limit"] + 10.0
