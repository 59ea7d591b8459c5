"""Honest statuses: CONVERGED only at a first-order optimum whose gradient means something.

A zero-gradient stop (the cost wants a state to move that no control moves: on hard contact,
a hand short of the box) is STALLED with a message, by every method, while a genuine optimum of
the same problem family stays CONVERGED (solvers._common.gradient_reach, finish)."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import solve
from solvers._common import REACH_TOL, finish, gradient_reach
from solvers.shooting import ipopt_status
from trajopt import OCP, ControlCost, StateCost
from trajopt.solution import Status

from .test_ddp import Linear

METHODS = ["ddp", "gn", "ipopt", "shooting", "cem-ddp", "cem-gn"]
OPTIONS = {"shooting": {"shot_length": 5}, "cem-ddp": {"population": 8, "max_iter": 50},
           "cem-gn": {"population": 8, "max_iter": 50}}


def reach_problem(coupling: float, T: int = 20) -> OCP:
    """``x = (a, b)``, ``a+ = a + 0.1 u``, ``b+ = b + coupling u``; the terminal cost wants ``b = 1``
    (and ``a = 0``). With ``coupling = 0`` no control moves ``b``: the gradient of the cost with
    respect to the controls is exactly zero at ``u = 0``, though the cost is not at its minimum."""
    dyn = Linear(np.eye(2), np.array([[0.1], [coupling]]))
    return OCP(dynamics=dyn, x0=np.zeros(2), horizon=T, running_cost=ControlCost(dyn, 1e-2),
               terminal_cost=StateCost(dyn, np.array([0.0, 1.0]), 10.0), name=f"reach-{coupling}")


@pytest.mark.parametrize("method", METHODS)
def test_a_problem_with_an_exactly_zero_gradient_returns_stalled_not_converged(method):
    ocp = reach_problem(coupling=0.0)
    sol = solve(ocp, method=method, verbose=False, **OPTIONS.get(method, {}))
    assert sol.status == Status.STALLED, sol.info["message"]
    assert sol.info["message"].startswith("zero gradient") and "no control can move" in sol.info["message"]
    assert sol.cost == pytest.approx(5.0)  # b never moved


@pytest.mark.parametrize("method", METHODS)
def test_a_genuine_optimum_of_the_same_family_is_converged(method):
    ocp = reach_problem(coupling=0.05)
    sol = solve(ocp, method=method, verbose=False, **OPTIONS.get(method, {}))
    assert sol.status == Status.CONVERGED, sol.info["message"]
    assert sol.info["message"].startswith("first-order optimal")
    assert sol.info["gradient_reach"]["ratio"] > 1e3 * REACH_TOL
    # one control moves a and b together (a = 2 b): the optimum trades a's term against b's and
    # ends at cost 4 + 0.004 (from 5): the state gradient does not vanish there, it is balanced
    assert sol.cost < 4.01


def test_gradient_reach_is_scale_free_and_separates_the_two_cases():
    u = np.zeros((20, 1))
    for scale in (1e-6, 1.0, 1e6):  # the ratio does not depend on the cost's or the controls' units
        for coupling, stalled in ((0.0, True), (0.05, False), (1e-3, False)):
            ocp = reach_problem(coupling)
            ocp.terminal_cost = scale * ocp.terminal_cost
            reach = gradient_reach(ocp, ocp.rollout(u), u)
            assert reach.stalled == stalled and reach.carried <= reach.ceiling * (1 + 1e-12)
    # a cost already at its minimum in the states wants nothing: not a stall
    ocp = reach_problem(0.0)
    ocp.terminal_cost = StateCost(ocp.dynamics, np.zeros(2), 10.0)
    assert not gradient_reach(ocp, ocp.rollout(u), u).stalled


def test_non_finite_answers_fail_with_a_message():
    ocp = reach_problem(0.05)
    u = np.zeros((20, 1))
    xs = ocp.rollout(u)
    xs[3, 1] = np.nan
    sol = finish(ocp, method="x", xs=xs, us=u, cost=1.0, history=[], status=Status.CONVERGED, t0=0.0)
    assert sol.status == Status.FAILED and "non-finite states" in sol.info["message"]
    sol = finish(ocp, method="x", xs=ocp.rollout(u), us=u, cost=np.inf, history=[], status=Status.MAX_ITERATIONS,
                 t0=0.0)
    assert sol.status == Status.FAILED and "non-finite cost" in sol.info["message"]


@pytest.mark.parametrize("code, defect, status", [
    ("Solve_Succeeded", 1e-9, Status.CONVERGED),
    ("Solved_To_Acceptable_Level", 1e-9, Status.CONVERGED),
    ("Solve_Succeeded", 1e-3, Status.STALLED),  # the shots do not join: not an answer
    ("Solved_To_Acceptable_Level", np.nan, Status.STALLED),
    ("Maximum_Iterations_Exceeded", 1.0, Status.MAX_ITERATIONS),
    ("Maximum_CpuTime_Exceeded", 1.0, Status.MAX_ITERATIONS),
    ("Maximum_WallTime_Exceeded", 1.0, Status.MAX_ITERATIONS),
    ("Restoration_Failed", 1.0, Status.STALLED),
    ("Infeasible_Problem_Detected", 1.0, Status.STALLED),
    ("Search_Direction_Becomes_Too_Small", 1e-9, Status.STALLED),
    ("Invalid_Number_Detected", 1e-9, Status.FAILED),
    ("Some_New_Code", 1e-9, Status.FAILED),
])
def test_ipopt_return_codes_map_to_statuses_with_the_code_in_the_message(code, defect, status):
    got, message = ipopt_status(code, defect, 1e-6)
    assert got == status and code in message


def kink_problem(T: int = 10) -> OCP:
    """``x+ = x + u`` (1-D), terminal cost ``|x - 1| + 0.005 (x - 1)^2``: a kink at ``x = 1``, the
    non-smooth minimum a contact event makes. The local quadratic model always promises a
    decrease of about ``1 / (2 * 0.01)`` that no step realizes near the kink."""
    from trajopt import CostDerivatives, FunctionCost

    dyn = Linear(np.eye(1), np.eye(1))

    def value(x, u=None):
        e = x[0] - 1.0
        return abs(e) + 0.005 * e * e

    def derivatives(x, u=None):
        e = x[0] - 1.0
        out = CostDerivatives.zeros(1, 1)
        out.L = value(x)
        out.Lx[0] = np.sign(e) + 0.01 * e
        out.Lxx[0, 0] = 0.01
        return out

    return OCP(dynamics=dyn, x0=np.zeros(1), horizon=T, running_cost=ControlCost(dyn, 1e-6),
               terminal_cost=FunctionCost(dyn, value, derivatives), name="kink")


def test_ddp_stopping_at_a_kink_is_stalled_not_converged():
    ocp = kink_problem()
    sol = solve(ocp, method="ddp", max_iter=200, verbose=False)
    assert abs(sol.xs[-1, 0] - 1.0) < 1e-3  # it got to the kink
    assert sol.status == Status.STALLED and sol.info["message"].startswith("a kink"), sol.info["message"]
