"""Contact Jacobians in the contact frame, and their derivatives contracted with a vector.

World-frame joint Jacobians ``J6`` (6 x nv: linear rows first, then angular;
the spatial velocity of the body at the world origin) come from Pinocchio. For a
contact direction ``d`` at a world point ``p``, the velocity row is
``[d; p x d]^T (J6_A - J6_B)`` (body A minus body B).

The derivatives never form the tensor dJ/dq. They use the Lie-algebra identity
``dS_i/dq_k = S_k x S_i`` for world-frame motion-subspace columns ``S`` whenever
dof k's joint supports dof i's joint (same joint included: Pinocchio's
tangent-space perturbations act on the right), and 0 otherwise:

- ``d(J6^T w)/dq`` at a fixed world wrench w: entry (i, k) =
  ``mask[i, k] S_k^T (S_i x* w)``;
- ``d(J6 v)/dq`` at fixed v: column k = ``S_k x U_k`` with
  ``U_k = sum_i mask[i, k] S_i v_i``.

The collision-geometry terms add how each contact's point ``p`` and normal
``n`` (and the tangents built from it) move with q: the normal turns with the
body that carries it (``dn = w_N x n``), or between two round shapes along the line
of their cores' closest points, which slide along a capsule's axis
(``dn = (I - n n^T) dr / gap``, ``Contacts.gap``/``slide``, :func:`contact._kernels.centre_line`);
the point is a body-fixed vertex or a
sphere/capsule surface point ``centre + radius n``, or the lowest point of a
cylinder's rim ``centre + radius u``, ``u`` the unit projection of ``n`` normal to
the cylinder's axis ``a`` (turning with both bodies: ``du = (I - u u^T) dw / |w|``,
``w = n - a (a.n)``) (see :mod:`contact.detection`).

Rows per contact: ``(n, t)`` in planar scenes (xy plane; ``t = z x n``),
``(n, t1, t2)`` in 3-D (``t1 = e x n / |e x n|`` with ``e`` the world axis least
aligned with n, ``t2 = n x t1``).

The loops over contacts run in the compiled core (C++, ``cpp/src/kinematics.cpp``) when it is
available, else in numba kernels (:mod:`contact._kernels`, the reference the core is tested
against: ``_reference_geometry`` etc.); a line-by-line numpy version lives in
``tests/reference_kinematics.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from . import _kernels, core
from .detection import Contacts


@dataclass
class ContactGeometry:
    """Per-step contact kinematics (m = nc * rows): what the derivatives reuse.

    ``J`` (m, nv) contact Jacobian; ``D`` (nc, 3, r) directions (columns n, t1[, t2]);
    ``dD`` (nc, r, 3, nv) their derivatives; ``dp`` (nc, 3, nv) point derivatives;
    ``J6A``/``J6B`` (nc, 6, nv) world joint Jacobians of the two bodies.
    """

    contacts: Contacts
    J: np.ndarray
    D: np.ndarray
    dD: np.ndarray
    dp: np.ndarray
    J6A: np.ndarray
    J6B: np.ndarray
    rows: int


def support_masks(model: pin.Model) -> tuple[np.ndarray, np.ndarray]:
    """``(mask, support)``: ``mask[i, k]`` = dof k's joint supports dof i's joint (nv, nv);
    ``support[j, k]`` = dof k's joint supports joint j (njoints, nv; row 0, the world, is 0)."""
    nv = model.nv
    joint_of = np.empty(nv, dtype=np.intp)
    for j in range(1, model.njoints):
        jm = model.joints[j]
        joint_of[jm.idx_v: jm.idx_v + jm.nv] = j
    support = np.zeros((model.njoints, nv))
    for j in range(1, model.njoints):
        sup = set(model.supports[j])
        support[j] = [float(int(joint_of[k]) in sup) for k in range(nv)]
    mask = support[joint_of].copy()
    return mask, support


class ContactKinematics:
    """Contact-frame Jacobians and their derivative contractions for one model."""

    def __init__(self, model: pin.Model, *, planar: bool = False, compiled: bool = True):
        self.nv = model.nv
        self.planar = planar
        self.rows = 2 if planar else 3
        self.mask, self.support = support_masks(model)
        #: the compiled core (C++) that computes the kinematics, or None: the numba reference
        #: (``compiled=False``, or the core is missing: :func:`contact.core.available` warns once)
        self.core = core.module if compiled and core.available() else None

    def geometry(self, data: pin.Data, contacts: Contacts) -> ContactGeometry:
        """Contact Jacobian and derivative ingredients. Needs ``computeJointJacobians`` at q first."""
        if self.core is None:
            return self._reference_geometry(data, contacts)
        c = contacts
        J, D, dD, dp, J6A, J6B = self.core.contact_geometry(data, self.support, c.body_a, c.body_b, c.normal_body,
                                                            c.point_body, c.points, c.normals, c.radius, c.axis,
                                                            bool(self.planar), c.gap, c.slide)
        return ContactGeometry(contacts, J, D, dD, dp, J6A, J6B, self.rows)

    def force_derivative(self, g: ContactGeometry, lam: np.ndarray) -> np.ndarray:
        """``d(J(q)^T lambda)/dq`` (nv, nv) with the contact-frame impulses ``lambda`` (m,) held."""
        if self.core is None:
            return self._reference_force_derivative(g, lam)
        return self.core.force_derivative(g.J6A, g.J6B, g.D, g.dD, g.dp, g.contacts.points, lam, self.mask)

    def velocity_derivative(self, g: ContactGeometry, v: np.ndarray) -> np.ndarray:
        """``d(J(q) v)/dq`` (m, nv) at a fixed generalized velocity ``v`` (nv,)."""
        if self.core is None:
            return self._reference_velocity_derivative(g, v)
        return self.core.velocity_derivative(g.J6A, g.J6B, g.D, g.dD, g.dp, g.contacts.points, v, self.mask)

    # -- the reference (numba kernels) ------------------------------------------------------
    def _reference_geometry(self, data: pin.Data, contacts: Contacts) -> ContactGeometry:
        nv, r, nc = self.nv, self.rows, len(contacts)
        J = np.empty((nc * r, nv))
        D = np.empty((nc, 3, r))
        dD = np.empty((nc, r, 3, nv))
        dp = np.empty((nc, 3, nv))
        J6A = np.empty((nc, 6, nv))
        J6B = np.empty((nc, 6, nv))
        _kernels.contact_geometry(np.asarray(data.J).reshape(6, -1), self.support, contacts.body_a, contacts.body_b,
                                  contacts.normal_body, contacts.point_body, contacts.points, contacts.normals,
                                  contacts.radius, contacts.axis, contacts.gap, contacts.slide, self.planar, J, D, dD,
                                  dp, J6A, J6B)
        return ContactGeometry(contacts, J, D, dD, dp, J6A, J6B, r)

    def _reference_force_derivative(self, g: ContactGeometry, lam: np.ndarray) -> np.ndarray:
        out = np.empty((self.nv, self.nv))
        _kernels.force_derivative(g.J6A, g.J6B, g.D, g.dD, g.dp, g.contacts.points,
                                  np.ascontiguousarray(lam, dtype=float), self.mask, out)
        return out

    def _reference_velocity_derivative(self, g: ContactGeometry, v: np.ndarray) -> np.ndarray:
        out = np.empty((len(g.contacts) * self.rows, self.nv))
        _kernels.velocity_derivative(g.J6A, g.J6B, g.D, g.dD, g.dp, g.contacts.points,
                                     np.ascontiguousarray(v, dtype=float), self.mask, out)
        return out
