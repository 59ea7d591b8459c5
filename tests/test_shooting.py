"""Multiple shooting / IPOPT through the CasADi callbacks."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import problems
from solvers import solve
from trajopt import casadi_step
from trajopt.casadi_bridge import casadi_cost_local, casadi_step_local
from trajopt.solution import Status


def test_casadi_step_value_and_jacobian_equal_the_simulators():
    sim = problems.load("catapult").dynamics
    f = casadi_step(sim)
    x = ca.MX.sym("x", sim.nx)
    u = ca.MX.sym("u", sim.nu)
    J = ca.Function("J", [x, u], [f(x, u), ca.jacobian(f(x, u), x), ca.jacobian(f(x, u), u)])
    rng = np.random.default_rng(0)
    for _ in range(3):
        xv = problems.load("catapult").x0 + 0.05 * rng.standard_normal(sim.nx)
        uv = rng.uniform(-100, 100, sim.nu)
        xn, Fx, Fu = sim.step_derivatives(xv, uv)
        a, b, c = (np.asarray(v) for v in J(xv, uv))
        assert np.allclose(a.ravel(), xn) and np.allclose(b, Fx) and np.allclose(c, Fu)


def test_casadi_step_refuses_free_flyer_states():
    from tests.conftest import free_body_simulator

    with pytest.raises(ValueError, match="needs a Euclidean state.*casadi_step_local"):
        casadi_step(free_body_simulator())


def test_local_chart_step_and_costs_have_the_exact_jacobians_of_a_free_flyer_in_contact():
    """Go1 standing on its feet (LCP contact, free-flyer base): the local-chart step's and
    costs' CasADi derivatives equal central differences of the same functions."""
    ocp = problems.load("go1-hold", horizon=5)
    sim = ocp.dynamics
    x0, u0 = ocp.x0, ocp.us_init[0]
    xb1 = sim.step(x0, u0)
    d, u = ca.MX.sym("d", sim.ndx), ca.MX.sym("u", sim.nu)
    step = casadi_step_local(sim)  # keep the callback alive while CasADi uses it
    y = step(d, u, ca.DM(x0), ca.DM(xb1))
    F = ca.Function("F", [d, u], [y, ca.jacobian(y, d), ca.jacobian(y, u)])
    rng = np.random.default_rng(0)
    dv = 1e-3 * rng.standard_normal(sim.ndx)
    _, A, B = (np.asarray(v) for v in F(dv, u0))
    assert np.allclose(np.asarray(F(np.zeros(sim.ndx), u0)[0]).ravel(), 0.0, atol=1e-12)  # the chart's origin
    h = 1e-6

    def f(dd, uu):
        return np.asarray(F(dd, uu)[0]).ravel()

    fd_A = np.stack([(f(dv + h * e, u0) - f(dv - h * e, u0)) / (2 * h) for e in np.eye(sim.ndx)], axis=1)
    fd_B = np.stack([(f(dv, u0 + h * e) - f(dv, u0 - h * e)) / (2 * h) for e in np.eye(sim.nu)], axis=1)
    assert np.abs(A - fd_A).max() < 1e-7 * np.abs(A).max() and np.abs(B - fd_B).max() < 1e-7 * np.abs(B).max()
    for cost, terminal in ((ocp.running(0), False), (ocp.terminal_cost, True)):
        c = casadi_cost_local(cost, sim, terminal=terminal)
        val = c(d, ca.DM(x0)) if terminal else c(d, u, ca.DM(x0))
        C = ca.Function("C", [d, u], [val, ca.gradient(val, d)])
        g = np.asarray(C(dv, u0)[1]).ravel()
        fd = np.array([(float(C(dv + h * e, u0)[0]) - float(C(dv - h * e, u0)[0])) / (2 * h) for e in np.eye(sim.ndx)])
        assert np.abs(g - fd).max() < 1e-6 * np.abs(g).max()


@pytest.mark.parametrize("method, options", [("ipopt", {}), ("shooting", {"shot_length": 5})])
def test_shooting_on_a_free_flyer_in_contact(method, options):
    """Go1 from zero torques (it sags) to the torques that hold it: knots are tangent increments."""
    T = 20
    ocp = problems.load("go1-hold", horizon=T)
    u0 = np.zeros((T, ocp.nu))
    start = ocp.cost(ocp.rollout(u0), u0)
    sol = solve(ocp, method=method, us_init=u0, max_iter=100, verbose=False, **options)
    assert sol.status == Status.CONVERGED and sol.info["max_defect"] < 1e-6
    assert start > 1.0 and sol.cost < 1e-8
    q = sol.xs[:, 3:7]  # the base quaternion of every state: a unit one (the rollout of the answer)
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0)


def test_ipopt_derivative_checker_passes_on_a_short_catapult(capsys):
    """IPOPT's own finite-difference check of the constraint Jacobian and the gradient, at the
    initial point (IPOPT's default moves the point at random, across contact modes). The
    projectile rests on the floor (a contact that a small perturbation does not break) and the
    arm is away from its joint limits (the stated start has link 2 exactly at its limit)."""
    ocp = problems.load("catapult", horizon=30)
    ocp.x0 = ocp.x0.copy()
    ocp.x0[:5] = (1.0, -0.525, np.deg2rad(45), np.deg2rad(30), np.deg2rad(45))
    sol = solve(ocp, method="ipopt", max_iter=1, verbose=True,
                ipopt_options={"derivative_test": "first-order", "point_perturbation_radius": 0.0,
                               "derivative_test_perturbation": 1e-7, "derivative_test_tol": 1e-3})
    out = capsys.readouterr().out
    assert "Starting derivative checker for first derivatives" in out
    assert "No errors detected by derivative checker" in out
    assert np.all(np.isfinite(sol.xs))
    stats = ocp.dynamics.warm_start_stats
    assert stats["contact_steps"] > 0  # the check went through contact
    # each knot's Jacobian callback comes right after CasADi evaluated the step there: it reuses that solve
    assert stats["reused"] >= ocp.horizon, stats


@pytest.mark.parametrize("method, options", [("ipopt", {}), ("shooting", {"shot_length": 10}), ("ddp", {}), ("gn", {})])
def test_cartpole_swing_up_by_every_method(method, options):
    ocp = problems.load("cartpole")
    sol = solve(ocp, method=method, verbose=False, max_iter=200, **options)
    # Single-shooting gn converges linearly on this unstable system: 200 iterations reach 26.1348
    # (DDP: 48 to 26.1347), short of its tight convergence test.
    assert sol.status == Status.CONVERGED or (method == "gn" and sol.status == Status.MAX_ITERATIONS)
    assert ocp.evaluate(sol.xs, sol.us)["final_angle_error"] < 0.05
    assert sol.cost < 30.0  # the optimum is 26.13
    assert np.all(sol.us <= ocp.u_upper + 1e-9) and np.all(sol.us >= ocp.u_lower - 1e-9)
    if method in ("ipopt", "shooting"):
        assert sol.info["max_defect"] < 1e-6


def test_shooting_rejects_bad_options():
    ocp = problems.load("pendulum", horizon=10)
    with pytest.raises(ValueError, match="shot_length must be an integer >= 1 or None"):
        solve(ocp, method="shooting", shot_length=0)
    with pytest.raises(ValueError, match="shot_length must be an integer >= 1 or None"):
        solve(ocp, method="shooting", shot_length=2.5)
    with pytest.raises(ValueError, match="unknown hessian 'bfgs'"):
        solve(ocp, method="shooting", hessian="bfgs")


def test_opti_example_swings_the_cartpole_up():
    """The documented example: a user's own casadi.Opti problem around casadi_step."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "opti_cartpole.py"
    spec = importlib.util.spec_from_file_location("opti_cartpole", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    xs, us = mod.swing_up(T=100, verbose=False)
    assert np.allclose(xs[-1], [0.0, np.pi, 0.0, 0.0], atol=1e-6)
    assert np.abs(us).max() <= 30.0 + 1e-6
    sim = problems.load("cartpole").dynamics
    assert np.allclose(sim.rollout(xs[0], us), xs, atol=1e-6)  # the solution obeys the simulator


def test_single_shooting_has_no_state_variables_and_reaches_the_direct_transcription_optimum():
    """shot_length=None: the controls are the only variables; every iterate is a rollout."""
    ocp = problems.load("pendulum", horizon=40)
    single = solve(ocp, method="shooting", shot_length=None, hessian="lbfgs", verbose=False, max_iter=300)
    direct = solve(ocp, method="ipopt", verbose=False, max_iter=300)
    assert single.status == Status.CONVERGED and direct.status == Status.CONVERGED
    assert single.info["shot_length"] == 40 and all(h["max_defect"] == 0.0 for h in single.history)
    assert abs(single.cost - direct.cost) <= 1e-5 * abs(direct.cost)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 5])
def test_catapult_by_shooting_reaches_the_target_within_1cm(seed):
    """Issue 11 target: `trajopt solve catapult --method shooting` within 1 cm in 300 s, by the
    problem's advice (CEM search, single shooting, L-BFGS). Slow: 30-160 s each."""
    ocp = problems.load("catapult")
    sol = solve(ocp, "shooting", seed=seed, verbose=False)
    assert sol.method == "cem-shooting"
    assert ocp.evaluate(sol.xs, sol.us)["distance_to_target"] < 0.01


def test_a_feasible_run_without_progress_stops_as_stalled():
    """The crawl test of solve_shooting(stall_iterations=...): best cost over the last n iterations
    against the best before them; a run with open defects is never judged."""
    from solvers.shooting import _Recorder

    def recorder(costs, defect=0.0, stall=(3, 0.01)):
        rec = _Recorder(1, 0, 0.0, [], None, None, stall)
        rec.history.extend({"cost": c, "max_defect": defect} for c in costs)
        return rec._no_progress()

    assert recorder([1.0, 0.999, 0.998, 0.997]) is not None  # 0.3% in 3 iterations
    assert "0.30%" in recorder([1.0, 0.999, 0.998, 0.997])
    assert recorder([1.0, 0.999, 0.998, 0.98]) is None  # 2%
    assert recorder([1.0, 1.2, 1.3, 1.1]) is not None  # worse than before
    assert recorder([1.0, 0.999, 0.998]) is None  # too few iterations to judge
    assert recorder([1.0, 0.999, 0.998, 0.997], defect=1e-3) is None  # shots not joined yet
    assert recorder([1.0, 0.999, 0.998, 0.997], stall=None) is None
    with pytest.raises(ValueError, match="stall_iterations must be >= 1"):
        solve(problems.load("pendulum", horizon=10), method="shooting", stall_iterations=0)


def test_shooting_stops_a_crawl_as_stalled_with_its_reason():
    ocp = problems.load("pendulum", horizon=40)
    sol = solve(ocp, method="shooting", shot_length=None, hessian="lbfgs", verbose=False, stall_iterations=2,
                stall_progress=0.99)
    assert sol.status == Status.STALLED and "no progress" in sol.info["message"]
    assert sol.iterations <= 4


class _Signal(KeyboardInterrupt):
    """What the CLI's SIGTERM handler raises (app.cli.Stopped is a KeyboardInterrupt)."""


@pytest.mark.parametrize("raised", ["plain", "chained"])
def test_a_signal_inside_a_casadi_callback_stops_ipopt_as_interrupted(monkeypatch, raised):
    """A Ctrl-C / SIGTERM lands in whatever Python code runs: nearly always one of the step or cost
    callbacks CasADi calls. It must not escape into CasADi (a traceback, Invalid_Number_Detected,
    status failed): IPOPT stops at its next iteration with the last iterate, status interrupted.
    ``chained``: the signal arrived inside CasADi's own conversion code, which reports it as a
    SystemError whose cause is the KeyboardInterrupt (seen in the battery)."""
    ocp = problems.load("pendulum", horizon=30)
    dyn = ocp.dynamics
    real_step = dyn.step
    calls = {"n": 0}

    def step(x, u):
        calls["n"] += 1
        if calls["n"] == 30 * 6:  # within the sixth evaluation of the trajectory
            if raised == "plain":
                raise _Signal("SIGTERM")
            try:
                raise _Signal("SIGTERM")
            except _Signal as exc:
                raise SystemError("<function DM.__array__> returned a result with an exception set") from exc
        return real_step(x, u)

    monkeypatch.setattr(dyn, "step", step)
    sol = solve(ocp, method="ipopt", max_iter=200, verbose=False)
    assert calls["n"] >= 30 * 6
    assert sol.status == Status.INTERRUPTED, sol.info["message"]
    assert sol.info["ipopt_status"] == "User_Requested_Stop"
    assert np.isfinite(sol.xs).all() and len(sol.history) >= 1
    # the next solve is not stopped by the noted signal of this one
    monkeypatch.setattr(dyn, "step", real_step)
    again = solve(ocp, method="ipopt", max_iter=3, verbose=False)
    assert again.status != Status.INTERRUPTED
