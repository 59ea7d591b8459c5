"""DDP: exact on linear-quadratic problems (against a dense reference), swing-ups, bounds, failures."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from solvers import solve
from trajopt import OCP, ControlCost, StateCost
from trajopt.solution import Status


class Linear:
    """x+ = A x + B u on a plain vector state (the protocol, no Pinocchio)."""

    def __init__(self, A, B):
        self.A, self.B = A, B
        self.nx = self.ndx = A.shape[0]
        self.nu = B.shape[1]

    def step(self, x, u):
        return self.A @ x + self.B @ u

    def step_derivatives(self, x, u):
        return self.step(x, u), self.A.copy(), self.B.copy()

    def state_integrate(self, x, dx):
        return x + dx

    def state_difference(self, x0, x1):
        return x1 - x0


def lq_problem(T=30, seed=0, bounds=None):
    rng = np.random.default_rng(seed)
    n, m = 4, 2
    A = np.eye(n) + 0.1 * rng.standard_normal((n, n))
    B = 0.1 * rng.standard_normal((n, m))
    dyn = Linear(A, B)
    x0 = rng.standard_normal(n)
    Q, R, Qf = np.diag(rng.uniform(0.5, 2, n)), np.diag(rng.uniform(0.1, 1, m)), 10 * np.eye(n)
    ocp = OCP(dynamics=dyn, x0=x0, horizon=T, running_cost=StateCost(dyn, np.zeros(n), Q) + ControlCost(dyn, R),
              terminal_cost=StateCost(dyn, np.zeros(n), Qf),
              u_lower=None if bounds is None else -bounds, u_upper=None if bounds is None else bounds)
    return ocp, (A, B, x0, Q, R, Qf)


def dense_lq_reference(A, B, x0, Q, R, Qf, T):
    """The optimal controls of the unconstrained LQ problem by one dense least-squares solve."""
    n, m = B.shape
    # x_t = A^t x0 + sum_{s<t} A^(t-1-s) B u_s  ->  X = Phi x0 + Gam U
    Phi = np.vstack([np.linalg.matrix_power(A, t) for t in range(T + 1)])
    Gam = np.zeros(((T + 1) * n, T * m))
    for t in range(1, T + 1):
        for s in range(t):
            Gam[t * n:(t + 1) * n, s * m:(s + 1) * m] = np.linalg.matrix_power(A, t - 1 - s) @ B
    W = np.zeros(((T + 1) * n, (T + 1) * n))
    for t in range(T):
        W[t * n:(t + 1) * n, t * n:(t + 1) * n] = Q
    W[T * n:, T * n:] = Qf
    Rb = np.kron(np.eye(T), R)
    H = Gam.T @ W @ Gam + Rb
    g = Gam.T @ W @ (Phi @ x0)
    return np.linalg.solve(H, -g).reshape(T, m)


def test_ddp_is_exact_on_a_linear_quadratic_problem_in_one_iteration():
    ocp, (A, B, x0, Q, R, Qf) = lq_problem()
    ref = dense_lq_reference(A, B, x0, Q, R, Qf, ocp.horizon)
    sol = solve(ocp, method="ddp", max_iter=1, verbose=False, reg_init=0.0, reg_min=0.0)
    assert np.allclose(sol.us, ref, atol=1e-9)
    again = solve(ocp, method="ddp", max_iter=5, verbose=False, reg_init=0.0, reg_min=0.0, us_init=sol.us)
    assert again.status == Status.CONVERGED and again.iterations == 1  # nothing left to gain


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_bounded_lq_respects_the_bounds_and_beats_clipping(method):
    ocp, (A, B, x0, Q, R, Qf) = lq_problem(bounds=np.array([0.3, 0.3]), seed=2)
    ref = dense_lq_reference(A, B, x0, Q, R, Qf, ocp.horizon)
    assert np.abs(ref).max() > 0.3  # the bounds are active
    sol = solve(ocp, method=method, max_iter=100, verbose=False)
    assert sol.status == Status.CONVERGED
    assert np.all(sol.us <= 0.3) and np.all(sol.us >= -0.3)
    clipped = np.clip(ref, -0.3, 0.3)
    assert sol.cost <= ocp.cost(ocp.rollout(clipped), clipped) - 1e-6
    if method == "gn":  # one convex problem, one optimum
        assert sol.cost == pytest.approx(solve(ocp, method="ddp", max_iter=100, verbose=False).cost, rel=1e-6)


@pytest.mark.parametrize("name, bound", [("pendulum", 0.1), ("cartpole", 0.05)])
def test_swing_ups_reach_the_upright(name, bound):
    ocp = problems.load(name)
    sol = solve(ocp, method="ddp", max_iter=150, verbose=False)
    figures = ocp.evaluate(sol.xs, sol.us)
    assert sol.status == Status.CONVERGED
    assert figures["final_angle_error"] < bound
    assert np.all(sol.us <= ocp.u_upper + 1e-12) and np.all(sol.us >= ocp.u_lower - 1e-12)
    assert np.allclose(ocp.rollout(sol.us), sol.xs)  # the returned states are the controls' rollout
    costs = [h["cost"] for h in sol.history]
    assert all(b <= a for a, b in zip(costs, costs[1:]))  # monotone decrease


def test_unknown_method_is_named():
    with pytest.raises(ValueError, match=r"unknown method 'newton'; available: .*ddp"):
        solve(problems.load("pendulum"), method="newton")


def test_progress_table_and_callback(capsys):
    seen = []
    solve(problems.load("pendulum", horizon=50), method="ddp", max_iter=3, callback=seen.append)
    out = capsys.readouterr().out
    assert "[ddp]" in out and "cost" in out and len(seen) == 3 and {"iteration", "cost", "time"} <= set(seen[0])


def test_interrupt_returns_the_last_iterate():
    ocp = problems.load("pendulum", horizon=50)

    def stop(info):
        if info["iteration"] == 1:
            raise KeyboardInterrupt

    sol = solve(ocp, method="ddp", max_iter=50, callback=stop, verbose=False)
    assert sol.status == Status.INTERRUPTED and sol.iterations == 2 and np.all(np.isfinite(sol.xs))


def _backward_cases():
    """(name, ocp, us): catapult and go1-hold at their initial guesses, and box-constrained problems
    whose bounds are active (a bounded LQ, the cart-pole)."""
    bounded, _ = lq_problem(bounds=np.array([0.3, 0.3]), seed=2)
    yield "lq-bounded", bounded, bounded.us_init
    for name in ("catapult", "go1-hold", "cartpole"):
        ocp = problems.load(name)
        yield name, ocp, ocp.us_init


@pytest.mark.parametrize("case", list(_backward_cases()), ids=lambda c: c[0])
def test_compiled_backward_pass_equals_the_reference(case):
    """The numba backward pass (one call for all knots) against the Python reference: gains and
    expected decrease to 1e-12 (on this machine they are bitwise equal), at the regularizations DDP
    uses and at none; and the same failure where Quu is indefinite."""
    from solvers import ddp

    _, ocp, us = case
    us = np.clip(np.asarray(us, dtype=float), ocp.u_lower, ocp.u_upper)
    xs = ocp.rollout(us)
    derivs = ddp.derivatives(ocp, xs, us)
    clamped = 0
    for reg in (0.0, 1e-9, 1e-6, 1e-2):
        K, k, dV1, dV2 = ddp.backward_pass(ocp, xs, us, derivs, reg)
        K0, k0, dV10, dV20 = ddp._backward_pass_reference(ocp, xs, us, derivs, reg)
        assert np.abs(K - K0).max() <= 1e-12 * max(1.0, np.abs(K0).max())
        assert np.abs(k - k0).max() <= 1e-12 * max(1.0, np.abs(k0).max())
        assert abs(dV1 - dV10) <= 1e-12 * max(1.0, abs(dV10)) and abs(dV2 - dV20) <= 1e-12 * max(1.0, abs(dV20))
        clamped += int((K0 == 0).all(axis=2).sum())
    if case[0] in ("lq-bounded", "cartpole"):
        assert clamped > 0  # the box QP clamps some controls: the bounded branch is compared too
    for fn in (ddp.backward_pass, ddp._backward_pass_reference):
        with pytest.raises(ddp.BackwardPassError, match="not positive definite"):
            fn(ocp, xs, us, derivs, -1e12)
