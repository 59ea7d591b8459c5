"""One contact model = one adapter with one optimality function (DESIGN.md).

Every contact model (boxed LCP :mod:`contact.lcp`, Coulomb NCP :mod:`contact.ncp`,
relaxed :mod:`contact.relaxed`) works on the same rows (:class:`RowLayout`: contacts of
``r`` rows, normal first, then joint-limit rows) and the same data: the Delassus matrix
``A`` (m, m), the free contact velocity ``b`` (m,) and the signed distances ``phi`` of the
normal rows. It answers through one small interface (:class:`ContactAdapter`):

* ``problem(A, b, layout, phi, previous)`` -- its problem (``previous``: the last step's
  problem on the same rows, whose structure it may reuse);
* ``solve(problem, guess)`` -- impulses ``lambda`` (``solution.lam``), ``guess`` the last
  step's solution on the same rows;
* ``residual(problem, lam)`` (m,) -- its optimality function ``F(lambda; c, phi)``, zero
  exactly at a solution, with ``c = A lambda + b``;
* ``linearize(problem, solution)`` -- :class:`Linearization` of ``F`` at the solution;
* ``contact_modes(solution, layout)`` -- one mode per contact, for ``sim.contacts``;
* ``reclassify(problem, solution, dl_dlam)`` -- a complementarity-aware linearization, or
  None (only the LCP has one).

Implicit function theorem (as jaxopt derives gradients from an optimality function). At a
solution ``F`` is smooth on its active set (for the hard models the natural-map residual
*is* the mode equations there: a breaking row ``F = lambda``, a sticking row ``F = c``, a
bounded or sliding friction row stays on its bound). Its differential::

    dF = F_lambda dlambda + F_c dc + F_phi dphi,    dc = A dlambda + dc_theta

where ``dc_theta`` is ``dc/dtheta`` at fixed impulses and ``dphi`` ``dphi/dtheta``. Impulses
that stay zero drop out and bounded ones follow their normal: ``dlambda = P dz``. So::

    E dz = -(F_c dc_theta + F_phi dphi_theta),     E = (F_lambda + F_c A) P

solved once per step by :func:`lambda_jacobian` (least squares with a relative rank cutoff
:data:`RANK_RTOL` where ``E`` may be rank-deficient: the clamping set of a box flat on the
ground; a plain solve where the adapter says it is regular).

:func:`lambda_jacobian`, :func:`velocity_jacobian` and :func:`fixed_impulse_velocity_derivative`
run in the compiled core (C++, ``cpp/src/kinematics.cpp``) when it is available (``_core``, set once
at import), else in the numba reference kept here (``_reference_...``), which the core is tested
against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numba import njit

from . import core

#: the compiled core, or None (the numba reference runs); set once at import
_core = core.module if core.available() else None

#: Relative rank cutoff of the least-squares implicit solve (on the singular values of ``E``).
RANK_RTOL = 1e-10


@dataclass(frozen=True)
class RowLayout:
    """The rows of one step's contact problem: ``nc`` contacts of ``r`` rows each (normal first,
    then ``r - 1`` tangent rows), then ``nlim`` joint-limit rows (unilateral, no friction).
    ``friction`` is the contacts' coefficient ``mu``: one number, or (nc,) one per contact (friction per
    collision pair)."""

    nc: int
    r: int
    nlim: int
    friction: float | np.ndarray

    @property
    def m(self) -> int:
        """Number of rows."""
        return self.nc * self.r + self.nlim

    @property
    def normal_rows(self) -> np.ndarray:
        """(nc + nlim,) the rows that carry a signed distance: contact normals, then limits."""
        return np.concatenate((np.arange(self.nc) * self.r, self.nc * self.r + np.arange(self.nlim))).astype(np.intp)

    @property
    def mu(self) -> np.ndarray:
        """(nc,) each contact's friction coefficient: ``friction`` broadcast (a read-only view)."""
        return np.broadcast_to(np.asarray(self.friction, dtype=float), (self.nc,))


@dataclass
class Linearization:
    """A contact model's residual ``F`` linearized at a solution (see the module docstring).

    ``E`` (k, z) ``(F_lambda + F_c A) P``; ``Fc`` (k, m) ``F_c``; ``Fphi`` (k, m) ``F_phi``
    (its columns are rows of ``phi`` laid out like impulses; None: ``F`` does not depend on
    ``phi``). The ``z`` reduced unknowns map to impulses by ``P`` (m, z), or, when ``P`` is
    None, are the impulses of the rows ``unknowns`` (z,). ``regular``: ``E`` is square and
    regular (plain solve); otherwise least squares with the cutoff :data:`RANK_RTOL`. ``symmetric``:
    ``E`` is symmetric (the LCP's clamping block ``A[C, C] = J_C M^-1 J_C^T``): the compiled least squares
    may use its symmetric factorizations (Cholesky where it certifies full rank; where rank-deficient, as
    a flat foot's corners, a Cholesky with diagonal pivoting where it certifies the rank numpy's cutoff
    gives, then the minimum-norm solution of its rank-r factor; else the symmetric eigendecomposition
    with the same cutoff; numpy's lstsq, an SVD, in the reference: cpp/src/linalg.hpp sym_factor),
    equal up to round-off (cond(E) eps).
    """

    E: np.ndarray
    Fc: np.ndarray
    unknowns: np.ndarray
    P: np.ndarray | None = None
    Fphi: np.ndarray | None = None
    regular: bool = False
    symmetric: bool = False


@njit(cache=True)
def _solve_reduced(E, Fc, Fphi, dc, dphi, regular):
    """``dz`` (z, ncols) of ``E dz = -(Fc dc + Fphi dphi)`` (``Fphi`` with no rows: no distance term)."""
    rhs = Fc @ dc
    if Fphi.shape[0]:
        rhs += Fphi @ dphi
    rhs = -rhs
    if regular:
        return np.linalg.solve(E, rhs)
    return np.ascontiguousarray(np.linalg.lstsq(E, rhs, RANK_RTOL)[0])


@njit(cache=True)
def _implicit_velocity(E, Fc, Fphi, dc, dphi, regular, P, unknowns, MJt, dv_fixed):
    """``dv_fixed + MJt dlambda`` with ``dlambda = P dz`` (``P`` with no columns: ``dlambda[unknowns] = dz``)."""
    dz = np.ascontiguousarray(_solve_reduced(E, Fc, Fphi, dc, dphi, regular))
    if P.shape[1]:
        W = MJt @ P
    else:
        W = np.empty((MJt.shape[0], unknowns.shape[0]))
        for a in range(unknowns.shape[0]):
            W[:, a] = MJt[:, unknowns[a]]
    return dv_fixed + W @ dz


_NO_ROWS = np.zeros((0, 0))


def _arrays(lin: Linearization, dc, dphi):
    c = np.ascontiguousarray
    m = lin.Fc.shape[1]
    no = np.zeros((0, m))
    if lin.Fphi is None:
        Fphi, dphi = no, np.zeros((0, dc.shape[1]))
    else:
        Fphi, dphi = c(lin.Fphi), c(dphi)
    return c(lin.E), c(lin.Fc), Fphi, c(dc), dphi, bool(lin.regular)


def lambda_jacobian(lin: Linearization, dc: np.ndarray, dphi: np.ndarray | None = None) -> np.ndarray:
    """``dlambda/dtheta`` (m, ncols) from ``dc = dc/dtheta`` at fixed impulses (m, ncols) and, for a
    model whose residual depends on the distances, ``dphi = dphi/dtheta`` (m, ncols, normal rows)."""
    if _core is None:
        return _reference_lambda_jacobian(lin, dc, dphi)
    dphi = None if lin.Fphi is None else dphi
    return _core.lambda_jacobian(lin.E, lin.Fc, lin.Fphi, dc, dphi, bool(lin.regular), lin.P, lin.unknowns,
                                 bool(lin.symmetric))


def _reference_lambda_jacobian(lin: Linearization, dc: np.ndarray, dphi: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros((lin.Fc.shape[1], dc.shape[1]))
    if lin.E.shape[0] == 0:
        return out
    dz = _solve_reduced(*_arrays(lin, dc, dphi))
    if lin.P is not None:
        return lin.P @ dz
    out[lin.unknowns] = dz
    return out


def velocity_jacobian(lin: Linearization, dc: np.ndarray, dphi: np.ndarray | None, MJt: np.ndarray,
                      dv_fixed: np.ndarray) -> np.ndarray:
    """``dv_fixed + MJt dlambda/dtheta`` (nv, ncols): :func:`lambda_jacobian` mapped to velocities by
    ``MJt = M^-1 J^T`` (nv, m) in one compiled call (the step's hot path)."""
    if lin.E.shape[0] == 0:
        return dv_fixed.copy()
    if _core is None:
        return _reference_velocity_jacobian(lin, dc, dphi, MJt, dv_fixed)
    dphi = None if lin.Fphi is None else dphi
    return _core.implicit_velocity(lin.E, lin.Fc, lin.Fphi, dc, dphi, bool(lin.regular), lin.P, lin.unknowns, MJt,
                                   dv_fixed, bool(lin.symmetric))


def _reference_velocity_jacobian(lin: Linearization, dc: np.ndarray, dphi: np.ndarray | None, MJt: np.ndarray,
                                 dv_fixed: np.ndarray) -> np.ndarray:
    if lin.E.shape[0] == 0:
        return dv_fixed.copy()
    P = _NO_ROWS if lin.P is None else np.ascontiguousarray(lin.P)
    return _implicit_velocity(*_arrays(lin, dc, dphi), P, np.asarray(lin.unknowns, dtype=np.int64),
                              np.ascontiguousarray(MJt), np.ascontiguousarray(dv_fixed))


def fixed_impulse_velocity_derivative(J, dv_fixed, rows, slope, dJv):
    """``dc/dtheta`` (m, ncols) of the contact velocities ``c = J v+`` at fixed impulses: ``J dv_fixed`` plus,
    on the q-columns (the first nv), ``slope * J`` on the distance rows ``rows`` and ``dJv`` (the
    kinematic term ``d(J w)/dq`` at ``w = v+``) on the first ``dJv.shape[0]`` (contact) rows."""
    if _core is None:
        return _reference_fixed_impulse_velocity_derivative(J, dv_fixed, rows, slope, dJv)
    return _core.fixed_impulse_velocity_derivative(J, dv_fixed, rows, slope, dJv)


@njit(cache=True)
def _reference_fixed_impulse_velocity_derivative(J, dv_fixed, rows, slope, dJv):
    nv = J.shape[1]
    dc = J @ dv_fixed
    for a in range(rows.shape[0]):
        i = rows[a]
        for k in range(nv):
            dc[i, k] += slope[a] * J[i, k]
    for i in range(dJv.shape[0]):
        for k in range(nv):
            dc[i, k] += dJv[i, k]
    return dc


class ContactAdapter(Protocol):
    """What the step asks of a contact model (see the module docstring)."""

    def problem(self, A: np.ndarray, b: np.ndarray, layout: RowLayout, phi: np.ndarray, previous=None): ...

    def solve(self, problem, guess=None): ...

    def residual(self, problem, lam: np.ndarray) -> np.ndarray: ...

    def linearize(self, problem, solution) -> Linearization: ...

    def contact_modes(self, solution, layout: RowLayout) -> np.ndarray: ...

    def reclassify(self, problem, solution, dl_dlam: np.ndarray) -> Linearization | None: ...
