"""Multiple shooting / IPOPT through the CasADi callbacks."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import problems
from solvers import solve
from trajopt import casadi_step
from trajopt.solution import Status


def test_casadi_step_value_and_jacobian_equal_the_simulators():
    sim = problems.load("catapult").dynamics
    f = casadi_step(sim)
    x = ca.MX.sym("x", sim.nx)
    u = ca.MX.sym("u", sim.nu)
    J = ca.Function("J", [x, u], [f(x, u), ca.jacobian(f(x, u), x), ca.jacobian(f(x, u), u)])
    rng = np.random.default_rng(0)
    for _ in range(3):
        xv = problems.load("catapult").x0 + 0.05 * rng.standard_normal(sim.nx)
        uv = rng.uniform(-100, 100, sim.nu)
        xn, Fx, Fu = sim.step_derivatives(xv, uv)
        a, b, c = (np.asarray(v) for v in J(xv, uv))
        assert np.allclose(a.ravel(), xn) and np.allclose(b, Fx) and np.allclose(c, Fu)


def test_casadi_step_refuses_free_flyer_states():
    from tests.conftest import free_body_simulator

    with pytest.raises(ValueError, match="needs a Euclidean state"):
        casadi_step(free_body_simulator())


def test_ipopt_derivative_checker_passes_on_a_short_catapult(capsys):
    """IPOPT's own finite-difference check of the constraint Jacobian and the gradient, at the
    initial point (IPOPT's default moves the point at random, across contact modes). The
    projectile rests on the floor (a contact that a small perturbation does not break) and the
    arm is away from its joint limits (the stated start has link 2 exactly at its limit)."""
    ocp = problems.load("catapult", horizon=30)
    ocp.x0 = ocp.x0.copy()
    ocp.x0[:5] = (1.0, -0.525, np.deg2rad(45), np.deg2rad(30), np.deg2rad(45))
    sol = solve(ocp, method="ipopt", max_iter=1, verbose=True,
                ipopt_options={"derivative_test": "first-order", "point_perturbation_radius": 0.0,
                               "derivative_test_perturbation": 1e-7, "derivative_test_tol": 1e-3})
    out = capsys.readouterr().out
    assert "Starting derivative checker for first derivatives" in out
    assert "No errors detected by derivative checker" in out
    assert np.all(np.isfinite(sol.xs))
    assert ocp.dynamics.warm_start_stats["contact_steps"] > 0  # the check went through contact


@pytest.mark.parametrize("method, options", [("ipopt", {}), ("shooting", {"shot_length": 10}), ("ddp", {})])
def test_cartpole_swing_up_by_every_method(method, options):
    ocp = problems.load("cartpole")
    sol = solve(ocp, method=method, verbose=False, max_iter=200, **options)
    assert sol.status == Status.CONVERGED
    assert ocp.evaluate(sol.xs, sol.us)["final_angle_error"] < 0.05
    assert sol.cost < 30.0  # the optimum is 26.13
    assert np.all(sol.us <= ocp.u_upper + 1e-9) and np.all(sol.us >= ocp.u_lower - 1e-9)
    if method != "ddp":
        assert sol.info["max_defect"] < 1e-6


def test_shooting_rejects_bad_options():
    ocp = problems.load("pendulum", horizon=10)
    with pytest.raises(ValueError, match="shot_length must be >= 1"):
        solve(ocp, method="shooting", shot_length=0)
    with pytest.raises(ValueError, match="unknown hessian 'bfgs'"):
        solve(ocp, method="shooting", hessian="bfgs")


def test_opti_example_swings_the_cartpole_up():
    """The documented example: a user's own casadi.Opti problem around casadi_step."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "opti_cartpole.py"
    spec = importlib.util.spec_from_file_location("opti_cartpole", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    xs, us = mod.swing_up(T=100, verbose=False)
    assert np.allclose(xs[-1], [0.0, np.pi, 0.0, 0.0], atol=1e-6)
    assert np.abs(us).max() <= 30.0 + 1e-6
    sim = problems.load("cartpole").dynamics
    assert np.allclose(sim.rollout(xs[0], us), xs, atol=1e-6)  # the solution obeys the simulator
