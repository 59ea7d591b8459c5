"""Benchmark of one step and its Jacobians: analytical vs finite differences.

:func:`bench_dynamics` times ``step``, ``step_derivatives`` (all Jacobians
analytically), central finite differences and Ridders' extrapolation at one
``(x, u)``, and reports the worst error of each Jacobian block against Ridders.
Timings are means of the best of several repeats, Python call included;
absolute numbers vary between machines, ratios are what to compare.
"""

from __future__ import annotations

import time

import numpy as np

from .numdiff import max_relative_error, step_jacobians_fd

BLOCKS = ("dq+/dq", "dq+/dv", "dv+/dq", "dv+/dv", "dq+/du", "dv+/du")


def time_call(fn, *, min_time: float = 0.1, repeat: int = 5, setup=None) -> float:
    """Seconds per call of ``fn()``: best of ``repeat`` means over loops of >= ``min_time``. With ``setup``,
    ``fn(setup())``: each call's argument made outside the timed part (only ``fn`` is timed, call by call).
    The garbage collector is off while it times (as in ``timeit``): a collection of the workspaces ``setup``
    leaves behind would otherwise land in some timed calls and not others."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        return _time_call(fn, min_time, repeat, setup)
    finally:
        if collecting:
            gc.enable()


def _time_call(fn, min_time, repeat, setup):
    def loop(n):  # (timed seconds, wall seconds) of n calls
        start = time.perf_counter()
        if setup is None:
            for _ in range(n):
                fn()
            t = time.perf_counter() - start
            return t, t
        t = 0.0
        for _ in range(n):
            arg = setup()
            t0 = time.perf_counter()
            fn(arg)
            t += time.perf_counter() - t0
        return t, time.perf_counter() - start

    loop(1)
    n = 1
    while True:  # the loop's wall time bounds it too (a setup much dearer than fn)
        t, wall = loop(n)
        if t >= min_time / repeat or wall >= 2 * min_time / repeat or n >= 1 << 20:
            break
        n *= 2
    best = t / n
    for _ in range(repeat - 1):
        best = min(best, loop(n)[0] / n)
    return best


def jacobian_blocks(Fx, Fu, nv):
    """The named blocks of the step Jacobians (rows and columns ordered (dq, dv))."""
    return {
        "dq+/dq": Fx[:nv, :nv], "dq+/dv": Fx[:nv, nv:], "dv+/dq": Fx[nv:, :nv], "dv+/dv": Fx[nv:, nv:],
        "dq+/du": Fu[:nv], "dv+/du": Fu[nv:],
    }


def bench_dynamics(dyn, x, u, *, name: str, contact: str = "none", min_time: float = 0.1) -> dict:
    """One benchmark record (see the module docstring) for dynamics ``dyn`` at ``(x, u)``."""
    nv = dyn.ndx // 2
    step_s = time_call(lambda: dyn.step(x, u), min_time=min_time)
    if hasattr(dyn, "create_data"):
        # a workspace of their own: the simulator keeps the contact solve of step(x, u) just timed, which
        # step_derivatives(x, u) would reuse; timed here is the whole step with its Jacobians
        d = dyn.create_data()
        analytic_s = time_call(lambda: dyn.step_derivatives(x, u, data=d), min_time=min_time)
    else:
        analytic_s = time_call(lambda: dyn.step_derivatives(x, u), min_time=min_time)
    t0 = time.perf_counter()
    central = step_jacobians_fd(dyn, x, u, method="central")
    fd_s = time.perf_counter() - t0
    if fd_s < min_time:
        fd_s = time_call(lambda: step_jacobians_fd(dyn, x, u, method="central"), min_time=min_time, repeat=3)
    t0 = time.perf_counter()
    ridders = step_jacobians_fd(dyn, x, u, method="ridders")
    ridders_s = time.perf_counter() - t0
    _, Fx, Fu = dyn.step_derivatives(x, u)
    ours = jacobian_blocks(Fx, Fu, nv)
    ref = jacobian_blocks(ridders.Fx, ridders.Fu, nv)
    cen = jacobian_blocks(central.Fx, central.Fu, nv)
    errors = {b: max_relative_error(ours[b], ref[b]) for b in BLOCKS}
    contacts = getattr(dyn, "contacts", None)
    record = {
        "problem": name,
        "contact": contact,
        "dof": int(nv),
        "nu": int(dyn.nu),
        "contacts": 0 if contacts is None else len(contacts),
        "step_ms": step_s * 1e3,
        "analytic_ms": analytic_s * 1e3,
        "fd_ms": fd_s * 1e3,
        "ridders_ms": ridders_s * 1e3,
        "speedup_fd": fd_s / analytic_s,
        "speedup_ridders": ridders_s / analytic_s,
        "block_err": errors,
        "max_err": max(errors.values()),
        "fd_max_err": max(max_relative_error(cen[b], ref[b]) for b in BLOCKS),
    }
    record["at_mode_switch"] = bool(record["fd_max_err"] > SWITCH_TOL)
    ref_s = _pinocchio_reference(dyn, x, u, min_time)
    if ref_s is not None:
        record["pin_aba_derivatives_ms"] = ref_s * 1e3
    return record


def _pinocchio_reference(dyn, x, u, min_time):
    """Time of one raw ``pin.computeABADerivatives`` on the same state, when ``dyn`` wraps Pinocchio."""
    model = getattr(dyn, "model", None)
    B = getattr(dyn, "B", None)
    if model is None or B is None:
        return None
    import pinocchio as pin

    if not isinstance(model, pin.Model):
        return None
    data = model.createData()
    q, v, tau = x[: model.nq].copy(), x[model.nq:].copy(), B @ u
    return time_call(lambda: pin.computeABADerivatives(model, data, q, v, tau), min_time=min_time)


#: Central differences further than this from Ridders (relative, as ``max err``; smooth states give 1e-11..1e-7):
#: the step is not smooth within the difference steps -- a contact mode switches there -- and no difference
#: quotient is a reference for the exact Jacobian at the state
SWITCH_TOL = 1e-6


def format_table(records) -> str:
    """A plain-text table of benchmark records; errors at a mode switch (:data:`SWITCH_TOL`) carry a ``*``."""
    head = (f"{'problem':<16} {'contact':<7} {'dof':>3} {'nc':>3} {'step':>8} {'analytic':>9} {'pin ABAd':>9} "
            f"{'central':>9} {'ridders':>9} {'x FD':>6} {'x Rid':>6} {'max err':>9} {'FD err':>9}")
    lines = [head, "-" * len(head)]
    for r in records:
        pin_ms = r.get("pin_aba_derivatives_ms")
        pin_s = f"{pin_ms * 1e3:7.1f}us" if pin_ms is not None else f"{'-':>9}"
        lines.append(
            f"{r['problem']:<16} {r['contact']:<7} {r['dof']:>3} {r['contacts']:>3} "
            f"{r['step_ms'] * 1e3:6.1f}us {r['analytic_ms'] * 1e3:7.1f}us {pin_s} "
            f"{r['fd_ms'] * 1e3:7.0f}us {r['ridders_ms']:7.1f}ms {r['speedup_fd']:6.1f} {r['speedup_ridders']:6.0f} "
            + (f"{r['max_err']:8.1e}* {r['fd_max_err']:8.1e}*" if r["fd_max_err"] > SWITCH_TOL
               else f"{r['max_err']:9.1e} {r['fd_max_err']:9.1e}")
        )
    lines.append("times per call (Python included); 'x FD'/'x Rid': speed-up of the analytical Jacobians; "
                 "errors: worst block vs Ridders, max|A-B|/max(1,|B|)")
    if any(r["fd_max_err"] > SWITCH_TOL for r in records):
        lines.append(f"*: central differences are more than {SWITCH_TOL:g} off Ridders as well: the step is not smooth "
                     "within the difference steps (a contact mode switch), so neither is a reference there (timing only)")
    return "\n".join(lines)


#: problems whose DDP iteration ``trajopt bench`` times without ``--ddp-iterations`` (issue 13: the
#: catapult's and the Go1's); with it, every optimal-control problem named
DDP_PROBLEMS = ("catapult", "go1-hold")
#: DDP iterations timed on :data:`DDP_PROBLEMS` when ``--ddp-iterations`` is not given
DEFAULT_DDP_ITERATIONS = 5


def bench_trajectory(dyn, x0, us, *, min_time: float = 0.1) -> dict:
    """Per-step times (ms) of a whole trajectory's states and Jacobians: ``x0`` under ``us`` (T, nu).

    ``rollout_ms``: :meth:`rollout` (states only); ``loop_jacobians_ms``: a loop of
    ``step_derivatives`` (states and Jacobians, one call per step); ``rollout_derivatives_ms``: the
    same in one call; ``rollout_then_jacobians_ms``: a rollout, then the Jacobians at its states in
    another workspace, so every contact is detected and solved twice (how the solvers worked before
    ``knot_derivatives``); ``rollout_then_kept_jacobians_ms``: a rollout, then ``knot_derivatives`` at
    its states in the same workspace, which reuses the rollout's contact solves (how they work now).
    Needs the simulator's ``create_data``, ``rollout_derivatives`` and ``knot_derivatives``.
    """
    T = len(us)
    fresh = dyn.create_data

    def loop():
        d, x = fresh(), x0
        for u in us:
            x = dyn.step_derivatives(x, u, data=d)[0]

    def twice():
        xs = dyn.rollout(x0, us, data=fresh())
        dyn.knot_derivatives(xs, us, data=fresh())

    def kept():
        d = fresh()
        dyn.knot_derivatives(dyn.rollout(x0, us, data=d), us, data=d)

    calls = {"rollout_ms": lambda: dyn.rollout(x0, us, data=fresh()), "loop_jacobians_ms": loop,
             "rollout_derivatives_ms": lambda: dyn.rollout_derivatives(x0, us, data=fresh()),
             "rollout_then_jacobians_ms": twice, "rollout_then_kept_jacobians_ms": kept}
    out = {"steps": T}
    for key, fn in calls.items():
        out[key] = time_call(fn, min_time=min_time, repeat=3) / T * 1e3
    return out


def bench_ddp(ocp, solve_ddp, *, iterations: int = 5, repeat: int = 2) -> dict:
    """The time of one DDP iteration (ms): ``solve_ddp(ocp, max_iter=iterations)`` from the problem's
    initial guess, wall time (initial rollout included) divided by the iterations it ran, best of
    ``repeat`` solves. An iteration is the Jacobians and cost derivatives along the current
    trajectory, a backward pass and a line search of one or more trial rollouts (none once the
    expected decrease is below the tolerance: go1-hold starts at its optimum and stops after one).
    ``solve_ddp`` is :func:`solvers.ddp.solve_ddp` (passed in: ``trajopt`` does not import solvers).
    """
    best, sol = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        sol = solve_ddp(ocp, max_iter=iterations, verbose=False)
        wall = time.perf_counter() - t0
        best = min(best, wall / max(1, len(sol.history)))
    return {"ddp_iteration_ms": best * 1e3, "ddp_iterations": len(sol.history), "ddp_status": sol.status.value,
            "ddp_cost": float(sol.cost)}


def format_ddp_table(records) -> str:
    """The second table: DDP's time per iteration and a trajectory's states and Jacobians per step."""
    head = (f"{'problem':<16} {'T':>4} {'DDP iter':>10} {'its':>3}  {'rollout':>8} {'Jac loop':>9} {'roll+Jac':>9} "
            f"{'roll, Jac':>9} {'roll+kept':>9}")
    lines = [head, "-" * len(head)]
    for r in records:
        if "ddp_iteration_ms" not in r:
            continue
        lines.append(f"{r['problem']:<16} {r['steps']:>4} {r['ddp_iteration_ms']:8.1f}ms {r['ddp_iterations']:>3}  "
                     + " ".join(f"{r[k] * 1e3:7.1f}us" if k in r else f"{'-':>9}"  # (dynamics without batched calls)
                                for k in ("rollout_ms", "loop_jacobians_ms", "rollout_derivatives_ms",
                                          "rollout_then_jacobians_ms", "rollout_then_kept_jacobians_ms")))
    lines.append("DDP iter: wall time of solve_ddp(max_iter=N) from the initial guess / iterations run (its); then per "
                 "step of the initial guess's trajectory: rollout (states only), Jac loop (step_derivatives per step), "
                 "roll+Jac (rollout_derivatives: one call), 'roll, Jac' (rollout, then Jacobians re-solving every "
                 "contact: the solvers before), roll+kept (rollout, then knot_derivatives reusing its solves: now)")
    return "\n".join(lines)


#: which of ``parameter_names()`` each timing takes: friction, the one coefficient (per-pair ``friction:<pair>`` names
#: are not this column); the inertial parameters; all
PARAMETER_KINDS = {"friction": lambda n: n == "friction",
                   "inertial": lambda n: n.split(":")[0] in ("mass", "com", "inertia"),
                   "all": lambda n: True}


def time_step_derivatives(dyn, x, u, setting: str, *, min_time: float = 0.1, **kwargs) -> float:
    """Seconds per ``dyn.step_derivatives(x, u, **kwargs)``: ``"fresh"`` on a new workspace per call (the contact
    solve included), ``"kept"`` on a new workspace that has just taken ``step(x, u)``, whose solve the Jacobians
    reuse as a solver's backward pass does after its rollout. The workspace is made (and stepped) outside the
    timed part in both: timing ``create_data`` too diluted the fresh ratios (cartpole, all parameters: 1.13x
    with it, 1.49x without)."""
    if setting == "fresh":
        return time_call(lambda d: dyn.step_derivatives(x, u, data=d, **kwargs), min_time=min_time,
                         setup=dyn.create_data)
    if setting != "kept":
        raise ValueError(f"setting must be 'fresh' or 'kept', got {setting!r}")

    def stepped():
        d = dyn.create_data()
        dyn.step(x, u, data=d)
        return d

    return time_call(lambda d: dyn.step_derivatives(x, u, data=d, **kwargs), min_time=min_time, setup=stepped)


def bench_parameters(dyn, x, u, *, min_time: float = 0.1, rounds: int = 4) -> dict:
    """The cost of the parameter Jacobians ``Fp`` next to the state Jacobians, at ``(x, u)`` (issue 14's
    target: at most 1.5x). Times ``step_derivatives(x, u)`` and ``step_derivatives(x, u, params=names)`` for
    the inertial parameters (masses, COMs, inertias) and for all of ``dyn.parameter_names()``, twice each:
    on a fresh workspace per call (``fresh``: the contact solve included, what one step with its Jacobians
    costs) and right after ``step(x, u)`` on the same workspace (``kept``: a solver's backward pass after its
    rollout, which reuses the step's contact solve): each timed call on a new workspace that has just taken the
    step (untimed), so that the factors a contact state makes on its first Jacobians (the LCP's reduced K, the
    NCP's mode equations), which later calls on that state reuse, are paid once per call as a backward pass pays
    them once per knot. Ratios are ``params`` over state-only time in the same setting. Also ``friction`` alone
    (one column: the fixed cost of asking for ``Fp``) and ``all_kept_per_column``: the added time per parameter
    column over the state Jacobians' time per column (``ndx + nu`` of them), kept. Returns ``{}`` for dynamics
    without parameters (``parameter_names``).

    Every configuration is timed in ``rounds`` interleaved rounds of ``min_time / rounds`` each and keeps its best:
    on a shared machine, whose speed drifts over seconds, a ratio then compares times taken in the same phases
    rather than a numerator and a denominator timed seconds apart."""
    if not hasattr(dyn, "parameter_names"):
        return {}
    if not (isinstance(rounds, int) and rounds >= 1):
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    out = {}
    lists = {None: None}  # label -> parameter names (None: the state Jacobians alone)
    for label, takes in PARAMETER_KINDS.items():
        names = [n for n in dyn.parameter_names() if takes(n)]
        if names:
            lists[label] = names
            out[f"{label}_parameters"] = int(dyn.parameter_size(names))
    best = {}
    for _ in range(rounds):
        for label, names in lists.items():
            kw = {} if names is None else {"params": names}
            for setting in ("fresh", "kept"):
                t = time_step_derivatives(dyn, x, u, setting, min_time=min_time / rounds, **kw)
                best[label, setting] = min(best.get((label, setting), np.inf), t)
    out["state_jacobians_ms"] = 1e3 * best[None, "fresh"]
    out["state_jacobians_kept_ms"] = 1e3 * best[None, "kept"]
    for label in lists:
        if label is not None:
            for setting in ("fresh", "kept"):
                out[f"{label}_{setting}_ratio"] = best[label, setting] / best[None, setting]
    if "all_kept_ratio" in out and out["all_parameters"] > 0:  # (added time / npar) / (state time / (ndx + nu))
        out["all_kept_per_column"] = (out["all_kept_ratio"] - 1.0) * (dyn.ndx + dyn.nu) / out["all_parameters"]
    return out


def format_parameter_table(records, backend: str | None = None) -> str:
    """The parameter-Jacobian columns of ``records`` (those that have them) as a table; ``backend``: what computed
    ``Fp`` (``dynamics.parameters.backend()``), named under it."""
    rows = [r for r in records if "state_jacobians_ms" in r]
    head = (f"{'problem':<16}{'Jac [ms]':>10}{'friction':>10}{'kept':>7}{'inertial':>10}{'fresh':>8}{'kept':>8}"
            f"{'all':>6}{'fresh':>8}{'kept':>8}{'per col':>9}")
    # friction: its fresh ratio under 'friction', then kept (one column: no count)
    lines = [head, "-" * len(head)]
    for r in rows:
        def cell(label, key, width):
            v = r.get(f"{label}_{key}")
            if v is None:  # as wide as a figure would be (ratios carry their 'x')
                return f"{'-':>{width if key == 'parameters' else width + 1}}"
            return f"{v:>{width}d}" if isinstance(v, int) else f"{v:>{width}.2f}x"
        lines.append(f"{r['problem']:<16}{r['state_jacobians_ms']:>10.3f}{cell('friction', 'fresh_ratio', 9)}"
                     f"{cell('friction', 'kept_ratio', 6)}{cell('inertial', 'parameters', 10)}"
                     f"{cell('inertial', 'fresh_ratio', 7)}{cell('inertial', 'kept_ratio', 7)}"
                     f"{cell('all', 'parameters', 6)}{cell('all', 'fresh_ratio', 7)}{cell('all', 'kept_ratio', 7)}"
                     f"{cell('all', 'kept_per_column', 8)}")
    skipped = [r["problem"] for r in records if "state_jacobians_ms" not in r and "problem" in r]
    if skipped:
        lines.append(f"(no physical parameters, not in this table: {', '.join(skipped)})")
    lines.append("Parameter Jacobians: step_derivatives(x, u, params=names) time over step_derivatives(x, u), "
                 "friction alone (one column: the fixed cost), inertial (masses, COMs, inertias; their count) and all "
                 "parameters; fresh: a new workspace per call (contact solve included), kept: the first Jacobians "
                 "right after step(x, u) on its workspace, which keeps the solve (a backward pass; the step untimed); "
                 "per col: the time added per parameter column over the state Jacobians' time per column (ndx + nu), "
                 "kept. Issue 14's target: <= 1.5x" + ("" if backend is None else f". Computed by: {backend}"))
    return "\n".join(lines)



def bench_state(ocp, seed: int = 0):
    """The ``(x, u)`` a problem is benchmarked at.

    ``ocp.info['bench_state']`` when the problem names one (e.g. a state in
    contact); otherwise the middle of a rollout under seeded random controls
    within 30% of the bounds (unit scale where unbounded).
    """
    if "bench_state" in ocp.info:
        x, u = ocp.info["bench_state"]
        return np.asarray(x, float), np.asarray(u, float)
    rng = np.random.default_rng(seed)
    scale = np.where(np.isfinite(ocp.u_upper), 0.3 * ocp.u_upper, 1.0)
    T = max(1, ocp.horizon // 2)
    us = rng.uniform(-1.0, 1.0, (ocp.horizon, ocp.nu)) * scale
    us = np.clip(us, ocp.u_lower, ocp.u_upper)
    xs = ocp.rollout(us)
    return xs[T], us[T]
