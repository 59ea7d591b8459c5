"""The drone lift-off (Nimble VII-C): a resting contact's zero gradient, and the ways out of it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import problems
from solvers import solve
from solvers.continuation import resolve_schedule
from trajopt.sensitivity import adjoint_gradient
from trajopt.solution import Status


@pytest.mark.parametrize("hover", [0.0, 0.9])
def test_resting_drone_has_an_exactly_zero_gradient_but_aware_and_relaxed_ones_are_not(hover):
    ocp = problems.load("drone", hover=hover)
    us = ocp.us_init
    assert np.array_equal(ocp.dynamics.rollout(ocp.x0, us)[:, 0], np.zeros(ocp.horizon + 1))  # it rests
    cost, _, exact = adjoint_gradient(ocp, us)
    assert cost == pytest.approx(25.0, rel=1e-6)  # (0 - 5)^2, the control cost ~0
    # the floor clamps: the dynamics pass exactly nothing back, every step; what is left is the control
    # regularization's own gradient, 1e-8 u (exactly 0 at zero force)
    assert np.array_equal(exact, 1e-8 * us)
    _, _, aware = adjoint_gradient(ocp, us, complementarity_aware=True)
    assert np.all(aware < 0)  # pushing up lowers the loss, at every step
    kappa = resolve_schedule(ocp.dynamics, "auto")[0]
    relaxed = dataclasses.replace(ocp, dynamics=ocp.dynamics.with_smoothing(kappa))
    _, _, smooth = adjoint_gradient(relaxed, us)
    # the relaxed floor lets the push through (it also lifts the drone ~3 cm and lets it bob, so the
    # gradient changes sign in mid-horizon; at the first steps pushing up helps)
    assert np.all(smooth[:100] < -1e-3)


def test_plain_ddp_stalls_on_the_floor():
    ocp = problems.load("drone", horizon=100)
    sol = solve(ocp, method="ddp", max_iter=5, verbose=False)
    assert sol.status == Status.STALLED and sol.xs[-1, 0] == 0.0


@pytest.mark.parametrize("target", [3.0, 5.0, 8.0])
def test_default_method_lifts_off_to_the_target(target):
    """The issue's target: final height >= 4.95 m at 5 m (Nimble: 4.93); and the family's other targets."""
    ocp = problems.load("drone", target=target)
    sol = solve(ocp, verbose=False)
    m = ocp.evaluate(sol.xs, sol.us)
    assert sol.status == Status.CONVERGED
    assert abs(m["final_height"] - target) < 1e-3 and m["max_force"] <= 10.0


@pytest.mark.parametrize("seed", [0, 1])
def test_lifts_off_from_seeded_resting_guesses(seed):
    """Random forces below the weight: still resting, still a zero exact gradient; the default lifts off."""
    ocp = problems.load("drone")
    ocp.us_init = np.random.default_rng(seed).uniform(0.0, 0.98, (ocp.horizon, 1))
    assert np.array_equal(adjoint_gradient(ocp, ocp.us_init)[2], 1e-8 * ocp.us_init)
    sol = solve(ocp, verbose=False)
    assert ocp.evaluate(sol.xs, sol.us)["final_height"] >= 4.95


@pytest.mark.slow
def test_continuation_on_relaxed_contact_lifts_off_too():
    ocp = problems.load("drone")
    sol = solve(ocp, method="ddp", smoothing="auto", verbose=False)
    assert ocp.evaluate(sol.xs, sol.us)["final_height"] >= 4.95


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="hover"):
        problems.load("drone", hover=1.0)
    with pytest.raises(ValueError, match="target"):
        problems.load("drone", target=-1.0)
