"""Gauss-Newton with Levenberg-Marquardt damping for ``trajopt.LeastSquares`` problems.

Each iteration solves ``(J'J + lam D) dz = -J'r`` (``D`` = diag(J'J), floored),
tries ``z + alpha dz`` for ``alpha`` in 1, 1/2, 1/4 ... and takes the first that
decreases ``|r|``; ``lam`` shrinks after a full step and grows after a failed
search. It stops when ``|r|`` falls below ``tol_residual`` (CONVERGED), when
the step is below ``tol_step (1 + |z|)`` or ``|r|`` has stagnated (less than 10%
decrease over ``stagnation`` iterations: the floor set by the simulator's own
tolerances, CONVERGED), when no step decreases the
residual at the largest damping (STALLED), after ``max_iter`` iterations
(MAX_ITERATIONS), or on Ctrl-C (INTERRUPTED).

``jacobian="analytic"`` uses the problem's Jacobian (from the simulator's step
Jacobians); ``"fd"`` uses central finite differences of the residual instead,
to compare.
"""

from __future__ import annotations

import time

import numpy as np

from trajopt.numdiff import jacobian_fd
from trajopt.solution import Solution, Status

from ._common import Progress, check_options, out_of_time, record


def gauss_newton(problem, *, z0=None, jacobian: str = "analytic", max_iter: int = 50, tol_residual: float = 1e-12,
                 tol_step: float = 1e-14, lam_init: float = 1e-8, fd_step: float = 1e-6, stagnation: int = 3,
                 verbose: bool = True, callback=None, time_limit: float | None = None) -> Solution:
    """Solve ``problem`` (a ``trajopt.LeastSquares``). Returns a Solution whose ``z`` is the answer (n,),
    ``xs`` the iterates (iterations+1, n), ``us`` the answer again as one row (1, n: kept for code that
    reads ``us[0]``) and ``cost = 0.5 |r|^2``."""
    if jacobian not in ("analytic", "fd"):
        raise ValueError(f"unknown jacobian {jacobian!r}; expected 'analytic' or 'fd'")
    check_options({"time_limit": time_limit, "max_iter": max_iter})
    t0 = time.perf_counter()

    def jac(z):
        return problem.jacobian(z) if jacobian == "analytic" else jacobian_fd(problem.residual, z, fd_step)

    name = f"gauss-newton ({jacobian})"
    progress = Progress(name, verbose, ["residual", "damping", "alpha"])
    z = np.asarray(problem.z0 if z0 is None else z0, dtype=float).copy()
    iterates = [z.copy()]
    history = []
    lam = lam_init
    status = Status.MAX_ITERATIONS
    try:
        r, J = jac(z)
        norm = float(np.linalg.norm(r))
        for it in range(max_iter):
            if norm <= tol_residual:
                status = Status.CONVERGED
                break
            g = J.T @ r
            H = J.T @ J
            D = np.maximum(np.diag(H), 1e-12 * max(1.0, np.diag(H).max()))
            accepted = False
            while not accepted and lam < 1e12:
                try:
                    dz = np.linalg.solve(H + lam * np.diag(D), -g)
                except np.linalg.LinAlgError:
                    lam *= 10.0
                    continue
                alpha = 1.0
                while alpha > 1e-6:
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
                if not accepted:
                    lam *= 10.0
            if not accepted:
                status = Status.STALLED
                break
            step = float(np.linalg.norm(alpha * dz))
            lam = max(lam / 10.0, 1e-15) if alpha == 1.0 else lam
            z = z_new
            iterates.append(z.copy())
            r, J = jac(z)
            norm = float(np.linalg.norm(r))
            info = {"iteration": it, "cost": 0.5 * norm**2, "residual": norm, "damping": lam, "alpha": alpha,
                    "step": step, "time": time.perf_counter() - t0}
            record(info, history, progress, callback)
            if norm <= tol_residual or step <= tol_step * (1.0 + np.linalg.norm(z)):
                status = Status.CONVERGED
                break
            if len(history) > stagnation and norm > 0.9 * history[-1 - stagnation]["residual"]:
                status = Status.CONVERGED  # stagnated at the residual floor
                break
            if out_of_time(info, time_limit):
                break
    except KeyboardInterrupt:
        status = Status.INTERRUPTED
    wall = time.perf_counter() - t0
    final = problem.residual(z)
    cost = 0.5 * float(final @ final)
    progress.done(status, cost, wall)
    return Solution(np.array(iterates), z[None, :].copy(), cost, history, status, name, wall,
                    {"final_residual": float(np.linalg.norm(final)), "jacobian": jacobian}, z=z.copy())
