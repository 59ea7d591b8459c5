"""Compiled (numba) kernels of the contact kinematics: the per-step hot path.

Each kernel loops over all contacts of a step at once. The maths is documented
in :mod:`contact.kinematics`; ``tests/reference_kinematics.py`` keeps the same
computations in plain numpy, and the tests hold the two equal.

World-frame joint Jacobians come from one array: ``Jw`` (6, nv) is Pinocchio's
``data.J`` after ``computeJointJacobians`` (every dof's motion-subspace column
in the world frame, linear rows first), and body ``j``'s Jacobian is ``Jw`` with
the columns of the dofs that do not support ``j`` zeroed (``support[j]``).

The functions are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _body_jacobian(Jw, support, j, out):
    nv = Jw.shape[1]
    for r in range(6):
        for k in range(nv):
            out[r, k] = Jw[r, k] * support[j, k]


@njit(cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True)
def tangent_basis(n0, n1, n2):
    """The contact frame's tangents of unit normal ``n``: ``t = e x n / |e x n|`` with ``e`` the axis
    least aligned with ``n``, and ``s = n x t``. Returns ``t, s, e`` (9 numbers) and ``|e x n|``."""
    a0, a1, a2 = abs(n0), abs(n1), abs(n2)
    e0, e1, e2 = 0.0, 0.0, 0.0
    if a0 <= a1 and a0 <= a2:
        e0 = 1.0
    elif a1 <= a2:
        e1 = 1.0
    else:
        e2 = 1.0
    u0, u1, u2 = _cross(e0, e1, e2, n0, n1, n2)
    un = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    t0, t1, t2 = u0 / un, u1 / un, u2 / un
    s0, s1, s2 = _cross(n0, n1, n2, t0, t1, t2)
    return t0, t1, t2, s0, s1, s2, e0, e1, e2, un


@njit(cache=True)
def centre_line(JP, JN, k, x0, x1, x2, n0, n1, n2, gap, slides, c):
    """Column ``k`` of the centre line's motion (Contacts.gap, .slide): the core points ``x_P`` (given) and
    ``x_N = x_P - gap n`` of two shapes on a centre line (a sphere's centre, or the closest point of a capsule's or
    a cylinder side's segment, which slides along its unit axis ``a``: ``slides[c, :3]`` for P, ``slides[c, 3:]``
    for N, zeros when fixed; a cylinder rim's point slides along the rim's tangent, passed as ``sqrt(R / rho)``
    times it, which the one-slide formulas below are bilinear in, while the two-slide system takes unit axes:
    contact.detection._line_cores). With
    ``r = x_P - x_N = gap n``, ``w = v_P(x_P) - v_N(x_N)`` and ``dr = w + s_P a_P - s_N a_N``, a sliding point
    keeps ``r . a = 0``: ``dr . a + r . (w_X x a) = 0`` gives the slides (both: a 2 x 2 system; parallel axes: P's
    alone). Returns ``dn = (I - n n^T) dr / gap`` and ``s_P a_P`` (the point body's core moves by
    ``v_P(x_P) + s_P a_P``)."""
    q0, q1, q2 = _cross(JP[3, k], JP[4, k], JP[5, k], x0, x1, x2)
    y0, y1, y2 = x0 - gap * n0, x1 - gap * n1, x2 - gap * n2
    s0, s1, s2 = _cross(JN[3, k], JN[4, k], JN[5, k], y0, y1, y2)
    w0 = (JP[0, k] + q0) - (JN[0, k] + s0)
    w1 = (JP[1, k] + q1) - (JN[1, k] + s1)
    w2 = (JP[2, k] + q2) - (JN[2, k] + s2)
    ap0, ap1, ap2 = slides[c, 0], slides[c, 1], slides[c, 2]
    an0, an1, an2 = slides[c, 3], slides[c, 4], slides[c, 5]
    slp = ap0 != 0.0 or ap1 != 0.0 or ap2 != 0.0
    sln = an0 != 0.0 or an1 != 0.0 or an2 != 0.0
    sp, sn = 0.0, 0.0
    r0, r1, r2 = gap * n0, gap * n1, gap * n2
    bp, bn = 0.0, 0.0
    if slp:
        e0, e1, e2 = _cross(JP[3, k], JP[4, k], JP[5, k], ap0, ap1, ap2)
        bp = -(w0 * ap0 + w1 * ap1 + w2 * ap2 + r0 * e0 + r1 * e1 + r2 * e2)
    if sln:
        e0, e1, e2 = _cross(JN[3, k], JN[4, k], JN[5, k], an0, an1, an2)
        bn = -(w0 * an0 + w1 * an1 + w2 * an2 + r0 * e0 + r1 * e1 + r2 * e2)
    if slp and sln:
        cc = ap0 * an0 + ap1 * an1 + ap2 * an2
        if 1.0 - cc * cc > 1e-12:  # the detector's test of crossing axes (contact.detection._round_cores)
            sn = (bn - cc * bp) / (cc * cc - 1.0)
            sp = bp + cc * sn
        else:  # parallel axes: sliding along them moves no normal
            sp = bp
    elif slp:
        sp = bp
    elif sln:
        sn = -bn
    u0 = w0 + sp * ap0 - sn * an0
    u1 = w1 + sp * ap1 - sn * an1
    u2 = w2 + sp * ap2 - sn * an2
    un = n0 * u0 + n1 * u1 + n2 * u2
    return ((u0 - n0 * un) / gap, (u1 - n1 * un) / gap, (u2 - n2 * un) / gap, sp * ap0, sp * ap1, sp * ap2)


@njit(cache=True)
def contact_geometry(Jw, support, body_a, body_b, normal_body, point_body, points, normals, radius, axes, gaps,
                     slides, planar, J, D, dD, dp, J6A, J6B):
    """Fill the contact Jacobian and the derivative ingredients (shapes as in ContactGeometry).

    ``J`` (nc*r, nv), ``D`` (nc, 3, r), ``dD`` (nc, r, 3, nv), ``dp`` (nc, 3, nv),
    ``J6A``/``J6B`` (nc, 6, nv). ``gaps`` (nc,), ``slides`` (nc, 6): two round shapes' centre line (Contacts.gap,
    .slide; :func:`centre_line`), whose normal turns with both cores; gap 0: ``dn = w_N x n``.
    """
    nc = points.shape[0]
    nv = Jw.shape[1]
    r = 2 if planar else 3
    JN = np.empty((6, nv))
    JP = np.empty((6, nv))
    dn = np.empty((3, nv))
    dDdn = np.zeros((r, 3, 3))
    for c in range(nc):
        _body_jacobian(Jw, support, body_a[c], J6A[c])
        _body_jacobian(Jw, support, body_b[c], J6B[c])
        _body_jacobian(Jw, support, normal_body[c], JN)
        _body_jacobian(Jw, support, point_body[c], JP)
        n0, n1, n2 = normals[c, 0], normals[c, 1], normals[c, 2]
        p0, p1, p2 = points[c, 0], points[c, 1], points[c, 2]
        ax0, ax1, ax2 = axes[c, 0], axes[c, 1], axes[c, 2]
        cyl = ax0 != 0.0 or ax1 != 0.0 or ax2 != 0.0
        an, ws, ru0, ru1, ru2 = 0.0, 1.0, n0, n1, n2
        if cyl:
            an = ax0 * n0 + ax1 * n1 + ax2 * n2
            w0, w1, w2 = n0 - ax0 * an, n1 - ax1 * an, n2 - ax2 * an
            ws = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
            ru0, ru1, ru2 = w0 / ws, w1 / ws, w2 / ws
        # directions and their derivative with respect to n
        dDdn[:] = 0.0
        D[c, 0, 0], D[c, 1, 0], D[c, 2, 0] = n0, n1, n2
        for i in range(3):
            dDdn[0, i, i] = 1.0
        if planar:
            D[c, 0, 1], D[c, 1, 1], D[c, 2, 1] = -n1, n0, 0.0
            dDdn[1, 0, 1] = -1.0  # t = z x n = (-n1, n0, 0)
            dDdn[1, 1, 0] = 1.0
        else:
            t0, t1, t2, s0, s1, s2, e0, e1, e2, un = tangent_basis(n0, n1, n2)
            D[c, 0, 1], D[c, 1, 1], D[c, 2, 1] = t0, t1, t2
            D[c, 0, 2], D[c, 1, 2], D[c, 2, 2] = s0, s1, s2
            # dt1/dn = (I - t1 t1^T) skew(e) / |u|
            Se = np.array([[0.0, -e2, e1], [e2, 0.0, -e0], [-e1, e0, 0.0]])
            tt = np.array([t0, t1, t2])
            P = np.eye(3) - np.outer(tt, tt)
            dt1 = (P @ Se) / un
            Sn = np.array([[0.0, -n2, n1], [n2, 0.0, -n0], [-n1, n0, 0.0]])
            St = np.array([[0.0, -t2, t1], [t2, 0.0, -t0], [-t1, t0, 0.0]])
            dt2 = Sn @ dt1 - St
            for i in range(3):
                for j in range(3):
                    dDdn[1, i, j] = dt1[i, j]
                    dDdn[2, i, j] = dt2[i, j]
        # contact rows: D^T (Jv - skew(p) Jw) of A minus B
        for k in range(nv):
            lv0 = J6A[c, 0, k] - J6B[c, 0, k]
            lv1 = J6A[c, 1, k] - J6B[c, 1, k]
            lv2 = J6A[c, 2, k] - J6B[c, 2, k]
            w0 = J6A[c, 3, k] - J6B[c, 3, k]
            w1 = J6A[c, 4, k] - J6B[c, 4, k]
            w2 = J6A[c, 5, k] - J6B[c, 5, k]
            # v(p) = v_o + w x p
            x0, x1, x2 = _cross(w0, w1, w2, p0, p1, p2)
            vp0, vp1, vp2 = lv0 + x0, lv1 + x1, lv2 + x2
            for j in range(r):
                J[c * r + j, k] = D[c, 0, j] * vp0 + D[c, 1, j] * vp1 + D[c, 2, j] * vp2
            # dn = w_N x n ; dp = v_P(centre) + radius dn
            rad = radius[c]
            gap = gaps[c]
            sl0, sl1, sl2 = 0.0, 0.0, 0.0
            if gap != 0.0:  # the centre line of two round shapes: x_P = p - rad n, x_N = x_P - gap n
                d0, d1, d2, sl0, sl1, sl2 = centre_line(JP, JN, k, p0 - rad * n0, p1 - rad * n1, p2 - rad * n2,
                                                        n0, n1, n2, gap, slides, c)
            else:
                nw0, nw1, nw2 = JN[3, k], JN[4, k], JN[5, k]
                d0, d1, d2 = _cross(nw0, nw1, nw2, n0, n1, n2)
            dn[0, k], dn[1, k], dn[2, k] = d0, d1, d2
            if cyl:
                # rim point: p = centre + rad u, u = w / |w|, w = n - a (a.n); du = (I - u u^T) dw / |w|
                # with dw = dn - da (a.n) - a (da.n + a.dn), da = w_P x a
                c0, c1, c2 = p0 - rad * ru0, p1 - rad * ru1, p2 - rad * ru2
                da0, da1, da2 = _cross(JP[3, k], JP[4, k], JP[5, k], ax0, ax1, ax2)
                dan = da0 * n0 + da1 * n1 + da2 * n2 + ax0 * d0 + ax1 * d1 + ax2 * d2
                dw0 = d0 - da0 * an - ax0 * dan
                dw1 = d1 - da1 * an - ax1 * dan
                dw2 = d2 - da2 * an - ax2 * dan
                uw = ru0 * dw0 + ru1 * dw1 + ru2 * dw2
                g0, g1, g2 = (dw0 - ru0 * uw) / ws, (dw1 - ru1 * uw) / ws, (dw2 - ru2 * uw) / ws
            else:
                c0, c1, c2 = p0 - rad * n0, p1 - rad * n1, p2 - rad * n2
                g0, g1, g2 = d0, d1, d2
            y0, y1, y2 = _cross(JP[3, k], JP[4, k], JP[5, k], c0, c1, c2)
            dp[c, 0, k] = JP[0, k] + y0 + rad * g0 + sl0
            dp[c, 1, k] = JP[1, k] + y1 + rad * g1 + sl1
            dp[c, 2, k] = JP[2, k] + y2 + rad * g2 + sl2
        for j in range(r):
            for i in range(3):
                for k in range(nv):
                    dD[c, j, i, k] = dDdn[j, i, 0] * dn[0, k] + dDdn[j, i, 1] * dn[1, k] + dDdn[j, i, 2] * dn[2, k]


@njit(cache=True)
def _add_dJTw(J6, f0, f1, f2, m0, m1, m2, mask, sign, out):
    """out += sign * d(J6^T w)/dq at a fixed world wrench w = (f, m)."""
    nv = J6.shape[1]
    Pm = np.empty((6, nv))
    for i in range(nv):
        v0, v1, v2 = J6[0, i], J6[1, i], J6[2, i]
        w0, w1, w2 = J6[3, i], J6[4, i], J6[5, i]
        a0, a1, a2 = _cross(w0, w1, w2, f0, f1, f2)
        b0, b1, b2 = _cross(w0, w1, w2, m0, m1, m2)
        c0, c1, c2 = _cross(v0, v1, v2, f0, f1, f2)
        Pm[0, i], Pm[1, i], Pm[2, i] = a0, a1, a2
        Pm[3, i], Pm[4, i], Pm[5, i] = b0 + c0, b1 + c1, b2 + c2
    for i in range(nv):
        for k in range(nv):
            if mask[i, k] != 0.0:
                s = 0.0
                for r in range(6):
                    s += Pm[r, i] * J6[r, k]
                out[i, k] += sign * s


@njit(cache=True)
def force_derivative(J6A, J6B, D, dD, dp, points, lam, mask, out):
    """out = d(J(q)^T lambda)/dq (nv, nv) with contact-frame impulses ``lam`` held."""
    nc, r = D.shape[0], D.shape[2]
    nv = out.shape[0]
    out[:] = 0.0
    for c in range(nc):
        nz = False
        for j in range(r):
            if lam[c * r + j] != 0.0:
                nz = True
        if not nz:
            continue
        p0, p1, p2 = points[c, 0], points[c, 1], points[c, 2]
        F0 = F1 = F2 = 0.0
        for j in range(r):
            lj = lam[c * r + j]
            F0 += D[c, 0, j] * lj
            F1 += D[c, 1, j] * lj
            F2 += D[c, 2, j] * lj
        m0, m1, m2 = _cross(p0, p1, p2, F0, F1, F2)
        _add_dJTw(J6A[c], F0, F1, F2, m0, m1, m2, mask, 1.0, out)
        _add_dJTw(J6B[c], F0, F1, F2, m0, m1, m2, mask, -1.0, out)
        # the wrench moves: dw = (dF, dp x F + p x dF)
        dw = np.empty((6, nv))
        for k in range(nv):
            g0 = g1 = g2 = 0.0
            for j in range(r):
                lj = lam[c * r + j]
                g0 += lj * dD[c, j, 0, k]
                g1 += lj * dD[c, j, 1, k]
                g2 += lj * dD[c, j, 2, k]
            h0, h1, h2 = _cross(dp[c, 0, k], dp[c, 1, k], dp[c, 2, k], F0, F1, F2)
            i0, i1, i2 = _cross(p0, p1, p2, g0, g1, g2)
            dw[0, k], dw[1, k], dw[2, k] = g0, g1, g2
            dw[3, k], dw[4, k], dw[5, k] = h0 + i0, h1 + i1, h2 + i2
        for i in range(nv):
            for k in range(nv):
                s = 0.0
                for rr in range(6):
                    s += (J6A[c, rr, i] - J6B[c, rr, i]) * dw[rr, k]
                out[i, k] += s


@njit(cache=True)
def _dJv(J6, v, mask, out):
    """out (6, nv) = d(J6 v)/dq at fixed v: column k = S_k x U_k, U_k = sum_i mask[i,k] S_i v_i."""
    nv = J6.shape[1]
    for k in range(nv):
        u = np.zeros(6)
        for i in range(nv):
            if mask[i, k] != 0.0 and v[i] != 0.0:
                for rr in range(6):
                    u[rr] += J6[rr, i] * v[i]
        sv0, sv1, sv2 = J6[0, k], J6[1, k], J6[2, k]
        sw0, sw1, sw2 = J6[3, k], J6[4, k], J6[5, k]
        a0, a1, a2 = _cross(sw0, sw1, sw2, u[0], u[1], u[2])
        b0, b1, b2 = _cross(sv0, sv1, sv2, u[3], u[4], u[5])
        c0, c1, c2 = _cross(sw0, sw1, sw2, u[3], u[4], u[5])
        out[0, k], out[1, k], out[2, k] = a0 + b0, a1 + b1, a2 + b2
        out[3, k], out[4, k], out[5, k] = c0, c1, c2


@njit(cache=True)
def velocity_derivative(J6A, J6B, D, dD, dp, points, v, mask, out):
    """out (nc*r, nv) = d(J(q) v)/dq at a fixed generalized velocity ``v``."""
    nc, r = D.shape[0], D.shape[2]
    nv = v.shape[0]
    dA = np.empty((6, nv))
    dB = np.empty((6, nv))
    for c in range(nc):
        _dJv(J6A[c], v, mask, dA)
        _dJv(J6B[c], v, mask, dB)
        p0, p1, p2 = points[c, 0], points[c, 1], points[c, 2]
        V = np.zeros(6)
        for rr in range(6):
            for i in range(nv):
                V[rr] += (J6A[c, rr, i] - J6B[c, rr, i]) * v[i]
        x0, x1, x2 = _cross(V[3], V[4], V[5], p0, p1, p2)
        vr0, vr1, vr2 = V[0] + x0, V[1] + x1, V[2] + x2
        for j in range(r):
            d0, d1, d2 = D[c, 0, j], D[c, 1, j], D[c, 2, j]
            pd0, pd1, pd2 = _cross(p0, p1, p2, d0, d1, d2)
            q0, q1, q2 = _cross(d0, d1, d2, V[3], V[4], V[5])
            for k in range(nv):
                s = (d0 * (dA[0, k] - dB[0, k]) + d1 * (dA[1, k] - dB[1, k]) + d2 * (dA[2, k] - dB[2, k])
                     + pd0 * (dA[3, k] - dB[3, k]) + pd1 * (dA[4, k] - dB[4, k]) + pd2 * (dA[5, k] - dB[5, k]))
                s += vr0 * dD[c, j, 0, k] + vr1 * dD[c, j, 1, k] + vr2 * dD[c, j, 2, k]
                s += q0 * dp[c, 0, k] + q1 * dp[c, 1, k] + q2 * dp[c, 2, k]
                out[c * r + j, k] = s


@njit(cache=True)
def snap_to_vertices(R, t, local_vertices, pts, n, toward, tol, planar=False):
    """Replace each patch point (rows of ``pts``, world frame) by the shape vertex under it.

    The shape has rotation ``R``, translation ``t`` and vertices ``local_vertices``
    (k, 3) in its own frame. Among the vertices within ``tol`` of a point in the
    plane normal to ``n``, the one furthest along ``toward * n`` is taken; points
    with none stay as they are. ``planar`` (a scene moving in the xy plane, ``n_z = 0``): the
    out-of-plane offset does not count (a face patch clipped in z by a narrower body has its
    corners off the vertices in z only; they stand for the vertex all the same).
    """
    out = pts.copy()
    nvtx = local_vertices.shape[0]
    V = np.empty((nvtx, 3))
    for k in range(nvtx):
        l0, l1, l2 = local_vertices[k, 0], local_vertices[k, 1], local_vertices[k, 2]
        for i in range(3):
            V[k, i] = R[i, 0] * l0 + R[i, 1] * l1 + R[i, 2] * l2 + t[i]
    tol2 = tol * tol
    for j in range(pts.shape[0]):
        best = -1
        best_along = -np.inf
        for k in range(nvtx):
            d0, d1, d2 = V[k, 0] - pts[j, 0], V[k, 1] - pts[j, 1], V[k, 2] - pts[j, 2]
            along = d0 * n[0] + d1 * n[1] + d2 * n[2]
            g0, g1, g2 = d0 - along * n[0], d1 - along * n[1], d2 - along * n[2]
            if planar:
                g2 = 0.0
            if g0 * g0 + g1 * g1 + g2 * g2 <= tol2 and toward * along > best_along:
                best_along = toward * along
                best = k
        if best >= 0:
            for i in range(3):
                out[j, i] = V[best, i]
    return out
