"""Nimble's complementarity-aware gradients: a way out of the zero gradients of resting contacts."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from dynamics import ModelBuilder, Simulator
from solvers import solve
from trajopt import OCP, ControlCost, StateCost
from trajopt.sensitivity import adjoint_gradient
from trajopt.solution import Status


def lifter(horizon=200, target=0.2, **contact):
    """A 1 kg box on a vertical actuated slider, resting on a floor (Nimble's Figure 3): lift it
    to ``target`` m by the last step. ``contact``: the Simulator's contact keywords (default LCP)."""
    b = ModelBuilder("lifter", gravity=(0, -9.81, 0))
    j = b.add_joint("prismatic", name="lift", axis="y", effort=100.0)
    b.add_body(j, mass=1.0, box=(0.1, 0.1, 0.1))
    b.add_static_box("floor", (1.0, 0.2, 0.5), (0, -0.15, 0))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, actuated=["lift"], planar=True, **contact)
    return OCP(dynamics=sim, x0=np.zeros(sim.nx), horizon=horizon, running_cost=ControlCost(sim, 1e-6),
               terminal_cost=StateCost(sim, np.array([target, 0.0]), np.diag([100.0, 0.0])), name="lifter")


def test_a_resting_contact_zeroes_the_exact_gradient_but_not_the_aware_one():
    ocp = lifter()
    us = np.zeros((ocp.horizon, 1))
    _, _, exact = adjoint_gradient(ocp, us)
    _, _, aware = adjoint_gradient(ocp, us, complementarity_aware=True)
    assert np.abs(exact).max() < 1e-12  # the floor absorbs any small push: clamped
    assert np.all(aware < 0)  # pushing up lowers the loss, at every step
    assert ocp.dynamics.warm_start_stats["aware_switches"] == ocp.horizon
    # The contact read as separating: the gradient of free flight. Semi-implicit Euler gives
    # d y_T / d u_t = dt^2 (T - t) / m, and dl/dy_T = 100 (0 - 0.2) (cost 0.5 e'We).
    T, dt = ocp.horizon, ocp.dynamics.dt
    assert np.allclose(aware[:, 0], -20.0 * dt**2 * (T - np.arange(T)), rtol=1e-9, atol=0)


def test_aware_jacobians_are_not_mixed_with_exact_parameter_jacobians():
    """With params= (or impulses=) and adjoint= the call gave reclassified Fx, Fu next to an exact Fp: two
    linearizations in one answer, undocumented."""
    sim = lifter().dynamics
    x, u = np.zeros(sim.nx), np.zeros(sim.nu)
    for kw in ({"params": ["friction"]}, {"impulses": True}):
        with pytest.raises(ValueError, match="adjoint= .* cannot be combined with params= or impulses="):
            sim.step_derivatives(x, u, adjoint=np.ones(sim.ndx), **kw)
        sim.step_derivatives(x, u, **kw)  # without adjoint=: exact, fine
    sim.step_derivatives(x, u, adjoint=np.ones(sim.ndx))


def test_ddp_lifts_the_box_only_with_aware_gradients():
    ocp = lifter()
    exact = solve(ocp, method="ddp", max_iter=50, verbose=False)
    assert exact.iterations <= 1 and exact.xs[-1, 0] < 1e-9  # stuck on the floor at once
    aware = solve(ocp, method="ddp", max_iter=50, complementarity_aware=True, verbose=False)
    assert abs(aware.xs[-1, 0] - 0.2) < 5e-3 and aware.cost < 0.05 * exact.cost


def test_aware_jacobians_are_the_exact_ones_away_from_a_reclassification():
    ocp = problems.load("catapult", horizon=5)
    sim = ocp.dynamics
    x = ocp.x0.copy()
    adj = np.random.default_rng(0).standard_normal(sim.ndx)
    # the plain call runs the compiled Jacobian (ABA's derivatives from RNEA's and the solve's M^-1), the aware one
    # the Python path (computeABADerivatives): the same Jacobians to round-off
    for a, b in zip(sim.step_derivatives(x, np.zeros(sim.nu)), sim.step_derivatives(x, np.zeros(sim.nu), adjoint=adj)):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)
    # In contact (Go1 on four clamping feet, LCP): the loss decides. Where the reclassification keeps the
    # exact classification, the Jacobians are the exact ones; where it switches a contact, they are not.
    go1 = problems.load("go1-hold", horizon=2)
    gsim = go1.dynamics
    assert gsim.contact == "lcp"
    exact = gsim.step_derivatives(go1.x0, go1.us_init[0])
    assert len(gsim.contacts.points) == 4
    switched = []
    for seed in range(4):
        adj = np.random.default_rng(seed).standard_normal(gsim.ndx)
        before = gsim.warm_start_stats["aware_switches"]
        aware = gsim.step_derivatives(go1.x0, go1.us_init[0], adjoint=adj)
        switched.append(gsim.warm_start_stats["aware_switches"] > before)
        same = all(np.allclose(a, b, rtol=1e-12, atol=1e-12) for a, b in zip(exact, aware, strict=True))
        assert same != switched[-1], seed
    assert any(switched) and not all(switched)  # both cases were met
    with pytest.raises(ValueError, match="adjoint has shape"):
        lif = lifter()
        lif.dynamics.step_derivatives(lif.x0, np.zeros(1), adjoint=np.zeros(3))


def test_plain_gradient_methods_jump_the_worm_with_aware_gradients():
    """Issue target (root above 0.35 m) by pure gradient methods: exact DDP cannot leave the floor."""
    ocp = problems.load("jump-worm")
    exact = solve(ocp, method="ddp", smoothing="none", max_iter=3, verbose=False)
    assert exact.status == Status.STALLED and exact.xs[-1, 1] < -0.5  # lying on the floor: a zero-gradient stop
    assert exact.info["message"].startswith("zero gradient")
    for method, iterations in (("ddp", 2), ("gn", 1)):
        aware = solve(ocp, method=method, max_iter=iterations, complementarity_aware=True, verbose=False)
        assert ocp.evaluate(aware.xs, aware.us)["final_root_height"] > 0.35, method
