"""Relaxed hard contact (contact.relaxed): closed forms, the hard limit, exact Jacobians against FD."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from contact.relaxed import auto_schedule, fade, relaxed_residual
from dynamics import ModelBuilder, Simulator
from trajopt import max_relative_error, step_jacobians_fd

from .test_contact import cube_sim, cube_state, sphere_sim

G = 9.81


def ball_state(z, v=(0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0)):
    return np.r_[0.0, 0.0, z, 0, 0, 0, 1.0, v, w]


@pytest.mark.parametrize("kappa", [1e-1, 1e-2, 1e-3])
@pytest.mark.parametrize("gap", [0.0, 0.004, 0.02])
def test_ball_above_ground_gets_the_closed_form_force(kappa, gap):
    """A 1 kg ball at rest a gap ``phi`` above the ground: ``lambda (c_free + lambda / m) = kappa w(phi)``
    with ``c_free = phi / dt - g dt``, one quadratic with one positive root."""
    d = 0.05
    sim = sphere_sim(mu=0.5).with_smoothing(kappa, distance=d)
    x_next = sim.step(ball_state(0.1 + gap), np.zeros(0))
    dt = sim.dt
    w = fade(np.array([gap]), d)[0][0]
    bq = gap / dt - G * dt
    lam = (-bq + np.sqrt(bq * bq + 4.0 * kappa * w)) / 2.0
    assert x_next[9] == pytest.approx(-G * dt + lam, rel=1e-10, abs=1e-14)
    assert sim.contacts.impulses[0, 0] == pytest.approx(lam, rel=1e-9)


def test_force_fades_to_zero_at_the_smoothing_distance():
    sim = sphere_sim().with_smoothing(1e-2, distance=0.05)
    free = -G * sim.dt
    assert sim.step(ball_state(0.1 + 0.0501), np.zeros(0))[9] == pytest.approx(free, abs=1e-15)
    near = sim.step(ball_state(0.1 + 0.0499), np.zeros(0))[9] - free
    assert 0.0 < near < 1e-8  # kappa w / c_n with w ~ (1 - (phi/d)^2)^2 = 1.6e-5 at the edge


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_kappa_to_zero_converges_to_hard_contact(contact):
    """The relaxed step's error against the hard step shrinks in proportion to kappa (LCP: a flat cube
    sliding and turning on four corners; NCP: a ball sliding, whose single contact is determinate)."""
    if contact == "lcp":
        x, make = cube_state(z=0.1, v=(1.0, 0.3, -0.2), w=(0.1, 0.2, 0.3), rot=(0.0, 0.0, 0.2)), cube_sim
    else:
        x, make = ball_state(0.1, v=(1.0, 0.3, -0.2), w=(0.3, -0.2, 0.1)), sphere_sim
    hard = make(mu=0.5, contact=contact)
    x_hard = hard.step(x, np.zeros(0))
    errors = [np.abs(hard.with_smoothing(k).step(x, np.zeros(0)) - x_hard).max() for k in (1e-3, 1e-5, 1e-7)]
    assert errors[2] < 1e-4 and errors[2] < 1e-3 * errors[0]
    assert errors[1] < errors[0] and errors[2] < errors[1]


def _states():
    return {
        "resting": cube_state(z=0.1),
        "approaching": cube_state(z=0.13, v=(0.2, 0.0, -0.5)),
        "sliding": cube_state(z=0.1, v=(1.0, 0.3, 0.0), rot=(0.05, 0.0, 0.2)),
        "tilted-penetrating": cube_state(z=0.099, rot=(0.1, 0.05, 0.0)),
        "free-flight": cube_state(z=0.3, v=(0.1, 0.0, 0.2)),
    }


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
@pytest.mark.parametrize("kappa", [1e-1, 1e-2, 1e-3])
@pytest.mark.parametrize("name", sorted(_states()))
def test_relaxed_cube_jacobians_match_finite_differences(contact, kappa, name):
    sim = cube_sim(mu=0.5, contact=contact).with_smoothing(kappa)
    x = _states()[name]
    _, Fx, _ = sim.step_derivatives(x, np.zeros(0))
    fd = step_jacobians_fd(sim, x, np.zeros(0), h=1e-7)
    assert max_relative_error(Fx, fd.Fx) < 1e-5


def _arm_on_box():
    """A planar 2-link arm (torques) and a box on the floor: pushing, sticking, joint limits."""
    b = ModelBuilder("arm-box", gravity=(0.0, -9.81, 0.0))
    p = b.add_joint("translation2d", name="box")
    b.add_body(p, mass=1.0, box=(0.1, 0.1, 0.1))
    j1 = b.add_joint("revolute", name="a1", axis="z", placement=(-0.3, 0.0, 0.0), lower=-1.0, upper=1.2, effort=50.0)
    b.add_body(j1, mass=1.0, box=(0.05, 0.25, 0.05), offset=(0, 0.125, 0))
    j2 = b.add_joint("revolute", name="a2", parent=j1, axis="z", placement=(0, 0.25, 0), lower=-2.5, upper=0.0,
                     effort=50.0)
    b.add_body(j2, mass=1.0, box=(0.05, 0.25, 0.05), offset=(0, 0.125, 0))
    b.add_static_box("floor", (3.0, 0.2, 0.5), (0.0, -0.15, 0.0))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=1e-3, actuated=["a1", "a2"], planar=True, friction=0.6)


@pytest.mark.parametrize("kappa", [1e-1, 1e-2])
def test_relaxed_planar_arm_jacobians_match_finite_differences(kappa):
    sim = _arm_on_box().with_smoothing(kappa)
    rng = np.random.default_rng(3)
    states = [np.r_[0.0, 0.0, 0.3, -1.0, np.zeros(4)],  # box resting on the floor, arm up
              np.r_[0.0, 0.0, 1.19, -0.5, 0.5, 0.0, 2.0, 0.0],  # near the first joint's upper limit
              np.r_[0.1, 0.0, 0.0, -2.4, -0.5, 0.0, 0.3, -1.0]]  # sliding box, second joint near its limit
    for x in states:
        u = rng.uniform(-5, 5, 2)
        _, Fx, Fu = sim.step_derivatives(x, u)
        fd = step_jacobians_fd(sim, x, u, h=1e-7)
        assert max_relative_error(Fx, fd.Fx) < 1e-5
        assert max_relative_error(Fu, fd.Fu) < 1e-5


def test_residual_vanishes_and_the_hard_model_is_untouched():
    hard = cube_sim(mu=0.5)
    x = cube_state(z=0.1, v=(0.5, 0.0, -0.1))
    relaxed = hard.with_smoothing(1e-2)
    assert relaxed.with_smoothing(0.0).step(x, np.zeros(0)) == pytest.approx(hard.step(x, np.zeros(0)), abs=0)
    assert hard.hard is hard and relaxed.hard.smoothing == 0.0
    relaxed.step(x, np.zeros(0))
    state = relaxed._data.contact
    assert np.abs(relaxed_residual(state.problem, state.lam)).max() < 1e-10
    assert np.all(state.lam[::3] > 0)  # every detected contact pushes


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_bad_kappa_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="smoothing"):
        cube_sim().with_smoothing(bad)


def test_relaxed_contact_needs_kappa():
    b = ModelBuilder("cube")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    with pytest.raises(ValueError, match="smoothing > 0"):
        Simulator(model, geometry=geom, ground=0.0, contact="relaxed")
    sim = Simulator(model, geometry=geom, ground=0.0, contact="relaxed", smoothing=1e-3)
    assert sim.with_smoothing(0.0).contact == "ncp"
    with pytest.raises(ValueError, match="weight"):
        auto_schedule(-1.0)
    assert auto_schedule(10.0)[-1] == 0.0 and auto_schedule(10.0)[0] == pytest.approx(0.3)
    assert pin.neutral(model).shape == (7,)


def test_a_step_with_no_central_path_falls_back_to_hard_contact_with_its_jacobians():
    """A catapult state met in an optimization: arm 1 pushed 1 cm past its lower limit, arm 3 at
    its limit, a link on the floor; the relaxed solve finds no central point (A is rank-deficient).
    With the velocity push-out of its deep rows (recovery="velocity": the catapult's recovery when the
    state was met); the default position recovery's bias gives this state a central path."""
    import problems

    x = np.array([1.4905285775911505, 1.7541138383362862, -9.9052865831979094e-03, 2.3772979723070091,
                  9.1085383069872999e-06, 4.2429225614966031, 2.9958622512956117, 2.5897775546216995,
                  6.9242602856797149, -8.4964329773598024e-03])
    u = np.array([-112.0782998271623, 210.0464694723037, -80.29334253027527])
    base = problems.load("catapult").dynamics  # met with the catapult's former velocity push-out: kept for it
    sim = Simulator(base.model, geometry=base.geometry, **dict(base._options, recovery="velocity")).with_smoothing(0.00981)
    with pytest.warns(RuntimeWarning, match="use hard contact"):
        x_next = sim.step(x, u)
    assert sim.contact_model.relaxed_fallbacks == 1
    assert np.all(np.isfinite(x_next))
    np.testing.assert_allclose(x_next, sim.hard.step(x, u), rtol=0, atol=1e-12)
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u, h=1e-7)
    assert max_relative_error(Fx, fd.Fx) < 1e-5
    assert max_relative_error(Fu, fd.Fu) < 1e-5
