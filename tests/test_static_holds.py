"""The NCP paper's Appendix E: torques that hold Go1 (with a payload, in a handstand) and G1 (push-up) still."""

from __future__ import annotations

import json

import numpy as np
import pinocchio as pin
import pytest

import problems
from problems.static_holds import G1_HANDS, G1_TOES, GO1_FRONT_FEET, support_line_offset
from solvers import gauss_newton
from app.cli import main
from trajopt.solution import Status

TARGET = 1e-8


def held(name, steps, **options):
    """Solve problem ``name`` by Gauss-Newton; roll the answer out ``steps`` steps from rest."""
    prob = problems.load(name, **options)
    sol = gauss_newton(prob, verbose=False, max_iter=20)
    sim, x = prob.dynamics, prob.info["x_rest"]
    xs = sim.rollout(x, np.tile(sol.z, (steps, 1)), data=sim.create_data())
    return prob, sol, xs


def assert_still(prob, sol, xs, *, contacts):
    sim, x = prob.dynamics, prob.info["x_rest"]
    assert sol.status == Status.CONVERGED and sol.info["final_residual"] <= TARGET
    assert np.abs(xs[:, sim.nq:]).max() < 1e-6  # nothing moves
    assert np.abs(xs[:, :3] - x[:3]).max() < 1e-6  # the base stays put (m)
    assert np.all(np.abs(sol.z) <= sim.u_upper)  # within the motors' limits
    assert prob.evaluate(sol.z)["contacts"] == contacts


@pytest.mark.parametrize("payload", [10.0, 5.0, 15.0])
def test_go1_payload_is_held_still_for_half_a_second(payload):
    prob, sol, xs = held("go1-payload", 500, payload=payload)
    assert_still(prob, sol, xs, contacts=4)
    model = prob.dynamics.model
    assert sum(I.mass for I in model.inertias[1:]) == pytest.approx(13.10 + payload, abs=0.01)
    data = model.createData()
    pin.framesForwardKinematics(model, data, prob.info["x_rest"][: model.nq])
    top = data.oMf[model.getFrameId("payload")].translation
    assert top[2] > prob.info["x_rest"][2] + 0.057  # on the trunk's back


def test_go1_payload_needs_more_torque_than_standing_alone():
    bare = gauss_newton(problems.load("go1-standing"), verbose=False).z
    loaded = gauss_newton(problems.load("go1-payload"), verbose=False).z
    assert np.abs(loaded).max() > 1.5 * np.abs(bare).max()


@pytest.mark.parametrize("options", [{}, {"pitch": 0.5}, {"friction": 0.3}])
def test_go1_handstand_balances_on_its_front_feet_for_half_a_second(options):
    prob, sol, xs = held("go1-handstand", 500, **options)
    assert_still(prob, sol, xs, contacts=2)
    sim, q = prob.dynamics, prob.info["x_rest"][: prob.dynamics.nq]
    assert abs(support_line_offset(sim, q)) < 1e-12  # the centre of mass is above the foot line
    contacts = sim.contacts
    assert np.all(contacts.impulses[:, 0] > 0) and np.all(contacts.points[:, 0] < q[0])  # front feet only


def test_a_handstand_off_the_foot_line_cannot_be_held():
    """The check that the balance condition matters: 1 mm off the line, no torques hold it."""
    prob = problems.load("go1-handstand")
    sim, x = prob.dynamics, prob.info["x_rest"].copy()
    x[0] += 1e-3  # the whole robot moves 1 mm forward: nothing changes
    x[3:7] = pin.Quaternion(pin.utils.rpyToMatrix(0.0, 0.7 + 2e-3, 0.0)).coeffs()  # tipped: the COM leaves the line
    x[2] -= problems.static_holds.lowest_point(sim, x[: sim.nq], axis=2, names=GO1_FRONT_FEET)
    from problems.inverse import hold_still

    tipped = hold_still("tipped", sim, x)
    assert gauss_newton(tipped, verbose=False, max_iter=20).info["final_residual"] > 1e-5


@pytest.mark.parametrize("options", [{}, {"friction": 0.5}])
def test_g1_pushup_is_held_still(options):
    """Held for 0.2 s. Later (~0.25 s) the open-loop wrists tip: each hand rests on one vertex of its
    hull and the light wrist links pivot about it (an unstable equilibrium, like a handstand's)."""
    prob, sol, xs = held("g1-pushup", 200, **options)
    assert_still(prob, sol, xs, contacts=6)
    sim = prob.dynamics
    names = {sim.geometry.geometryObjects[k].name for k in range(len(sim.geometry.geometryObjects))}
    assert set(G1_TOES) | set(G1_HANDS) <= names


@pytest.mark.parametrize("name, options, match", [
    ("go1-payload", {"payload": -1.0}, "payload must be a finite mass >= 0"),
    ("go1-payload", {"payload": float("nan")}, "payload must be a finite mass >= 0"),
    ("go1-handstand", {"pitch": 1.5}, r"pitch must be a base pitch in \[0.2, 1.0\]"),
    ("go1-handstand", {"friction": -0.1}, "friction"),
    ("g1-pushup", {"contact": "cone"}, "contact"),
])
def test_bad_options_are_refused_clearly(name, options, match):
    with pytest.raises(ValueError, match=match):
        problems.load(name, **options)


def test_cli_solves_the_appendix_e_problems(tmp_path, capsys):
    for name in ("go1-payload", "go1-handstand"):
        assert main(["solve", name, "--out", str(tmp_path)]) == 0
        summary = json.loads((tmp_path / name / "gauss-newton" / "summary.json").read_text())
        assert summary["metrics"]["final_residual"] <= TARGET


def test_simulator_names_say_which_robot():
    """The simulator's name is shown in its errors (``go1: the step produced ...``); the handstand's Go1 carries
    no payload and was named ``go1-payload``."""
    from problems import static_holds

    assert static_holds.go1_handstand_simulator().name == "go1"
    assert problems.load("go1-handstand").dynamics.name == "go1"
    assert static_holds.go1_payload_simulator(payload=0.0).name == "go1"
    assert problems.load("go1-payload").dynamics.name == "go1-payload"
