"""Complementarity-aware Jacobians are Nimble's (LCP) only: with the Coulomb cone they are refused,
in the Python API and on the command line, before any solving."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from solvers import solve
from solvers.ddp import solve_ddp
from solvers.single_shooting_gn import solve_gn
from app.cli import main
from trajopt.sensitivity import adjoint_gradient, aware_trajectory_jacobians

from .test_complementarity_aware import lifter

BOTH = r"complementarity_aware=True.*contact='ncp'"


@pytest.fixture(scope="module")
def jump_ncp():
    return problems.load("jump-worm", contact="ncp", horizon=20)


def test_step_derivatives_refuses_an_adjoint_under_ncp(jump_ncp):
    sim = jump_ncp.dynamics
    x, u = jump_ncp.x0, np.zeros(sim.nu)
    with pytest.raises(ValueError, match=BOTH):
        sim.step_derivatives(x, u, adjoint=np.ones(sim.ndx))
    with pytest.raises(ValueError, match=BOTH):  # the parameter path too
        sim.step_derivatives(x, u, adjoint=np.ones(sim.ndx), params=["friction"])
    sim.step_derivatives(x, u)  # the exact Jacobians are fine


@pytest.mark.parametrize("call", [
    lambda ocp: solve(ocp, method="ddp", complementarity_aware=True, verbose=False),
    lambda ocp: solve(ocp, method="cem-ddp", complementarity_aware=True, verbose=False),
    lambda ocp: solve(ocp, method="ddp", smoothing="auto", complementarity_aware=True, verbose=False),
    lambda ocp: solve_ddp(ocp, complementarity_aware=True, verbose=False),
    lambda ocp: solve_gn(ocp, complementarity_aware=True, verbose=False),
    lambda ocp: adjoint_gradient(ocp, np.zeros((ocp.horizon, ocp.nu)), complementarity_aware=True),
    lambda ocp: aware_trajectory_jacobians(ocp, np.zeros((ocp.horizon, ocp.nu))),
], ids=["solve-ddp", "solve-cem-ddp", "solve-smoothing", "solve_ddp", "solve_gn", "adjoint_gradient",
        "aware_trajectory_jacobians"])
def test_solvers_refuse_aware_ncp_before_any_step(jump_ncp, call):
    sim = jump_ncp.dynamics
    before = sim.warm_start_stats["contact_steps"], sim.warm_start_stats["aware_switches"]
    with pytest.raises(ValueError, match=BOTH):
        call(jump_ncp)
    assert (sim.warm_start_stats["contact_steps"], sim.warm_start_stats["aware_switches"]) == before


def test_lcp_and_relaxed_keep_their_aware_jacobians():
    ocp = lifter(horizon=20)  # LCP: the reclassification runs
    _, _, aware = adjoint_gradient(ocp, np.zeros((20, 1)), complementarity_aware=True)
    assert np.all(aware < 0) and ocp.dynamics.warm_start_stats["aware_switches"] == 20
    drone = problems.load("drone", horizon=20)  # Nimble's lift-off: aware DDP on LCP is its default recipe
    assert drone.dynamics.contact == "lcp" and drone.default_options["complementarity_aware"]
    _, _, g = adjoint_gradient(drone, np.zeros((20, drone.nu)), complementarity_aware=True)
    assert np.abs(g).max() > 0
    # Relaxed contact: accepted, nothing to reclassify (its exact gradient already sees the floor).
    relaxed = lifter(horizon=20, contact="relaxed", smoothing=1e-3)
    _, _, exact = adjoint_gradient(relaxed, np.zeros((20, 1)))
    _, _, aware = adjoint_gradient(relaxed, np.zeros((20, 1)), complementarity_aware=True)
    assert relaxed.dynamics.contact == "relaxed" and relaxed.dynamics.warm_start_stats["aware_switches"] == 0
    assert np.abs(exact).max() > 1e-5 and np.allclose(aware, exact, rtol=1e-12, atol=1e-18)


def test_cli_refuses_aware_with_ncp_naming_both_options(tmp_path, capsys):
    assert main(["solve", "jump-worm", "--contact", "ncp", "--complementarity-aware", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--complementarity-aware" in err and "--contact ncp" in err
    assert not (tmp_path / "jump-worm").exists()  # nothing was solved or written
    assert main(["solve", "go1-standing", "--complementarity-aware", "--out", str(tmp_path)]) == 2
    assert "least-squares" in capsys.readouterr().err
