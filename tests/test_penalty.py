"""Compliant contact (contact.penalty): exact Jacobians against central differences, C^1 through onset,
and closed forms of its force law (resting depth, sliding deceleration, damped-spring restitution, no
energy gain without damping).

Closed forms (module docstring of :mod:`contact.penalty`): a contact carrying ``F`` at rest sits at
``delta(phi) = F / k``; a 1 kg ball hitting the ground at ``V`` without gravity is a linear damped spring
(Kelvin-Voigt; the smoothing band ``|phi| < w`` is 1 mm of the ~40 mm compression at 2 m/s) and leaves
with ``e V``, ``e = exp(-pi zeta / sqrt(1 - zeta^2))``, ``zeta = d / (2 sqrt(k m))``; a body sliding well
above ``v_s`` decelerates at ``mu g``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import problems
from contact.penalty import STIFFNESS, WIDTH, penalty_residual, resting_distance, spring
from dynamics import ModelBuilder, Simulator
from trajopt import max_relative_error, step_jacobians_fd

from .test_contact import cube_sim, cube_state

G, R, W = 9.81, 0.1, WIDTH
SIDE = 0.2  # cube_sim's cube: 1 kg, side 0.2 m, centre at z = 0.1 + phi when flat


def ball(*, gravity=True, friction=0.0, **options):
    """A 1 kg ball of radius R on a vertical prismatic joint over the ground z = 0 (penalty contact)."""
    b = ModelBuilder("ball")
    j = b.add_joint("prismatic", name="ball", axis="z")
    b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    if not gravity:
        model.gravity = pin.Motion.Zero()
    return Simulator(model, geometry=geom, dt=1e-3, ground=0.0, friction=friction, contact="penalty", **options)


@pytest.fixture(scope="module")
def cube():
    return cube_sim(mu=0.5, contact="penalty")


STATES = {  # the cube's lowest point at phi (flat unless rotated); W = 1 mm, the force starts at phi = W
    "free-near": cube_state(z=0.1 + 3e-3, v=(0.2, 0.0, -0.3)),  # detected (margin 5 mm), no force yet
    "inside-width": cube_state(z=0.1 + 0.5e-3, v=(0.1, 0.05, -0.2), w=(0.1, 0.2, 0.3)),
    "deeper-tilted": cube_state(z=0.1 - 3e-3, v=(0.0, 0.0, 0.1), rot=(0.003, 0.001, 0.0)),  # 4 corners, 4 depths
    "sliding": cube_state(z=0.1 - 1.5e-3, v=(1.0, 0.3, 0.0), w=(0.0, 0.0, 0.5), rot=(0.0, 0.0, 0.2)),
    "sticking": cube_state(z=0.1 - 0.7e-3, v=(2e-4, -1e-4, 0.0)),  # slip well below v_s = 1 mm/s
    "corner": cube_state(z=0.1, v=(0.3, 0.0, -0.1), rot=(0.1, 0.05, 0.0)),
}


@pytest.mark.parametrize("name", sorted(STATES))
def test_jacobians_match_central_differences(cube, name):
    """Fx against central differences (h = 1e-7): within 1e-7 of max(1, |Fx|) (1e-9 to 5e-9 measured; the
    free flyer's tangent-space Jacobians, all contacts through the implicit solve)."""
    x = STATES[name]
    _, Fx, _ = cube.step_derivatives(x, np.zeros(0))
    assert len(cube.contacts) >= 1
    fd = step_jacobians_fd(cube, x, np.zeros(0), h=1e-7)
    assert max_relative_error(Fx, fd.Fx) < 1e-7


def test_jacobians_at_onset_and_continuity_across_it(cube):
    """Exactly at onset (every corner at phi = W, approaching at 0.5 m/s) the force's second derivative
    jumps, so central differences are O(h) off (measured 3.9e-3 h/1e-7): h = 1e-9 agrees within 1e-4.
    Across onset the Jacobian is continuous: |Fx(W - eps) - Fx(W + eps)| shrinks like eps (2.4e5 eps
    measured), where a force with a kink at onset (C^0) would leave a jump that does not shrink."""
    x = cube_state(z=0.1 + W, v=(0.1, 0.0, -0.5))
    _, Fx, _ = cube.step_derivatives(x, np.zeros(0))
    fd = step_jacobians_fd(cube, x, np.zeros(0), h=1e-9)
    assert max_relative_error(Fx, fd.Fx) < 1e-4
    jumps = []
    for eps in (1e-5, 1e-6, 1e-7):
        below = cube.step_derivatives(cube_state(z=0.1 + W - eps, v=(0.1, 0.0, -0.5)), np.zeros(0))[1]
        above = cube.step_derivatives(cube_state(z=0.1 + W + eps, v=(0.1, 0.0, -0.5)), np.zeros(0))[1]
        jumps.append(np.abs(below - above).max())
    assert jumps[0] > 0.1  # the contact does act inside: a Jacobian that changes
    assert jumps[1] < 0.15 * jumps[0] and jumps[2] < 0.15 * jumps[1]


def test_planar_arm_with_joint_limits_jacobians():
    """The catapult (planar, a box on a 2-D joint, an arm with joint-limit rows) with zero torques after
    0.4 s: the box fallen onto the arm (3 contacts, 2 limit rows): Fx and Fu against central differences."""
    ocp = problems.load("catapult", contact="penalty")
    sim = ocp.dynamics
    assert sim.contact == "penalty" and sim.contact_model.fused is None
    xs = sim.rollout(ocp.x0, np.zeros((400, sim.nu)))
    x, u = xs[-1], np.array([20.0, -10.0, 5.0])
    sim.step(x, u)
    assert len(sim.contacts) and len(sim.contacts.limit_impulses)
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u, h=1e-7)
    assert max_relative_error(Fx, fd.Fx) < 1e-6 and max_relative_error(Fu, fd.Fu) < 1e-6


def test_residual_vanishes_at_the_solution(cube):
    data = cube.create_data()
    cube.step(STATES["sliding"], np.zeros(0), data=data)
    st = data.contact
    F = penalty_residual(st.problem, st.lam)
    assert np.abs(F).max() <= 1e-12 * np.abs(st.lam).max()
    assert np.abs(penalty_residual(st.problem, 1.01 * st.lam)).max() > 1e-3 * np.abs(st.lam).max()


def test_resting_cube_settles_at_the_closed_form_depth(cube):
    """Flat on its 4 corners, each carrying m g / 4: delta(phi) = m g / (4 k) (0.98 mm for the defaults);
    released at phi = 0, still (|v| < 1e-9) within 1e-9 m of it after 1 s."""
    xs = cube.rollout(cube_state(z=0.1), np.zeros((1000, 0)))
    phi = resting_distance(G / 4)
    assert phi == pytest.approx(-G / (4 * STIFFNESS), rel=1e-3)  # just inside the band: ~m g / (4 k)
    assert spring(phi, W)[0] * STIFFNESS == pytest.approx(G / 4, rel=1e-12)
    assert abs(xs[-1, 2] - (0.1 + phi)) < 1e-9
    assert np.abs(xs[-100:, 7:]).max() < 1e-9
    assert np.abs(cube.contacts.impulses[:, 0] - G / 4 * cube.dt).max() < 1e-12


def test_sliding_cube_decelerates_at_mu_g(cube):
    """From 2 m/s (2000 v_s) at its resting depth: the mean deceleration over 0.05-0.25 s is mu g within 1%
    (0.2% measured: 4.915 m/s^2 for 4.905)."""
    xs = cube.rollout(cube_state(z=0.1 + resting_distance(G / 4), v=(2.0, 0.0, 0.0)), np.zeros((300, 0)))
    decel = (xs[50, 7] - xs[250, 7]) / 0.2
    assert decel == pytest.approx(0.5 * G, rel=0.01)


@pytest.mark.parametrize("damping", [5.0, 20.0, 50.0])
def test_bounce_restitution_is_the_damped_spring_closed_form(damping):
    """No gravity, 2 m/s into the ground: e = exp(-pi zeta / sqrt(1 - zeta^2)), zeta = d / (2 sqrt(k m))
    (0.854, 0.527, 0.163), within 0.01 (0.0003, 0.002, 0.005 measured: the time step and the 1 mm band)."""
    sim = ball(gravity=False, contact_damping=damping)
    xs = sim.rollout(np.array([R + 0.01, -2.0]), np.zeros((300, sim.nu)))
    assert xs[-1, 0] > R + W  # left the ground
    zeta = damping / (2.0 * np.sqrt(STIFFNESS * 1.0))
    e = np.exp(-np.pi * zeta / np.sqrt(1.0 - zeta * zeta))
    assert xs[-1, 1] / 2.0 == pytest.approx(e, abs=0.01)


def test_undamped_bounces_gain_no_energy():
    """d = 0, dropped from 0.5 m: every apex of 8 bounces within [h - 1 mm, h + g dt^2] (the symplectic
    spring returns what it stores; measured 0.49980-0.49999 m)."""
    h = 0.5
    xs = ball(contact_damping=0.0).rollout(np.array([R + h, 0.0]), np.zeros((6000, 1)))
    z, v = xs[:, 0] - R, xs[:, 1]
    apexes = np.flatnonzero((v[:-1] > 0) & (v[1:] <= 0)) + 1
    assert len(apexes) >= 8
    assert z[apexes].max() <= h + G * 1e-6
    assert z[apexes].min() >= h - 1e-3


def test_options_reach_the_model_and_problems_pass_contact_through():
    sim = ball(contact_stiffness=1e4, contact_damping=3.0, contact_width=2e-3, contact_slip_velocity=0.01)
    p = sim.contact_model.adapter.params
    assert (p.stiffness, p.damping, p.width, p.slip_velocity) == (1e4, 3.0, 2e-3, 0.01)
    assert sim.contact_model.scene.margin >= 2e-3
    assert sim.with_parameters(["friction"], [0.3]).contact_model.adapter.params == p  # rebuilt with its options
    for name in ("catapult", "jump-worm"):
        dyn = problems.load(name, contact="penalty").dynamics
        assert dyn.contact == "penalty" and dyn.contact_model.fused is None
    hard = cube_sim(contact="lcp")
    assert hard.contact_model.compliant is False


@pytest.mark.parametrize("option, bad, match", [
    ("contact_stiffness", 0.0, "contact_stiffness must be a finite number > 0"),
    ("contact_stiffness", -5.0, "contact_stiffness must be a finite number > 0"),
    ("contact_stiffness", float("nan"), "contact_stiffness must be a finite number > 0"),
    ("contact_width", 0.0, "contact_width must be a finite number > 0"),
    ("contact_width", float("inf"), "contact_width must be a finite number > 0"),
    ("contact_damping", -1.0, "contact_damping must be a finite number >= 0"),
    ("contact_damping", float("nan"), "contact_damping must be a finite number >= 0"),
    ("contact_slip_velocity", 0.0, "contact_slip_velocity must be a finite number > 0"),
    ("contact_stiffness", "1e3", "contact_stiffness must be a number"),
])
def test_bad_parameters_are_refused_at_construction(option, bad, match):
    with pytest.raises(ValueError, match=match):
        ball(**{option: bad})


def test_options_of_another_model_and_restitution_are_refused():
    b = ModelBuilder("ball")
    j = b.add_joint("prismatic", name="ball", axis="z")
    b.add_body(j, mass=1.0, sphere=R)
    model, geom = b.build()
    with pytest.raises(ValueError, match=r"contact_stiffness apply to contact='penalty' only"):
        Simulator(model, geometry=geom, ground=0.0, contact="lcp", contact_stiffness=1e3)
    with pytest.raises(ValueError, match="bounces by its spring and damping"):
        Simulator(model, geometry=geom, ground=0.0, contact="penalty", restitution=0.5)
    with pytest.raises(ValueError, match="smooth already"):
        ball().with_smoothing(1e-3)
