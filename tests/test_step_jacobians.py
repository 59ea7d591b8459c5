"""Analytical step Jacobians against finite differences at seeded random states."""

from __future__ import annotations

import numpy as np
import pytest

from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd

from .conftest import random_control, random_state


def test_jacobians_match_central_differences(any_sim):
    name, sim = any_sim
    rng = np.random.default_rng(1234)
    tol = fd_tolerance()
    for _ in range(5):
        x, u = random_state(sim, rng), random_control(sim, rng)
        x_next, Fx, Fu = sim.step_derivatives(x, u, data=sim.create_data())
        assert np.array_equal(x_next, sim.step(x, u, data=sim.create_data())), name  # the same x+, bit for bit
        fd = step_jacobians_fd(sim, x, u)
        scale = max(1.0, np.abs(Fx).max(), np.abs(Fu).max(initial=0.0))
        assert max_relative_error(Fx, fd.Fx) < tol * scale, name
        assert max_relative_error(Fu, fd.Fu) < tol * scale, name


def test_jacobians_match_ridders_below_1e6(any_sim):
    name, sim = any_sim
    rng = np.random.default_rng(99)
    x, u = random_state(sim, rng), random_control(sim, rng)
    _, Fx, Fu = sim.step_derivatives(x, u)
    ref = step_jacobians_fd(sim, x, u, method="ridders")
    assert max_relative_error(Fx, ref.Fx) < 1e-6, name
    assert max_relative_error(Fu, ref.Fu) < 1e-6, name


def test_free_flyer_jacobian_is_not_euclidean():
    """On a rotating free body, dq+/dq differs from the identity-based Euclidean guess."""
    from .conftest import free_body_simulator

    sim = free_body_simulator(dt=0.05)
    rng = np.random.default_rng(3)
    x = random_state(sim, rng, v_scale=3.0)
    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    nv = sim.nv
    assert np.abs(Fx[:nv, :nv] - np.eye(nv)).max() > 1e-2  # the group structure matters here
    fd = step_jacobians_fd(sim, x, np.zeros(0))
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * max(1.0, np.abs(Fx).max())


def test_checker_detects_a_wrong_jacobian(any_sim):
    """The comparison used above fails on a perturbed Jacobian (it can fail)."""
    name, sim = any_sim
    rng = np.random.default_rng(5)
    x, u = random_state(sim, rng), random_control(sim, rng)
    _, Fx, _ = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    Fx_bad = Fx.copy()
    Fx_bad[-1, 0] += 1e-4
    assert max_relative_error(Fx_bad, fd.Fx) > fd_tolerance() * max(1.0, np.abs(Fx).max())


def _cube_on_the_ground(contact):
    """A 1 kg cube (0.2 m) on the ground, and two states with different contacts: sliding flat on its
    four bottom corners, and tilted, falling onto one corner."""
    import pinocchio as pin

    from dynamics import ModelBuilder, Simulator

    b = ModelBuilder("cube")
    b.add_body(b.add_joint("free", name="root"), mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    smoothing = {"smoothing": 1e-3} if contact == "relaxed" else {}
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=0.5, contact=contact, **smoothing)
    flat = sim.neutral_state()
    flat[2] = 0.0999  # 0.1 mm deep
    flat[sim.nq:sim.nq + 3] = (1.0, 0.3, -0.2)
    tilted = sim.neutral_state()
    tilted[:sim.nq] = pin.integrate(model, tilted[:sim.nq], np.array([0.0, 0.0, 0.1, 0.3, 0.2, 0.0]))
    tilted[sim.nq + 2] = -0.5
    return sim, flat, tilted


@pytest.mark.parametrize("contact", ["lcp", "ncp", "relaxed"])
def test_workspaces_are_independent(contact):
    """Two knots' workspaces stepping different contact states (a cube sliding on four corners, one
    landing on one corner), interleaved step by step, give bit for bit what each gives alone, and each
    keeps its own contacts and counters: no warm start, kept solve or contact report crosses over."""
    sim, flat, tilted = _cube_on_the_ground(contact)
    u = np.zeros(0)
    steps = 5

    def alone(x):
        d, out = sim.create_data(), []
        for _ in range(steps):
            sim.step(x, u, data=d)
            out.append(sim.step_derivatives(x, u, data=d))  # reuses the kept contact solve of the step
            x = out[-1][0]
        return out, sim.contact_model.report(d.contact), d.stats

    (ref_flat, flat_report, flat_stats), (ref_tilted, tilted_report, tilted_stats) = alone(flat), alone(tilted)
    assert len(flat_report.points) == 4 and len(tilted_report.points) == 1  # different contact states
    other = sim.create_data()
    got_flat, got_tilted = [], []
    x1, x2 = flat, tilted
    for _ in range(steps):  # both steps, then both Jacobians: a forward pass, then a backward pass
        sim.step(x1, u)  # the default workspace: sim.contacts, sim.warm_start_stats
        sim.step(x2, u, data=other)
        got_flat.append(sim.step_derivatives(x1, u))
        got_tilted.append(sim.step_derivatives(x2, u, data=other))
        x1, x2 = got_flat[-1][0], got_tilted[-1][0]
    for got, ref in ((got_flat, ref_flat), (got_tilted, ref_tilted)):
        for a, b in zip(got, ref, strict=True):
            for p, q in zip(a, b, strict=True):
                assert np.array_equal(p, q), contact
    assert len(sim.contacts.points) == 4 and np.array_equal(sim.contacts.points, flat_report.points)
    assert np.array_equal(sim.contact_model.report(other.contact).points, tilted_report.points)
    # each workspace warm-starts from its own last solve only, and counts its own solves
    assert sim.warm_start_stats == flat_stats and other.stats == tilted_stats
    assert flat_stats["contact_steps"] == steps and flat_stats["warm_hits"] > 0


def test_returned_arrays_are_not_views_into_workspace():
    from problems.cartpole import cartpole_simulator

    sim = cartpole_simulator(2)
    rng = np.random.default_rng(0)
    x, u = random_state(sim, rng), random_control(sim, rng)
    xn, Fx, Fu = sim.step_derivatives(x, u)
    keep = (xn.copy(), Fx.copy(), Fu.copy())
    sim.step_derivatives(random_state(sim, rng), random_control(sim, rng))
    sim.step(random_state(sim, rng), random_control(sim, rng))
    for p, q in zip(keep, (xn, Fx, Fu), strict=True):
        assert np.array_equal(p, q)


@pytest.mark.parametrize("method", ["central", "ridders"])
def test_fd_checker_on_a_linear_system(method):
    """On a known linear map the finite-difference checker is exact (to round-off)."""

    class Linear:
        nx = ndx = 3
        nu = 2
        A = np.array([[1.0, 0.1, 0.0], [0.0, 1.0, 0.1], [0.2, 0.0, 0.9]])
        Bm = np.array([[0.0, 1.0], [0.5, 0.0], [1.0, -1.0]])

        def step(self, x, u):
            return self.A @ x + self.Bm @ u

        def step_derivatives(self, x, u):
            return self.step(x, u), self.A, self.Bm

        def state_integrate(self, x, dx):
            return x + dx

        def state_difference(self, x0, x1):
            return x1 - x0

    lin = Linear()
    fd = step_jacobians_fd(lin, np.ones(3), np.ones(2), method=method)
    assert np.allclose(fd.Fx, lin.A, atol=1e-9)
    assert np.allclose(fd.Fu, lin.Bm, atol=1e-9)


@pytest.mark.xfail(strict=True, reason="known defect (found 2026-11-27): between two round shapes that both move "
                   "(sphere-sphere), detection gives the normal to one body to carry (dn = w_B x n, contact/"
                   "detection.py _classify), but it lies along the line of centres and turns as either centre "
                   "moves; the q-columns are off by up to 127 (of 1e3) here, frictionless too. A sphere on a "
                   "fixed or flat body is right (the other tests). Fix: a centre-line normal mode in "
                   "contact/_kernels.py and cpp/src/kinematics.cpp, dn = (I - n n^T)(dc_A - dc_B) / |c_A - c_B|")
def test_two_moving_spheres_in_contact():
    """A sphere on a swinging arm against a free ball, 0.5 mm apart (within the margin: a contact row), both
    moving: Fx against central differences."""
    from dynamics import ModelBuilder, Simulator

    b = ModelBuilder("hit")
    j1 = b.add_joint("revolute", name="swing", axis="y", placement=(0.0, 0.0, 1.0))
    b.add_body(j1, mass=1.0, sphere=0.1, offset=(0.0, 0.0, -0.8))
    j2 = b.add_joint("free", name="ball", placement=(0.3, 0.05, 0.0))
    b.add_body(j2, mass=0.4, sphere=0.08)
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, dt=1e-3, ground=-5.0, friction=0.3, contact="lcp")
    a = 0.2
    tip = np.array([-0.8 * np.sin(a), 0.0, 1 - 0.8 * np.cos(a)])
    d = np.array([-1.0, 0.3, 0.2]) / np.linalg.norm([-1.0, 0.3, 0.2])
    x = np.zeros(sim.nx)
    x[0], x[1:4], x[7] = a, tip + d * (0.18 + 5e-4) - [0.3, 0.05, 0.0], 1.0
    x[8], x[9:15] = 3.0, [1.0, 0.2, 0.3, 2.0, -1.0, 0.5]
    u = np.zeros(sim.nu)
    _, Fx, _ = sim.step_derivatives(x, u)
    sim.step(x, u)
    assert len(sim.contacts) == 1
    fd = step_jacobians_fd(sim, x, u)
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * max(1.0, np.abs(Fx).max())
