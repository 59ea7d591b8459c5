"""Catapult and jump-worm: scenes as stated, contact along rollouts, Jacobians away from mode switches."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd


@pytest.fixture(scope="module", params=[("catapult", "lcp"), ("jump-worm", "lcp"), ("catapult", "ncp"),
                                        ("jump-worm", "ncp")], ids=lambda p: "-".join(p))
def planar(request):
    ocp = problems.load(request.param[0], contact=request.param[1])
    rng = np.random.default_rng(0)
    # Moderate random torques (20% of the limits) so that links hit the floor and each other.
    us = np.clip(rng.normal(0, 0.2, (ocp.horizon, ocp.nu)) * ocp.u_upper, ocp.u_lower, ocp.u_upper)
    xs = ocp.rollout(us)
    return request.param[0], ocp, xs, us


def test_scene_matches_its_statement():
    cat = problems.load("catapult")
    sim = cat.dynamics
    assert (sim.nq, sim.nv, sim.nu) == (5, 5, 3) and sim.dt == 1e-3 and cat.horizon == 500
    assert np.allclose(cat.x0[:5], [0, 0.1, np.pi / 4, 0, np.pi / 4])
    assert np.allclose(sim.u_upper, 1000.0)
    assert np.allclose(sim.model.gravity.linear, [0, -9.81, 0])
    assert np.allclose(sim.model.lowerPositionLimit[2:], 0) and np.allclose(sim.model.upperPositionLimit[2:], np.pi)
    worm = problems.load("jump-worm")
    assert worm.horizon == 400 and np.allclose(worm.dynamics.u_upper, 100.0)
    assert np.allclose(worm.x0[2:5], np.deg2rad([90, 90, 45]))


def test_rollouts_stay_out_of_the_floor(planar):
    name, ocp, xs, us = planar
    assert np.all(np.isfinite(xs))
    floor_top = -0.575
    assert xs[:, 1].min() > floor_top + 0.05 - 2e-3  # the 0.1 m box never sinks into the floor
    st = ocp.dynamics.warm_start_stats
    assert st["contact_steps"] > 0


def test_jacobians_along_rollout_match_central_differences(planar):
    """Every 10th state: analytical vs central FD, except at states within the FD step
    of a mode switch, recognised by two FD step sizes disagreeing with each other."""
    name, ocp, xs, us = planar
    sim = ocp.dynamics
    checked = skipped = in_contact = 0
    for t in range(0, ocp.horizon, 10):
        x, u = xs[t], us[t]
        _, Fx, Fu = sim.step_derivatives(x, u)
        touching = len(sim.contacts) > 0 or sim.contacts.limit_impulses.size > 0
        a = step_jacobians_fd(sim, x, u, h=6e-6)
        b = step_jacobians_fd(sim, x, u, h=1e-6)
        scale = max(1.0, np.abs(Fx).max(), np.abs(Fu).max())
        if max(max_relative_error(a.Fx, b.Fx), max_relative_error(a.Fu, b.Fu)) > 1e-5:
            skipped += 1
            continue
        err = max(max_relative_error(Fx, b.Fx), max_relative_error(Fu, b.Fu))
        assert err < max(1e-6, 10 * fd_tolerance(1e-6) * scale), (name, t, err)
        checked += 1
        in_contact += touching
    assert skipped <= 0.1 * (checked + skipped), (checked, skipped)
    assert in_contact >= 5  # the check covers states in contact, not only free flight


def test_problem_losses(planar):
    name, ocp, xs, us = planar
    figures = ocp.evaluate(xs, us)
    if name == "catapult":
        d = np.linalg.norm(xs[-1, :2] - [2.2, 2.2])
        assert figures["distance_to_target"] == pytest.approx(d)
        assert ocp.terminal_cost.value(xs[-1]) == pytest.approx(d * d)
        g = ocp.terminal_cost.derivatives(xs[-1]).Lx
        assert np.allclose(g[:2], 2 * (xs[-1, :2] - [2.2, 2.2])) and not g[2:].any()
    else:
        assert figures["final_root_height"] == pytest.approx(xs[-1, 1])
        assert ocp.terminal_cost.value(xs[-1]) == pytest.approx(-xs[-1, 1])


def test_half_cheetah_lands_on_its_feet_with_exact_jacobians():
    from problems.cheetah import _capsule_mass

    ocp = problems.load("half-cheetah", horizon=400)
    sim = ocp.dynamics
    assert (sim.nq, sim.nv, sim.nu) == (9, 9, 6)
    assert np.allclose(sim.u_upper, [120, 90, 60, 120, 60, 30])
    total = sum(_capsule_mass(h) for h in (0.5, 0.15, 0.145, 0.15, 0.094, 0.133, 0.106, 0.07))
    assert sum(I.mass for I in sim.model.inertias) == pytest.approx(total)
    xs = ocp.rollout(ocp.us_init)
    assert np.all(np.isfinite(xs))
    height = ocp.evaluate(xs, ocp.us_init)["final_torso_height"]
    assert 0.2 < height < 0.6  # standing on its legs, not through the ground
    for t in (150, 300):
        _, Fx, Fu = sim.step_derivatives(xs[t], ocp.us_init[t])
        assert len(sim.contacts) >= 1
        fd = step_jacobians_fd(sim, xs[t], ocp.us_init[t], h=1e-6)
        assert max(max_relative_error(Fx, fd.Fx), max_relative_error(Fu, fd.Fu)) < 1e-6


def _regime_state(name, regime):
    """A hand-built state of catapult / jump-worm in a given contact regime.

    Floor top is at y = -0.575, so the 0.1 m box rests at y = -0.525. The catapult
    arm stays at its start angles (away from the box); the worm's tail points up.
    """
    ocp = problems.load(name)
    x = ocp.x0.copy()
    nq = ocp.dynamics.nq
    if name == "jump-worm":
        x[2:5] = (0.3, 0.4, 0.5)
    x[:2] = (1.0 if name == "catapult" else 0.0, -0.525)
    if regime == "free":
        x[1] = 0.5
        x[nq:nq + 2] = (1.0, 0.5)
    elif regime == "sliding":
        x[nq:nq + 2] = (1.0, 0.0)
    elif regime == "separating":
        x[1] = -0.524
        x[nq:nq + 2] = (0.3, 2.0)
    elif regime == "joint limit":
        x[1] = 0.5  # box away from everything
        x[3] = 0.0  # second link at its lower limit, moving into it
        x[nq + 3] = -1.0
    return ocp, x


@pytest.mark.parametrize("name", ["catapult", "jump-worm"])
@pytest.mark.parametrize("regime", ["free", "resting", "sliding", "separating", "joint limit"])
def test_jacobians_in_each_contact_regime(name, regime):
    ocp, x = _regime_state(name, regime)
    sim = ocp.dynamics
    u = np.zeros(sim.nu)
    _, Fx, Fu = sim.step_derivatives(x, u)
    rep, state = sim.contacts, sim._data.contact
    box = rep.body_a == 1  # contacts of the box (joint 1) with the floor
    if regime == "free":
        assert not box.any()
    elif regime == "resting":  # sticking: friction strictly inside the cone (the worm's tail loads it)
        lam = rep.impulses[box]
        assert box.any() and np.all(lam[:, 0] > 0) and np.all(np.abs(lam[:, 1]) < 0.99 * sim.friction * lam[:, 0])
    elif regime == "sliding":
        lam = rep.impulses[box]
        assert np.all(lam[:, 0] > 0)
        assert np.allclose(np.abs(lam[:, 1]), sim.friction * lam[:, 0])  # on the friction bound
        n = rep.normals[box]
        friction_x = lam[:, 1] * -n[:, 1]  # tangent t = z x n = (-n_y, n_x, 0)
        assert np.all(friction_x < 0)  # opposing the motion along +x
    elif regime == "separating":
        assert box.any() and np.all(rep.impulses[box] == 0)
    else:
        assert rep.limit_impulses.size >= 1 and rep.limit_impulses.max() > 0
    ref = step_jacobians_fd(sim, x, u)
    err = max(max_relative_error(Fx, ref.Fx), max_relative_error(Fu, ref.Fu))
    assert err < 1e-6, err
    assert state is None or regime != "free" or not box.any()



def test_planar_lcp_and_ncp_give_the_same_motion():
    """In the plane the Coulomb cone is the LCP's friction box."""
    a, b = problems.load("jump-worm", contact="lcp"), problems.load("jump-worm", contact="ncp")
    rng = np.random.default_rng(1)
    us = np.clip(rng.normal(0, 0.1, (a.horizon, a.nu)) * a.u_upper, a.u_lower, a.u_upper)
    assert np.allclose(a.rollout(us), b.rollout(us), atol=1e-7)
