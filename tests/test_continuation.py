"""Continuation on relaxed contact (solvers.continuation): a push that hard-contact gradients cannot see."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import ModelBuilder, Simulator
from solvers import Status, resolve_schedule, solve
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost

GAP = 0.02  # the pusher starts 2 cm short of the box


def pusher_scene(dt=0.01):
    """Planar, y up: a 1 kg box (0.1 m) on a 2-D joint resting on a floor, and a 1 kg pusher (0.05 m cube)
    on an actuated horizontal slider at the box's mid-height, ``GAP`` to its left."""
    b = ModelBuilder("pusher", gravity=(0.0, -9.81, 0.0))
    j = b.add_joint("translation2d", name="box")
    b.add_body(j, mass=1.0, box=(0.1, 0.1, 0.1))
    s = b.add_joint("prismatic", name="slider", axis="x", placement=(-0.075 - GAP, 0.0, 0.0), effort=20.0)
    b.add_body(s, mass=1.0, box=(0.05, 0.05, 0.05))
    b.add_static_box("floor", (3.0, 0.2, 0.5), (0.0, -0.15, 0.0))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, actuated=["slider"], planar=True, friction=0.3,
                     collision_pairs=[("box_body1", "slider_body2"), ("box_body1", "floor")])


def push_ocp(target=0.05, horizon=60):
    sim = pusher_scene()

    def value(x, u=None):
        return 100.0 * (x[0] - target) ** 2

    def derivatives(x, u=None):
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = value(x)
        out.Lx[0] = 200.0 * (x[0] - target)
        out.Lxx[0, 0] = 200.0
        return out

    x0 = np.zeros(sim.nx)
    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=ControlCost(sim, 1e-6),
               terminal_cost=FunctionCost(sim, value, derivatives), name="push")


@pytest.fixture(scope="module")
def push():
    return push_ocp()


def test_hard_gradient_is_zero_and_continuation_pushes_the_box(push):
    # hard contact: the pusher never reaches the box, so nothing moves it
    plain = solve(push, "ddp", max_iter=20, verbose=False)
    assert abs(plain.xs[-1, 0]) < 1e-12
    assert plain.status == Status.STALLED and plain.info["message"].startswith("zero gradient")
    assert "smoothing='auto'" in plain.info["message"]  # what to try
    sol = solve(push, "ddp", smoothing="auto", max_iter=50, verbose=False)
    # the answer is judged on hard contact: its states are the hard rollout of its controls
    assert np.allclose(sol.xs, push.rollout(sol.us), atol=1e-12, rtol=0)
    assert sol.cost == pytest.approx(push.cost(sol.xs, sol.us), rel=1e-12)
    assert abs(sol.xs[-1, 0] - 0.05) < 2e-3  # the box reaches the target within 2 mm
    stages = sol.info["stages"]
    assert [s["kappa"] for s in stages] == resolve_schedule(push.dynamics, "auto")
    assert stages[-1]["kappa"] == 0.0 and all(s["kappa"] > 0 for s in stages[:-1])
    assert all(np.isfinite(s["hard_cost"]) for s in stages[:-1])
    assert sol.cost < 1e-2 * plain.cost
    if sol.status == Status.CONVERGED:  # the hard stage's status went through the same checks
        assert not sol.info["gradient_reach"]["stalled"]


def test_continuation_reports_its_hard_stage_stall(push):
    """A schedule too soft to reach the box leaves the hard stage at the zero-gradient stop."""
    sol = solve(push, "ddp", smoothing=[1e-12], max_iter=20, verbose=False)
    assert [s["kappa"] for s in sol.info["stages"]] == [1e-12, 0.0]
    assert sol.status == Status.STALLED and sol.info["stages"][-1]["status"] == "stalled"
    assert sol.info["message"].startswith("zero gradient") and "even after smoothing" in sol.info["message"]


def test_continuation_with_gn(push):
    sol = solve(push, "gn", smoothing="auto", max_iter=60, verbose=False)
    assert abs(sol.xs[-1, 0] - 0.05) < 2e-3
    assert np.allclose(sol.xs, push.rollout(sol.us), atol=1e-12, rtol=0)


def test_one_large_kappa_pushes_from_a_distance(push):
    """A single soft stage: the relaxed answer pushes the box without touching it, so the hard
    stage starts where hard contact has no gradient -- why the automatic schedule goes down slowly."""
    sol = solve(push, "gn", smoothing=0.05, max_iter=60, verbose=False)
    soft, hard = sol.info["stages"]
    assert (soft["kappa"], hard["kappa"]) == (0.05, 0.0)
    assert soft["cost"] < 1e-2 * soft["hard_cost"]  # solved on the soft model, not on the hard one


def test_schedules():
    sim = pusher_scene()
    auto = resolve_schedule(sim, "auto")
    assert auto[-1] == 0.0 and all(a > b for a, b in zip(auto, auto[1:]))
    assert auto[0] == pytest.approx(sim.smoothing_scale * 0.03)
    assert resolve_schedule(sim, "none") == [0.0] and resolve_schedule(sim, None) == [0.0]
    assert resolve_schedule(sim, [0.3, 0.1]) == [0.3, 0.1, 0.0]
    assert resolve_schedule(sim, "0.2") == [0.2, 0.0]


@pytest.mark.parametrize("bad, match", [(-1.0, "kappa >= 0"), (float("nan"), "kappa >= 0"),
                                        ("fast", "'auto', 'none' or a number"), ([0.1, -0.1], "kappa >= 0")])
def test_bad_smoothing_is_a_clear_error(push, bad, match):
    with pytest.raises(ValueError, match=match):
        solve(push, "ddp", smoothing=bad, verbose=False)


def test_smoothing_with_a_method_that_cannot_use_it(push):
    with pytest.raises(ValueError, match=r"cannot use smoothing \(it uses no gradients\).*ddp"):
        solve(push, "cem", smoothing="auto", verbose=False)
    # design-search polishes with DDP and smooths that polish itself ("uses no gradients" was wrong there)
    from solvers.continuation import check_smoothing

    with pytest.raises(ValueError, match=r"'design-search' cannot use smoothing \(it smooths by itself: its polish"):
        check_smoothing("design-search", "auto")


def test_smoothing_needs_dynamics_that_can_relax(push):
    class Plain:  # a user's own dynamics: the protocol without with_smoothing
        nx, ndx, nu = push.nx, push.ndx, push.nu

        def step(self, x, u):
            return push.dynamics.step(x, u)

        def step_derivatives(self, x, u):
            return push.dynamics.step_derivatives(x, u)

        def state_difference(self, x0, x1):
            return push.dynamics.state_difference(x0, x1)

        def state_integrate(self, x, dx):
            return push.dynamics.state_integrate(x, dx)

    with pytest.raises(TypeError, match="with_smoothing"):
        resolve_schedule(Plain(), "auto")


def test_a_hybrid_with_smoothing_takes_its_search_options_to_the_first_stage_only(push):
    sol = solve(push, "cem-ddp", smoothing=[1.0], seed=3, population=8, cem_iterations=1, max_iter=5, verbose=False)
    assert [s["method"] for s in sol.info["stages"]] == ["cem-ddp", "ddp"]
    assert np.allclose(sol.xs, push.rollout(sol.us), atol=1e-12, rtol=0)


def test_a_failed_smoothed_stage_is_skipped_and_the_solve_still_ends_on_hard_contact(push):
    from solvers import METHODS
    from solvers.continuation import solve_continuation
    from trajopt.solution import Solution

    def fails_when_smoothed(ocp, **options):
        if ocp.dynamics.smoothing > 0:
            us = options["us_init"]
            return Solution(ocp.rollout(us) * np.nan, us, np.inf, [], Status.FAILED, "ddp", 0.0,
                            {"message": "diverged"})
        return METHODS["ddp"](ocp, **options)

    sol = solve_continuation(push, "ddp", {"ddp": fails_when_smoothed}, [1.0, 0.1], max_iter=3, verbose=False)
    assert [s["status"] for s in sol.info["stages"]][:2] == ["failed", "failed"]
    assert sol.info["stages"][-1]["kappa"] == 0.0 and sol.status != Status.FAILED
    assert np.all(np.isfinite(sol.xs))


def test_ctrl_c_between_stages_returns_the_last_stage_on_hard_contact(push):
    """A Ctrl-C that reaches the continuation between two stages (or before a stage's solver can catch it, e.g.
    in its initial rollout) raised out of the solve, losing the stages already done."""
    from solvers import METHODS
    from solvers.continuation import solve_continuation

    calls = []

    def interrupted_at_the_second_stage(ocp, **options):
        calls.append(ocp.dynamics.smoothing)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return METHODS["ddp"](ocp, **options)

    sol = solve_continuation(push, "ddp", {"ddp": interrupted_at_the_second_stage}, [1.0, 0.1], max_iter=3,
                             verbose=False)
    assert calls == [1.0, 0.1]
    assert sol.status == Status.INTERRUPTED
    assert [s["kappa"] for s in sol.info["stages"]] == [1.0]
    first = sol.info["stages"][0]
    assert sol.cost == pytest.approx(first["hard_cost"], rel=1e-12)  # stage 1's controls, judged on hard contact
    assert np.allclose(sol.xs, push.rollout(sol.us), atol=1e-12, rtol=0)
