"""3-D scenes of problems/legged.py (Go1 standing, Talos standing) and problems/manipulators.py (UR5 pressing
on a box).

Each bench state is in contact with the expected contacts and impulses, stays put
for 0.5 s under its own torques, and has step Jacobians that match central
finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest

import problems
import problems.legged as legged  # registers go1-hold, talos-standing
import problems.manipulators as manipulators  # registers ur5-box
from problems._scene import lowest_point
from trajopt import max_relative_error, step_jacobians_fd

NAMES = ["go1-hold", "ur5-box", "talos-standing"]


@pytest.fixture(scope="module", params=NAMES)
def scene(request):
    ocp = problems.load(request.param)
    x, u = ocp.info["bench_state"]
    return request.param, ocp, np.asarray(x, float), np.asarray(u, float)


def _contacts_at(sim, x, u):
    """Step once at (x, u); the contacts of that step (sim.contacts)."""
    sim.step(x, u)
    return sim.contacts


def test_registered_and_shaped():
    for name in NAMES:
        assert name in problems.names()
    sizes = {"go1-hold": (19, 18, 12, 200), "ur5-box": (13, 12, 6, 300), "talos-standing": (39, 38, 32, 200)}
    for name, (nq, nv, nu, T) in sizes.items():
        ocp = problems.load(name, horizon=5)
        sim = ocp.dynamics
        assert (sim.nq, sim.nv, sim.nu) == (nq, nv, nu)
        assert sim.dt == 1e-3 and sim.contact == "lcp"
        assert np.allclose(sim.model.gravity.linear, [0, 0, -9.81])
        x, u = ocp.info["bench_state"]
        assert x.shape == (nq + nv,) and ocp.x0.shape == (nq + nv,)
        assert u.shape == (nu,) and np.all(np.isfinite(u))
        assert np.all(u <= sim.u_upper) and np.all(u >= sim.u_lower)
        assert np.isfinite(ocp.cost(ocp.rollout(ocp.us_init), ocp.us_init))
        assert problems.load(name).horizon == T


def test_contact_keyword_is_passed_on():
    assert legged.go1_standing_simulator(contact="lcp").contact == "lcp"
    for factory in (legged.go1_standing_simulator, manipulators.ur5_box_simulator, legged.talos_standing_simulator):
        with pytest.raises(ValueError, match="unknown contact model"):
            factory(contact="no-such-model")


def test_go1_scene_as_stated():
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    assert sum(I.mass for I in sim.model.inertias) == pytest.approx(13.100529)
    assert np.allclose(sim.u_upper, [23.7, 23.7, 35.55] * 4)
    x, u = ocp.info["bench_state"]
    for leg in legged.GO1_LEGS:
        for part, angle in legged.GO1_STANDING.items():
            jm = sim.model.joints[sim.model.getJointId(f"{leg}_{part}_joint")]
            assert x[jm.idx_q] == angle
    feet = [sim.geometry.geometryObjects[sim.geometry.getGeometryId(f"{leg}_foot_0")] for leg in legged.GO1_LEGS]
    assert all(f.geometry.radius == legged.GO1_FOOT_RADIUS for f in feet)
    assert x[2] == pytest.approx(0.27383, abs=1e-5)
    assert lowest_point(sim, x[: sim.nq], axis=2, names=[f.name for f in feet]) == pytest.approx(0.0, abs=1e-12)


def test_bench_state_contacts(scene):
    name, ocp, x, u = scene
    sim = ocp.dynamics
    rep = _contacts_at(sim, x, u)
    lam = rep.impulses
    assert np.all(np.abs(rep.phi) < 1e-9)  # touching: no gap, no penetration
    assert np.all(np.linalg.norm(lam[:, 1:], axis=1) <= sim.friction * lam[:, 0] + 1e-12)  # inside the pyramid
    dt_weight = sum(I.mass for I in sim.model.inertias[1:]) * 9.81 * sim.dt
    if name == "go1-hold":
        feet = {sim.model.getJointId(f"{leg}_calf_joint") for leg in legged.GO1_LEGS}
        assert len(rep) == 4 and set(rep.body_a) == feet and np.all(rep.body_b == 0)
        assert np.all(lam[:, 0] > 0.1 * dt_weight / 4)
        assert lam[:, 0].sum() == pytest.approx(dt_weight, rel=1e-9)  # the ground carries the robot
    elif name == "talos-standing":
        soles = {sim.model.getJointId(f"leg_{s}_6_joint") for s in ("left", "right")}
        assert len(rep) >= 8 and set(rep.body_a) == soles and np.all(rep.body_b == 0)
        for j in soles:
            assert np.sum(rep.body_a == j) == 4
        assert np.all(lam[:, 0] > 0.1 * dt_weight / 8)
        assert lam[:, 0].sum() == pytest.approx(dt_weight, rel=1e-9)
        assert rep.limit_impulses.size == 0  # no joint sits on a limit
    else:
        box = sim.model.getJointId("box")
        tip = sim.model.getJointId("wrist_3_joint")
        ground = (rep.body_a == box) & (rep.body_b == 0)
        touch = (rep.body_a == tip) & (rep.body_b == box) | (rep.body_a == box) & (rep.body_b == tip)
        assert ground.sum() == 4 and touch.sum() == 1 and len(rep) == 5
        corners = rep.points[ground]
        assert np.allclose(np.sort(np.abs(corners[:, :2] - manipulators.BOX_CENTER[:2]), axis=0), 0.15)
        assert np.all(lam[ground, 0] > 0)
        assert lam[touch, 0][0] == pytest.approx(manipulators.PRESS_FORCE * sim.dt, rel=1e-6)
        assert lam[ground, 0].sum() == pytest.approx((manipulators.BOX_MASS * 9.81 + manipulators.PRESS_FORCE) * sim.dt, rel=1e-6)
        assert rep.points[touch][0][2] == pytest.approx(manipulators.BOX_SIZE[2], abs=1e-9)  # on the top face


def test_half_second_under_bench_torques_stays_put(scene):
    """500 steps (0.5 s) from the bench state with its torques: no NaN, no penetration deeper
    than 1 mm, base (or box) height within 1 cm, contacts kept."""
    name, ocp, x, u = scene
    sim = ocp.dynamics
    data = sim.create_data()
    xs = [x]
    deepest = np.inf
    for _ in range(500):
        xs.append(sim.step(xs[-1], u, data=data))
        st = data.contact
        assert st is not None and st.geo is not None
        deepest = min(deepest, st.geo.contacts.phi.min())
        lam = st.lam
        assert np.all(np.isfinite(lam))
    xs = np.array(xs)
    assert np.all(np.isfinite(xs))
    assert deepest > -1e-3
    assert np.abs(xs[:, 2] - x[2]).max() < 1e-2
    rep = sim.contact_model.report(data.contact)
    assert len(rep) == {"go1-hold": 4, "ur5-box": 5, "talos-standing": 8}[name]
    assert np.all(rep.impulses[:, 0] > 0)
    if name == "ur5-box":
        assert np.abs(xs[:, :3] - x[:3]).max() < 1e-3  # the box does not move
    assert np.abs(xs[:, sim.nq:]).max() < 1e-6  # held at rest by the static torques


def test_step_jacobians_match_central_differences(scene):
    name, ocp, x, u = scene
    sim = ocp.dynamics
    _, Fx, Fu = sim.step_derivatives(x, u)
    assert len(sim.contacts) >= 4
    fd = step_jacobians_fd(sim, x, u)  # default step, ~6e-6
    err = max(max_relative_error(Fx, fd.Fx), max_relative_error(Fu, fd.Fu))
    if name == "ur5-box":
        # The box's 4 coplanar corners are redundant contacts: once the box tilts by
        # one finite-difference step the LCP picks a vertex solution (a corner
        # unloaded), which bends the step at second order. Central differences then
        # carry an O(h) bias (1.4e-6 at the default step; a lone box on the ground
        # shows 9e-7) that vanishes with h, so the analytical Jacobian is the limit.
        assert err < 3e-6, err
        fine = step_jacobians_fd(sim, x, u, h=1e-6)
        err_fine = max(max_relative_error(Fx, fine.Fx), max_relative_error(Fu, fine.Fu))
        assert err_fine < 1e-6 and err_fine < 0.3 * err, (err, err_fine)
    else:
        assert err < 1e-6, err


def test_ur5_push_problem_start():
    ocp = problems.load("ur5-box")
    sim = ocp.dynamics
    x0 = ocp.x0
    rep = _contacts_at(sim, x0, ocp.us_init[0])
    tip = sim.model.getJointId("wrist_3_joint")
    gap = rep.phi[(rep.body_a == tip) | (rep.body_b == tip)]
    assert gap.size == 1 and gap[0] == pytest.approx(manipulators.START_GAP, abs=1e-9)
    assert ocp.info["target_box_x"] == pytest.approx(x0[0] + manipulators.PUSH_DISTANCE)
    # the terminal cost's derivatives match finite differences in the tangent space
    x = x0.copy()
    x[0] += 0.03
    x[3:7] = [0.1, -0.2, 0.05, 1.0]
    x[3:7] /= np.linalg.norm(x[3:7])
    d = ocp.terminal_cost.derivatives(x)
    assert d.L == pytest.approx(ocp.terminal_cost.value(x))
    h = 1e-6
    g = np.array([(ocp.terminal_cost.value(sim.state_integrate(x, h * e))
                   - ocp.terminal_cost.value(sim.state_integrate(x, -h * e))) / (2 * h) for e in np.eye(sim.ndx)])
    assert np.allclose(d.Lx, g, atol=1e-5)
    xs = ocp.rollout(ocp.us_init)
    assert np.all(np.isfinite(xs)) and np.abs(xs[:, :3] - x0[:3]).max() < 1e-6  # gravity compensation: nothing moves
    assert np.abs(xs[:, sim.nq:]).max() < 1e-6
