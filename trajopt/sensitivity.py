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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .protocol import check_complementarity_aware

from .protocol import rollout_derivatives


@dataclass
class TrajectoryJacobians:
    """``xs`` (T+1, nx) and the step Jacobians ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) along it."""

    xs: np.ndarray
    Fx: np.ndarray
    Fu: np.ndarray


def trajectory_jacobians(dyn, x0, us) -> TrajectoryJacobians:
    """Roll out from ``x0`` under ``us`` (T, nu), keeping every step's Jacobians: one call of
    :func:`trajopt.protocol.rollout_derivatives` (one contact solve per step for the simulator,
    none when it has just rolled out the same controls)."""
    return TrajectoryJacobians(*rollout_derivatives(dyn, x0, us))


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
    return TrajectoryJacobians(xs, Fx, Fu)


def forward_sensitivity(dyn, x0, us, jac: TrajectoryJacobians | None = None):
    """``(x_T, dx_T/dx_0 (ndx, ndx), dx_T/du (ndx, T, nu))`` by forward accumulation."""
    jac = jac or trajectory_jacobians(dyn, x0, us)
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
    T = ocp.horizon
    term = ocp.terminal_cost.derivatives(jac.xs[-1])
    p = term.Lx.copy()
    cost = term.L
    g_u = np.empty((T, ocp.nu))
    for t in range(T - 1, -1, -1):
        d = ocp.running(t).derivatives(jac.xs[t], us[t])
        cost += d.L
        g_u[t] = d.Lu + jac.Fu[t].T @ p
        p = d.Lx + jac.Fx[t].T @ p
    return float(cost), p, g_u
