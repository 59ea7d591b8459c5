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


def time_call(fn, *, min_time: float = 0.1, repeat: int = 5) -> float:
    """Seconds per call of ``fn()``: best of ``repeat`` means over loops of >= ``min_time``."""
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time / repeat or n >= 1 << 20:
            break
        n *= 2
    best = t / n
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
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


def format_table(records) -> str:
    """A plain-text table of benchmark records."""
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
            f"{r['max_err']:9.1e} {r['fd_max_err']:9.1e}"
        )
    lines.append("times per call (Python included); 'x FD'/'x Rid': speed-up of the analytical Jacobians; "
                 "errors: worst block vs Ridders, max|A-B|/max(1,|B|)")
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
