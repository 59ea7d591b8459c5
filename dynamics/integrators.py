"""Implicit integrators (``Simulator(integrator="bdf1" | "bdf2")``): backward Euler and BDF2, as in
DiffHand/RedMax (``seeds/003``), solved by Newton with the exact Jacobian, differentiated implicitly.

Notation as in :mod:`dynamics.simulator`: ``x = (q, v)``, ``tau = B u``, passive joint torque
``tau_p(q, v) = -K (q - q_ref) - D v`` (springs on revolute/prismatic joints, viscous damping), step
``h = dt``. ``ID(q, v, a) = M(q) a + b(q, v)`` is Pinocchio's RNEA (armature included).

The schemes, with the unknown ``v+`` (nv)::

    q+ = q (+) (c_q + beta h v+)                      c_q: 0 (BDF1), difference(q-, q) / 3 (BDF2)
    R(v+) = ID(q+, v+, (v+ - w) / (beta h)) - B u - tau_p(q+, v+) = 0
    BDF1 (backward Euler):  beta = 1,   w = v
    BDF2:                   beta = 2/3, w = 4/3 v - 1/3 v-

i.e. ``v+ = w + beta h M(q+)^-1 (B u + tau_p - b)(q+, v+)`` and, in a vector space,
``q+ = 4/3 q - 1/3 q- + 2/3 h v+`` (DiffHand's eqs. 10-11). On a Lie group (free-flyer, spherical)
``c_q`` is the tangent ``difference(q-, q) / 3`` carried from ``q-`` to ``q``: exact for a constant
body twist, and the BDF2 formula wherever ``q`` is a vector. Everything -- springs, damping, gravity,
Coriolis terms -- is evaluated at the new state, so a spring of stiffness ``k`` on inertia ``I`` is
stable at any ``h sqrt(k / I)``, where semi-implicit Euler needs ``h sqrt(k / I) < 2``. The
simulator's ``damping=`` option is an Euler-only choice: BDF is implicit in the damping by
construction (``damping="explicit"`` with BDF is refused).

**Newton.** ``A = dR/dv+ = (dID/dq + K) J_1 beta h + dID/dv + D + M(q+) / (beta h)`` (``J_1`` =
``dIntegrate`` with respect to its increment, at ``q+``'s tangent; ``K``, ``D`` diagonal), from
``pin.computeRNEADerivatives``. Start at ``v+ = v``; backtracking halves a step that does not lower
``|R|``; stop when a step is below ``NEWTON_TOL (1 + |v+|)``; :class:`SimulationError` after
``NEWTON_MAX_ITER`` iterations.

**Jacobians** (tangent space, as the Euler step's): the implicit function theorem on ``R = 0``,
``dv+/dtheta = -A^-1 dR/dtheta`` with ``dR/dq = P (J_0 + J_1 dc_q/dq)`` (``P = dID/dq + K``, ``J_0``
= ``dIntegrate`` with respect to ``q``), ``dR/dv = -M w_v / (beta h)``, ``dR/du = -B``; then
``dq+ = J_0 dq + J_1 (dc_q + beta h dv+)``, with ``A`` linearized once more at the answer (Newton's last
matrix is an iterate older): one solve for every right-hand side, exact Jacobians at the answer.

**BDF2's state.** ``x+`` depends on ``x`` and on the previous state ``x-``; the simulator's state
stays ``x = (q, v)`` and the previous state is an argument: ``step(x, u, previous=x_prev)``,
``step_derivatives(x, u, previous=x_prev) -> (x+, Fx, Fu, Fprev)`` with ``Fx = dx+/dx`` at fixed
``x-`` (a partial derivative) and ``Fprev = dx+/dx-`` (ndx, ndx); a perturbation ``dx_{t+1} =
Fx[t] dx_t + Fprev[t] dx_{t-1} + Fu[t] du_t`` chains them. Without ``previous``, BDF2 refuses
(ValueError). ``rollout(x0, us)`` starts with one BDF1 step (local error O(h^2), so the global order
stays 2, measured in ``tests/test_integrators.py``) or with BDF2 from ``previous=x_{-1}``. The
one-step plugin protocol (``rollout_derivatives``, ``knot_derivatives``, the solvers) needs a
Markov step: it takes ``"bdf1"`` and refuses ``"bdf2"``.

**Contact**: compliant contact only (``contact="penalty"``, :mod:`contact.penalty`; DiffHand combines BDF
with penalty contact). Its generalized force joins the residual at the new state, fully implicit::

    R(v+) = ID(q+, v+, a) - B u - tau_p(q+, v+) - J(q+)^T f(phi(q+), J(q+) v+)

with the rows of :meth:`~dynamics.contact_step.ContactModel.compliant_rows` at ``q+`` (contacts detected
there with the model's reach, and the joint limits within the margin, which are springs too), ``f`` the
penalty law (force units; the Euler step's impulses are ``dt f``). Its exact derivatives enter ``A`` and
the Jacobians through ``P`` and ``dID/dv``: ``dR/dq+ -= d(J^T f)/dq|_f + J^T (f_c d(J w)/dq|_{w = v+} + f_phi
J_phi)`` (``J_phi``: ``J``'s normal rows, ``dphi/dq = J_n``), ``dR/dv+ -= J^T f_c J``. Every Newton iterate
detects the contacts at its own ``q+``; the force is C^1 in the state (zero with zero slope at the edge of
the width), so a contact entering the set adds nothing discontinuous. ``sim.contacts`` is not reported for
BDF steps. Hard contact (LCP, NCP, relaxed: complementarity, a velocity-level impulse problem) is refused
with BDF at construction: use ``integrator="euler"`` with it, or ``contact="penalty"``.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import scipy.linalg

from contact.penalty import forces

#: The integrators ``Simulator(integrator=...)`` accepts; ``"euler"`` (semi-implicit) is the default.
INTEGRATORS = ("euler", "bdf1", "bdf2")
#: Newton stops when a step is below ``NEWTON_TOL * (1 + max|v+|)``.
NEWTON_TOL = 1e-13
#: Newton iterations before the step raises :class:`SimulationError`.
NEWTON_MAX_ITER = 50

_SCHEMES = {  # beta, weight of v, weight of v-, weight of difference(q-, q)
    "bdf1": (1.0, 1.0, 0.0, 0.0),
    "bdf2": (2.0 / 3.0, 4.0 / 3.0, -1.0 / 3.0, 1.0 / 3.0),
}


def check_integrator(integrator, *, contact: bool, damping: str, model: str = "lcp", compliant: bool = False) -> None:
    """``ValueError`` unless ``integrator`` is one of :data:`INTEGRATORS` and fits the other options:
    BDF with hard contact (``contact``: the simulator has collision pairs, a ground or joint limits, under
    the contact ``model``; ``compliant``: the penalty model, which BDF takes) or with ``damping="explicit"``
    is refused."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator must be 'euler' (semi-implicit Euler, the default), 'bdf1' (backward Euler) "
                         f"or 'bdf2', got {integrator!r}")
    if integrator == "euler":
        return
    if contact and not compliant:
        raise ValueError(f"integrator={integrator!r} takes compliant contact only, and this system has hard contact "
                         f"(contact={model!r}, with collision pairs, a ground or joint limits): use "
                         f"integrator='euler' with contact={model!r}, or contact='penalty' with {integrator!r} (or "
                         "remove the contact: ground=None, joint_limits=False, no collision pairs)")
    if damping != "implicit":
        raise ValueError(f"damping={damping!r} is an option of integrator='euler'; integrator={integrator!r} "
                         "integrates damping implicitly (leave damping='implicit')")


class ImplicitStep:
    """The BDF1/BDF2 step of a :class:`dynamics.Simulator` (module docstring); one per simulator."""

    def __init__(self, sim, integrator: str):
        self.sim = sim
        self.integrator = integrator
        self.beta, self.w_v, self.w_prev, self.c_q = _SCHEMES[integrator]
        nv = sim.nv
        self._k = np.zeros(nv)
        self._k[sim._spring_dofs] = sim._stiffness_k
        self._d = np.asarray(sim._damping, dtype=float)
        self._cm = sim.contact_model  # None, or the compliant model (check_integrator refused the others)
        # BDF2's rollout starts with one BDF1 step (module docstring): its companion, made once
        self._start = ImplicitStep(sim, "bdf1") if integrator == "bdf2" else None

    def _contact(self, q_next, v_next, d, derivatives: bool):
        """The penalty contact's generalized force ``J^T f`` (nv,) at ``(q+, v+)`` and, with ``derivatives``,
        its derivatives with respect to ``q+`` (tangent) and ``v+`` (nv, nv each); None without rows
        (module docstring, "Contact")."""
        cm = self._cm
        rows = cm.compliant_rows(self.sim.model, d.pin, d.geom, q_next)
        if rows is None:
            return None
        geo, J, phi, layout = rows
        p = cm.adapter.problem(None, None, layout, phi)  # forces() reads the rows, not A and b
        f, fc, fphi = forces(p, J @ v_next, derivatives=derivatives)
        tau = J.T @ f
        if not derivatives:
            return tau, None, None
        normal = layout.normal_rows
        dfdq = fphi[:, normal] @ J[normal]
        if geo is not None:
            mc = geo.J.shape[0]
            dfdq += fc[:, :mc] @ cm.kin.velocity_derivative(geo, v_next)  # limit rows: J does not move
        dq = J.T @ dfdq
        if geo is not None:
            dq += cm.kin.force_derivative(geo, f[:mc])
        return tau, dq, J.T @ fc @ J

    # -- checks ------------------------------------------------------------------------
    def _previous(self, previous, what="step"):
        """The checked previous state (BDF2), or None (BDF1); ValueError when BDF2 lacks it or BDF1 gets it."""
        if self.integrator == "bdf2":
            if previous is None:
                raise ValueError(f"integrator='bdf2' is a two-step method: {what} needs the previous state, "
                                 "previous=x_prev (rollout starts with one BDF1 step when it is not given), or "
                                 "use integrator='bdf1'")
            return self.sim._check_x(previous, "previous state")
        if previous is not None:
            raise ValueError(f"previous= is for integrator='bdf2' (the state before x); integrator={self.integrator!r} "
                             "is a one-step method")
        return None

    # -- the residual and its Jacobian ---------------------------------------------------
    def _terms(self, q, qp):
        """``c_q`` (BDF2: ``difference(q-, q) / 3``; None for BDF1)."""
        if qp is None:
            return None
        sim = self.sim
        if sim._euclidean:
            return self.c_q * (q - qp)
        return self.c_q * pin.difference(sim.model, qp, q)

    def _configuration(self, q, cq, v_next):
        """``(q+, increment)``: ``q+ = q (+) (c_q + beta h v+)``."""
        inc = self.beta * self.sim.dt * v_next
        if cq is not None:
            inc = inc + cq
        if self.sim._euclidean:
            return q + inc, inc
        return pin.integrate(self.sim.model, q, inc), inc

    def _residual(self, q, cq, w, u, v_next, d):
        q_next, _ = self._configuration(q, cq, v_next)
        a = (v_next - w) / (self.beta * self.sim.dt)
        R = pin.rnea(self.sim.model, d.pin, q_next, v_next, a) - self.sim._tau(u, d, q_next, v_next)
        if self._cm is not None:
            c = self._contact(q_next, v_next, d, False)
            if c is not None:
                R -= c[0]
        return R

    def _linearize(self, q, cq, w, u, v_next, d):
        """``(R, A, P, M, J0, J1, q+)`` at ``v+`` (module docstring)."""
        sim = self.sim
        bh = self.beta * sim.dt
        q_next, inc = self._configuration(q, cq, v_next)
        a = (v_next - w) / bh
        c = None if self._cm is None else self._contact(q_next, v_next, d, True)  # before RNEA: it runs FK on d.pin
        dq, dv, M = pin.computeRNEADerivatives(sim.model, d.pin, q_next, v_next, a)
        R = d.pin.tau - self.sim._tau(u, d, q_next, v_next)
        P = dq.copy()
        P[sim._diag_v, sim._diag_v] += self._k
        if c is not None:
            R -= c[0]
            P -= c[1]
            dv = dv - c[2]
        M = np.triu(M) + np.triu(M, 1).T
        if sim._euclidean:
            J0 = J1 = None
            A = P * bh
        else:
            J0, J1 = pin.dIntegrate(sim.model, q, inc)
            A = (P @ J1) * bh
        A += dv
        A[sim._diag_v, sim._diag_v] += self._d
        A += M / bh
        return R, A, P, M, J0, J1, q_next

    def _solve(self, q, v, qp, vp, u, d):
        """Newton on ``R(v+) = 0``; returns ``(v+, c_q, w)``."""
        cq = self._terms(q, qp)
        w = self.w_v * v if vp is None else self.w_v * v + self.w_prev * vp
        v_next = v.copy()
        last = math.inf
        for _ in range(NEWTON_MAX_ITER):
            R, A, *_ = self._linearize(q, cq, w, u, v_next, d)
            try:
                delta = scipy.linalg.solve(A, -R, check_finite=True)
            except (ValueError, np.linalg.LinAlgError) as exc:
                raise self._error(f"the Newton matrix is singular or non-finite ({exc})") from None
            size = float(np.abs(delta).max())
            tol = NEWTON_TOL * (1.0 + float(np.abs(v_next).max()))
            if size <= tol:
                return v_next + delta, cq, w
            norm, t = float(np.linalg.norm(R)), 1.0
            if size > 1e-8 * (1.0 + float(np.abs(v_next).max())):  # far from the solution: backtrack
                while t > 1e-6:
                    trial = self._residual(q, cq, w, u, v_next + t * delta, d)
                    if math.isfinite(trial.sum()) and np.linalg.norm(trial) < (1.0 - 1e-4 * t) * norm:
                        break
                    t *= 0.5
            v_next = v_next + t * delta
            last = size
        raise self._error(f"Newton did not converge in {NEWTON_MAX_ITER} iterations (last step {last:.3g})")

    def _error(self, what):
        from .simulator import SimulationError

        return SimulationError(f"{self.sim.name}: the {self.integrator} step failed: {what}")

    # -- the step ----------------------------------------------------------------------
    def step(self, x, u, previous, d):
        """``x+`` (nx,) from checked ``x``, ``u`` and the (checked) previous state or None."""
        sim = self.sim
        nq = sim.nq
        q, v = x[:nq], x[nq:]
        qp, vp = (None, None) if previous is None else (previous[:nq], previous[nq:])
        v_next, cq, _ = self._solve(q, v, qp, vp, u, d)
        out = np.empty(sim.nx)
        out[:nq] = self._configuration(q, cq, v_next)[0]
        out[nq:] = v_next
        return sim._check_next(out, x, u)

    def step_derivatives(self, x, u, previous, d):
        """``(x+, Fx, Fu, Fprev)`` (Fprev None for BDF1) from checked inputs (module docstring)."""
        sim = self.sim
        nq, nv, nu = sim.nq, sim.nv, sim.nu
        bh = self.beta * sim.dt
        q, v = x[:nq], x[nq:]
        qp, vp = (None, None) if previous is None else (previous[:nq], previous[nq:])
        v_next, cq, w = self._solve(q, v, qp, vp, u, d)
        R, A, P, M, J0, J1, q_next = self._linearize(q, cq, w, u, v_next, d)
        two = previous is not None
        # dR/d(q, v, u[, q-, v-]), one right-hand side per column
        rhs = np.empty((nv, 2 * nv + nu + (2 * nv if two else 0)))
        if two:
            if sim._euclidean:
                D0, D1 = -np.eye(nv), np.eye(nv)
            else:
                D0, D1 = pin.dDifference(sim.model, qp, q)
            dc_q, dc_qp = self.c_q * D1, self.c_q * D0
        if sim._euclidean:
            rhs[:, :nv] = P + (P @ dc_q if two else 0.0)
        else:
            rhs[:, :nv] = P @ (J0 + J1 @ dc_q) if two else P @ J0
        rhs[:, nv:2 * nv] = M * (-self.w_v / bh)
        rhs[:, 2 * nv:2 * nv + nu] = -sim.B
        if two:
            rhs[:, 2 * nv + nu:3 * nv + nu] = P @ dc_qp if sim._euclidean else P @ (J1 @ dc_qp)
            rhs[:, 3 * nv + nu:] = M * (-self.w_prev / bh)
        try:
            dv = -scipy.linalg.solve(A, rhs, check_finite=True)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise self._error(f"the Newton matrix is singular or non-finite ({exc})") from None
        # dq+ = J0 dq + J1 (dc_q + beta h dv+)
        dinc = bh * dv
        dinc[:, :nv] += dc_q if two else 0.0
        if two:
            dinc[:, 2 * nv + nu:3 * nv + nu] += dc_qp
        dq = dinc if sim._euclidean else J1 @ dinc
        if sim._euclidean:
            dq[:, :nv] += np.eye(nv)
        else:
            dq[:, :nv] += J0
        out = np.empty(sim.nx)
        out[:nq], out[nq:] = q_next, v_next
        sim._check_next(out, x, u)
        Fx = np.vstack((dq[:, :2 * nv], dv[:, :2 * nv]))
        Fu = np.vstack((dq[:, 2 * nv:2 * nv + nu], dv[:, 2 * nv:2 * nv + nu]))
        Fprev = np.vstack((dq[:, 2 * nv + nu:], dv[:, 2 * nv + nu:])) if two else None
        return out, Fx, Fu, Fprev

    # -- trajectories --------------------------------------------------------------------
    def rollout(self, x0, us, previous, d):
        """States (T+1, nx); BDF2 starts with one BDF1 step unless ``previous`` (x_{-1}) is given."""
        from .simulator import SimulationError

        sim = self.sim
        xs = np.empty((len(us) + 1, sim.nx))
        xs[0] = x0
        first = self._start if previous is None else None
        for t, u in enumerate(us):
            try:
                if self.integrator == "bdf1":
                    xs[t + 1] = self.step(xs[t], u, None, d)
                elif t == 0:
                    xs[1] = first.step(x0, u, None, d) if first is not None else self.step(x0, u, previous, d)
                else:
                    xs[t + 1] = self.step(xs[t], u, xs[t - 1], d)
            except SimulationError as exc:
                raise SimulationError(f"rollout step {t}: {exc}", xs=xs[: t + 1].copy()) from None
        return xs

    def derivatives_loop(self, xin, xout, us, d, label, *, rollout=None, check=False):
        """BDF1: ``(Fx, Fu)`` (T, ndx, ndx), (T, ndx, nu) of the steps from each ``xin[t]`` into ``xout[t]``
        (as ``Simulator._derivatives_loop``). BDF2 is refused (module docstring: not a one-step map)."""
        from .simulator import SimulationError

        sim = self.sim
        if self.integrator == "bdf2":
            raise ValueError(f"{label.split()[0]} derivatives need a one-step map x+ = f(x, u) and integrator='bdf2' "
                             "is a two-step method: use integrator='bdf1' for trajectory optimization, or chain "
                             "step_derivatives(x, u, previous=x_prev) -> (x+, Fx, Fu, Fprev) yourself")
        T = len(us)
        Fx = np.empty((T, sim.ndx, sim.ndx))
        Fu = np.empty((T, sim.ndx, sim.nu))
        for t in range(T):
            x = sim._check_x(xin[t], f"{label} {t}: state xs[{t}]") if check else xin[t]
            try:
                xout[t], Fx[t], Fu[t], _ = self.step_derivatives(x, us[t], None, d)
            except SimulationError as exc:
                states = None if rollout is None else rollout[: t + 1].copy()
                raise SimulationError(f"{label} {t}: {exc}", xs=states) from None
        return Fx, Fu
