"""Trajectory sensitivities chained from step Jacobians: forward mode and reverse mode (adjoint).

For ``x_{t+1} = f(x_t, u_t)`` with tangent-space Jacobians ``Fx_t``, ``Fu_t``:

- **forward mode**: ``S_0 = I``, ``S_{t+1} = Fx_t S_t`` gives ``d x_T / d x_0`` (ndx, ndx);
  ``d x_T / d u_t = Fx_{T-1} ... Fx_{t+1} Fu_t`` (ndx, nu) for every t; an initial
  impulse ``p`` (generalized, nv) changes ``v_0`` by ``M(q_0)^-1 p``, so
  ``d x_T / d p = (d x_T / d v_0) M^-1``;
- **reverse mode** for a scalar loss ``sum_t l_t(x_t, u_t) + l_T(x_T)``:
  ``p_T = dl_T/dx_T``, ``p_t = dl_t/dx_t + Fx_t' p_{t+1}`` and
  ``dL/du_t = dl_t/du_t + Fu_t' p_{t+1}``, ``dL/dx_0 = p_0`` -- one backward sweep,
  whatever the number of controls.

Derivatives with respect to ``x_0`` are in the tangent space (``x_0 (+) dx``).

Physical parameters ``p`` (names of ``dyn.parameter_names()``, time-invariant; the step's
``Fp_t = d x_{t+1} / d p`` from ``dyn.step_derivatives(x, u, params=names)``):

- **forward mode**: ``S_0 = dx_0/dz`` (zero unless the start depends on the unknowns: an
  ``initial`` block of extra columns), ``S_{t+1} = Fx_t S_t + [Fp_t, 0]`` gives every
  ``d x_t / d (p, z_0)`` (ndx, np + k) (:func:`parameter_sensitivity`);
- **reverse mode**: with the same adjoints ``p_t`` as above, ``dL/dp = sum_t Fp_t' p_{t+1}``
  (plus ``dl_t/dp``, zero for costs that do not see the parameters)
  (:func:`parameter_adjoint_gradient`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .protocol import check_complementarity_aware, rollout_derivatives


@dataclass
class TrajectoryJacobians:
    """``xs`` (T+1, nx) and the step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) along it; ``us`` (T, nu),
    the controls of the rollout (None: not kept, e.g. built by hand), so that a ``jac=`` of other controls is
    refused."""

    xs: np.ndarray
    Fx: np.ndarray
    Fu: np.ndarray
    us: np.ndarray | None = None


def trajectory_jacobians(dyn, x0, us) -> TrajectoryJacobians:
    """Roll out from ``x0`` under ``us`` (T, nu), keeping every step's Jacobians: one call of
    :func:`trajopt.protocol.rollout_derivatives` (one contact solve per step for the simulator,
    none when it has just rolled out the same controls)."""
    return TrajectoryJacobians(*rollout_derivatives(dyn, x0, us), np.array(us, dtype=float))


def aware_trajectory_jacobians(ocp, us, x0=None) -> TrajectoryJacobians:
    """Like :func:`trajectory_jacobians`, with Nimble's complementarity-aware step Jacobians for
    ``ocp``'s cost: one backward sweep hands each step the adjoint of its next state
    (``dyn.step_derivatives(x, u, adjoint=p)``); Euclidean and free-flyer states alike."""
    check_complementarity_aware(ocp.dynamics)
    us = ocp.check_controls(us)
    x0 = ocp.x0 if x0 is None else np.asarray(x0, dtype=float)
    dyn = ocp.dynamics
    xs = dyn.rollout(x0, us)
    T = len(us)
    Fx = np.empty((T, dyn.ndx, dyn.ndx))
    Fu = np.empty((T, dyn.ndx, dyn.nu))
    p = ocp.terminal_cost.derivatives(xs[-1]).Lx.copy()
    for t in range(T - 1, -1, -1):
        _, Fx[t], Fu[t] = dyn.step_derivatives(xs[t], us[t], adjoint=p)
        p = ocp.running(t).derivatives(xs[t], us[t]).Lx + Fx[t].T @ p
    return TrajectoryJacobians(xs, Fx, Fu, us.copy())


@dataclass
class ParameterJacobians:
    """``xs`` (T+1, nx) and the step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) and ``Fp`` (T, ndx,
    np) along it, for the parameters ``params`` (names, in the order of ``Fp``'s columns); ``us`` (T, nu), the
    controls of the rollout (None: not kept, e.g. built by hand), so that a ``jac=`` of other controls is
    refused."""

    xs: np.ndarray
    Fx: np.ndarray
    Fu: np.ndarray
    Fp: np.ndarray
    params: tuple
    us: np.ndarray | None = None


def parameter_trajectory_jacobians(dyn, x0, us, params) -> ParameterJacobians:
    """Roll out from ``x0`` under ``us`` (T, nu), keeping each step's ``Fx``, ``Fu`` and ``Fp`` with
    respect to the parameters ``params`` (a name or a list of names; ``dyn.step_derivatives(x, u,
    params=...)``, e.g. :class:`dynamics.Simulator`). Raises ``TypeError`` when ``dyn`` has no parameters."""
    params, npar = _parameters(dyn, params)
    us = _controls(dyn, us)
    x0 = _start_state(dyn, x0)
    T = len(us)
    xs = np.empty((T + 1, dyn.nx))
    xs[0] = x0
    Fx = np.empty((T, dyn.ndx, dyn.ndx))
    Fu = np.empty((T, dyn.ndx, dyn.nu))
    Fp = np.empty((T, dyn.ndx, npar))
    for t in range(T):
        xs[t + 1], Fx[t], Fu[t], Fp[t] = dyn.step_derivatives(xs[t], us[t], params=params)
    return ParameterJacobians(xs, Fx, Fu, Fp, params, us.copy())


def parameter_sensitivity(dyn, x0, us, params, *, initial=None, jac: ParameterJacobians | None = None):
    """``(xs, S)``: the states (T+1, nx) and ``S[t] = d x_t / d z`` (T+1, ndx, np + k), ``z`` the
    parameters ``params`` (np) followed by ``k`` unknowns of the start state, ``initial = d x_0 / d z_0``
    (ndx, k) in the tangent space (e.g. the velocity rows of an identity for an unknown initial
    velocity; None: k = 0). Forward mode, ``S_{t+1} = Fx_t S_t + [Fp_t, 0]`` (module docstring).
    ``jac``: the rollout's Jacobians already computed (:func:`parameter_trajectory_jacobians` of the same
    ``x0``, ``us`` and ``params``; another rollout's is refused)."""
    params, npar = _parameters(dyn, params)
    ndx = dyn.ndx
    initial = np.zeros((ndx, 0)) if initial is None else _initial(initial, ndx)
    if jac is None:
        jac = parameter_trajectory_jacobians(dyn, x0, us, params)
    else:
        _check_jac(jac, dyn, x0, us, params, npar)
    T = jac.Fp.shape[0]
    S = np.zeros((T + 1, ndx, npar + initial.shape[1]))
    S[0, :, npar:] = initial
    for t in range(T):
        S[t + 1] = jac.Fx[t] @ S[t]
        S[t + 1, :, :npar] += jac.Fp[t]
    return jac.xs, S


def parameter_adjoint_gradient(ocp, us, params, *, x0=None, jac: ParameterJacobians | None = None):
    """``(cost, dcost/dx_0 (ndx,), dcost/dus (T, nu), dcost/dp (np,))`` of ``ocp``'s cost by one backward
    sweep (module docstring); the costs do not depend on the parameters. ``jac`` as in
    :func:`parameter_sensitivity` (of ``x0``, default ``ocp.x0``)."""
    us = ocp.check_controls(us)
    params, npar = _parameters(ocp.dynamics, params)
    x0 = ocp.x0 if x0 is None else x0
    if jac is None:
        jac = parameter_trajectory_jacobians(ocp.dynamics, x0, us, params)
    else:
        _check_jac(jac, ocp.dynamics, x0, us, params, npar)
    return _adjoint_sweep(ocp, jac.xs, us, jac.Fx, jac.Fu, jac.Fp)


# -- the input checks shared by the functions above (once per call, none per step) -----------------------


def _parameters(dyn, params) -> tuple[tuple, int]:
    """``(names, np)``: ``params`` (a name or a sequence of names) as a tuple and its total size; TypeError
    naming ``params`` for anything else (None, a number, bytes, an unordered set) or when ``dyn`` has no
    physical parameters; the dynamics' own ValueError for an unknown or repeated name."""
    if not hasattr(dyn, "parameter_size"):
        raise TypeError(f"{type(dyn).__name__} has no physical parameters (needs parameter_size and "
                        "step_derivatives(..., params=))")
    if isinstance(params, str) or (isinstance(params, np.ndarray) and params.ndim == 0 and params.dtype.kind == "U"):
        names = (str(params),)  # a name, or numpy's 0-d string array of one (as the simulator takes)
    elif (isinstance(params, (bytes, bytearray, set, frozenset, Mapping)) or not isinstance(params, Iterable)):
        why = (" (a set is unordered: Fp's and S's columns follow the names' order; pass a list)"
               if isinstance(params, (set, frozenset)) else "")
        raise TypeError(f"params must be a parameter name or a sequence of names (dyn.parameter_names()), got "
                        f"{type(params).__name__} {params!r}{why}")
    else:
        names = tuple(params)  # once: an iterator would be used up by a second reading
    return names, int(dyn.parameter_size(names))


def _floats(value, what: str) -> np.ndarray:
    """``value`` as a float array with finite entries: TypeError naming ``what`` when it is not numbers (a string,
    None...), ValueError naming the non-finite entries' indices (the first five)."""
    if value is None:  # NumPy makes None a NaN: "non-finite values at [[]]" named no None
        raise TypeError(f"{what} must be an array of numbers, got None")
    try:
        a = np.asarray(value)
        ok = a.dtype.kind in "iufO"  # not bools (the simulator refuses them too: True is no torque)
        if ok:
            a = a.astype(float, copy=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be an array of numbers, got {type(value).__name__} ({exc})") from None
    if not ok:
        raise TypeError(f"{what} must be an array of numbers, got {type(value).__name__} of dtype {a.dtype}")
    bad = np.argwhere(~np.isfinite(a))
    if len(bad):
        raise ValueError(f"{what} contains non-finite values at {bad[:5].tolist()}")
    return a


def _controls(dyn, us) -> np.ndarray:
    """``us`` as a (T, nu) float array with finite entries, or an error naming the controls."""
    us = _floats(us, "controls us")
    if us.ndim != 2 or us.shape[1] != dyn.nu:
        raise ValueError(f"controls have shape {us.shape}, expected (T, {dyn.nu})")
    return us


def _start_state(dyn, x0) -> np.ndarray:
    """``x0`` as an (nx,) float array with finite entries, or an error naming it."""
    x0 = _floats(x0, "x0")
    if x0.shape != (dyn.nx,):
        raise ValueError(f"x0 has shape {x0.shape}, expected ({dyn.nx},) (nq + nv)")
    return x0


def _initial(initial, ndx: int) -> np.ndarray:
    """``initial`` (d x_0 / d z_0) as an (ndx, k) float array with finite entries, or an error naming it."""
    initial = _floats(initial, "initial (d x_0 / d z_0)")
    if initial.ndim != 2 or initial.shape[0] != ndx:
        raise ValueError(f"initial (d x_0 / d z_0) has shape {initial.shape}, expected ({ndx}, k) "
                         "(ndx rows, one column per unknown of the start state)")
    return initial


_JAC_FIELDS = ("xs", "Fx", "Fu", "Fp", "params")


def _check_jac(jac, dyn, x0, us, params: tuple | None = None, npar: int = 0) -> None:
    """A ``jac=`` must be the Jacobians of the rollout from ``x0`` under ``us`` (for ``params``, when given: a
    :class:`ParameterJacobians`; else any :class:`TrajectoryJacobians`-like ``xs``, ``Fx``, ``Fu``): its type (or
    fields), its parameters, horizon and shapes, its start state (``xs[0]`` is ``x0`` copied, so compared exactly)
    and its controls when it kept them. O(T nu + nx)."""
    fields, kind, maker = ((_JAC_FIELDS, "ParameterJacobians", "parameter_trajectory_jacobians(dyn, x0, us, params)")
                           if params is not None else
                           (_JAC_FIELDS[:3], "TrajectoryJacobians", "trajectory_jacobians(dyn, x0, us)"))
    missing = [f for f in fields if not hasattr(jac, f)]
    if missing:
        raise TypeError(f"jac must be a {kind} (from {maker}), got {type(jac).__name__} without {', '.join(missing)}")
    if params is not None:
        held = (jac.params,) if isinstance(jac.params, str) else jac.params
        if not isinstance(held, (tuple, list)) or tuple(held) != params:
            shown = list(held) if isinstance(held, (tuple, list)) else repr(held)
            raise ValueError(f"jac holds the Jacobians of parameters {shown}, not of {list(params)}")
    us = _controls(dyn, us)
    x0 = _start_state(dyn, x0)
    T, nx, ndx, nu = len(us), dyn.nx, dyn.ndx, dyn.nu
    steps = np.shape(jac.Fx)[0] if np.ndim(jac.Fx) else None
    if steps != T:
        raise ValueError(f"jac covers {steps} steps but us has {T} (jac must come from the same rollout: {maker})")
    for name, shape, sizes in (("xs", (T + 1, nx), "(T + 1, nx)"), ("Fx", (T, ndx, ndx), "(T, ndx, ndx)"),
                               ("Fu", (T, ndx, nu), "(T, ndx, nu)")):
        if np.shape(getattr(jac, name)) != shape:
            raise ValueError(f"jac.{name} has shape {np.shape(getattr(jac, name))}, expected {sizes} = {shape}")
    if params is not None:
        Fp = np.shape(jac.Fp)
        if len(Fp) != 3 or Fp[:2] != (T, ndx) or Fp[2] != npar:
            cols = f"{Fp[2]} columns" if len(Fp) == 3 else f"shape {Fp}"
            raise ValueError(f"jac.Fp has {cols}, expected (T, ndx, np) = {(T, ndx, npar)}: params {list(params)} "
                             f"have parameter_size {npar}")
    if not np.array_equal(jac.xs[0], x0):
        gap = np.abs(np.asarray(jac.xs[0], dtype=float) - x0).max()
        raise ValueError(f"jac was computed from another start state: jac.xs[0] differs from x0 by up to {gap:.3g} "
                         f"(recompute it with {maker})")
    kept = getattr(jac, "us", None)
    if kept is not None and not np.array_equal(kept, us):
        raise ValueError(f"jac was computed under other controls than us (recompute it with {maker})")


def _adjoint_sweep(ocp, xs, us, Fx, Fu, Fp=None):
    """The one backward sweep of reverse mode (module docstring) along ``xs`` (T+1, nx), ``us`` (T, nu)
    with step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) and, when given, ``Fp`` (T, ndx, np):
    ``(cost, p_0 = dcost/dx_0 (ndx,), dcost/dus (T, nu))``, plus ``dcost/dp (np,)`` when ``Fp`` is given."""
    T = ocp.horizon
    term = ocp.terminal_cost.derivatives(xs[-1])
    p = term.Lx.copy()
    cost = term.L
    g_u = np.empty((T, ocp.nu))
    g_p = None if Fp is None else np.zeros(Fp.shape[2])
    for t in range(T - 1, -1, -1):
        d = ocp.running(t).derivatives(xs[t], us[t])
        cost += d.L
        g_u[t] = d.Lu + Fu[t].T @ p
        if g_p is not None:
            g_p += Fp[t].T @ p
        p = d.Lx + Fx[t].T @ p
    return (float(cost), p, g_u) if g_p is None else (float(cost), p, g_u, g_p)


def forward_sensitivity(dyn, x0, us, jac: TrajectoryJacobians | None = None):
    """``(x_T, dx_T/dx_0 (ndx, ndx), dx_T/du (ndx, T, nu))`` by forward accumulation. ``jac``: the rollout's
    Jacobians already computed (:func:`trajectory_jacobians` of the same ``x0`` and ``us``: checked)."""
    if jac is None:
        jac = trajectory_jacobians(dyn, x0, us)
    else:  # another rollout's (other x0 or controls) returned its own answer, silently
        _check_jac(jac, dyn, x0, us)
    T = len(jac.Fx)
    S = np.eye(dyn.ndx)
    for t in range(T):
        S = jac.Fx[t] @ S
    dU = np.empty((dyn.ndx, T, dyn.nu))
    P = np.eye(dyn.ndx)  # Fx_{T-1} ... Fx_{t+1}
    for t in range(T - 1, -1, -1):
        dU[:, t] = P @ jac.Fu[t]
        P = P @ jac.Fx[t]
    return jac.xs[-1].copy(), S, dU


def impulse_sensitivity(dyn, x0, us, jac: TrajectoryJacobians | None = None):
    """``(x_T, d x_T / d p)`` (ndx, nv) for an impulse ``p`` applied at the start.

    Needs ``dyn.inverse_mass_matrix(q)`` (the simulator has it).
    """
    xT, S, _ = forward_sensitivity(dyn, x0, us, jac)
    nq, nv = dyn.nx - dyn.ndx // 2, dyn.ndx // 2
    return xT, S[:, nv:] @ dyn.inverse_mass_matrix(np.asarray(x0, dtype=float)[:nq])


def adjoint_gradient(ocp, us, *, x0=None, jac: TrajectoryJacobians | None = None,
                     complementarity_aware: bool = False):
    """``(cost, dcost/dx_0 (ndx,), dcost/dus (T, nu))`` of ``ocp``'s cost by one backward sweep.

    ``complementarity_aware``: each step's Jacobians are Nimble's complementarity-aware ones for
    the adjoint at the next knot (:func:`aware_trajectory_jacobians`): not the gradient where
    they differ, a search direction out of resting contacts' zero gradients.
    """
    us = ocp.check_controls(us)
    x0 = ocp.x0 if x0 is None else np.asarray(x0, dtype=float)
    if jac is None:
        jac = (aware_trajectory_jacobians(ocp, us, x0) if complementarity_aware
               else trajectory_jacobians(ocp.dynamics, x0, us))
    else:  # another horizon's raised an IndexError deep in the sweep
        _check_jac(jac, ocp.dynamics, x0, us)
    return _adjoint_sweep(ocp, jac.xs, us, jac.Fx, jac.Fu)
