"""Closed-form physics of the smooth step: quaternions, energy, free fall."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from problems.cartpole import pendulum_simulator

from .conftest import free_body_simulator


def test_free_flyer_quaternion_stays_normalized():
    sim = free_body_simulator(dt=1e-3)
    x0 = sim.neutral_state()
    x0[sim.nq:] = [0.1, -0.2, 0.3, 2.0, -3.0, 5.0]  # tumbling about all three axes
    xs = sim.rollout(x0, np.zeros((3000, 0)))
    norms = np.linalg.norm(xs[:, 3:7], axis=1)
    assert np.abs(norms - 1.0).max() < 1e-12
    # Angular momentum of a torque-free body is conserved in the world frame
    # (up to the scheme's first-order error): check it stays within 2% of its start.
    m, d = sim.model, sim.model.createData()
    h = []
    for x in xs[::100]:
        pin.computeCentroidalMomentum(m, d, x[: sim.nq], x[sim.nq:])
        h.append(d.hg.angular.copy())
    h = np.array(h)
    assert np.abs(np.linalg.norm(h, axis=1) / np.linalg.norm(h[0]) - 1).max() < 0.02


def test_free_fall_matches_closed_form():
    """Semi-implicit Euler on free fall: z_n = z0 - g dt^2 n (n + 1) / 2 exactly."""
    sim = free_body_simulator(dt=1e-3)
    x0 = sim.neutral_state()
    n = 500
    xs = sim.rollout(x0, np.zeros((n, 0)))
    g, dt = 9.81, sim.dt
    steps = np.arange(n + 1)
    assert np.allclose(xs[:, 2], -g * dt * dt * steps * (steps + 1) / 2, atol=1e-12)
    assert np.allclose(xs[:, sim.nq + 2], -g * dt * steps, atol=1e-12)


def _pendulum_energy(sim, xs):
    m, d = sim.model, sim.model.createData()
    E = []
    for x in xs:
        q, v = x[: sim.nq], x[sim.nq:]
        E.append(pin.computeKineticEnergy(m, d, q, v) + pin.computePotentialEnergy(m, d, q))
    return np.array(E)


@pytest.mark.parametrize("dt", [2e-3, 1e-3])
def test_pendulum_energy_conserved_within_symplectic_drift(dt):
    """Symplectic Euler keeps the energy error bounded and O(dt), without secular drift, over 1 s."""
    sim = pendulum_simulator(dt=dt)
    x0 = np.array([np.deg2rad(60.0), 0.0])
    n = int(round(1.0 / dt))
    xs = sim.rollout(x0, np.zeros((n, 1)))
    E = _pendulum_energy(sim, xs)
    swing = 9.81 * 1.0 * 0.5 * (1 - np.cos(np.deg2rad(60.0)))  # m g (L/2) (1 - cos)
    err = np.abs(E - E[0]) / swing
    # The modified energy of symplectic Euler differs from E by O(dt): about 1.1 dt here.
    assert err.max() < 2.0 * dt
    # No drift: the error in the last tenth is no larger than the worst over the run.
    assert err[-n // 10:].max() <= err.max()


def test_pendulum_energy_error_is_first_order():
    errs = []
    for dt in (4e-3, 2e-3, 1e-3):
        sim = pendulum_simulator(dt=dt)
        n = int(round(1.0 / dt))
        xs = sim.rollout(np.array([np.deg2rad(60.0), 0.0]), np.zeros((n, 1)))
        E = _pendulum_energy(sim, xs)
        errs.append(np.abs(E - E[0]).max())
    ratios = [errs[0] / errs[1], errs[1] / errs[2]]
    assert all(1.7 < r < 2.3 for r in ratios), ratios


def test_pendulum_small_oscillation_period():
    """A compound pendulum (rod of length L hinged at its end) has period 2 pi sqrt(2L / 3g)."""
    sim = pendulum_simulator(dt=1e-4)
    n = 30000
    xs = sim.rollout(np.array([0.01, 0.0]), np.zeros((n, 1)))
    th = xs[:, 0]
    crossings = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))
    period = np.mean(np.diff(crossings)) * sim.dt
    assert period == pytest.approx(2 * np.pi * np.sqrt(2 * 1.0 / (3 * 9.81)), rel=1e-3)
