"""Whole-trajectory derivatives in one call: Simulator.rollout_derivatives / knot_derivatives and the
protocol-level functions, against loops of step_derivatives (bit for bit), with rollout's errors."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from dynamics import SimulationError
from problems.cartpole import cartpole_simulator
from problems.inverse import cube_simulator
from trajopt import protocol


def _catapult():
    """30 steps of the catapult with the projectile resting on the floor (contact, LCP, planar)."""
    ocp = problems.load("catapult", horizon=30)
    x0 = ocp.x0.copy()
    x0[:5] = (1.0, -0.525, np.deg2rad(45), np.deg2rad(30), np.deg2rad(45))
    us = np.random.default_rng(0).uniform(-20, 20, (30, ocp.nu))
    return ocp.dynamics, x0, us


def _cube():
    """A free-flying cube thrown onto the ground: flight, landing, sliding (quaternion state, NCP)."""
    sim = cube_simulator()
    x0 = sim.neutral_state()
    x0[2] = 0.13
    x0[sim.nq:sim.nq + 3] = (1.2, 0.4, -0.5)
    x0[sim.nq + 3:] = (0.3, -0.2, 0.5)
    return sim, x0, np.zeros((120, 0))


def _cartpole():
    """No contact at all."""
    sim = cartpole_simulator(1, dt=0.02)
    us = np.random.default_rng(1).uniform(-10, 10, (40, 1))
    return sim, np.array([0.1, 0.2, -0.3, 0.4]), us


CASES = {"catapult": _catapult, "free-flyer cube": _cube, "cartpole": _cartpole}


def _loop(sim, x0, us, data):
    xs = [np.asarray(x0, float)]
    Fx, Fu = [], []
    for u in us:
        x, A, B = sim.step_derivatives(xs[-1], u, data=data)
        xs.append(x)
        Fx.append(A)
        Fu.append(B)
    return np.array(xs), np.array(Fx).reshape(len(us), sim.ndx, sim.ndx), np.array(Fu).reshape(len(us), sim.ndx, sim.nu)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    return request.param, *CASES[request.param]()


def test_rollout_derivatives_is_a_loop_of_step_derivatives_bit_for_bit(case):
    name, sim, x0, us = case
    xs, Fx, Fu = sim.rollout_derivatives(x0, us, data=sim.create_data())
    ref = _loop(sim, x0, us, sim.create_data())
    assert xs.shape == (len(us) + 1, sim.nx) and Fx.shape == (len(us), sim.ndx, sim.ndx)
    assert Fu.shape == (len(us), sim.ndx, sim.nu)
    assert np.array_equal(xs, ref[0]), name
    assert np.array_equal(Fx, ref[1]), name
    assert np.array_equal(Fu, ref[2]), name
    assert np.array_equal(xs, sim.rollout(x0, us, data=sim.create_data())), name  # the states are rollout's
    if name != "cartpole":  # the trajectory went through contact
        d = sim.create_data()
        sim.rollout_derivatives(x0, us, data=d)
        assert d.stats["contact_steps"] > 0 and d.stats["warm_hits"] > 0, d.stats  # warm starts still work


def test_jacobians_after_a_rollout_reuse_its_contact_solves_and_are_the_same(case):
    name, sim, x0, us = case
    fresh = sim.rollout_derivatives(x0, us, data=sim.create_data())
    d = sim.create_data()
    sim.rollout(x0, us, data=d)
    solved = d.stats["contact_steps"]
    again = sim.rollout_derivatives(x0, us, data=d)
    for a, b in zip(again, fresh, strict=True):
        assert np.array_equal(a, b), name
    if sim.contact_model is None:
        assert d.stats["reused"] == 0
    else:  # every step reused the rollout's detection and solve; none was solved again
        assert d.stats["reused"] == len(us), d.stats
        assert d.stats["contact_steps"] == solved, d.stats


def test_knot_derivatives_is_a_loop_of_step_derivatives_at_the_knots(case):
    name, sim, x0, us = case
    xs = sim.rollout(x0, us, data=sim.create_data())
    rng = np.random.default_rng(7)
    knots = np.array([sim.state_integrate(x, 1e-3 * rng.standard_normal(sim.ndx)) for x in xs])  # not a rollout
    for states in (knots, knots[:-1]):  # T+1 or T rows
        x_next, Fx, Fu = sim.knot_derivatives(states, us, data=sim.create_data())
        d = sim.create_data()
        for t in range(len(us)):
            ref = sim.step_derivatives(knots[t], us[t], data=d)
            assert np.array_equal(x_next[t], ref[0]) and np.array_equal(Fx[t], ref[1]), (name, t)
            assert np.array_equal(Fu[t], ref[2]), (name, t)


def _error(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("bad", ["x0 shape", "x0 nan", "us shape", "us nan"])
def test_bad_input_gives_rollouts_error(case, bad):
    name, sim, x0, us = case
    x0, us = x0.copy(), us.copy()
    if bad == "x0 shape":
        x0 = x0[:-1]
    elif bad == "x0 nan":
        x0[-1] = np.nan
    elif bad == "us shape":
        us = np.zeros((len(us), sim.nu + 1))
    elif us.size:
        us[3, 0] = np.nan
    else:  # no controls to spoil: a NaN velocity instead
        x0[sim.nq] = np.inf
    kind, message = _error(sim.rollout_derivatives, x0, us)
    assert kind is ValueError
    assert (kind, message) == _error(sim.rollout, x0, us)
    if bad == "us nan" and us.size:
        assert message.startswith("rollout step 3: control u contains non-finite values")


def test_a_divergent_rollout_names_the_step_and_keeps_the_states():
    sim, x0, _ = _cartpole()
    us = np.full((10, 1), 1e9)
    with pytest.raises(SimulationError, match=r"^rollout step \d+: ") as info:
        sim.rollout_derivatives(x0, us)
    with pytest.raises(SimulationError) as ref:
        sim.rollout(x0, us)
    assert str(info.value) == str(ref.value)
    assert np.array_equal(info.value.xs, ref.value.xs) and len(info.value.xs) >= 1


def test_knot_errors_name_the_knot():
    sim, x0, us = _cube()
    xs = sim.rollout(x0, us[:5])
    bad = xs.copy()
    bad[2, 3:7] *= 2.0  # a quaternion of norm 2
    with pytest.raises(ValueError, match=r"knot 2: state xs\[2\].*quaternion"):
        sim.knot_derivatives(bad, us[:5])
    bad = xs.copy()
    bad[4, 0] = np.nan
    with pytest.raises(ValueError, match=r"knot 4: state xs\[4\] contains non-finite"):
        sim.knot_derivatives(bad, us[:5])
    with pytest.raises(ValueError, match=r"knot states xs have shape \(3, 13\), expected \(5, 13\) or \(6, 13\)"):
        sim.knot_derivatives(xs[:3], us[:5])
    fast = xs.copy()
    fast[3, sim.nq:] = 1e9  # beyond MAX_VELOCITY at knot 3 (it was stepped, then its output refused)
    with pytest.raises(ValueError, match=r"^knot 3: state xs\[3\]: v\[0\] .* is beyond the bound \|v\| <= "
                                         "MAX_VELOCITY"):
        sim.knot_derivatives(fast, us[:5])
    fast = xs.copy()
    fast[3, 0], fast[3, sim.nq] = sim.MAX_POSITION, 9e3  # within both bounds, its step leaves them: named by its knot
    with pytest.raises(SimulationError, match=r"^knot 3: "):
        sim.knot_derivatives(fast, us[:5])


class Linear:
    """A user's own dynamics with only the protocol's members: x+ = A x + B u."""

    def __init__(self, A, B):
        self.A, self.B = A, B
        self.nx = self.ndx = A.shape[0]
        self.nu = B.shape[1]
        self.calls = 0

    def step(self, x, u):
        return self.A @ x + self.B @ u

    def step_derivatives(self, x, u):
        self.calls += 1
        return self.step(x, u), self.A.copy(), self.B.copy()

    def state_integrate(self, x, dx):
        return x + dx

    def state_difference(self, x0, x1):
        return x1 - x0


def test_protocol_falls_back_to_a_loop_for_a_users_dynamics():
    rng = np.random.default_rng(3)
    dyn = Linear(np.eye(3) + 0.1 * rng.standard_normal((3, 3)), rng.standard_normal((3, 2)))
    x0, us = rng.standard_normal(3), rng.standard_normal((6, 2))
    xs, Fx, Fu = protocol.rollout_derivatives(dyn, x0, us)
    assert dyn.calls == 6 and xs.shape == (7, 3) and Fx.shape == (6, 3, 3) and Fu.shape == (6, 3, 2)
    x = x0
    for t in range(6):
        assert np.array_equal(xs[t], x)
        x = dyn.A @ x + dyn.B @ us[t]
        assert np.array_equal(Fx[t], dyn.A) and np.array_equal(Fu[t], dyn.B)
    assert np.array_equal(xs[-1], x)
    x_next, Fx2, Fu2 = protocol.knot_derivatives(dyn, xs, us)
    assert np.array_equal(x_next, xs[1:]) and np.array_equal(Fx2, Fx) and np.array_equal(Fu2, Fu)
    with pytest.raises(ValueError, match=r"controls us have shape \(6, 3\), expected \(T, 2\)"):
        protocol.rollout_derivatives(dyn, x0, np.zeros((6, 3)))
    with pytest.raises(ValueError, match=r"initial state x0 has shape \(2,\), expected \(3,\)"):
        protocol.rollout_derivatives(dyn, x0[:2], us)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the divergence under test
def test_protocol_fallback_stops_at_a_non_finite_state_naming_the_step():
    dyn = Linear(np.eye(2) * 1e200, np.ones((2, 1)))
    with pytest.raises(RuntimeError, match=r"rollout step 1: Linear.step_derivatives returned a non-finite") as info:
        protocol.rollout_derivatives(dyn, np.ones(2), np.zeros((4, 1)))
    assert info.value.xs.shape == (2, 2)  # the states before the failure, as SimulationError carries them


def test_protocol_uses_the_dynamics_own_calls_when_it_has_them():
    class Batched(Linear):
        def rollout_derivatives(self, x0, us):
            return "rollout_derivatives", x0, us

        def knot_derivatives(self, xs, us):
            return "knot_derivatives", xs, us

    dyn = Batched(np.eye(2), np.ones((2, 1)))
    assert protocol.rollout_derivatives(dyn, np.ones(2), np.zeros((3, 1)))[0] == "rollout_derivatives"
    assert protocol.knot_derivatives(dyn, np.ones((3, 2)), np.zeros((3, 1)))[0] == "knot_derivatives"
    assert dyn.calls == 0


def test_one_detection_per_step_for_the_states_and_the_jacobians(monkeypatch):
    sim, x0, us = _catapult()
    cm = sim.contact_model  # each contact solve runs detection once (inside the fused step's one call too)
    calls = []
    solve = cm.solve
    monkeypatch.setattr(cm, "solve", lambda *a: calls.append(1) or solve(*a))
    # the fused whole step (Simulator._fused_step) solves without cm.solve; its solves are counted here
    keep = sim._fused_bookkeeping
    monkeypatch.setattr(sim, "_fused_bookkeeping", lambda d, x, u, out, code, st: (code == 2 and calls.append(1))
                        or keep(d, x, u, out, code, st))

    class Counted:  # the fused step's Jacobians (FusedStep.step_derivatives: code 2, a contact solve ran)
        def __init__(self, fs):
            self.fs = fs

        def __getattr__(self, name):
            return getattr(self.fs, name)

        def step_derivatives(self, *a):
            code, st = self.fs.step_derivatives(*a)
            if code == 2:
                calls.append(1)
            return code, st

    if sim._fused_step is not None:
        monkeypatch.setattr(sim, "_fused_step", Counted(sim._fused_step))
    protocol.rollout_derivatives(sim, x0, us)
    assert len(calls) == len(us)
    calls.clear()
    xs = sim.rollout(x0, us)  # a solver's rollout, then the Jacobians along it: no second detection
    sim.knot_derivatives(xs, us)
    assert len(calls) == len(us)
