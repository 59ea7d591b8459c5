"""Multiple shooting solved by IPOPT, through CasADi callbacks around the differentiable step.

Decision variables: the states at the shot boundaries (every ``shot_length``
steps; 1 = direct transcription) and all controls. Each shot rolls the step
forward from its start state (the step and its exact Jacobian are CasADi
callbacks, :func:`trajopt.casadi_step`; CasADi chains the Jacobians inside a
shot), and a defect ``X_{k+1} - rollout(X_k, U_shot) = 0`` ties consecutive shots.
The objective sums the OCP's running costs along the shots and its terminal
cost (callbacks with exact gradients). Constraint Jacobians are exact; the
Hessian of the Lagrangian is Gauss-Newton (``hessian="gauss-newton"``: the costs'
exact Hessians, the dynamics' curvature left out) or IPOPT's L-BFGS
(``hessian="lbfgs"``).

Free-flyer (non-Euclidean) states: the knot variables are tangent increments
``d_k`` around the initial guess's rollout ``xb`` (``X_k = xb_k (+) d_k``), and the
shots chain ``casadi_step_local`` in the same charts, so IPOPT never sees a
quaternion.

The returned ``xs`` is the rollout of the returned controls, so it satisfies the
dynamics exactly; ``info["max_defect"]`` is the largest defect of IPOPT's last
iterate.
"""

from __future__ import annotations

import time

import casadi as ca
import numpy as np

from trajopt.casadi_bridge import (CasadiCallback, casadi_cost, casadi_cost_local, casadi_step, casadi_step_local,
                                    clear_interrupt, interrupt_requested, interrupts_noted)
from trajopt.memory import check_memory
from trajopt.solution import Solution, Status

from ._common import Progress, finish, interrupted_message, rollout

#: IPOPT's return codes -> status. A success is CONVERGED only when the defects are closed and
#: the controls receive the cost's gradient (:func:`solvers._common.finish`); codes not listed
#: here (Invalid_Number_Detected, internal errors, ...) are FAILED.
_STATUS = {
    "Solve_Succeeded": Status.CONVERGED,
    "Solved_To_Acceptable_Level": Status.CONVERGED,
    "Maximum_Iterations_Exceeded": Status.MAX_ITERATIONS,
    "Maximum_WallTime_Exceeded": Status.MAX_ITERATIONS,
    "Maximum_CpuTime_Exceeded": Status.MAX_ITERATIONS,
    "User_Requested_Stop": Status.INTERRUPTED,
    "Search_Direction_Becomes_Too_Small": Status.STALLED,
    "Restoration_Failed": Status.STALLED,
    "Infeasible_Problem_Detected": Status.STALLED,
    "Error_In_Step_Computation": Status.STALLED,
}


def ipopt_status(return_status: str, max_defect: float, defect_tol: float) -> tuple[Status, str]:
    """The status and message for IPOPT's ``return_status`` and the largest defect of its last
    iterate: a success with a defect above ``defect_tol`` is STALLED (the shots do not join)."""
    status = _STATUS.get(return_status, Status.FAILED)
    message = f"IPOPT: {return_status}"
    if status == Status.CONVERGED and not max_defect <= defect_tol:
        status = Status.STALLED
        message += f", but the largest defect {max_defect:.3g} exceeds {defect_tol:g}"
    return status, message


class _Recorder:
    """IPOPT's iteration callback (``function``): records cost, defect and time; stops on Ctrl-C or on request."""

    def __init__(self, nz, ng, t0, history, callback, time_limit, stall=None, defect_tol=1e-6):
        self.nz, self.ng, self.t0 = nz, ng, t0
        self.history, self.callback, self.time_limit = history, callback, time_limit
        self.stall = stall  # (iterations, progress) or None
        self.defect_tol = defect_tol  # a run is judged only once its shots join
        self.interrupted = False
        self.stalled = None  # the reason IPOPT was stopped for lack of progress
        names = [ca.nlpsol_out(i) for i in range(ca.nlpsol_n_out())]
        self.function = CasadiCallback("recorder", [self._sparsity(n) for n in names], [ca.Sparsity.dense(1, 1)],
                                       self.eval, names_in=names, names_out=("ret",))

    def _sparsity(self, name):
        if name == "f":
            return ca.Sparsity.scalar()
        if name in ("x", "lam_x"):
            return ca.Sparsity.dense(self.nz)
        if name in ("g", "lam_g"):
            return ca.Sparsity.dense(self.ng)
        return ca.Sparsity(0, 0)

    def eval(self, arg):
        if interrupt_requested():  # Ctrl-C / SIGTERM noted inside a step or cost callback
            self.interrupted = True
            return [1]
        try:
            g = np.asarray(arg[2]).ravel()
            info = {"iteration": len(self.history), "cost": float(arg[1]),
                    "max_defect": float(np.abs(g).max()) if g.size else 0.0, "time": time.perf_counter() - self.t0}
            self.history.append(info)
            if self.callback is not None:
                self.callback(info)
        except KeyboardInterrupt:
            self.interrupted = True
            return [1]
        self.stalled = self._no_progress()
        return [1 if self.stalled else 0]

    def _no_progress(self) -> str | None:
        """Why to stop a feasible run whose best cost fell by less than ``progress`` (relative) over
        its last ``iterations`` iterations, or None."""
        if self.stall is None or len(self.history) <= self.stall[0]:
            return None
        n, progress = self.stall
        recent = self.history[-n - 1:]
        if any(h["max_defect"] > self.defect_tol for h in recent):
            return None
        before = min(h["cost"] for h in self.history[:-n])
        now = min(h["cost"] for h in recent[1:])
        if before - now >= progress * abs(before):
            return None
        return (f"no progress: the cost fell by {before - now:.3g} ({(before - now) / abs(before):.2%}) over "
                f"{n} iterations, less than {progress:.0%} (a kink: the contact events change along the step)")


#: what multiple shooting's CasADi graph takes per knot (measured 2026-11-28 on the pendulum: 37 kB)
GRAPH_BYTES_PER_KNOT = 40_000


def check_graph_memory(ocp) -> None:
    """ValueError before any solving when the CasADi graph of ``ocp`` over its horizon would not fit
    (:func:`trajopt.memory.check_memory`); the OCP's own check counts the arrays every solver keeps."""
    check_memory(f"multiple shooting's CasADi graph over a horizon of {ocp.horizon} knots",
                 ocp.horizon * GRAPH_BYTES_PER_KNOT, "a shorter horizon, or DDP (about 1 kB a knot)")


def solve_shooting(ocp, *, shot_length: int | None = 1, hessian: str = "gauss-newton", us_init=None, max_iter: int = 300,
                   tol: float = 1e-8,
                   time_limit: float | None = None, verbose: bool = True, callback=None,
                   ipopt_options: dict | None = None, method_name: str = "shooting",
                   defect_tol: float = 1e-6, stall_iterations: int | None = None,
                   stall_progress: float = 1e-2) -> Solution:
    """Solve ``ocp`` by multiple shooting with IPOPT (see the module docstring).

    ``shot_length``: steps per shot (1 = direct transcription; None or >= horizon = single
    shooting: the controls are the only variables, every IPOPT iterate is a rollout of the
    true dynamics, which keeps its trial states out of deep penetration). ``ipopt_options``
    are passed to IPOPT (e.g. ``{"mu_strategy": "adaptive"}``).

    Status (:func:`ipopt_status`): IPOPT's success is CONVERGED only when its last iterate's
    largest defect is at most ``defect_tol`` and the controls receive the cost's gradient
    (:func:`solvers._common.gradient_reach`); its iteration and time limits are MAX_ITERATIONS;
    Restoration_Failed, Infeasible_Problem_Detected, Search_Direction_Becomes_Too_Small are
    STALLED; anything else (Invalid_Number_Detected, ...) FAILED. ``info["message"]`` names
    IPOPT's code.

    ``stall_iterations``: stop as STALLED once the best cost of a feasible run has fallen by less
    than ``stall_progress`` (relative) over that many iterations -- on contact, IPOPT can spend
    minutes of line-search cuts at a kink (measured on the catapult: 20 rollouts an iteration,
    150 s for 0.05% less cost); a hybrid then tries another basin. None: IPOPT's own tests only.
    """
    if shot_length is None:
        shot_length = ocp.horizon
    if not isinstance(shot_length, (int, np.integer)) or shot_length < 1:
        raise ValueError(f"shot_length must be an integer >= 1 or None (single shooting), got {shot_length!r}")
    shot_length = min(int(shot_length), ocp.horizon)
    if hessian not in ("gauss-newton", "lbfgs"):
        raise ValueError(f"unknown hessian {hessian!r}; expected 'gauss-newton' or 'lbfgs'")
    if stall_iterations is not None and (stall_iterations < 1 or not 0.0 <= stall_progress < 1.0):
        raise ValueError(f"stall_iterations must be >= 1 and stall_progress in [0, 1), got {stall_iterations}, "
                         f"{stall_progress}")
    check_graph_memory(ocp)
    t0 = time.perf_counter()
    dyn = ocp.dynamics
    nx, nu, T = ocp.nx, ocp.nu, ocp.horizon
    local = dyn.nx != dyn.ndx  # free-flyer / spherical joints: tangent increments in local charts
    step = casadi_step_local(dyn) if local else casadi_step(dyn)
    costs = {}

    def cost_fn(c, terminal=False):
        key = (id(c), terminal)
        if key not in costs:
            nm = f"cost{len(costs)}"
            costs[key] = (casadi_cost_local(c, dyn, terminal=terminal, name=nm) if local
                          else casadi_cost(c, nx=nx, nu=nu, terminal=terminal, name=nm))
        return costs[key]

    us0 = ocp.check_controls(ocp.us_init if us_init is None else us_init)
    us0 = np.clip(us0, ocp.u_lower, ocp.u_upper)
    try:
        xs0 = rollout(ocp, us0)
    except (RuntimeError, ValueError) as exc:  # as DDP and gn: FAILED with the start, before IPOPT is built
        return finish(ocp, method=method_name, xs=np.full((T + 1, nx), np.nan), us=us0, cost=np.inf, history=[],
                      status=Status.FAILED, t0=t0, info={"error": str(exc)}, progress=Progress(method_name, verbose, []),
                      message=f"the initial rollout failed: {exc}")
    ref = [ca.DM(x) for x in xs0]

    def chart(*ts):
        """The local functions' reference-state arguments at knots ``ts`` (none when Euclidean)."""
        return tuple(ref[t] for t in ts) if local else ()

    nz_x = dyn.ndx if local else nx
    starts = list(range(0, T, shot_length))
    # The state at the start of shots 1, 2, ...; the last shot runs into the terminal cost, so
    # shot_length >= horizon is single shooting (no state variables, no defects).
    X = [ca.MX.sym(f"X{k}", nz_x) for k in range(1, len(starts))]
    U = ca.MX.sym("U", nu, T)
    obj = 0
    defects = []
    x = ca.DM.zeros(dyn.ndx) if local else ca.DM(ocp.x0)
    for k, s in enumerate(starts):
        for t in range(s, min(s + shot_length, T)):
            obj = obj + cost_fn(ocp.running(t))(x, U[:, t], *chart(t))
            x = step(x, U[:, t], *chart(t, t + 1))
        if k < len(X):
            defects.append(X[k] - x)
            x = X[k]
    obj = obj + cost_fn(ocp.terminal_cost, terminal=True)(x, *chart(T))
    z = ca.vertcat(*X, ca.vec(U))
    g = ca.vertcat(*defects) if defects else ca.MX(0, 1)
    nz, ng = z.shape[0], g.shape[0]
    history = []
    stall = None if stall_iterations is None else (int(stall_iterations), float(stall_progress))
    recorder = _Recorder(nz, ng, t0, history, callback, time_limit, stall, defect_tol)
    opts = {"ipopt.hessian_approximation": "exact" if hessian == "gauss-newton" else "limited-memory",
            "ipopt.max_iter": max_iter, "ipopt.tol": tol,
            "ipopt.print_level": 5 if verbose else 0, "print_time": False, "iteration_callback": recorder.function,
            "ipopt.sb": "yes"}
    if time_limit is not None:
        opts["ipopt.max_wall_time"] = max(float(time_limit), 1e-6)  # IPOPT refuses 0: out of time, one iterate
    for key, val in (ipopt_options or {}).items():
        opts[f"ipopt.{key}"] = val
    solver = ca.nlpsol(method_name, "ipopt", {"x": z, "f": obj, "g": g}, opts)
    z0 = np.concatenate([np.zeros(nz_x) if local else xs0[s] for s in starts[1:]] + [us0.T.ravel(order="F")])
    lbz = np.concatenate([np.full(nz_x * len(X), -np.inf), np.tile(ocp.u_lower, T)])
    ubz = np.concatenate([np.full(nz_x * len(X), np.inf), np.tile(ocp.u_upper, T)])
    clear_interrupt()
    try:
        with interrupts_noted():  # Ctrl-C / SIGTERM: IPOPT stops at its next iteration, nothing raised
            res = solver(x0=z0, lbx=lbz, ubx=ubz, lbg=0.0, ubg=0.0)
        zs = np.asarray(res["x"]).ravel()
        return_status = solver.stats().get("return_status", "unknown")
    except RuntimeError as exc:  # a callback raised (e.g. the simulation diverged at a trial point)
        zs, return_status = None, f"error: {exc}"
    max_defect = history[-1]["max_defect"] if history else np.nan
    if interrupt_requested():  # noted after IPOPT's last iteration, or its NaN ended the solve
        recorder.interrupted = True
        clear_interrupt()
    if zs is None:
        status, message = Status.FAILED, f"IPOPT stopped on an {return_status}"
        us = us0
    else:
        status, message = ipopt_status(return_status, max_defect, defect_tol)
        if recorder.interrupted:
            status, message = Status.INTERRUPTED, f"{interrupted_message()}; {message}"
        elif recorder.stalled:
            status, message = Status.STALLED, f"{recorder.stalled} (IPOPT stopped)"
        us = np.clip(zs[nz_x * len(X):].reshape(T, nu), ocp.u_lower, ocp.u_upper)
    try:
        xs = rollout(ocp, us)
        cost = ocp.cost(xs, us)
    except (RuntimeError, ValueError) as exc:
        xs, us, cost, status = xs0, us0, ocp.cost(xs0, us0), Status.FAILED
        message = f"{message}; the rollout of IPOPT's controls failed ({exc}): the initial guess is returned"
    info = {"ipopt_status": return_status, "shot_length": shot_length, "hessian": hessian, "max_defect": max_defect}
    return finish(ocp, method=method_name, xs=xs, us=us, cost=cost, history=history, status=status, t0=t0,
                  info=info, message=message, progress=Progress(method_name, verbose, []))


def solve_ipopt(ocp, **options) -> Solution:
    """Direct transcription (one step per shot) with IPOPT: the CasADi wrapper as a user would use it."""
    options.setdefault("shot_length", 1)
    return solve_shooting(ocp, method_name="ipopt", **options)
