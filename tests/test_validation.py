"""Model validation at load (ModelError), state checks, divergence errors (issue 12)."""

from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest

from dynamics import ModelBuilder, ModelError, SimulationError, Simulator


def _urdf(tmp_path, *, mass="1", inertia=("0.01", "0.01", "0.01"), limits=("-1", "1"), geometry=True,
          mass0="1", mid_mass=None):
    """A base link, optionally a massless middle link, and one revolute link 'l1' on joint 'j1'."""
    ixx, iyy, izz = inertia
    col = "<collision><geometry><box size='0.1 0.1 0.1'/></geometry></collision>" if geometry else ""

    def link(name, m, i=("0.01", "0.01", "0.01")):
        return (f"<link name='{name}'><inertial><mass value='{m}'/><inertia ixx='{i[0]}' iyy='{i[1]}' "
                f"izz='{i[2]}' ixy='0' ixz='0' iyz='0'/></inertial>{col}</link>")

    mid = ""
    parent = "base"
    if mid_mass is not None:
        mid = (link("mid", mid_mass, ("0", "0", "0")) + "<joint name='jm' type='revolute'><parent link='base'/>"
               "<child link='mid'/><axis xyz='0 1 0'/><limit effort='1' velocity='1' lower='-1' upper='1'/></joint>")
        parent = "mid"
    text = (f"<robot name='r'>{link('base', mass0)}{mid}{link('l1', mass, inertia)}"
            f"<joint name='j1' type='revolute'><parent link='{parent}'/><child link='l1'/>"
            f"<origin xyz='0 0 0.5'/><axis xyz='1 0 0'/>"
            f"<limit effort='1' velocity='1' lower='{limits[0]}' upper='{limits[1]}'/></joint></robot>")
    path = tmp_path / "r.urdf"
    path.write_text(text)
    return path


def test_a_sound_urdf_loads(tmp_path):
    sim = Simulator.from_urdf(_urdf(tmp_path), floating_base=True, ground=0.0)
    assert sim.nv == 7


@pytest.mark.parametrize("mass, pattern", [("-1", r"link 'l1' \(joint 'j1'\) has mass -1.0"),
                                           ("0", r"link 'l1' \(joint 'j1'\) has mass 0.0 and carries no body")])
def test_bad_mass_is_named(tmp_path, mass, pattern):
    with pytest.raises(ModelError, match=pattern):
        Simulator.from_urdf(_urdf(tmp_path, mass=mass), floating_base=True)


def test_nan_mass_and_inertia_in_a_built_model():
    """URDF text cannot carry NaN (urdfdom rejects it); a model edited in code can (pin.Inertia refuses a NaN
    inertia matrix, so the centre of mass carries it)."""
    for field in ("mass", "inertia"):
        sim = _box()
        model = sim.model.copy()
        I = model.inertias[1]
        model.inertias[1] = (pin.Inertia(np.nan, I.lever, I.inertia) if field == "mass"
                             else pin.Inertia(I.mass, np.array([np.nan, 0.0, 0.0]), I.inertia))
        with pytest.raises(ModelError, match=r"link 'root_body\d' \(joint 'root'\) has (mass nan|a non-finite)"):
            Simulator(model, geometry=sim.geometry)


def test_massless_intermediate_link_is_legitimate(tmp_path):
    """A zero-mass link whose subtree has mass (an MJCF multi-joint body) is not singular."""
    sim = Simulator.from_urdf(_urdf(tmp_path, mid_mass="0"), floating_base=True)
    assert sim.nv == 8 and sim.model.inertias[sim.model.getJointId("jm")].mass == 0.0


def test_point_mass_on_a_free_flyer_is_singular():
    b = ModelBuilder("point")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, sphere=0.1, inertia=pin.Inertia(1.0, np.zeros(3), np.zeros((3, 3))))
    model, geom = b.build()
    with pytest.raises(ModelError, match=r"mass matrix is singular .* joint 'root'"):
        Simulator(model, geometry=geom)


@pytest.mark.parametrize("inertia, pattern", [(("-0.01", "0.01", "0.01"), "not positive semi-definite"),
                                              (("0.01", "0.01", "0.05"), "triangle inequality")])
def test_bad_inertia_is_named(tmp_path, inertia, pattern):
    with pytest.raises(ModelError, match=rf"link 'l1' \(joint 'j1'\).*{pattern}"):
        Simulator.from_urdf(_urdf(tmp_path, inertia=inertia))


def test_crossed_limits_are_named(tmp_path):
    with pytest.raises(ModelError, match=r"joint 'j1' has crossed position limits: lower \[1.\] > upper \[-1.\]"):
        Simulator.from_urdf(_urdf(tmp_path, limits=("1", "-1")))


def _box(**kwargs):
    b = ModelBuilder("box")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    return Simulator(model, geometry=geom, **kwargs)


@pytest.mark.parametrize("option, value, pattern", [
    ("ground", np.inf, "ground must be a finite height"),
    ("ground", np.nan, "ground must be a finite height"),
    ("margin", -1e-3, "margin must be a finite distance >= 0"),
    ("margin", np.nan, "margin must be a finite distance >= 0"),
    ("friction", -0.5, r"friction must be a coefficient in \[0, 1e\+06\]"),
    ("friction", np.nan, r"friction must be a coefficient in \[0, 1e\+06\]"),
    ("friction", np.inf, r"friction must be a coefficient in \[0, 1e\+06\]"),
    # taken, then silently wrong under NCP: the catapult's box thrown 72 m off at 1e12 (a bad-input battery)
    ("friction", 1e12, r"friction must be a coefficient in \[0, 1e\+06\] .*larger ones lose the contact solve's "
                       r"precision silently\), got 1000000000000\.0"),
    ("dt", 0.0, "dt must be a positive finite"),
    ("dt", -1e-3, "dt must be a positive finite"),
    ("dt", np.nan, "dt must be a positive finite"),
])
def test_bad_options_raise_before_any_work(option, value, pattern):
    """ground=inf used to segfault inside coal, ground=nan disabled contact, margin<0 fell through."""
    with pytest.raises(ModelError, match=pattern):
        _box(ground=0.0, **{option: value}) if option != "ground" else _box(**{option: value})


def test_bad_options_through_every_construction_path(tmp_path):
    sim = _box(ground=0.0)
    with pytest.raises(ModelError, match="ground must be"):
        Simulator(sim.model, geometry=sim.geometry, ground=np.inf)
    with pytest.raises(ModelError, match="ground must be"):
        Simulator.from_urdf(_urdf(tmp_path), floating_base=True, ground=np.nan)
    mjcf = tmp_path / "m.xml"
    mjcf.write_text("<mujoco><worldbody><body name='b' pos='0 0 1'><freejoint name='root'/>"
                    "<geom type='box' size='0.1 0.1 0.1' mass='1'/></body></worldbody></mujoco>")
    assert Simulator.from_mjcf(mjcf, ground=0.0).nv == 6
    with pytest.raises(ModelError, match="margin must be"):
        Simulator.from_mjcf(mjcf, ground=0.0, margin=-1.0)
    bad = Simulator(sim.model, geometry=sim.geometry, ground=0.0, contact="relaxed", smoothing=1e-3)
    with pytest.raises(ValueError, match="smoothing"):
        bad.with_smoothing(np.nan)


def test_ground_without_collision_geometry(tmp_path):
    with pytest.raises(ModelError, match=r"ground=0.0 was given but model 'r' has no collision geometry"):
        Simulator.from_urdf(_urdf(tmp_path, geometry=False), ground=0.0)
    with pytest.raises(ModelError, match="no collision geometry"):
        Simulator.from_urdf(_urdf(tmp_path), ground=0.0, load_geometry=False)


def test_planar_on_a_3d_model():
    b = ModelBuilder("tilted", gravity=(0.0, -9.81, 0.0))
    j = b.add_joint("translation2d", name="slide")
    k = b.add_joint("revolute", name="tilt", parent=j, axis="x")
    b.add_body(k, mass=1.0, box=(0.1, 0.1, 0.1), offset=(0, 0.2, 0))
    model, geom = b.build()
    with pytest.raises(ModelError, match=r"planar=True, but joint 'tilt' moves its body out of the xy plane"):
        Simulator(model, geometry=geom, planar=True)
    with pytest.raises(ModelError, match="joint 'root'"):
        _box(planar=True)
    from problems.cheetah import half_cheetah_simulator

    assert half_cheetah_simulator().contact_model.rows == 2  # a true planar model passes


# -- states -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def box():
    return _box(ground=0.0)


def _box_state(z=0.5, quat=(0.0, 0.0, 0.0, 1.0)):
    return np.r_[0.0, 0.0, z, quat, np.zeros(6)]


@pytest.mark.parametrize("quat", [(0.0, 0.0, 0.0, 1.0 + 2e-6), (0.1, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 0.0)])
def test_quaternion_off_the_unit_sphere_is_rejected(box, quat):
    x = _box_state(quat=quat)
    for call in (lambda: box.step(x, np.zeros(0)), lambda: box.step_derivatives(x, np.zeros(0)),
                 lambda: box.rollout(x, np.zeros((3, 0)))):
        with pytest.raises(ValueError, match=r"quaternion of joint 'root' \(q\[3:7\].*use sim.normalize_state\(x\)"):
            call()


def test_normalize_state(box):
    x = _box_state(quat=(0.0, 0.3, 0.0, 0.9))
    y = box.normalize_state(x)
    assert np.linalg.norm(y[3:7]) == pytest.approx(1.0, abs=1e-15) and y[4] / y[6] == pytest.approx(1 / 3)
    assert x[4] == 0.3  # a copy
    assert np.isfinite(box.step(y, np.zeros(0))).all()
    x_ok = _box_state(quat=(0.0, 0.0, 0.0, 1.0 + 5e-7))  # within the tolerance: accepted
    box.step(x_ok, np.zeros(0))
    with pytest.raises(ValueError, match=r"quaternion of joint 'root' .* has norm 0: it cannot be normalized"):
        box.normalize_state(_box_state(quat=(0.0, 0.0, 0.0, 0.0)))


def test_neutral_state_is_inside_the_joint_limits(tmp_path):
    sim = Simulator.from_urdf(_urdf(tmp_path, limits=("0.5", "1.2")))
    assert sim.neutral_state()[0] == 0.5 and sim.default_state()[0] == 0.5
    sim = Simulator.from_urdf(_urdf(tmp_path, limits=("-1.2", "-0.5")))
    assert sim.neutral_state()[0] == -0.5
    from dynamics import example_robot_urdf

    go1 = Simulator.from_urdf(example_robot_urdf("go1"), floating_base=True, load_geometry=False)
    q = go1.neutral_state()[: go1.nq]
    lo, hi = go1.model.lowerPositionLimit, go1.model.upperPositionLimit
    assert np.all(q[7:] >= lo[7:]) and np.all(q[7:] <= hi[7:]) and np.any(q[7:] != 0.0)  # calves: 0 is off-limits
    assert np.array_equal(q[:7], [0, 0, 0, 0, 0, 0, 1])


# -- divergence -------------------------------------------------------------------------------


def _feather(dt=1e-3, effort=100.0):
    """A near-singular pendulum: a 1e-9 kg link (mass matrix ~2e-12) on a hinge with a 100 N m motor."""
    b = ModelBuilder("feather")
    j = b.add_joint("revolute", name="hinge", axis="y", effort=effort)
    b.add_body(j, mass=1e-9, box=(0.02, 0.02, 0.1), offset=(0, 0, -0.05), collision=False)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt)


def test_near_singular_model_blows_up_with_an_error_naming_the_step():
    sim = _feather()
    us = np.zeros((20, 1))
    us[7:] = 50.0  # quiet for 7 steps, then a large torque on the feather
    with pytest.raises(SimulationError, match=r"rollout step 7: .* v\[0\] \(joint 'hinge'\) = .*beyond the bound "
                                              r"\|v\| <= MAX_VELOCITY = 10000") as info:
        sim.rollout(np.zeros(2), us)
    assert info.value.xs.shape == (8, 2) and np.abs(info.value.xs).max() < 1e-6
    with pytest.raises(SimulationError, match=r"v\[0\] \(joint 'hinge'\)"):
        sim.step_derivatives(np.zeros(2), np.array([50.0]))
    # positions too: a state already near MAX_POSITION
    with pytest.raises(SimulationError, match=r"q\[0\] \(joint 'hinge'\) = .*\|q\| <= MAX_POSITION"):
        sim.step(np.array([Simulator.MAX_POSITION, 1.0]), np.zeros(1))


@pytest.mark.parametrize("name", ["catapult", "ur5-box", "go1-hold"])
def test_a_state_beyond_the_bounds_is_refused_before_the_collision_detection(name):
    """|q| = 1e160 crashed the process in coal's collision detection (segmentation fault, with or without the
    compiled core); a velocity there was blamed on the step ("the simulation diverged"). Both are refused as input,
    naming the coordinate and the bound, by every entry point."""
    import problems

    sim = problems.load(name).dynamics
    x0 = problems.load(name).x0
    u, us = np.zeros(sim.nu), np.zeros((2, sim.nu))
    for i, value, bound in ((1, 1e160, r"\|q\| <= MAX_POSITION = 1e\+06"), (sim.nq, -2e4, r"\|v\| <= MAX_VELOCITY")):
        x = x0.copy()
        x[i] = value
        for call in (lambda: sim.step(x, u), lambda: sim.step_derivatives(x, u),
                     lambda: sim.step_derivatives(x, u, params=["friction"]), lambda: sim.rollout(x, us),
                     lambda: sim.rollout_derivatives(x, us)):
            with pytest.raises(ValueError, match=re.escape(f"= {value:.3g} is beyond the bound ") + bound):
                call()
    q = x0[:sim.nq].copy()
    q[1] = 1e160
    with pytest.raises(ValueError, match=r"configuration q: q\[1\] .* = 1e\+160 is beyond the bound"):
        sim.contact_jacobian(q)
    x = x0.copy()
    x[1] = 0.999 * Simulator.MAX_POSITION  # within: stepped (the step may then leave the bounds: its own error)
    try:
        sim.step(x, u)
    except SimulationError:
        pass


def test_a_failed_contact_solve_is_a_simulation_error(box, monkeypatch):
    def broken(problem, guess=None):
        raise ValueError("singular Delassus matrix")

    class BrokenFused:  # the fused step (compiled) fails the same way
        def solve(self, *args):
            raise ValueError("singular Delassus matrix")

    for fused in (None, BrokenFused()):
        sim = _box(ground=0.0)
        monkeypatch.setattr(sim.contact_model.adapter, "solve", broken)
        sim.contact_model.fused = fused
        with pytest.raises(SimulationError,
                           match=r"rollout step 0: box: the lcp contact solve failed: singular Delassus"):
            sim.rollout(_box_state(z=0.1), np.zeros((2, 0)))


def _feather_ocp(horizon=30, target=10.0):
    from trajopt import OCP, ControlCost, StateCost

    sim = _feather(dt=1e-2, effort=1e-6)
    return OCP(dynamics=sim, x0=np.zeros(2), horizon=horizon, running_cost=ControlCost(sim, 1e-3),
               terminal_cost=StateCost(sim, np.array([target, 0.0]), 1.0))


def test_ddp_line_search_rejects_diverging_trials(monkeypatch):
    """Long DDP steps drive the feather past MAX_VELOCITY; the line search must back off, not crash."""
    from solvers import solve_ddp

    ocp = _feather_ocp()
    sim = ocp.dynamics
    with pytest.raises(SimulationError):
        ocp.rollout(np.full((ocp.horizon, 1), 1e-6))
    real, diverged = sim.step, []

    def counting(x, u, **kw):
        try:
            return real(x, u, **kw)
        except SimulationError as exc:
            diverged.append(exc)
            raise

    monkeypatch.setattr(sim, "step", counting)
    sol = solve_ddp(ocp, max_iter=5, verbose=False)
    assert len(diverged) > 0  # trial points did diverge ...
    assert sol.status.name != "FAILED" and np.isfinite(sol.cost)  # ... and were rejected
    assert sol.cost < 0.5 * ocp.cost(ocp.rollout(np.zeros((ocp.horizon, 1))), np.zeros((ocp.horizon, 1)))


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_solver_returns_its_best_iterate_when_the_jacobians_fail(method, monkeypatch):
    from solvers import solve

    ocp = _feather_ocp(horizon=10)
    sim = ocp.dynamics
    calls = {"n": 0}

    def flaky(real, steps):  # counts the steps linearized, by whichever call the solver makes
        def call(*args, **kw):
            calls["n"] += steps(*args)
            if calls["n"] > 2 * ocp.horizon:  # the second linearization fails
                raise SimulationError("feather: the lcp contact solve failed: test")
            return real(*args, **kw)
        return call

    monkeypatch.setattr(sim, "step_derivatives", flaky(sim.step_derivatives, lambda x, u: 1))
    monkeypatch.setattr(sim, "knot_derivatives", flaky(sim.knot_derivatives, lambda xs, us: len(us)))
    monkeypatch.setattr(sim, "rollout_derivatives", flaky(sim.rollout_derivatives, lambda x0, us: len(us)))
    sol = solve(ocp, method=method, max_iter=10, verbose=False)
    assert sol.status.name == "FAILED" and "contact solve failed" in sol.info["message"]
    assert np.isfinite(sol.cost) and np.all(np.isfinite(sol.xs))


def test_torque_limits_as_lower_upper_pairs_survive_with_smoothing():
    """(nu, 2) pairs (an MJCF ctrlrange) are the bounds, kept by derived simulators; bad pairs are named."""
    b = ModelBuilder("hinge")
    j = b.add_joint("revolute", name="hinge", axis="y")
    b.add_body(j, mass=1.0, box=(0.02, 0.02, 0.1), offset=(0, 0, -0.05))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, torque_limits=[[-1.0, 3.0]])
    assert sim.u_lower.tolist() == [-1.0] and sim.u_upper.tolist() == [3.0]
    soft = sim.with_smoothing(1e-3)
    assert soft.u_lower.tolist() == [-1.0] and soft.u_upper.tolist() == [3.0]
    with pytest.raises(ValueError, match="lower <= upper"):
        Simulator(model, geometry=geom, torque_limits=[[2.0, 1.0]])
    with pytest.raises(ValueError, match=r"pairs need \(1, 2\)"):
        Simulator(model, geometry=geom, torque_limits=[[0.0, 1.0], [0.0, 1.0]])
