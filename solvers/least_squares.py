"""Gauss-Newton with Levenberg-Marquardt damping for ``trajopt.LeastSquares`` problems.

Each iteration solves ``(J'J + damping D) dz = -J'r`` (``D`` = diag(J'J), floored),
tries ``z + alpha dz`` for ``alpha`` in 1, 1/2, 1/4 ... and takes the first that
decreases ``|r|``. The damping follows the step's gain ratio ``rho`` (actual over
predicted decrease of ``|r|^2/2``, Nielsen's rule: ``damping *= max(1/3, 1 - (2 rho - 1)^3)``),
and grows (x2, x4, ...) after a failed search: a step that the line search had to
shorten is a sign that the model is not trusted that far, and the next one is damped more.

It stops when ``|r|`` falls below ``tol_residual`` (CONVERGED); when ``|r|`` has stagnated
(less than 10% decrease over ``stagnation`` iterations) and ``r`` is orthogonal to ``J``'s
columns (first-order optimality at a nonzero residual, MINPACK's test: ``max_j |J_j' r| /
(|J_j| |r|) <= tol_gradient``, e.g. noisy data at its floor: CONVERGED); when the step is below
``tol_step (1 + |z|)``, no step decreases the residual at the largest damping, or the
stagnation lasts ``3 stagnation`` iterations: CONVERGED if that orthogonality holds or the undamped
Gauss-Newton step is below ``100 tol_step (1 + |z|)`` (MINPACK's xtol: a zero-residual fit at its round-off
floor), else STALLED with the cosine in ``info["reason"]``;
after ``max_iter`` iterations or ``time_limit`` seconds (MAX_ITERATIONS: the time is checked before
every trial step of the damping ladder too, and a stop there keeps the last accepted iterate, saying
so in ``info["message"]``); or on Ctrl-C (INTERRUPTED). A residual or Jacobian
that is NaN or infinite at an iterate is FAILED, naming which and where, with the last finite iterate
(its ``info["message"]``); no step or optimality test is run on it.

``jacobian="analytic"`` uses the problem's Jacobian (from the simulator's step
Jacobians); ``"fd"`` uses central finite differences of the residual instead,
to compare.
"""

from __future__ import annotations

import time

import numpy as np

from trajopt.numdiff import jacobian_fd
from trajopt.solution import Solution, Status

from ._common import Progress, check_options, out_of_time, record, renamed_option

#: Gauss-Newton's iteration budget unless the caller or the problem (``info["max_iter"]``) states one
DEFAULT_MAX_ITER = 50


def gauss_newton(problem, *, z0=None, jacobian: str = "analytic", max_iter: int | None = None,
                 tol_residual: float = 1e-12,
                 tol_step: float = 1e-14, damping_init: float = 1e-8, fd_step: float = 1e-6, stagnation: int = 3,
                 tol_gradient: float = 1e-6,
                 verbose: bool = True, callback=None, time_limit: float | None = None,
                 lam_init: float | None = None) -> Solution:
    """Solve ``problem`` (a ``trajopt.LeastSquares``). Returns a Solution whose ``z`` is the answer (n,),
    ``xs`` the iterates (iterations+1, n), ``us`` the answer again as one row (1, n: kept for code that
    reads ``us[0]``) and ``cost = 0.5 |r|^2``. ``lam_init`` is the former name of ``damping_init`` (an
    alias: ``lam`` is the contact impulses' name, trajopt's notation table). ``max_iter`` None: the problem's
    own budget (``problem.info["max_iter"]``, stated by a problem whose family needs more), else 50."""
    damping_init = renamed_option("lam_init", lam_init, "damping_init", damping_init, 1e-8)
    if max_iter is None:
        max_iter = (getattr(problem, "info", None) or {}).get("max_iter", DEFAULT_MAX_ITER)
    if jacobian not in ("analytic", "fd"):
        raise ValueError(f"unknown jacobian {jacobian!r}; expected 'analytic' or 'fd'")
    check_options({"time_limit": time_limit, "max_iter": max_iter})
    t0 = time.perf_counter()

    def jac(z, where):
        r, J = (problem.jacobian(z) if jacobian == "analytic" else
                jacobian_fd(problem.residual, z, fd_step, one_sided_at_bounds=True))
        for what, a in (("residual", r), ("jacobian", J)):
            if not np.all(np.isfinite(a)):
                raise _NonFinite(f"non-finite {what} at {where} ({jacobian} Jacobian): the last finite iterate is "
                                 "returned")
        return r, J

    name = f"gauss-newton ({jacobian})"
    progress = Progress(name, verbose, ["residual", "damping", "alpha"])
    z = np.asarray(problem.z0 if z0 is None else z0, dtype=float).copy()
    iterates = [z.copy()]
    history = []
    damping = damping_init
    grow = 2.0
    status = Status.MAX_ITERATIONS
    reason = message = None  # message: why a FAILED or timed-out solve ended

    def late():
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    def gradient_cosine(r, J):
        """MINPACK's orthogonality measure: the largest cosine between ``r`` and a column of ``J``."""
        cols = np.linalg.norm(J, axis=0)
        nr = float(np.linalg.norm(r))
        if nr == 0.0:
            return 0.0
        g = np.abs(J.T @ r)
        return float(np.max(np.where(cols > 0, g / np.where(cols > 0, cols, 1.0) / nr, 0.0), initial=0.0))

    def settle(r, J, why, z):
        """CONVERGED if ``r`` is orthogonal to ``J``'s columns, or if the undamped Gauss-Newton step is itself
        below the iterate's round-off (MINPACK's xtol test: a zero-residual fit at its floor, where the cosine
        of two round-off vectors means nothing); else STALLED with the reason."""
        nonlocal reason
        cos = gradient_cosine(r, J)
        if cos <= tol_gradient:
            return Status.CONVERGED
        gn_step = float(np.linalg.norm(np.linalg.lstsq(J, -r, rcond=None)[0]))
        if gn_step <= 100.0 * tol_step * (1.0 + float(np.linalg.norm(z))):
            return Status.CONVERGED
        reason = f"{why} at |r| = {np.linalg.norm(r):.3e}, but the gradient is not zero (cosine {cos:.2e} > {tol_gradient:g})"
        return Status.STALLED

    try:
        r, J = jac(z, "z0")
        norm = float(np.linalg.norm(r))
        for it in range(max_iter):
            if norm <= tol_residual:
                status = Status.CONVERGED
                break
            g = J.T @ r
            H = J.T @ J
            D = np.maximum(np.diag(H), 1e-12 * max(1.0, np.diag(H).max()))
            accepted = timed_out = False
            while not accepted and not timed_out and damping < 1e12:
                try:
                    dz = np.linalg.solve(H + damping * np.diag(D), -g)
                except np.linalg.LinAlgError:
                    damping *= grow
                    grow *= 2.0
                    continue
                alpha = 1.0
                while alpha > 1e-6:
                    if late():  # a long damping ladder (many failing trials) stops on time too
                        timed_out = True
                        break
                    z_new = z + alpha * dz
                    try:
                        r_new = problem.residual(z_new)
                        new_norm = float(np.linalg.norm(r_new))
                    except (RuntimeError, ValueError):
                        new_norm = np.inf
                    if new_norm < norm:
                        accepted = True
                        break
                    alpha *= 0.5
                if not accepted and not timed_out:
                    damping *= grow
                    grow *= 2.0
            if timed_out:  # status stays MAX_ITERATIONS; z is the last accepted iterate
                message = (f"the time limit ({time_limit:g} s) ran out in iteration {it}'s damping ladder (no trial "
                           "step accepted yet): the last accepted iterate is returned")
                break
            if not accepted:
                status = settle(r, J, "no step decreases the residual at the largest damping", z)
                break
            s_ = alpha * dz
            step = float(np.linalg.norm(s_))
            predicted = -float(g @ s_) - 0.5 * float(s_ @ (H @ s_))
            rho = (0.5 * norm**2 - 0.5 * new_norm**2) / predicted if predicted > 0 else 0.0
            damping = max(damping * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), 1e-15) if rho > 0 else damping * grow
            grow = 2.0 if rho > 0 else grow * 2.0
            r, J = jac(z_new, f"iteration {it}")
            z = z_new
            iterates.append(z.copy())
            norm = float(np.linalg.norm(r))
            info = {"iteration": it, "cost": 0.5 * norm**2, "residual": norm, "damping": damping, "alpha": alpha,
                    "step": step, "time": time.perf_counter() - t0}
            record(info, history, progress, callback)
            if norm <= tol_residual:
                status = Status.CONVERGED
                break
            if step <= tol_step * (1.0 + np.linalg.norm(z)):
                status = settle(r, J, "the step vanished", z)
                break
            if len(history) > stagnation and norm > 0.9 * history[-1 - stagnation]["residual"]:
                # At a floor (noisy data, the simulator's tolerances) with a zero gradient: done. With a
                # nonzero gradient keep going (a nonzero-residual problem still moves its unknowns while
                # |r| barely changes), up to 3x as long before calling it stalled.
                if gradient_cosine(r, J) <= tol_gradient:
                    status = Status.CONVERGED
                    break
                if len(history) > 3 * stagnation and norm > 0.9 * history[-1 - 3 * stagnation]["residual"]:
                    status = settle(r, J, f"the residual stagnated (<10% decrease over {3 * stagnation} iterations)", z)
                    break
            if out_of_time(info, time_limit):
                break
    except KeyboardInterrupt:
        status = Status.INTERRUPTED
    except _NonFinite as exc:
        status, message = Status.FAILED, str(exc)
    wall = time.perf_counter() - t0
    final = problem.residual(z)
    cost = 0.5 * float(final @ final)
    progress.done(status, cost, wall, message=reason if status == Status.STALLED else message)
    return Solution(np.array(iterates), z[None, :].copy(), cost, history, status, name, wall,
                    {"final_residual": float(np.linalg.norm(final)), "jacobian": jacobian,
                     **({"reason": reason} if reason and status == Status.STALLED else {}),
                     **({"message": message} if message else {})}, z=z.copy())


class _NonFinite(ValueError):
    """A residual or Jacobian of :func:`gauss_newton`'s problem is NaN or infinite at an iterate."""
