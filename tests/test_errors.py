"""Bad input raises errors whose message names what is wrong."""

from __future__ import annotations

import re

import numpy as np
import pytest

import problems
from dynamics import SimulationError, Simulator
from problems.cartpole import cartpole_simulator
from trajopt import OCP, ControlCost, StateCost
from app.cli import main


@pytest.fixture(scope="module")
def sim():
    return cartpole_simulator(1)


def test_missing_urdf(tmp_path):
    path = tmp_path / "nope.urdf"
    with pytest.raises(FileNotFoundError, match="URDF file not found: .*nope.urdf"):
        Simulator.from_urdf(path)


def test_missing_mjcf(tmp_path):
    with pytest.raises(FileNotFoundError, match="MJCF file not found"):
        Simulator.from_mjcf(tmp_path / "nope.xml")


def test_invalid_urdf(tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text("<robot name='x'><link name='a'/><joint name='j' type='revolute'></joint></robot>")
    with pytest.raises(ValueError, match="could not parse URDF"):
        Simulator.from_urdf(path)


def test_unresolvable_mesh_package(tmp_path):
    path = tmp_path / "meshy.urdf"
    path.write_text(
        "<robot name='meshy'><link name='base'><inertial><mass value='1'/>"
        "<inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/></inertial>"
        "<collision><geometry><mesh filename='package://nowhere_pkg/m.stl'/></geometry></collision></link>"
        "<link name='l1'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/>"
        "</inertial></link><joint name='j1' type='revolute'><parent link='base'/><child link='l1'/>"
        "<axis xyz='0 0 1'/><limit effort='1' velocity='1' lower='-1' upper='1'/></joint></robot>"
    )
    with pytest.raises(FileNotFoundError, match="package_dirs"):
        Simulator.from_urdf(path)
    assert Simulator.from_urdf(path, load_geometry=False).nv == 1


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros(5), np.zeros((2, 2))])
def test_state_of_wrong_size(sim, bad):
    with pytest.raises(ValueError, match=r"state x has shape .* expected \(4,\)"):
        sim.step(bad, np.zeros(1))
    with pytest.raises(ValueError, match="state x has shape"):
        sim.step_derivatives(bad, np.zeros(1))


def test_nan_in_state(sim):
    x = np.array([0.0, np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"state x contains non-finite values at indices \[1\]"):
        sim.step(x, np.zeros(1))
    with pytest.raises(ValueError, match="non-finite"):
        sim.step_derivatives(x, np.zeros(1))


@pytest.mark.parametrize("bad", [None, "ab", {"q": 0.0}])
def test_a_state_or_control_that_is_no_array_is_named(sim, bad):
    """None, a string or a dict as x or u: named, with the expected shape (None reached the compiled step's
    argument parser: "incompatible function arguments"; a string gave NumPy's "could not convert string")."""
    x, u = np.zeros(4), np.zeros(1)
    calls = [lambda x, u: sim.step(x, u), lambda x, u: sim.step_derivatives(x, u),
             lambda x, u: sim.step_derivatives(x, u, params=["friction"] if sim.contact_model else [])]
    for call in calls:
        with pytest.raises(ValueError, match=r"state x must be an array of numbers of shape \(4,\), got "):
            call(bad, u)
        with pytest.raises(ValueError, match=r"control u must be an array of numbers of shape \(1,\), got "):
            call(x, bad)


def test_control_of_wrong_size_and_nan(sim):
    with pytest.raises(ValueError, match=r"control u has shape \(2,\), expected \(1,\).*cart"):
        sim.step(np.zeros(4), np.zeros(2))
    with pytest.raises(ValueError, match="control u contains non-finite"):
        sim.step(np.zeros(4), np.array([np.inf]))


def test_rollout_controls_wrong_shape(sim):
    with pytest.raises(ValueError, match=r"controls us have shape \(5, 2\)"):
        sim.rollout(np.zeros(4), np.zeros((5, 2)))


def test_text_is_not_taken_for_numbers(sim):
    """Controls, knot states and parameter values given as text (or None) are refused as a single step's are: NumPy
    parsed ['0.5'] (and an object array's '1.0') into numbers, and read None as NaN."""
    for us in ([["0.5"], ["0.1"]], np.array([["1.0"]], dtype=object), [[0.5], [None]]):
        with pytest.raises(ValueError, match=r"controls us must be an array of numbers of shape \(T, 1\)"):
            sim.rollout(np.zeros(4), us)
    with pytest.raises(ValueError, match=r"knot states xs must be an array of numbers of shape \(1, 4\)"):
        sim.knot_derivatives([["0", "0", "0", "0"]], [[0.0]])
    with pytest.raises(ValueError, match=r"values must be 1 number .*text, None, bool or complex elements"):
        sim.with_parameters(sim.parameter_names()[:1], np.array(["1.0"], dtype=object))


def test_booleans_and_ints_past_float_are_not_taken_for_numbers(sim):
    """with_parameters([mass], [True]) set a mass of 1.0 and a state of booleans stepped; an int past float's range
    (10**400) raised NumPy's bare OverflowError, which named nothing."""
    name = sim.parameter_names()[:1]
    for bad, why in (([True], "elements of type bool"), ([np.True_], "elements of type bool"),
                     ([10**400], "a number beyond float's range")):
        with pytest.raises(ValueError, match=r"^values must be 1 number .*" + re.escape(f"({why})")):
            sim.with_parameters(name, bad)
    # impulses="no" asked for the impulses (any truthy value did)
    with pytest.raises(TypeError, match="impulses must be True or False, got 'no'"):
        sim.step_derivatives(np.zeros(4), np.zeros(1), impulses="no")
    # a name as a 0-d array of text is that name (it was "iteration over a 0-d array")
    assert sim.parameter_size(np.array(name[0])) == sim.parameter_size(name)
    x_bool, x_big = np.array([True, False, True, False]), [10**400, 0, 0, 0]
    for x, why in ((x_bool, "elements of type bool"), (x_big, "a number beyond float's range")):
        with pytest.raises(ValueError, match=r"^state x must be an array of numbers .*" + re.escape(f"({why})")):
            sim.step(x, np.zeros(1))


UTILITIES = {  # name: (call on the bad argument, the name the message gives it, its size)
    "state_integrate": (lambda sim, b: sim.state_integrate(sim.neutral_state(), b), "tangent vector dx", "ndx"),
    "state_difference": (lambda sim, b: sim.state_difference(b, sim.neutral_state()), "state x0", "nx"),
    "state_difference_jacobians": (lambda sim, b: sim.state_difference_jacobians(sim.neutral_state(), b),
                                   "state x1", "nx"),
    "state_integrate_jacobians": (lambda sim, b: sim.state_integrate_jacobians(b, np.zeros(sim.ndx)), "state x",
                                  "nx"),
    "inverse_mass_matrix": (lambda sim, b: sim.inverse_mass_matrix(b), "configuration q", "nq"),
    "contact_jacobian": (lambda sim, b: sim.contact_jacobian(b), "configuration q", "nq"),
    "shapes_2d": (lambda sim, b: sim.shapes_2d(b), "configuration q", "nq"),
    "normalize_state": (lambda sim, b: sim.normalize_state(b), "state x", "nx"),
}


@pytest.mark.parametrize("name, bad", [(name, bad) for name in sorted(UTILITIES) for bad in ("none", "text", "size", "nan")
                                       if (name, bad) != ("normalize_state", "nan")])
def test_state_space_utilities_name_a_bad_argument(sim, name, bad):
    """Each utility refuses None, text, a wrong size and NaN with the argument's name, rather than NumPy's
    conversion error, Pinocchio's argument mismatch or a silent NaN (normalize_state leaves NaN velocities to the
    step's check)."""
    call, what, size = UTILITIES[name]
    n = getattr(sim, size)
    value = {"none": None, "text": "ab", "size": np.zeros(n + 1), "nan": np.full(n, np.nan)}[bad]
    with pytest.raises(ValueError, match=what):
        call(sim, value)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the quick test's square norm
def test_large_finite_entries_are_not_called_non_finite(sim):
    """A square norm or a sum that overflows on large finite entries is no NaN: the utilities compute on, and a
    step's check names no empty list of indices (it said "non-finite values at indices []")."""
    big = np.array([1e308, 0.0, 1e308, 0.0])
    assert np.isfinite(sim.state_difference(np.zeros(4), big)).all()
    assert np.isfinite(sim.state_integrate(big, np.zeros(4))).all()
    sim.state_difference_jacobians(big, big)
    with pytest.raises(ValueError, match=r"contains non-finite values at indices \[1\]"):
        sim.state_difference(np.array([1e308, np.nan, 1e308, 0.0]), np.zeros(4))
    with pytest.raises(ValueError, match=r"state x: q\[0\] .* = 1e\+308 is beyond the bound \|q\| <= MAX_POSITION"):
        sim._check_x(big)  # finite, not called non-finite: beyond the bound of any state a step may produce


def test_divergence_is_reported_with_partial_trajectory():
    s = cartpole_simulator(1, dt=1.0)
    x0 = np.array([0.0, 3.0, 0.0, 9e3])  # within MAX_VELOCITY (1e150 is refused as input now)
    with pytest.raises(SimulationError, match="diverged") as info:
        s.rollout(x0, np.zeros((50, 1)))
    assert info.value.xs is not None and len(info.value.xs) >= 1
    assert np.all(np.isfinite(info.value.xs))


def test_unknown_problem():
    with pytest.raises(ValueError, match=r"unknown problem 'catapulty'; available: .*cartpole"):
        problems.load("catapulty")


def test_unknown_problem_cli(capsys):
    assert main(["simulate", "catapulty"]) == 2
    err = capsys.readouterr().err
    assert "unknown problem 'catapulty'" in err and "cartpole" in err
    assert "Traceback" not in err


def test_unknown_actuated_joint():
    model = cartpole_simulator(1).model
    with pytest.raises(ValueError, match="actuated joint 'elbow' is not in the model"):
        Simulator(model, actuated=["elbow"])


def test_bad_dt():
    model = cartpole_simulator(1).model
    with pytest.raises(ValueError, match="dt must be a positive"):
        Simulator(model, dt=0.0)


def test_ocp_validation(sim):
    run, term = ControlCost(sim, 1.0), StateCost(sim, np.zeros(4), 1.0)
    with pytest.raises(ValueError, match=r"x0 has shape \(3,\), expected \(4,\)"):
        OCP(dynamics=sim, x0=np.zeros(3), horizon=10, running_cost=run, terminal_cost=term)
    with pytest.raises(ValueError, match="horizon must be a positive integer"):
        OCP(dynamics=sim, x0=np.zeros(4), horizon=0, running_cost=run, terminal_cost=term)
    with pytest.raises(ValueError, match="control bounds cross"):
        OCP(dynamics=sim, x0=np.zeros(4), horizon=3, running_cost=run, terminal_cost=term,
            u_lower=[1.0], u_upper=[-1.0])
    with pytest.raises(TypeError, match="cannot be used as dynamics: it lacks .*step_derivatives"):
        OCP(dynamics=object(), x0=np.zeros(4), horizon=3, running_cost=run, terminal_cost=term)
    ocp = OCP(dynamics=sim, x0=np.zeros(4), horizon=3, running_cost=run, terminal_cost=term)
    with pytest.raises(ValueError, match=r"controls have shape \(2, 1\), expected \(horizon 3, nu 1\)"):
        ocp.rollout(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="state weights have shape"):
        StateCost(sim, np.zeros(4), np.ones(3))


def test_unknown_collision_pair_names():
    from problems.planar import catapult_simulator

    model = catapult_simulator().model
    geom = catapult_simulator().geometry
    with pytest.raises(ValueError, match=r"no collision object named \['ball'\]"):
        Simulator(model, geometry=geom, collision_pairs=[("ball", "floor")])
    sim = Simulator(model, geometry=geom, collision_pairs=[("projectile_body1", "floor")])
    assert sim.contact_model.scene.npairs == 1
