"""Box-constrained DDP (iLQR with control bounds), as named steps over an explicit state.

For ``T`` knots with step Jacobians ``Fx`` (ndx, ndx), ``Fu`` (ndx, nu) and cost
derivatives, the **backward pass** forms, from the terminal ``Vx``, ``Vxx``::

    Qx = Lx + Fx' Vx        Qu = Lu + Fu' Vx
    Qxx = Lxx + Fx' Vxx Fx  Quu = Luu + Fu' Vxx Fu + mu I   Qux = Lxu' + Fu' Vxx Fx

and solves the box QP ``min 0.5 du' Quu du + Qu' du`` subject to the control
bounds by projected Newton (Tassa et al. 2014): ``k`` is its solution, ``K`` the
feedback restricted to the free controls. The **forward pass** rolls out
``u = clip(u + alpha k + K (x_new - x))`` (the state difference in the tangent
space) and accepts the first ``alpha`` of the line search that decreases the
cost by a fraction of the expected decrease. The **regularization** ``mu`` grows
when ``Quu`` is not positive definite, a pass produces a non-finite number, or
no step is accepted, and shrinks after a success.

Gauss-Newton: second derivatives of the dynamics are not used (iLQR).

The solver is named steps over an explicit state (Crocoddyl's shape): the iterate
:class:`DDPIterate` (``xs, us, cost, reg``); :func:`derivatives` along it;
:func:`backward_pass` (gains, expected decrease); :func:`line_search` over
:func:`forward_pass`; :func:`update_regularization` (the three events that change
``mu``); :func:`ddp_step` joins them into one iteration; :func:`solve_ddp` loops and
hands the end to the shared epilogue :func:`solvers._common.finish`.

The backward pass runs compiled, all knots in one call (:mod:`solvers._ddp_kernels`, numba);
:func:`_backward_pass_reference` is the same recursion in Python, one knot at a time, kept as the
reference the tests hold it equal to (and used by the complementarity-aware pass, which asks the
dynamics for each knot's Jacobians). Measured on the 500-step catapult (2026-11, 3 iterations from
the initial guess): the Python pass took 71 ms of a 199 ms iteration (wall, loaded machine); the
compiled one takes ~4 ms (CPU), and an iteration (~75 ms CPU) is now mostly the simulator's: the
line search's trial rollouts (~3.3 an iteration, ~14 ms each, ~12 of them in the steps) and the
step Jacobians (~9 ms).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from trajopt.costs import CostDerivatives
from trajopt.protocol import check_complementarity_aware, knot_derivatives
from trajopt.solution import Solution, Status

from . import _ddp_kernels as _kernels
from ._common import (SMOOTHING_HINT, Progress, check_derivatives, error_message, finite_cost, finish,
                      initial_cost_failure, record, rollout)


class BackwardPassError(RuntimeError):
    """The backward pass met a non-positive-definite Quu or a non-finite number."""


def _box_qp(H, g, lower, upper, x0, max_iter=50, tol=1e-10):
    """``min 0.5 x' H x + g' x`` s.t. ``lower <= x <= upper`` by projected Newton.

    Returns ``(x, free, H_free_inverse)`` where ``free`` marks the variables not
    clamped at a bound at the solution.
    """
    n = len(g)
    x = np.clip(x0, lower, upper)
    free = np.ones(n, dtype=bool)
    Hf_inv = None
    for _ in range(max_iter):
        grad = g + H @ x
        clamped = ((x <= lower + 1e-12) & (grad > 0)) | ((x >= upper - 1e-12) & (grad < 0))
        free = ~clamped
        if not free.any():
            return x, free, np.zeros((0, 0))
        Hff = H[np.ix_(free, free)]
        try:
            L = np.linalg.cholesky(Hff)
        except np.linalg.LinAlgError as exc:
            raise BackwardPassError("Quu is not positive definite on the free controls") from exc
        Hf_inv = np.linalg.inv(L).T @ np.linalg.inv(L)
        step = np.zeros(n)
        step[free] = -Hf_inv @ grad[free]
        if np.abs(step).max() < tol:
            break
        # Armijo line search on the projected step
        f0 = 0.5 * x @ H @ x + g @ x
        alpha = 1.0
        while alpha > 1e-10:
            xn = np.clip(x + alpha * step, lower, upper)
            if 0.5 * xn @ H @ xn + g @ xn <= f0 + 1e-4 * grad @ (xn - x):
                break
            alpha *= 0.5
        x = xn
    if Hf_inv is None or Hf_inv.shape[0] != int(free.sum()):
        Hff = H[np.ix_(free, free)]
        Hf_inv = np.linalg.inv(Hff) if free.any() else np.zeros((0, 0))
    return x, free, Hf_inv


@dataclass
class Derivatives:
    """Along a trajectory: step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) (None when the
    complementarity-aware backward pass makes its own), the running costs' derivatives stacked over
    the T knots (:meth:`trajopt.OCP.running_derivatives`: ``Lx`` (T, ndx), ...) and the terminal cost's."""

    Fx: np.ndarray | None
    Fu: np.ndarray | None
    running: CostDerivatives
    terminal: object


@dataclass
class DDPIterate:
    """The solver's state: the trajectory ``xs`` (T+1, nx), ``us`` (T, nu), its ``cost``, and the
    regularization ``reg`` (mu) to use at the next backward pass."""

    xs: np.ndarray
    us: np.ndarray
    cost: float
    reg: float


@dataclass
class DDPSettings:
    """What stays fixed during a solve (the keywords of :func:`solve_ddp`)."""

    tol: float
    reg_min: float
    reg_max: float
    alphas: list
    complementarity_aware: bool


#: how the regularization moves: after a failed backward pass (Quu indefinite or non-finite),
#: after an accepted step, after a line search that accepted nothing
REG_EVENTS = ("indefinite", "accepted", "rejected")


def update_regularization(reg: float, event: str, settings: DDPSettings) -> float:
    """The next ``mu`` after ``event`` (one of :data:`REG_EVENTS`): x10 (at least 1e-6) when the
    backward pass failed, /4 (at least ``reg_min``) after an accepted step, x10 after a rejection."""
    if event == "indefinite":
        return max(reg * 10.0, 1e-6)
    if event == "accepted":
        return max(reg / 4.0, settings.reg_min)
    if event == "rejected":
        return reg * 10.0
    raise ValueError(f"unknown regularization event {event!r}; expected one of {REG_EVENTS}")


def backward_pass(ocp, xs, us, derivs: Derivatives, reg, complementarity_aware: bool = False):
    """Gains ``K`` (T, nu, ndx), ``k`` (T, nu) and the expected decrease terms ``(dV1, dV2)``.

    With ``complementarity_aware`` each step's Jacobians are Nimble's complementarity-aware
    ones for the value gradient ``Vx`` at the next knot (``dyn.step_derivatives(..., adjoint=Vx)``):
    :func:`_backward_pass_reference` (Python per knot). Otherwise the whole recursion runs in one
    compiled call (:func:`solvers._ddp_kernels.backward_pass`, tested equal to the reference).
    """
    if complementarity_aware:
        return _backward_pass_reference(ocp, xs, us, derivs, reg, True)
    T, nu, ndx = ocp.horizon, ocp.nu, ocp.ndx
    run, term = derivs.running, derivs.terminal
    K = np.empty((T, nu, ndx))
    k = np.empty((T, nu))
    dV = np.zeros(2)
    lower = np.ascontiguousarray(np.broadcast_to(ocp.u_lower, us.shape) - us, dtype=float)
    upper = np.ascontiguousarray(np.broadcast_to(ocp.u_upper, us.shape) - us, dtype=float)
    status, t = _kernels.backward_pass(derivs.Fx, derivs.Fu, run.Lx, run.Lu, run.Lxx, run.Lxu, run.Luu,
                                       np.asarray(term.Lx, dtype=float), np.asarray(term.Lxx, dtype=float),
                                       float(reg), lower, upper, K, k, dV)
    if status == _kernels.NON_FINITE:
        raise BackwardPassError(f"non-finite Q-function at knot {t}")
    if status == _kernels.NOT_POSITIVE_DEFINITE:
        raise BackwardPassError("Quu is not positive definite on the free controls")
    return K, k, float(dV[0]), float(dV[1])


def _backward_pass_reference(ocp, xs, us, derivs: Derivatives, reg, complementarity_aware: bool = False):
    """:func:`backward_pass` in Python, one knot at a time (the reference of the compiled one, and
    the complementarity-aware pass)."""
    T, nu, ndx = ocp.horizon, ocp.nu, ocp.ndx
    term, run = derivs.terminal, derivs.running
    Vx, Vxx = term.Lx.copy(), term.Lxx.copy()
    K = np.zeros((T, nu, ndx))
    k = np.zeros((T, nu))
    dV1 = dV2 = 0.0
    eye = np.eye(nu)
    for t in range(T - 1, -1, -1):
        if complementarity_aware:
            _, Fx, Fu = ocp.dynamics.step_derivatives(xs[t], us[t], adjoint=Vx)
        else:
            Fx, Fu = derivs.Fx[t], derivs.Fu[t]
        Qx = run.Lx[t] + Fx.T @ Vx
        Qu = run.Lu[t] + Fu.T @ Vx
        VxxFx = Vxx @ Fx
        Qxx = run.Lxx[t] + Fx.T @ VxxFx
        Qux = run.Lxu[t].T + Fu.T @ VxxFx
        Quu = run.Luu[t] + Fu.T @ Vxx @ Fu
        Quu_r = Quu + reg * eye
        if not (np.all(np.isfinite(Quu_r)) and np.all(np.isfinite(Qu))):
            raise BackwardPassError(f"non-finite Q-function at knot {t}")
        kt, free, Hf_inv = _box_qp(Quu_r, Qu, ocp.u_lower - us[t], ocp.u_upper - us[t], -k[t])
        Kt = np.zeros((nu, ndx))
        if free.any():
            Kt[free] = -Hf_inv @ Qux[free]
        K[t], k[t] = Kt, kt
        dV1 += kt @ Qu
        dV2 += 0.5 * kt @ Quu @ kt
        Vx = Qx + Kt.T @ Quu @ kt + Kt.T @ Qu + Qux.T @ kt
        Vxx = Qxx + Kt.T @ Quu @ Kt + Kt.T @ Qux + Qux.T @ Kt
        Vxx = 0.5 * (Vxx + Vxx.T)
    return K, k, dV1, dV2


def forward_pass(ocp, xs, us, K, k, alpha):
    """The new trajectory for line-search step ``alpha`` (raises on a non-finite state)."""
    dyn = ocp.dynamics
    T = ocp.horizon
    xs_new = np.empty_like(xs)
    us_new = us + alpha * k  # the open-loop part of every knot at once (the same sums as per knot)
    lower = np.broadcast_to(ocp.u_lower, us.shape[1:])
    upper = np.broadcast_to(ocp.u_upper, us.shape[1:])
    difference, step = dyn.state_difference, dyn.step
    x = xs_new[0] = ocp.x0
    for t in range(T):
        u = us_new[t]
        u += K[t] @ difference(xs[t], x)
        np.minimum(np.maximum(u, lower, out=u), upper, out=u)  # np.clip, without its dispatch
        x = xs_new[t + 1] = step(x, u)
    return xs_new, us_new


def derivatives(ocp, xs, us, *, step_jacobians: bool = True) -> Derivatives:
    """Step Jacobians (unless ``step_jacobians`` is False: the complementarity-aware backward
    pass makes its own) and cost derivatives along a trajectory.

    The step Jacobians come in one call, :func:`trajopt.protocol.knot_derivatives` at the knots
    ``xs``. ``xs`` is the rollout the line search has just accepted (its last one), and the
    simulator keeps the contact solves of the steps it has just taken, so these Jacobians cost no
    second collision detection or contact solve. Chosen by measurement (2026-11, CPU time, min of 4
    interleaved rounds, 5 iterations from the initial guess) over Jacobians in every trial rollout
    (``step_derivatives`` in :func:`forward_pass`), which wastes them on rejected trials: catapult
    (2.6 trial rollouts an iteration) 228 ms an iteration kept, 270 ms Jacobians in every trial,
    267 ms re-solving (the former way); go1-hold, one trial rollout + Jacobians + backward pass:
    97 ms kept, 103 ms in every trial, 141 ms re-solving."""
    Fx = Fu = None
    if step_jacobians:
        _, Fx, Fu = knot_derivatives(ocp.dynamics, xs, us)
    derivs = Derivatives(Fx, Fu, ocp.running_derivatives(xs, us), ocp.terminal_cost.derivatives(xs[-1]))
    check_derivatives(Fx, Fu, derivs.running, derivs.terminal)  # a NaN gradient fails, naming itself
    return derivs


def line_search(ocp, state: DDPIterate, K, k, dV1, dV2, alphas):
    """The first ``alpha`` whose rollout decreases the cost by more than 1e-4 of the expected
    ``-(alpha dV1 + alpha^2 dV2)``: ``(xs, us, cost, alpha)``, or None when none does (a
    diverging trial rollout counts as no decrease)."""
    for alpha in alphas:
        try:
            xs_new, us_new = forward_pass(ocp, state.xs, state.us, K, k, alpha)
            cost_new = finite_cost(ocp, xs_new, us_new)
        except (RuntimeError, ValueError):
            continue
        actual = state.cost - cost_new
        exp_a = -(alpha * dV1 + alpha**2 * dV2)
        if np.isfinite(cost_new) and actual > 1e-4 * exp_a and actual > 0:
            return xs_new, us_new, cost_new, alpha
    return None


@dataclass
class StepOutcome:
    """How one DDP iteration ended: ``"accepted"`` (``state`` moved), ``"converged"`` (the expected
    decrease is below the tolerance), ``"kink"`` (below it only because ``reg`` was raised:
    :func:`_damped_only`), ``"stalled"`` (``reg`` passed ``reg_max``) or ``"timed_out"`` (during
    the regularization ladder); its ``expected`` decrease and ``alpha``."""

    kind: str
    expected: float
    alpha: float


def ddp_step(ocp, state: DDPIterate, derivs: Derivatives, settings: DDPSettings, out_of_time) -> StepOutcome:
    """One iteration at ``derivs`` (taken at ``state``): backward pass, then line search, raising the
    regularization until a step is accepted. Updates ``state`` in place."""
    expected = np.nan
    while True:
        try:
            K, k, dV1, dV2 = backward_pass(ocp, state.xs, state.us, derivs, state.reg, settings.complementarity_aware)
        except BackwardPassError:
            state.reg = update_regularization(state.reg, "indefinite", settings)
            if state.reg > settings.reg_max:
                return StepOutcome("stalled", expected, 0.0)
            continue
        expected = -(dV1 + dV2)
        if expected < settings.tol * (1.0 + abs(state.cost)):
            if state.reg > 10.0 * settings.reg_min and _damped_only(ocp, state, derivs, settings):
                return StepOutcome("kink", expected, 0.0)
            return StepOutcome("converged", expected, 0.0)
        found = line_search(ocp, state, K, k, dV1, dV2, settings.alphas)
        if found is not None:
            state.xs, state.us, state.cost, alpha = found
            state.reg = update_regularization(state.reg, "accepted", settings)
            return StepOutcome("accepted", expected, alpha)
        state.reg = update_regularization(state.reg, "rejected", settings)
        if state.reg > settings.reg_max:
            return StepOutcome("stalled", expected, 0.0)
        if out_of_time():  # the regularization ladder can take many passes
            return StepOutcome("timed_out", expected, 0.0)


def _damped_only(ocp, state: DDPIterate, derivs: Derivatives, settings: DDPSettings) -> bool:
    """Whether a small expected decrease is the regularization's doing: at ``reg_min`` the local
    model is not convex or still promises a real decrease. Line searches that failed along that
    promise raised ``reg`` until the damped model promised nothing -- a kink (contact events
    changing), not a minimum."""
    try:
        _, _, dV1, dV2 = backward_pass(ocp, state.xs, state.us, derivs, settings.reg_min,
                                       settings.complementarity_aware)
    except BackwardPassError:
        return True
    return -(dV1 + dV2) >= settings.tol * (1.0 + abs(state.cost))


def solve_ddp(ocp, *, us_init=None, max_iter: int = 100, tol: float = 1e-8, reg_init: float = 1e-6,
              reg_min: float = 1e-9, reg_max: float = 1e10, alphas=None, callback=None, verbose: bool = True,
              time_limit: float | None = None, complementarity_aware: bool = False) -> Solution:
    """Solve ``ocp`` by box-constrained DDP. See the module docstring.

    ``complementarity_aware=True`` uses Nimble's complementarity-aware step Jacobians in the
    backward pass (``Simulator.step_derivatives(adjoint=...)``, LCP contact): a way out of
    the zero gradients of resting (clamping) contacts. The expected decrease then comes from
    a model that is not the step's derivative; the line search still checks the real cost.

    Stops when the expected decrease is below ``tol * (1 + |cost|)`` (CONVERGED, if the
    controls receive the cost's gradient: :func:`solvers._common.finish`), after
    ``max_iter`` iterations or ``time_limit`` seconds (MAX_ITERATIONS), when no step
    decreases the cost at the largest regularization (STALLED), or on Ctrl-C
    (INTERRUPTED). ``callback(info)`` is called after every iteration with a dict
    (``iteration, cost, reg, alpha, expected, time``).
    """
    if complementarity_aware:
        check_complementarity_aware(ocp.dynamics)
    _kernels.ensure_compiled(verbose)  # before the clock: the time budget is the solver's, not numba's
    t0 = time.perf_counter()
    settings = DDPSettings(tol, reg_min, reg_max, alphas if alphas is not None else [0.5**i for i in range(12)],
                           complementarity_aware)
    us = np.clip(ocp.check_controls(ocp.us_init if us_init is None else us_init), ocp.u_lower, ocp.u_upper)
    progress = Progress("ddp", verbose, ["reg", "alpha", "expected"])
    history = []
    status, message, derivs = Status.MAX_ITERATIONS, None, None
    try:
        xs = rollout(ocp, us)
    except (RuntimeError, ValueError) as exc:
        return finish(ocp, method="ddp", xs=np.full((ocp.horizon + 1, ocp.nx), np.nan), us=us, cost=np.inf,
                      history=[], status=Status.FAILED, t0=t0, info={"error": str(exc)}, progress=progress,
                      message=f"the initial rollout failed: {exc}")
    try:
        cost = finite_cost(ocp, xs, us)
    except ValueError as exc:  # NaN, or a cost that raises, at the start: nothing to descend from
        return initial_cost_failure(ocp, method="ddp", xs=xs, us=us, exc=exc, t0=t0, progress=progress)
    state = DDPIterate(xs, us, cost, reg_init)

    def late():
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    try:
        for it in range(max_iter):
            derivs = derivatives(ocp, state.xs, state.us, step_jacobians=not complementarity_aware)
            step = ddp_step(ocp, state, derivs, settings, late)
            info = {"iteration": it, "cost": state.cost, "reg": state.reg, "alpha": step.alpha,
                    "expected": step.expected, "time": time.perf_counter() - t0}
            record(info, history, progress, callback, ocp=ocp, xs=state.xs, us=state.us)
            if step.kind == "converged":
                status = Status.CONVERGED
                break
            if step.kind == "stalled":
                status = Status.STALLED
                message = f"no step decreased the cost, even at the largest regularization ({reg_max:g})"
                break
            if step.kind == "kink":
                status = Status.STALLED
                message = (f"a kink: the undamped local model still promises a decrease that no step realizes "
                           f"(regularization raised to {state.reg:.3g}); contact events change along the "
                           f"step; try a search first (cem-ddp) or {SMOOTHING_HINT}")
                break
            if step.kind == "timed_out" or late():
                break
    except KeyboardInterrupt:
        status = Status.INTERRUPTED
    except (RuntimeError, ValueError) as exc:  # e.g. SimulationError in the Jacobians at the accepted iterate
        status, derivs = Status.FAILED, None
        message = error_message(exc)
    exact = status == Status.CONVERGED and not complementarity_aware  # derivs holds the exact Jacobians at xs
    return finish(ocp, method="ddp", xs=state.xs, us=state.us, cost=state.cost, history=history, status=status,
                  t0=t0, info={"reg": state.reg}, message=message, progress=progress,
                  Fx=derivs.Fx if exact else None, Fu=derivs.Fu if exact else None)
