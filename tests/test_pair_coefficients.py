"""Friction and restitution per collision pair, and both as physical parameters (issues 14 and 15).

Closed forms: a box sliding at ``v0`` with friction ``mu`` travels ``x_T = v0 T dt - mu g dt^2 T (T + 1) / 2``
under semi-implicit Euler (``v0 T - mu g T^2 / 2`` in the limit), so two boxes side by side with their own
``mu`` travel their own distances, and ``d x_T / d mu = -g dt^2 T (T + 1) / 2`` for the box's own pair and 0
for the other's. A ball landing at ``V`` leaves at ``e V``: ``d v+ / d e = V`` at the impact step."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import ModelBuilder, Simulator
from trajopt.numdiff import parameter_jacobian_fd

G, DT, R = 9.81, 1e-3, 0.1


def two_bodies(*, shape="box", contact="lcp", friction=0.5, restitution=0.0, joint="free", **options):
    """Two 1 kg bodies (boxes of side 0.2 m or balls of radius R) 1 m apart along y, over the ground z = 0;
    returns the simulator and the names of their collision objects."""
    b = ModelBuilder("two")
    for i in range(2):
        j = b.add_joint(joint, name=f"body{i}", axis="z", placement=(0.0, float(i), 0.0))
        b.add_body(j, mass=1.0, **({"box": (0.2, 0.2, 0.2)} if shape == "box" else {"sphere": R}))
    model, geom = b.build()
    names = [o.name for o in geom.geometryObjects]
    sim = Simulator(model, geometry=geom, dt=DT, ground=0.0, friction=friction(names) if callable(friction)
                    else friction, restitution=restitution(names) if callable(restitution) else restitution,
                    contact=contact, **options)
    return sim, names


def sliding_state(sim, v0):
    """Both boxes resting flat on the ground, sliding along x at v0[0] and v0[1]."""
    x = np.zeros(sim.nx)
    for i in range(2):
        x[7 * i + 2], x[7 * i + 6] = 0.1, 1.0
        x[sim.nq + 6 * i] = v0[i]
    return x


MU = (0.2, 0.6)


def per_pair_friction(names):
    return {(names[0], "ground"): MU[0], ("ground", names[1]): MU[1], "default": 0.9}


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_boxes_side_by_side_travel_their_own_closed_form_distances(contact):
    sim, names = two_bodies(contact=contact, friction=per_pair_friction)
    assert sim.contact_model.fused is None and sim.friction == 0.9
    assert sorted(sim.contact_model.pair_friction.tolist()) == [0.2, 0.6, 0.9]
    T, v0 = 100, 1.0
    xs = sim.rollout(sliding_state(sim, (v0, v0)), np.zeros((T, sim.nu)))
    for i, mu in enumerate(MU):
        closed = v0 * T * DT - mu * G * DT ** 2 * T * (T + 1) / 2
        assert abs(xs[-1, 7 * i] - closed) < 1e-9, (i, xs[-1, 7 * i], closed)
    assert abs(xs[-1, 0] - xs[-1, 7]) > 0.01  # not the same distance
    # equal values per pair are the one-number step, bit for bit (on the Python path, which per-pair takes)
    same, _ = two_bodies(contact=contact, friction=lambda n: {(n[0], "ground"): 0.5, (n[1], "ground"): 0.5,
                                                              "default": 0.5})
    one, _ = two_bodies(contact=contact, friction=0.5)
    one.contact_model.fused = one._fused_step = None
    x0 = sliding_state(one, (v0, -v0))
    assert np.array_equal(same.rollout(x0, np.zeros((50, 0))), one.rollout(x0, np.zeros((50, 0))))


@pytest.mark.parametrize("contact, options", [("relaxed", {"smoothing": 1e-7}), ("penalty", {})])
def test_per_pair_friction_in_the_smooth_models(contact, options):
    """The relaxed and penalty models give each box its pair's friction too: each box moves as it does
    with one number equal to its pair's ``mu`` (to round-off), and the two boxes travel different distances.
    (The penalty box sinks into its spring first, so its distance is not the hard closed form: 2.7 mm more
    at mu 0.2, 8.3 mm more at 0.6, measured; the relaxed one is within 3 um of it.)"""
    sim, _ = two_bodies(contact=contact, friction=per_pair_friction, **options)
    T, v0 = 100, 1.0
    x0 = sliding_state(sim, (v0, v0))
    xs = sim.rollout(x0, np.zeros((T, sim.nu)))
    for i, mu in enumerate(MU):
        one = two_bodies(contact=contact, friction=mu, **options)[0].rollout(x0, np.zeros((T, 0)))
        assert np.abs(xs[:, 7 * i:7 * i + 7] - one[:, 7 * i:7 * i + 7]).max() < 1e-12
    assert xs[-1, 0] - xs[-1, 7] > 0.01
    if contact == "relaxed":
        for i, mu in enumerate(MU):
            assert abs(xs[-1, 7 * i] - (v0 * T * DT - mu * G * DT ** 2 * T * (T + 1) / 2)) < 1e-5


def trajectory_sensitivity(sim, x0, T, names):
    x, S = x0, np.zeros((sim.ndx, sim.parameter_size(names)))
    for _ in range(T):
        x, Fx, _, Fp = sim.step_derivatives(x, np.zeros(sim.nu), params=names)
        S = Fx @ S + Fp
    return x, S


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_friction_per_pair_parameters(contact):
    sim, names = two_bodies(contact=contact, friction=per_pair_friction)
    pa, pb = f"friction:{names[0]}|ground", f"friction:{names[1]}|ground"
    assert sim.parameter_names()[:3] == ["friction", pa, pb]
    np.testing.assert_array_equal(sim.get_parameters(["friction", pa, pb]), [0.9, *MU])
    # with_parameters changes only that pair (a new mapping; the original is unchanged)
    moved = sim.with_parameters(pb, [0.3])
    np.testing.assert_array_equal(moved.get_parameters(["friction", pa, pb]), [0.9, 0.2, 0.3])
    np.testing.assert_array_equal(sim.get_parameters(pb), [0.6])
    # d x_T / d mu_pair: closed form for the box's own pair, 0 for the other box and for the default
    T, v0 = 60, 1.0
    params = ["friction", pa, pb]
    xT, S = trajectory_sensitivity(sim, sliding_state(sim, (v0, v0)), T, params)
    d = -G * DT ** 2 * T * (T + 1) / 2
    np.testing.assert_allclose(S[[0, 6], :], [[0.0, d, 0.0], [0.0, 0.0, d]], rtol=1e-9, atol=1e-12)
    # one step, sliding and sticking, against central differences through with_parameters
    for x, sliding in ((sliding_state(sim, (v0, 0.5)), True), (sliding_state(sim, (1e-4, 0.0)), False)):
        _, _, _, Fp = sim.step_derivatives(x, np.zeros(0), params=params)
        fd = parameter_jacobian_fd(sim, x, np.zeros(0), params)
        assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
        assert (np.abs(Fp[:, 1:]).max() > 1e-3) == sliding  # sticking: friction is not on its bound


def bouncing_balls(contact, restitution, friction=0.3):
    return two_bodies(shape="ball", contact=contact, friction=friction, restitution=restitution)


def impact_state(sim, vz=(-3.0, -2.0), vx=(2.0, 0.5)):
    """Both balls 1 mm above the ground, falling at vz and sliding at vx."""
    x = np.zeros(sim.nx)
    for i in range(2):
        x[7 * i + 2], x[7 * i + 6] = R + 1e-3, 1.0
        x[sim.nq + 6 * i], x[sim.nq + 6 * i + 2] = vx[i], vz[i]
    return x


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_restitution_parameter(contact):
    """``"restitution"``: dv+/de = V at the impact step (exactly, on the normal), Fp against central
    differences through with_parameters at an impact step with friction, and 0 at a step without one."""
    sim, _ = bouncing_balls(contact, 0.7)
    names = ["friction", "restitution"]
    assert sim.parameter_names()[:2] == names and sim.get_parameters("restitution")[0] == 0.7
    x = impact_state(sim)
    xn, _, _, Fp = sim.step_derivatives(x, np.zeros(0), params=names)
    nv = sim.nv
    assert xn[sim.nq + 2] == pytest.approx(0.7 * 3.0, rel=1e-12)  # an impact step: v+ = e V
    assert Fp[nv + 2, 1] == pytest.approx(3.0, rel=1e-9) and Fp[nv + 8, 1] == pytest.approx(2.0, rel=1e-9)
    fd = parameter_jacobian_fd(sim, x, np.zeros(0), names)
    assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
    # no impact: resting and sliding on the ground (approach slower than the threshold), and in flight
    for z, vz in ((R, -0.05), (0.5, -3.0)):
        x = impact_state(sim, vz=(vz, vz))
        x[[2, 9]] = z
        _, _, _, Fp = sim.step_derivatives(x, np.zeros(0), params=names)
        fd = parameter_jacobian_fd(sim, x, np.zeros(0), names)
        assert np.abs(Fp[:, 1]).max() == 0.0 and np.abs(fd[:, 1]).max() < 1e-9
        assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
    # a simulator without restitution has no such parameter
    assert "restitution" not in bouncing_balls(contact, 0.0)[0].parameter_names()


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_restitution_per_pair_parameters(contact):
    """A per-pair mapping with a default: ``"restitution"`` moves the unlisted ball only, and
    ``"restitution:<pair>"`` the listed one; exact against central differences."""
    sim, names = bouncing_balls(contact, lambda n: {("ground", n[0]): 0.5, "default": 0.8})
    listed = f"restitution:{names[0]}|ground"
    params = [listed, "restitution", "friction"]
    assert set(params) <= set(sim.parameter_names())
    np.testing.assert_array_equal(sim.get_parameters(params), [0.5, 0.8, 0.3])
    x = impact_state(sim)
    xn, _, _, Fp = sim.step_derivatives(x, np.zeros(0), params=params)
    nv = sim.nv
    assert xn[sim.nq + 2] == pytest.approx(0.5 * 3.0) and xn[sim.nq + 8] == pytest.approx(0.8 * 2.0)
    assert Fp[nv + 2, 0] == pytest.approx(3.0, rel=1e-9) and Fp[nv + 8, 0] == 0.0
    assert Fp[nv + 8, 1] == pytest.approx(2.0, rel=1e-9) and Fp[nv + 2, 1] == 0.0
    fd = parameter_jacobian_fd(sim, x, np.zeros(0), params)
    assert np.abs(Fp - fd).max() <= 1e-6 * max(1.0, np.abs(fd).max())
    # without a default only the listed pairs are parameters
    only, _ = bouncing_balls(contact, lambda n: {(n[1], "ground"): 0.5})
    assert [n for n in only.parameter_names() if n.startswith("restitution")] == [f"restitution:{names[1]}|ground"]


@pytest.mark.parametrize("friction, match", [
    (lambda n: {(n[0], "floor"): 0.5, "default": 0.5}, r"friction pair .*no collision object named \['floor'\]"),
    (lambda n: {(n[0], "ground"): -0.1, "default": 0.5}, r"friction\[.*\] must be a number in \[0, 1e\+06\]"),
    (lambda n: {(n[0], "ground"): 1e9, "default": 0.5}, r"friction\[.*\] must be a number in \[0, 1e\+06\] \(larger"),
    (lambda n: {(n[0], "ground"): 0.5, "default": float("nan")}, r"friction\['default'\] must be"),
    (lambda n: {(n[0], "ground"): 0.5}, r"friction per pair: no value for the collision pairs .*'default'"),
    (lambda n: {(n[0], "ground"): 0.5, ("ground", n[0]): 0.4, "default": 0.1}, "listed twice"),
    (lambda n: {n[0]: 0.5}, r"\(nameA, nameB\) keys"),
    (lambda n: {(n[0], n[0]): 0.5, "default": 0.1}, "not a collision pair"),
])
def test_bad_friction_per_pair_is_refused_at_construction(friction, match):
    with pytest.raises(ValueError, match=match):
        two_bodies(friction=friction)


def test_bad_parameter_values_are_refused():
    sim, names = bouncing_balls("lcp", lambda n: {(n[0], "ground"): 0.5, "default": 0.8},
                                friction=per_pair_friction)
    pair = f"{names[0]}|ground"
    for name, value, match in ((f"friction:{pair}", -0.1, r"'friction:.*' must be >= 0"),
                               ("friction", -1.0, r"'friction' must be >= 0"),
                               (f"restitution:{pair}", 1.2, r"'restitution:.*' must be in \[0, 1\]"),
                               ("restitution", -0.5, r"'restitution' must be in \[0, 1\]")):
        with pytest.raises(ValueError, match=match):
            sim.with_parameters(name, [value])
    with pytest.raises(ValueError, match="unknown parameter 'friction:nothing|ground'"):
        sim.parameter_size("friction:nothing|ground")
    with pytest.raises(ValueError, match="unknown parameter 'restitution'"):
        bouncing_balls("lcp", 0.0)[0].get_parameters("restitution")
    with pytest.raises(ValueError, match=r"restitution\['default'\] must be a number in \[0, 1\]"):
        bouncing_balls("lcp", lambda n: {"default": 1.5})
