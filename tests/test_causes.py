"""A run that cannot go on says why, naming the cause (issue 16): a cost that is NaN, NaN gradients,
a user's dynamics returning Jacobians of the wrong shape, a workspace of another simulator. And
``dt`` as a numpy float32 is a valid time step."""

from __future__ import annotations

import numpy as np
import pytest

from problems.cartpole import cartpole_simulator, pendulum_simulator
from solvers import solve
from trajopt import OCP, ControlCost, StateCost
from trajopt.costs import Cost, CostDerivatives
from trajopt.solution import Status

from .test_ddp import Linear


def linear_problem(dyn=None, *, terminal=None, T=10) -> OCP:
    dyn = dyn or Linear(np.eye(2), np.array([[0.1], [0.05]]))
    return OCP(dynamics=dyn, x0=np.zeros(2), horizon=T, running_cost=ControlCost(dyn, 1e-2),
               terminal_cost=terminal or StateCost(dyn, np.array([0.0, 1.0]), 10.0), name="linear")


class NaNBeyond(Cost):
    """A broken terminal cost: NaN once the first state passes ``edge`` (plain float arithmetic, no raise)."""

    def __init__(self, dyn, edge):
        self.ndx, self.nu, self.edge = dyn.ndx, dyn.nu, edge

    def value(self, x, u=None):
        return float("nan") if x[0] > self.edge else float((x[1] - 1.0) ** 2)

    def derivatives(self, x, u=None):
        d = CostDerivatives.zeros(self.ndx, self.nu)
        d.Lx[1], d.Lxx[1, 1] = 2 * (x[1] - 1.0), 2.0
        return d


def test_a_nan_cost_in_cems_first_population_fails_naming_the_cost():
    ocp = linear_problem(terminal=None)
    ocp.terminal_cost = NaNBeyond(ocp.dynamics, edge=0.0)  # about half of the samples push x[0] above 0
    sol = solve(ocp, method="cem", population=16, max_iter=3, verbose=False)
    assert sol.status == Status.FAILED
    assert "the cost is not a number" in sol.info["message"] and "first population" in sol.info["message"]
    assert np.isfinite(sol.cost)  # the start's answer, whose cost is a number, is returned


class NaNCostGradient(Cost):
    """A terminal cost whose value is fine but whose gradient is NaN (a broken hand-written derivative)."""

    def __init__(self, dyn):
        self.ndx, self.nu = dyn.ndx, dyn.nu

    def value(self, x, u=None):
        return float((x[1] - 1.0) ** 2)

    def derivatives(self, x, u=None):
        d = CostDerivatives.zeros(self.ndx, self.nu)
        d.Lx[:] = np.nan
        return d


class NaNJacobian(Linear):
    def step_derivatives(self, x, u):
        x1, Fx, Fu = super().step_derivatives(x, u)
        Fu[0, 0] = np.nan
        return x1, Fx, Fu


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_nan_step_jacobians_fail_naming_them_not_stalled(method):
    ocp = linear_problem(NaNJacobian(np.eye(2), np.array([[0.1], [0.05]])))
    sol = solve(ocp, method=method, max_iter=5, verbose=False)
    assert sol.status == Status.FAILED, sol.info["message"]
    assert "non-finite gradient: the step Jacobian Fu" in sol.info["message"] and "knot 0" in sol.info["message"]


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_a_nan_cost_gradient_fails_naming_it_not_stalled(method):
    ocp = linear_problem()
    ocp.terminal_cost = NaNCostGradient(ocp.dynamics)
    sol = solve(ocp, method=method, max_iter=5, verbose=False)
    assert sol.status == Status.FAILED, sol.info["message"]
    assert "non-finite gradient: the terminal cost's Lx" in sol.info["message"]


class WrongShape(Linear):
    """A user's dynamics whose Fx comes back as a vector: numpy would broadcast it into (ndx, ndx)."""

    def step_derivatives(self, x, u):
        x1, Fx, Fu = super().step_derivatives(x, u)
        return x1, np.diag(Fx), Fu


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_wrong_shape_jacobians_from_a_users_dynamics_are_named(method):
    ocp = linear_problem(WrongShape(np.eye(2), np.array([[0.1], [0.05]])))
    sol = solve(ocp, method=method, max_iter=3, verbose=False)
    assert sol.status == Status.FAILED, sol.info["message"]
    assert "WrongShape.step_derivatives returned Fx of shape (2,), expected (ndx, ndx) = (2, 2)" in sol.info["message"]


def test_a_workspace_of_another_simulator_is_refused_naming_it():
    pendulum, cartpole = pendulum_simulator(dt=0.01), cartpole_simulator(1, dt=0.02)
    foreign = cartpole.create_data()
    for call in (lambda: pendulum.step(np.zeros(2), np.zeros(1), data=foreign),
                 lambda: pendulum.step_derivatives(np.zeros(2), np.zeros(1), data=foreign),
                 lambda: pendulum.rollout(np.zeros(2), np.zeros((3, 1)), data=foreign)):
        with pytest.raises(ValueError, match="not a workspace of this simulator"):
            call()
    own = pendulum.create_data()
    assert np.isfinite(pendulum.step(np.array([0.3, 0.0]), np.zeros(1), data=own)).all()


def test_dt_as_numpy_float32_is_accepted():
    sim = pendulum_simulator(dt=np.float32(0.01))
    ref = pendulum_simulator(dt=float(np.float32(0.01)))
    assert isinstance(sim.dt, float)
    x = np.array([0.3, 0.0])
    assert np.allclose(sim.step(x, np.zeros(1)), ref.step(x, np.zeros(1)))
    import problems

    ocp = problems.load("pendulum", dt=np.float32(0.01), horizon=10)
    assert solve(ocp, method="ddp", max_iter=2, verbose=False).status != Status.FAILED


@pytest.mark.parametrize("broken", ["jacobian", "residual"])
def test_gauss_newton_with_a_nan_residual_or_jacobian_fails_naming_it_not_stalled(broken):
    """A least-squares problem whose Jacobian (a broken hand-written one) or residual is NaN at the start:
    Gauss-Newton climbed its damping ladder on NaN steps and ended STALLED ("cosine nan")."""
    from solvers import gauss_newton
    from trajopt.lsq import LeastSquares

    A, b = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([1.0, 2.0, 0.5])

    def residual(z):
        return A @ z - b if broken == "jacobian" else np.full(3, np.nan)

    def jacobian(z):
        return residual(z), (np.full_like(A, np.nan) if broken == "jacobian" else A)

    sol = gauss_newton(LeastSquares("nan", residual, jacobian, np.zeros(2)), verbose=False, max_iter=5)
    assert sol.status == Status.FAILED
    assert f"non-finite {broken}" in sol.info["message"] and "z0" in sol.info["message"]
    assert np.array_equal(sol.z, np.zeros(2))  # the last finite iterate: the start


class DivergesAtStep(Linear):
    """A user's dynamics whose simulation fails (SimulationError is a RuntimeError) once the state passes 1."""

    def step(self, x, u):
        if abs(x[1]) > 1.0:
            raise RuntimeError("the simulation diverged")
        return super().step(x, u)


@pytest.mark.parametrize("method", ["ddp", "gn", "shooting", "ipopt"])
def test_a_diverging_initial_guess_fails_with_a_message_for_every_gradient_method(method):
    """DDP and gn returned FAILED ("the initial rollout failed"); IPOPT shooting raised the simulation's error
    out of solve() from its initial rollout, before IPOPT ran."""
    ocp = linear_problem(DivergesAtStep(np.eye(2), np.array([[0.1], [1.0]])))
    sol = solve(ocp, method=method, us_init=np.full((ocp.horizon, 1), 2.0), max_iter=3, verbose=False)
    assert sol.status == Status.FAILED
    assert "the initial rollout failed" in sol.info["message"] and "diverged" in sol.info["message"]
    assert np.array_equal(sol.us, np.full((ocp.horizon, 1), 2.0))


class NaNAtRest(Cost):
    """A running cost that is NaN where the control is exactly zero (a broken ``log |u|``-like term)."""

    def __init__(self, dyn):
        self.ndx, self.nu = dyn.ndx, dyn.nu

    def value(self, x, u=None):
        return float("nan") if not np.any(u) else float(u @ u)

    def derivatives(self, x, u=None):
        d = CostDerivatives.zeros(self.ndx, self.nu)
        d.Lu[:], d.Luu[:] = 2 * u, 2 * np.eye(self.nu)
        return d


@pytest.mark.parametrize("method", ["ddp", "gn"])
def test_a_nan_cost_at_the_initial_guess_fails_naming_the_term_and_the_knot(method):
    """DDP and gn raised a bare ``ValueError: non-finite cost nan`` out of solve() when the cost at the
    initial guess was NaN, instead of returning FAILED naming what is not finite."""
    ocp = linear_problem()
    ocp.terminal_cost = NaNBeyond(ocp.dynamics, edge=-1.0)  # NaN at the start's (and every) final state
    sol = solve(ocp, method=method, max_iter=3, verbose=False)
    assert sol.status == Status.FAILED, sol.info["message"]
    message = sol.info["message"]
    assert "initial guess" in message and "the terminal cost" in message and "NaNBeyond" in message, message
    assert np.array_equal(sol.us, ocp.us_init) and np.isfinite(sol.xs).all()

    dyn = ocp.dynamics
    ocp = OCP(dynamics=dyn, x0=np.zeros(2), horizon=10, running_cost=ControlCost(dyn, 1e-2) + NaNAtRest(dyn),
              terminal_cost=StateCost(dyn, np.array([0.0, 1.0]), 10.0), name="linear")
    sol = solve(ocp, method=method, max_iter=3, verbose=False)
    assert sol.status == Status.FAILED, sol.info["message"]
    message = sol.info["message"]
    assert "the running cost at knot 0" in message and "NaNAtRest" in message and "term 1" in message, message


@pytest.mark.parametrize("method", ["cem", "shooting"])
def test_cem_and_shooting_name_the_term_of_a_nan_cost(method):
    """CEM and IPOPT shooting returned FAILED "non-finite cost" without saying which cost term was NaN."""
    ocp = linear_problem()
    ocp.terminal_cost = NaNBeyond(ocp.dynamics, edge=-1.0)
    sol = solve(ocp, method=method, max_iter=3, verbose=False, **({"population": 8} if method == "cem" else {}))
    assert sol.status == Status.FAILED, sol.info["message"]
    assert "the terminal cost (knot 10) (NaNBeyond) is nan" in sol.info["message"], sol.info["message"]
