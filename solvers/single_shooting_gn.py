"""Single-shooting Gauss-Newton: Levenberg-Marquardt over the whole control sequence.

The unknowns are the ``N = T nu`` controls ``u``; the states are their rollout.
The trajectory sensitivities ``S_t = d x_t / d u`` (ndx, N), chained from the
step Jacobians (``S_0 = 0``, ``S_{t+1} = Fx_t S_t + Fu_t E_t``, ``E_t`` picking
the controls of knot t), give the reduced gradient and the Gauss-Newton Hessian
of the cost::

    g = sum_t S_t' Lx_t + E_t' Lu_t                              (+ S_T' Lx_T)
    H = sum_t S_t' Lxx_t S_t + E_t' Luu_t E_t + (S_t' Lxu_t E_t + its transpose)
                                                                 (+ S_T' Lxx_T S_T)

(the costs' exact Hessians, made positive semi-definite; the dynamics' curvature
left out). ``Lxx_t`` enters in factored form, so a terminal cost of a few state
entries (the catapult's box position) costs a few rows, not ``T`` matrix products.

Each iteration solves ``(H + damping D) du = -g`` on the controls not held at a bound,
tries ``clip(u + alpha du)`` for
``alpha = 1, 1/2, ...`` and accepts the first with an actual decrease of at least
``1e-4`` of the model's. The ``damping`` shrinks when the model predicted the
decrease well and grows when it did not or no step was accepted.

The damping's metric ``D`` decides what a "small" step is. ``metric="identity"``
(Levenberg) measures the controls themselves. ``metric="state"`` (default)
measures what the step does to the trajectory, ``D = sum_t S_t' S_t`` over every
``metric_stride``-th knot (plus 1e-6 of its mean diagonal), scaled to ``H``: a
trust region around the nominal states. Through contact this matters: a few
torques (those just before the arm strikes the box) move the states far more
than the rest, and a step that is small in the controls shifts the strike to
another time step, where the linear model no longer holds. On a 300-step
catapult started 4.9 cm off a reachable target, the state metric ends 0.06 mm
away, the identity 3.3 cm (both then stall).

Unlike DDP there is no feedback in the forward pass: the step is the exact
minimiser of the linearised model inside the damping's trust region. Through
contact, where a feedback rollout can land in another contact mode far from the
linearisation, that is often the better globalisation (on the catapult it is,
see ``cem-gn``). The dense ``N x N`` Hessian bounds the problem size (``max_controls``).

``knots=K`` optimises ``K`` knot values instead, the controls piecewise linear
between them (``us = P Z``, the parametrisation of ``solvers.cem``; ``g`` and
``H`` map through ``P``). Fewer, smoother unknowns average out the few steps
whose torques the contact events make extremely sensitive, so the linear model
holds over longer steps.

The solver is named steps over an explicit state: the iterate :class:`GNIterate`
(controls, knots, states, cost, damping and the step Jacobians); :func:`local_model`
(reduced gradient and Hessian on the free controls, the damping metric);
:meth:`GNModel.step` (the damped step and its predicted decrease); :func:`line_search`;
:func:`update_damping`; :func:`gn_step` joins them into one iteration, and
:func:`solve_gn` loops and hands the end to :func:`solvers._common.finish`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from trajopt.protocol import check_complementarity_aware
from trajopt.sensitivity import aware_trajectory_jacobians, trajectory_jacobians
from trajopt.solution import Solution, Status

from ._common import (NonFiniteDerivatives, Progress, check_derivatives, error_message, finite_cost, finish,
                      initial_cost_failure, knot_weights, out_of_time, record, renamed_option, sensitivity_sweep)


def _psd_factor(A: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Rows ``R`` (r, n) with ``R'R`` = the positive part of the symmetric ``A`` (r = its numerical rank)."""
    if not A.any():
        return np.zeros((0, A.shape[0]))
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    keep = w > rtol * max(w.max(), 0.0)
    return (np.sqrt(w[keep]) * V[:, keep]).T


def reduced_derivatives(ocp, xs, us, jac, metric_stride: int = 0):
    """Cost, reduced gradient ``g`` (N,) and Gauss-Newton Hessian ``H`` (N, N) of ``ocp`` at ``us``;
    with ``metric_stride > 0`` also the state-trajectory metric ``M = sum_t S_t' S_t`` over every
    ``metric_stride``-th knot (else ``M`` is None)."""
    T, nu, ndx = ocp.horizon, ocp.nu, ocp.ndx
    N = T * nu
    g = np.zeros(N)
    H = np.zeros((N, N))
    rows = []
    mrows = []
    cost = 0.0
    for t, S in sensitivity_sweep(jac.Fx, jac.Fu, ndx, nu):
        d = ocp.running(t).derivatives(xs[t], us[t]) if t < T else ocp.terminal_cost.derivatives(xs[t])
        cost += d.L
        n = t * nu  # S_t is zero beyond the first n columns
        if n:
            g[:n] += S[:, :n].T @ d.Lx
            R = _psd_factor(d.Lxx)
            if len(R):
                rows.append(R @ S[:, :n] if n == N else np.pad(R @ S[:, :n], ((0, 0), (0, N - n))))
            if metric_stride and (t % metric_stride == 0 or t == T):
                mrows.append(S.copy())
        if t == T:
            break
        b = slice(n, n + nu)
        g[b] += d.Lu
        H[b, b] += d.Luu
        if n and d.Lxu.any():
            C = S[:, :n].T @ d.Lxu  # (n, nu)
            H[:n, b] += C
            H[b, :n] += C.T
    if rows:
        R = np.vstack(rows)
        H += R.T @ R
    M = None
    if metric_stride:
        Ms = np.vstack(mrows) if mrows else np.zeros((0, N))
        M = Ms.T @ Ms
    return float(cost), g, 0.5 * (H + H.T), M


def _free(us_flat, g, lo, hi):
    """Controls free to move: not at a bound that the gradient pushes against."""
    with np.errstate(invalid="ignore"):  # infinite bounds: never reached
        at_lo = np.isfinite(lo) & (us_flat <= lo + 1e-12 * np.maximum(1.0, np.abs(lo))) & (g > 0)
        at_hi = np.isfinite(hi) & (us_flat >= hi - 1e-12 * np.maximum(1.0, np.abs(hi))) & (g < 0)
    return ~(at_lo | at_hi)


def interpolation_matrix(T: int, K: int) -> np.ndarray:
    """``P`` (T, K): controls ``us = P @ Z`` piecewise linear between ``K`` knots spread over ``T`` steps
    (the identity for ``K = T``; the same parametrisation as ``solvers.cem``)."""
    if K >= T:
        return np.eye(T)
    i, w = knot_weights(T, K)
    P = np.zeros((T, K))
    P[np.arange(T), i] = 1.0 - w
    P[np.arange(T), i + 1] = w
    return P


@dataclass
class GNIterate:
    """The solver's state: controls ``us`` (T, nu) and their knots ``Z`` (K, nu) (``us = P Z``;
    ``Z is us`` when ``K = T``), the rollout ``xs`` (T+1, nx), its ``cost``, the Levenberg-Marquardt ``damping``
    and the step Jacobians ``jac`` along ``xs``."""

    us: np.ndarray
    Z: np.ndarray
    xs: np.ndarray
    cost: float
    damping: float
    jac: object


@dataclass
class GNModel:
    """The Gauss-Newton model at an iterate, over the ``N = K nu`` knot values ``u`` (flat): gradient
    ``g`` (N,), Hessian ``H`` (N, N), the controls ``free`` to move, the damping metric ``D`` on
    them (None when none is free) and the bounds ``lo``, ``hi`` (N,)."""

    u: np.ndarray
    g: np.ndarray
    H: np.ndarray
    free: np.ndarray
    D: np.ndarray | None
    lo: np.ndarray
    hi: np.ndarray

    def step(self, damping: float):
        """The step ``du`` (N,) for the ``damping`` and the model's decrease for its clipped version
        (raises ``LinAlgError`` / ``ValueError`` when ``H + damping D`` cannot be factored)."""
        free, u = self.free, self.u
        du = np.zeros(len(u))
        du[free] = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(self.H[np.ix_(free, free)] + damping * self.D),
                                           self.g[free])
        full = np.clip(u + du, self.lo, self.hi) - u
        return du, -(self.g @ full + 0.5 * full @ self.H @ full)

    def undamped_decrease(self) -> float:
        """What the (almost) undamped Gauss-Newton step promises: 0 at a KKT point where every
        control is held at a bound by its gradient, +inf when the model cannot be solved."""
        if not self.free.any():
            return 0.0
        try:
            return self.step(1e-12)[1]
        except (np.linalg.LinAlgError, ValueError):
            return np.inf


def local_model(ocp, state: GNIterate, *, E, lo, hi, metric_stride: int) -> GNModel:
    """The :class:`GNModel` at ``state``: :func:`reduced_derivatives` mapped to the knots by ``E``
    (None when ``K = T``), the free controls, and the damping metric (module docstring):
    ``metric_stride > 0`` the state metric, 0 the identity, both scaled to ``H``'s diagonal.
    :class:`~solvers._common.NonFiniteDerivatives` when ``g`` or ``H`` is not finite, naming the cost
    block that made it so (the step Jacobians were checked when they were made)."""
    _, g, H, M = reduced_derivatives(ocp, state.xs, state.us, state.jac, metric_stride)
    if not (np.isfinite(g).all() and np.isfinite(H).all()):
        check_derivatives(running=ocp.running_derivatives(state.xs, state.us),
                          terminal=ocp.terminal_cost.derivatives(state.xs[-1]))
        raise NonFiniteDerivatives("non-finite gradient: the reduced gradient or Gauss-Newton Hessian of the "
                                   "controls overflowed (finite step Jacobians and cost derivatives)")
    if E is not None:
        g, H = E.T @ g, E.T @ H @ E
        M = None if M is None else E.T @ M @ E
    u = state.Z.ravel()
    free = _free(u, g, lo, hi)
    D = None
    if free.any():
        Hf = H[np.ix_(free, free)]
        if M is None:
            D = np.eye(int(free.sum())) * max(float(np.diag(Hf).mean()), 1e-300)
        else:
            Mf = M[np.ix_(free, free)]
            scale = float(np.diag(Hf).mean()) / max(float(np.diag(Mf).mean()), 1e-300)
            D = scale * (Mf + 1e-6 * float(np.diag(Mf).mean()) * np.eye(len(Mf)))
    return GNModel(u, g, H, free, D, lo, hi)


ALPHAS = (1.0, 0.5, 0.25, 0.125, 0.0625)


def line_search(ocp, state: GNIterate, model: GNModel, du, P):
    """The first ``alpha`` in :data:`ALPHAS` whose clipped step ``clip(u + alpha du)`` decreases the
    cost by more than 1e-4 of the model's prediction: ``(us, Z, cost, alpha, rho)`` with ``rho``
    the ratio of the actual to the predicted decrease, or None (a diverging rollout counts as no
    decrease). ``P`` (T, K) maps knots to controls (None when ``K = T``)."""
    K, nu = state.Z.shape
    u = model.u
    for alpha in ALPHAS:
        Z_new = np.clip(u + alpha * du, model.lo, model.hi)
        step = Z_new - u
        pred = -(model.g @ step + 0.5 * step @ model.H @ step)
        Z_new = Z_new.reshape(K, nu)
        us_new = np.clip(P @ Z_new, ocp.u_lower, ocp.u_upper) if P is not None else Z_new
        try:
            xs_new = ocp.rollout(us_new)
            cost_new = finite_cost(ocp, xs_new, us_new)
        except (RuntimeError, ValueError):
            continue
        actual = state.cost - cost_new
        if actual > 1e-4 * pred and actual > 0:
            return us_new, Z_new, cost_new, alpha, (actual / pred if pred > 0 else 0.0)
    return None


def update_damping(damping: float, event: str, *, alpha: float = 1.0, rho: float = 1.0) -> float:
    """The next damping: after an ``"accepted"`` step /3 (at least 1e-12) when the full step
    predicted well (``alpha = 1``, ``rho > 0.75``), x2 when it needed a shorter step or predicted
    badly (``rho < 0.25``), unchanged otherwise; x10 after a ``"rejected"`` (or unsolvable) model."""
    if event == "rejected":
        return damping * 10.0
    if event != "accepted":
        raise ValueError(f"unknown damping event {event!r}; expected 'accepted' or 'rejected'")
    if alpha == 1.0 and rho > 0.75:
        return max(damping / 3.0, 1e-12)
    if alpha < 1.0 or rho < 0.25:
        return damping * 2.0
    return damping


@dataclass
class StepOutcome:
    """How one iteration ended: ``"converged"``, ``"accepted"`` (with the trial ``found`` by
    :func:`line_search`) or ``"stalled"``; the model's ``expected`` decrease."""

    kind: str
    expected: float
    found: tuple | None = None


def gn_step(ocp, state: GNIterate, model: GNModel, *, tol: float, damping_max: float, P) -> StepOutcome:
    """One iteration: converged when even the undamped step promises (almost) nothing, else damped
    steps with a line search, the damping raised (``state.damping``, in place) until one is accepted or
    it passes ``damping_max``."""
    expected = model.undamped_decrease()
    if expected < tol * (1.0 + abs(state.cost)):
        return StepOutcome("converged", expected)
    while state.damping <= damping_max:
        try:
            du, expected = model.step(state.damping)
        except (np.linalg.LinAlgError, ValueError):
            state.damping = update_damping(state.damping, "rejected")
            continue
        found = line_search(ocp, state, model, du, P)
        if found is not None:
            state.damping = update_damping(state.damping, "accepted", alpha=found[3], rho=found[4])
            return StepOutcome("accepted", expected, found)
        state.damping = update_damping(state.damping, "rejected")
    return StepOutcome("stalled", expected)


def solve_gn(ocp, *, us_init=None, knots: int | None = None, max_iter: int = 200, tol: float = 1e-10,
             damping_init: float = 1e-3, damping_max: float = 1e6, time_limit: float | None = None, verbose: bool = True,
             callback=None, max_controls: int = 6000, metric: str = "state", metric_stride: int = 5,
             complementarity_aware: bool = False, lam_init: float | None = None,
             lam_max: float | None = None) -> Solution:
    """Solve ``ocp`` by single-shooting Gauss-Newton with Levenberg-Marquardt damping (module docstring).

    Stops when the undamped Gauss-Newton step's model decrease is below
    ``tol * (1 + |cost|)`` (CONVERGED), when no step decreases the cost at the
    damping ``damping_max`` (relative to ``H``; STALLED: the linear model holds nowhere
    near, e.g. at a kink made by a contact event), after ``max_iter`` iterations or
    ``time_limit`` seconds (MAX_ITERATIONS), or on Ctrl-C (INTERRUPTED). ``callback(info)`` gets
    ``iteration, cost, damping, alpha, expected, time`` after every iteration.

    A claimed convergence goes through :func:`solvers._common.finish` (CONVERGED only if the
    controls receive the cost's gradient).

    ``complementarity_aware=True``: the sensitivities chain Nimble's complementarity-aware step
    Jacobians (:func:`trajopt.sensitivity.aware_trajectory_jacobians`), a way out of resting
    contacts' zero gradients; the line search still checks the real cost.

    ``lam_init`` / ``lam_max`` are the former names of ``damping_init`` / ``damping_max`` (aliases:
    ``lam`` is the contact impulses' name, trajopt's notation table).
    """
    damping_init = renamed_option("lam_init", lam_init, "damping_init", damping_init, 1e-3)
    damping_max = renamed_option("lam_max", lam_max, "damping_max", damping_max, 1e6)
    if metric not in ("state", "identity"):
        raise ValueError(f"unknown metric {metric!r}; expected 'state' or 'identity'")
    if complementarity_aware:
        check_complementarity_aware(ocp.dynamics)
    T, nu = ocp.horizon, ocp.nu
    K = T if knots is None else max(2, min(int(knots), T))
    if T * nu > max_controls:
        raise ValueError(f"gn: {T * nu} controls (horizon {T} x nu {nu}) exceed max_controls={max_controls}; its "
                         f"dense Hessian would need {(T * nu) ** 2 * 8 / 2**20:.0f} MiB. Use method 'ddp', or raise "
                         f"max_controls.")
    t0 = time.perf_counter()
    us = np.clip(ocp.check_controls(ocp.us_init if us_init is None else us_init), ocp.u_lower, ocp.u_upper)
    if K < T:  # the knots that fit the start best (exact when it is piecewise linear on them)
        P = interpolation_matrix(T, K)
        E = np.kron(P, np.eye(nu))  # d(us flat)/d(knots flat)
        Z = np.clip(np.linalg.lstsq(P, us, rcond=None)[0], ocp.u_lower, ocp.u_upper)
        us = P @ Z
    else:
        P = E = None
        Z = us
    lo, hi = np.tile(ocp.u_lower, K), np.tile(ocp.u_upper, K)
    progress = Progress("gn", verbose, ["damping", "alpha", "expected"])

    def jacobians(us_):
        jac = (aware_trajectory_jacobians(ocp, us_) if complementarity_aware
               else trajectory_jacobians(ocp.dynamics, ocp.x0, us_))
        if np.isfinite(jac.xs).all():  # (a diverged rollout is the line search's business)
            check_derivatives(getattr(jac, "Fx", None), getattr(jac, "Fu", None))
        return jac

    history = []
    status, message = Status.MAX_ITERATIONS, None
    try:
        jac = jacobians(us)
    except (RuntimeError, ValueError) as exc:
        return finish(ocp, method="gn", xs=np.full((T + 1, ocp.nx), np.nan), us=us, cost=np.inf, history=[],
                      status=Status.FAILED, t0=t0, info={"error": str(exc)}, progress=progress,
                      message=f"the initial rollout failed: {exc}")
    try:
        cost = finite_cost(ocp, jac.xs, us)
    except ValueError as exc:  # NaN, or a cost that raises, at the start: nothing to descend from
        return initial_cost_failure(ocp, method="gn", xs=jac.xs, us=us, exc=exc, t0=t0, progress=progress,
                                    info={"knots": K})
    state = GNIterate(us, Z, jac.xs, cost, damping_init, jac)
    stride = metric_stride if metric == "state" else 0
    try:
        for it in range(max_iter):
            model = local_model(ocp, state, E=E, lo=lo, hi=hi, metric_stride=stride)
            step = gn_step(ocp, state, model, tol=tol, damping_max=damping_max, P=P)
            if step.kind == "converged":
                status = Status.CONVERGED
                record({"iteration": it, "cost": state.cost, "damping": state.damping, "alpha": 0.0,
                        "expected": step.expected, "time": time.perf_counter() - t0}, history, progress, callback,
                       ocp=ocp, xs=state.xs, us=state.us)
                break
            if step.kind == "stalled":
                status = Status.STALLED
                message = f"no step decreased the cost, even at the largest damping ({damping_max:g})"
                break
            us_new, Z_new, cost_new, alpha, _ = step.found
            jac_new = jacobians(us_new)  # may raise: the state keeps the last consistent iterate
            state.us, state.Z, state.cost, state.jac = us_new, Z_new, cost_new, jac_new
            state.xs = state.jac.xs
            info = {"iteration": it, "cost": state.cost, "damping": state.damping, "alpha": alpha,
                    "expected": step.expected, "time": time.perf_counter() - t0}
            record(info, history, progress, callback, ocp=ocp, xs=state.xs, us=state.us)
            if out_of_time(info, time_limit):
                break
    except KeyboardInterrupt:
        status = Status.INTERRUPTED
    except (RuntimeError, ValueError) as exc:  # e.g. SimulationError where no line search can recover
        status = Status.FAILED
        message = error_message(exc)
    exact = status == Status.CONVERGED and not complementarity_aware  # state.jac: the exact Jacobians at us
    return finish(ocp, method="gn", xs=state.xs, us=state.us, cost=state.cost, history=history, status=status,
                  t0=t0, info={"damping": state.damping, "knots": K}, message=message, progress=progress,
                  Fx=state.jac.Fx if exact else None, Fu=state.jac.Fu if exact else None)
