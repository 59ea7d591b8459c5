"""Inverse problems through contact: initial-condition estimation and inverse dynamics (Gauss-Newton)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import problems
from solvers import gauss_newton
from trajopt import LeastSquares
from app.cli import main
from trajopt.lsq import fd_jacobian
from trajopt.solution import Status


@pytest.fixture(scope="module")
def cube():
    return problems.load("cube-throw")


def test_cube_throw_jacobian_matches_finite_differences(cube):
    r, J = cube.jacobian(cube.z0)
    r_fd, J_fd = fd_jacobian(cube.residual, cube.z0)
    assert np.allclose(r, r_fd) and np.abs(J - J_fd).max() < 1e-5 * np.abs(J_fd).max()


def test_cube_throw_recovers_the_true_twist_with_analytical_jacobians(cube):
    sol = gauss_newton(cube, jacobian="analytic", verbose=False, max_iter=30)
    true = cube.info["true"]
    assert sol.status == Status.CONVERGED
    assert np.linalg.norm(sol.us[0] - true) / np.linalg.norm(true) < 1e-6
    assert sol.info["final_residual"] < 1e-7
    assert np.linalg.norm(cube.z0 - true) / np.linalg.norm(true) > 0.1  # it started well away
    assert cube.dynamics.warm_start_stats["contact_steps"] > 0  # through landing and sliding


def test_go1_inverse_dynamics_holds_the_robot(capsys):
    prob = problems.load("go1-standing")
    assert isinstance(prob, LeastSquares) and prob.z0.shape == (12,)
    sol = gauss_newton(prob, jacobian="analytic", verbose=False, max_iter=10)
    assert sol.info["final_residual"] < 1e-8 and sol.iterations <= 10
    sim, x = prob.dynamics, prob.info["x_stand"]
    u = sol.us[0]
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
