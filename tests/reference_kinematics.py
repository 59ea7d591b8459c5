"""Reference (plain numpy) contact kinematics, kept in the tests.

The package computes the same quantities with compiled kernels
(:mod:`contact._kernels`, driven by :class:`contact.kinematics.ContactKinematics`,
whose docstring states the maths); this slower, line-by-line version is what the
tests compare them with.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contact.detection import Contacts
from contact.kinematics import ContactGeometry

_Z = np.array([0.0, 0.0, 1.0])


def skew(a) -> np.ndarray:
    """The cross-product matrix of a 3-vector (scalar math: np.cross costs ~20 us)."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def cross_cols(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise cross products of two (3, n) arrays."""
    return np.stack((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


#: d(n, t)/dn in a planar scene (t = z x n): constant.
_PLANAR_DD = np.stack((np.eye(3), skew(_Z)))
_PLANAR_DD.setflags(write=False)


class ReferenceKinematics:
    """Contact-frame Jacobians and their derivative contractions for one model."""

    def __init__(self, model: pin.Model, *, planar: bool = False):
        self.model = model
        self.nv = model.nv
        self.planar = planar
        self.rows = 2 if planar else 3
        # mask[i, k] = 1 when dof k's joint supports dof i's joint (or is the same joint).
        nv = model.nv
        joint_of = np.empty(nv, dtype=np.intp)
        for j in range(1, model.njoints):
            jm = model.joints[j]
            joint_of[jm.idx_v: jm.idx_v + jm.nv] = j
        mask = np.zeros((nv, nv))
        for i in range(nv):
            support = set(model.supports[int(joint_of[i])])
            for k in range(nv):
                mask[i, k] = float(int(joint_of[k]) in support)
        self.mask = mask
        self._zero6 = np.zeros((6, nv))

    # -- frames ---------------------------------------------------------------------------
    def directions(self, n: np.ndarray):
        """``(D, dD_dn)``: direction matrix (3, r) with columns n, t1[, t2] and d(column)/dn (r, 3, 3)."""
        if self.planar:
            D = np.empty((3, 2))
            D[:, 0] = n
            D[0, 1], D[1, 1], D[2, 1] = -n[1], n[0], 0.0
            return D, _PLANAR_DD
        a = np.abs(n)
        e = np.zeros(3)
        e[int(np.argmin(a))] = 1.0
        Se = skew(e)
        u = Se @ n
        nu = np.sqrt(u @ u)
        t1 = u / nu
        dt1 = (np.eye(3) - np.outer(t1, t1)) @ Se / nu
        t2 = skew(n) @ t1
        dt2 = skew(n) @ dt1 - skew(t1)
        return np.column_stack((n, t1, t2)), np.stack((np.eye(3), dt1, dt2))

    # -- the Jacobian -----------------------------------------------------------------------
    def geometry(self, data: pin.Data, contacts: Contacts) -> ContactGeometry:
        """Contact Jacobian and derivative ingredients. Needs ``computeJointJacobians`` at q first."""
        model, nv, r = self.model, self.nv, self.rows
        nc = len(contacts)
        J = np.empty((nc * r, nv))
        D = np.empty((nc, 3, r))
        dD = np.empty((nc, r, 3, nv))
        dp = np.empty((nc, 3, nv))
        J6A = np.empty((nc, 6, nv))
        J6B = np.empty((nc, 6, nv))
        cache = {0: self._zero6}
        for c in range(nc):
            for jid in (contacts.body_a[c], contacts.body_b[c], contacts.normal_body[c], contacts.point_body[c]):
                if jid not in cache:
                    cache[jid] = pin.getJointJacobian(model, data, int(jid), pin.ReferenceFrame.WORLD).copy()
            A, B = cache[contacts.body_a[c]], cache[contacts.body_b[c]]
            J6A[c], J6B[c] = A, B
            p, n = contacts.points[c], contacts.normals[c]
            Dc, dD_dn = self.directions(n)
            D[c] = Dc
            dJ = A - B
            Jp = dJ[:3] - skew(p) @ dJ[3:]  # velocity of the material points at p, A minus B
            J[c * r:(c + 1) * r] = Dc.T @ Jp
            # Geometry: the normal turns with its carrier (between two spheres: along their centres' line), the
            # point moves with its body.
            N = cache[contacts.normal_body[c]]
            P = cache[contacts.point_body[c]]
            rad = contacts.radius[c]
            centre = p - rad * n
            gap = contacts.gap[c]
            slide = np.zeros((3, nv))
            if gap != 0.0:  # the cores' centre line (contact._kernels.centre_line), column by column
                other = centre - gap * n
                w = (P[:3] - skew(centre) @ P[3:]) - (N[:3] - skew(other) @ N[3:])
                aP, aN = contacts.slide[c, :3], contacts.slide[c, 3:]
                rr = gap * n
                rows, rhs = [], []
                if aP.any():
                    rows.append(np.concatenate(([1.0], [-(aP @ aN)] if aN.any() else [])))
                    rhs.append(-(aP @ w) - rr @ (-skew(aP) @ P[3:]))
                if aN.any():
                    rows.append(np.concatenate(([aP @ aN] if aP.any() else [], [-1.0])))
                    rhs.append(-(aN @ w) - rr @ (-skew(aN) @ N[3:]))
                s_P, s_N = np.zeros(nv), np.zeros(nv)
                if rows:
                    Mrows = np.array(rows)
                    if len(rows) == 2 and 1.0 - (aP @ aN) ** 2 <= 1e-12:  # parallel (the detector's test)
                        s_P = rhs[0]
                    else:
                        sol = np.linalg.solve(Mrows, np.array(rhs))
                        if aP.any():
                            s_P = sol[0]
                        if aN.any():
                            s_N = sol[-1]
                u = w + np.outer(aP, s_P) - np.outer(aN, s_N)
                dn = (np.eye(3) - np.outer(n, n)) @ u / gap
                slide = np.outer(aP, s_P)
            else:
                dn = -skew(n) @ N[3:]
            for k in range(r):
                dD[c, k] = dD_dn[k] @ dn
            dp[c] = P[:3] - skew(centre) @ P[3:] + rad * dn + slide
        return ContactGeometry(contacts, J, D, dD, dp, J6A, J6B, r)

    # -- derivative contractions ------------------------------------------------------------
    def dJTw_dq(self, J6: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``d(J6(q)^T w)/dq`` (nv, nv) at a fixed world wrench ``w = (f, m)``."""
        Jv, Jw = J6[:3], J6[3:]
        f, m = w[:3], w[3:]
        Sf = skew(f)
        P = np.vstack((-Sf @ Jw, -skew(m) @ Jw - Sf @ Jv))  # columns S_i x* w
        return self.mask * (P.T @ J6)

    def dJv_dq(self, J6: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``d(J6(q) v)/dq`` (6, nv) at a fixed velocity ``v``."""
        U = J6 @ (self.mask * v[:, None])
        Sv, Sw = J6[:3], J6[3:]
        Uv, Uw = U[:3], U[3:]
        return np.vstack((cross_cols(Sw, Uv) + cross_cols(Sv, Uw), cross_cols(Sw, Uw)))

    def force_derivative(self, g: ContactGeometry, lam: np.ndarray) -> np.ndarray:
        """``d(J(q)^T lambda)/dq`` (nv, nv) with the contact-frame impulses ``lambda`` (m,) held."""
        r = g.rows
        out = np.zeros((self.nv, self.nv))
        pts = g.contacts.points
        for c in range(len(g.contacts)):
            lc = lam[c * r:(c + 1) * r]
            if not lc.any():
                continue
            p = pts[c]
            F = g.D[c] @ lc
            w = np.concatenate((F, skew(p) @ F))
            out += self.dJTw_dq(g.J6A[c], w) - self.dJTw_dq(g.J6B[c], w)
            dF = np.tensordot(lc, g.dD[c], axes=1)  # (3, nv)
            dw = np.vstack((dF, -skew(F) @ g.dp[c] + skew(p) @ dF))
            out += (g.J6A[c] - g.J6B[c]).T @ dw
        return out

    def velocity_derivative(self, g: ContactGeometry, v: np.ndarray) -> np.ndarray:
        """``d(J(q) v)/dq`` (m, nv) at a fixed generalized velocity ``v`` (nv,)."""
        r = g.rows
        out = np.empty((len(g.contacts) * r, self.nv))
        pts = g.contacts.points
        for c in range(len(g.contacts)):
            p = pts[c]
            A, B = g.J6A[c], g.J6B[c]
            dV = self.dJv_dq(A, v) - self.dJv_dq(B, v)
            V = (A - B) @ v
            dv_o, dw = V[:3], V[3:]
            v_rel = dv_o + skew(dw) @ p
            Dc = g.D[c]
            W = np.vstack((Dc, skew(p) @ Dc))  # columns [d; p x d]
            rows = W.T @ dV
            for k in range(r):
                d = Dc[:, k]
                rows[k] += v_rel @ g.dD[c, k] + (skew(d) @ dw) @ g.dp[c]
            out[c * r:(c + 1) * r] = rows
        return out
