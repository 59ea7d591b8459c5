"""Inverse problems through contact: initial-condition estimation and inverse dynamics (Gauss-Newton)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import problems
from solvers import gauss_newton
from trajopt import LeastSquares
from app.cli import main
from trajopt.numdiff import jacobian_fd
from trajopt.solution import Status


@pytest.fixture(scope="module")
def cube():
    return problems.load("cube-throw")


def test_cube_throw_jacobian_matches_finite_differences(cube):
    r, J = cube.jacobian(cube.z0)
    r_fd, J_fd = jacobian_fd(cube.residual, cube.z0)
    assert np.allclose(r, r_fd) and np.abs(J - J_fd).max() < 1e-5 * np.abs(J_fd).max()


def test_cube_throw_recovers_the_true_twist_with_analytical_jacobians(cube):
    sol = gauss_newton(cube, jacobian="analytic", verbose=False, max_iter=30)
    true = cube.info["true"]
    assert sol.status == Status.CONVERGED
    assert np.linalg.norm(sol.z - true) / np.linalg.norm(true) < 1e-6
    assert np.array_equal(sol.us, sol.z[None]) and np.array_equal(sol.xs[-1], sol.z)  # the same answer, as before
    assert sol.info["final_residual"] < 1e-7
    assert np.linalg.norm(cube.z0 - true) / np.linalg.norm(true) > 0.1  # it started well away
    assert cube.dynamics.warm_start_stats["contact_steps"] > 0  # through landing and sliding


def test_go1_inverse_dynamics_holds_the_robot(capsys):
    prob = problems.load("go1-standing")
    assert isinstance(prob, LeastSquares) and prob.z0.shape == (12,)
    sol = gauss_newton(prob, jacobian="analytic", verbose=False, max_iter=10)
    assert sol.info["final_residual"] < 1e-8 and sol.iterations <= 10
    sim, x = prob.dynamics, prob.info["x_stand"]
    u = sol.z
    xs = sim.rollout(x, np.tile(u, (1000, 1)))  # 1 s with the found torques
    assert np.abs(xs[:, :3] - x[:3]).max() < 1e-3  # the base stays within 1 mm
    assert np.all(np.abs(u) <= sim.u_upper)
    assert len(sim.contacts) == 4 and np.all(sim.contacts.impulses[:, 0] > 0)


def test_cli_solves_inverse_problems_with_both_jacobians(tmp_path, capsys):
    assert main(["solve", "go1-standing", "--out", str(tmp_path)]) == 0
    out = tmp_path / "go1-standing" / "gauss-newton"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["final_residual"] < 1e-8 and summary["iterations"] <= 10
    assert summary["finite_differences"]["final_residual"] < 1e-6
    assert (out / "residuals.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "gauss-newton (analytic)" in printed and "gauss-newton (fd)" in printed
    assert main(["simulate", "go1-standing"]) == 2
    assert "inverse (least-squares) problem" in capsys.readouterr().err


def _linear_problem(jacobian_scale):
    """r(z) = z - (1, 2) with a Jacobian whose second column is scaled (1 = the true one)."""
    target = np.array([1.0, 2.0])
    J = np.diag([1.0, jacobian_scale])
    return LeastSquares("linear", lambda z: z - target, lambda z: (z - target, J.copy()), np.zeros(2))


def test_gauss_newton_does_not_call_a_stagnation_with_a_nonzero_gradient_converged():
    """A Jacobian 100x too large in one column makes every step 1% of the right one: |r| creeps down
    (a 'stagnation'), but J'r is not zero. This stopped as CONVERGED before the gradient test."""
    sol = gauss_newton(_linear_problem(100.0), verbose=False, max_iter=50)
    assert sol.status == Status.STALLED, sol.status
    assert "gradient is not zero" in sol.info["reason"] and sol.info["final_residual"] > 0.5
    good = gauss_newton(_linear_problem(1.0), verbose=False)
    assert good.status == Status.CONVERGED and good.info["final_residual"] <= 1e-12


def test_gauss_newton_converges_at_a_nonzero_residual_floor():
    """Inconsistent equations (z = 1 and z = 3): the least-squares answer z = 2 keeps |r| = sqrt(2),
    with J'r = 0 there: CONVERGED (not STALLED), and the answer is right."""
    prob = LeastSquares("floor", lambda z: np.r_[z - 1.0, z - 3.0],
                        lambda z: (np.r_[z - 1.0, z - 3.0], np.ones((2, 1))), np.zeros(1))
    sol = gauss_newton(prob, verbose=False)
    assert sol.status == Status.CONVERGED and abs(sol.us[0][0] - 2.0) < 1e-9
    assert abs(sol.info["final_residual"] - np.sqrt(2.0)) < 1e-9


def test_gauss_newton_stops_inside_its_damping_ladder_when_the_time_is_up(monkeypatch):
    """The time limit was checked only after an accepted step: a Jacobian pointing the wrong way makes
    every trial step fail, and the whole damping ladder (~200 residuals) ran past ``time_limit``, ending
    STALLED. The clock here is a counter that each residual advances by 1 s (no real timing)."""
    from types import SimpleNamespace

    from solvers import least_squares

    clock = [0.0]
    monkeypatch.setattr(least_squares, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    target = np.array([1.0, 2.0])

    def residual(z):
        clock[0] += 1.0
        return z - target

    prob = LeastSquares("wrong-way", residual, lambda z: (residual(z), -np.eye(2)), np.zeros(2))
    sol = gauss_newton(prob, verbose=False, max_iter=50, time_limit=5.0)
    assert sol.status == Status.MAX_ITERATIONS, sol.info
    assert clock[0] <= 5.0 + 3.0, clock[0]  # a trial or two past the limit, not the ladder's ~200
    assert np.array_equal(sol.z, np.zeros(2))  # the best iterate: the start, as no step was accepted
    assert "time limit" in sol.info["message"], sol.info
