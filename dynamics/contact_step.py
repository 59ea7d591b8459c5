"""The contact part of a step, and its implicit Jacobians (DESIGN.md "One step", "Its Jacobians").

Given the free velocity ``v_f = v + dt ABA(q, v, tau)``:

1. contacts at ``q`` (coal, :mod:`contact.detection`) and joint-limit rows;
2. ``J`` (m x nv) in the contact frames, Delassus ``A = J M^-1 J^T``,
   ``b = J v_f + bias(phi) / dt`` on normal and limit rows, where the
   penetration correction is ``bias(phi) = phi`` for a gap or a penetration
   shallower than ``slop`` (the contact may close a gap within the step but not
   cross it) and ``-slop + erp (phi + slop)`` deeper (pushed out at ``erp`` of the
   excess depth per step). ``bias`` is continuous with a kink at ``-slop``, not at
   0 where resting contacts sit, so their Jacobians are smooth;
3. impulses ``lambda`` from the contact problem: with ``contact="lcp"`` the boxed LCP
   (:mod:`contact.lcp`, Nimble): normal ``lambda_n >= 0`` complementary to ``c_n >= 0``,
   friction ``|lambda_t| <= mu lambda_n`` per tangent direction (a pyramid);
   with ``contact="ncp"`` the Coulomb cone with the De Saxce correction
   (:mod:`contact.ncp`): ``|lambda_T| <= mu lambda_n``, sliding opposite to the slip;
4. ``v+ = v_f + M^-1 J^T lambda``.

Jacobians, by implicit differentiation on the active set the LCP found:
clamping rows (and tied ones, ``lambda = 0`` and ``c = 0``, taken as clamping,
as are sticking friction rows) keep ``c_C = 0``; bounded
friction rows follow their normal, ``lambda_B = E lambda_C``; separating rows
keep ``lambda = 0``. With ``G = dv+/dtheta`` at fixed lambda (ABA derivatives at
``tau + J^T lambda / dt`` plus ``M^-1 d(J^T lambda)/dq``) and ``K = d(J w)/dq`` at
``w = v+`` plus ``bias'(phi) J_n / dt``::

    (J_C M^-1 (J_C^T + J_B^T E)) dlambda_C = -(J_C G + K)
    dv+ = G + M^-1 (J_C^T + J_B^T E) dlambda_C

solved once per step (least squares when rank-deficient).

For the NCP, by contact mode: breaking contacts drop out (``dlambda = 0``);
sticking contacts keep their three rows ``dc = 0``; a sliding contact keeps
``dc_n = 0`` and stays on the cone's boundary opposite to the slip,
``dlambda_T + mu u dlambda_n + (mu lambda_n / |c_T|) (I - u u^T) dc_T = 0`` with
``u = c_T / |c_T|`` -- one linear system over the active rows, coupled through
the Delassus matrix (``contact._kernels.implicit_velocity_jacobian_ncp``).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from contact.detection import CollisionScene, Contacts
from contact.kinematics import ContactGeometry, ContactKinematics
from contact import _kernels
from contact.lcp import BoxedLCP, solve_lcp
from contact.ncp import solve_ncp
from contact.relaxed import RelaxedProblem, RelaxedSolution, fade, relaxed_lambda_jacobian, rows_of, solve_relaxed

CONTACT_MODELS = ("lcp", "ncp", "relaxed")
#: Penetration depth (m) below which no extra push-out is applied (see ``bias``).
SLOP = 1e-4


@dataclass
class ContactReport:
    """The contacts of the last step (``sim.contacts``); nc contacts, r rows each.

    ``points``/``normals`` (nc, 3) world frame (normal from body B to body A),
    ``phi`` (nc,) signed distances, ``impulses`` (nc, r) contact-frame impulses
    (normal first), ``modes`` (nc,) mode of each contact (``contact.lcp.Mode`` of its
    normal row for the LCP, ``contact.ncp.NCPMode`` for the NCP),
    ``body_a``/``body_b`` (nc,) joint indices; ``limit_impulses`` per active
    joint-limit row.
    """

    points: np.ndarray
    normals: np.ndarray
    phi: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    limit_impulses: np.ndarray

    def __len__(self) -> int:
        return len(self.phi)


@dataclass
class ContactState:
    """What one step's contact solve leaves for its Jacobians (kept in the workspace)."""

    geo: ContactGeometry | None
    J: np.ndarray  # (m, nv): contact rows then limit rows
    Minv: np.ndarray
    MJt: np.ndarray  # Minv J^T
    lam: np.ndarray
    modes: np.ndarray
    signs: np.ndarray
    normal_rows: np.ndarray  # rows that carry a bias(phi) term
    bias_slope: np.ndarray  # bias'(phi) on those rows
    lcp: BoxedLCP | None  # the LCP (contact="lcp")
    groups: tuple | None  # (start, size, mu) of the NCP's row groups (contact="ncp")
    A: np.ndarray  # Delassus matrix J M^-1 J^T
    b: np.ndarray
    key: tuple
    dirs: np.ndarray | None = None  # the NCP's sliding/saturated directions
    warm_hit: bool = False  # the warm start held
    guessed: bool = False  # a warm start was tried (same rows as the last step)
    relaxed: RelaxedProblem | None = None  # the relaxed problem (smoothing > 0)
    relaxed_solution: RelaxedSolution | None = None

    @property
    def m_contact(self) -> int:
        """Number of contact rows (the limit rows follow them)."""
        return 0 if self.geo is None else self.geo.J.shape[0]


class ContactModel:
    """Everything about contact that does not change between steps."""

    def __init__(self, model: pin.Model, geometry, *, ground, up, friction: float, margin: float,
                 planar: bool, erp: float, joint_limits: bool, exclude=None, contact: str = "lcp",
                 self_collision: bool = True, pairs=None, smoothing: float = 0.0,
                 smoothing_distance: float = 0.05):
        if contact not in CONTACT_MODELS:
            raise ValueError(f"unknown contact model {contact!r}; available: {', '.join(CONTACT_MODELS)}")
        if not (friction >= 0.0 and np.isfinite(friction)):
            raise ValueError(f"friction must be a finite non-negative coefficient, got {friction!r}")
        if not 0.0 < erp <= 1.0:
            raise ValueError(f"erp must be in (0, 1], got {erp!r}")
        if not (isinstance(smoothing, (int, float, np.floating)) and np.isfinite(smoothing) and smoothing >= 0):
            raise ValueError(f"smoothing (kappa) must be a finite number >= 0, got {smoothing!r}")
        if not (np.isfinite(smoothing_distance) and smoothing_distance > 0):
            raise ValueError(f"smoothing_distance must be a positive finite distance (m), got {smoothing_distance!r}")
        if contact == "relaxed" and not smoothing > 0:
            raise ValueError("contact='relaxed' needs smoothing > 0 (kappa = 0 is contact='ncp')")
        self.contact = contact
        self.kappa = float(smoothing)
        self.relaxed_fallbacks = 0  # relaxed steps that fell back to hard contact (see solve)
        self.smoothing_distance = float(smoothing_distance)
        #: the friction barrier's tangent blocks: whole contacts (cone) or single rows (pyramid)
        self.cone = contact in ("ncp", "relaxed")
        if self.kappa > 0:  # relaxed forces reach out to the smoothing distance, and fade there
            margin = self.smoothing_distance
        self.scene = CollisionScene(model, geometry, ground=ground, up=up, margin=margin, planar=planar,
                                    exclude=exclude, self_collision=self_collision, pairs=pairs)
        self.kin = ContactKinematics(model, planar=planar)
        self.rows = self.kin.rows
        self.friction = float(friction)
        self.margin = float(margin)
        self.erp = float(erp)
        self.slop = SLOP
        self.nv = model.nv
        # 1-dof joints with finite position limits become unilateral rows near their limits.
        lim = []
        if joint_limits:
            lo, hi = model.lowerPositionLimit, model.upperPositionLimit
            for j in range(1, model.njoints):
                jm = model.joints[j]
                if jm.nq == 1 and jm.nv == 1:
                    if lo[jm.idx_q] > -1e10:
                        lim.append((jm.idx_q, jm.idx_v, +1.0, float(lo[jm.idx_q])))
                    if hi[jm.idx_q] < 1e10:
                        lim.append((jm.idx_q, jm.idx_v, -1.0, float(hi[jm.idx_q])))
        self.limits = lim
        self.enabled = self.scene.npairs > 0 or bool(lim)

    # -- the step's contact part ------------------------------------------------------------
    def may_touch(self, q) -> bool:
        """False when nothing can be in contact at ``q`` (no collision pairs, no limit near)."""
        if self.scene.npairs:
            return True
        margin = self.margin
        return any(s * (q[iq] - ref) < margin for iq, _, s, ref in self.limits)

    def solve(self, model, data, gdata, q, v_free, dt, previous: ContactState | None):
        """``(v+, ContactState or None)``; forward kinematics at q has been run by detection."""
        contacts = self.scene.detect(model, data, gdata, q)
        limit_rows = [(iq, iv, s, ref) for iq, iv, s, ref in self.limits if s * (q[iq] - ref) < self.margin]
        nc, r, nv = len(contacts), self.rows, self.nv
        if nc == 0 and not limit_rows:
            return v_free, None
        m = nc * r + len(limit_rows)
        J = np.zeros((m, nv))
        geo = None
        if nc:
            pin.computeJointJacobians(model, data, q)
            geo = self.kin.geometry(data, contacts)
            J[: nc * r] = geo.J
        phi = np.empty(nc + len(limit_rows))
        phi[:nc] = contacts.phi
        normal_rows = np.empty(nc + len(limit_rows), dtype=np.intp)
        normal_rows[:nc] = np.arange(nc) * r
        for k, (iq, iv, s, ref) in enumerate(limit_rows):
            row = nc * r + k
            J[row, iv] = s
            phi[nc + k] = s * (q[iq] - ref)
            normal_rows[nc + k] = row
        deep = phi < -self.slop
        bias_slope = np.where(deep, self.erp, 1.0)
        bias = np.where(deep, -self.slop + self.erp * (phi + self.slop), phi)
        Minv = pin.computeMinverse(model, data, q).copy()
        MJt = Minv @ J.T
        A = J @ MJt
        b = J @ v_free
        b[normal_rows] += bias / dt
        key = (tuple(contacts.pair.tolist()), len(contacts), tuple(x[0] * 2 + (x[2] > 0) for x in limit_rows))
        same = previous is not None and previous.key == key
        relaxed = rsol = None
        if self.kappa > 0:
            w, dw = fade(phi, self.smoothing_distance)
            weight = np.zeros(m)
            dweight = np.zeros(m)
            weight[normal_rows] = w
            dweight[normal_rows] = dw
            relaxed = RelaxedProblem(A, b, *rows_of(nc, r, len(limit_rows), self.friction, self.cone),
                                     weight=weight, dweight=dweight, kappa=self.kappa)
            sol = rsol = solve_relaxed(relaxed, guess=previous.lam if same and previous.relaxed is not None
                                       else None)
            if sol.converged:
                lcp = groups = signs = None
                modes = np.zeros(len(sol.lam), dtype=np.int64)
            else:
                # No point on the central path was found (seen on rank-deficient, nearly infeasible
                # problems: redundant joint limits pushed against a contact). This step is taken with
                # hard contact instead -- its state and its Jacobians, consistently -- and counted.
                self.relaxed_fallbacks += 1
                if self.relaxed_fallbacks == 1:
                    warnings.warn(f"relaxed contact (kappa {self.kappa:g}): the central-path solve did not converge "
                                  f"(residual {sol.residual:.3g}); such steps use hard contact "
                                  "(counted in ContactModel.relaxed_fallbacks)", RuntimeWarning, stacklevel=2)
                relaxed = rsol = None
        hard_same = same and previous.relaxed is None  # a warm start from the same hard model
        if rsol is None and self.cone:
            if hard_same:
                groups = previous.groups
            else:
                nlim = len(limit_rows)
                start = np.concatenate((np.arange(nc) * r, nc * r + np.arange(nlim))).astype(np.int64)
                size = np.concatenate((np.full(nc, r), np.ones(nlim))).astype(np.int64)
                mu = np.concatenate((np.full(nc, self.friction), np.zeros(nlim)))
                groups = (start, size, mu)
            sol = solve_ncp(A, b, *groups, guess=(previous.modes, previous.lam, previous.dirs) if hard_same else None)
            lcp, signs = None, None
            modes = np.asarray(sol.modes)
        elif rsol is None:
            if hard_same:  # same rows as the last step: reuse the LCP's structure and warm-start
                lcp = previous.lcp.with_values(A, b)
            else:
                normal_of = np.full(m, -1, dtype=np.intp)
                mu = np.zeros(m)
                idx = np.arange(nc) * r
                for t in range(1, r):
                    normal_of[idx + t] = idx
                    mu[idx + t] = self.friction
                lcp = BoxedLCP(A=A, b=b, normal_of=normal_of, mu=mu)
            sol = solve_lcp(lcp, guess=(previous.modes, previous.signs) if hard_same else None)
            groups, signs = None, np.asarray(sol.signs)
            modes = np.asarray(sol.modes)
        lam = sol.lam if rsol is not None else sol.x
        v_next = v_free + MJt @ lam
        state = ContactState(geo, J, Minv, MJt, lam, modes, signs, normal_rows, bias_slope,
                             lcp, groups, A, b, key, dirs=getattr(sol, "dirs", None),
                             warm_hit=bool(sol.warm_start_hit), guessed=same, relaxed=relaxed, relaxed_solution=rsol)
        return v_next, state

    def report(self, state: ContactState | None) -> ContactReport:
        r = self.rows
        if state is None or state.geo is None:
            c = Contacts.empty()
            nlim = 0 if state is None else len(state.lam)
            lim = np.zeros(nlim) if state is None else state.lam.copy()
            return ContactReport(c.points, c.normals, c.phi, np.zeros((0, r)), np.zeros(0, dtype=int),
                                 c.body_a, c.body_b, lim)
        c = state.geo.contacts
        nc = len(c)
        modes = state.modes[:nc] if state.groups is not None else state.modes[: nc * r: r]
        return ContactReport(c.points.copy(), c.normals.copy(), c.phi.copy(),
                             state.lam[: nc * r].reshape(nc, r).copy(), modes.copy(),
                             c.body_a.copy(), c.body_b.copy(), state.lam[nc * r:].copy())

    # -- Jacobians ------------------------------------------------------------------------------
    def _jacobian_terms(self, state: ContactState, v_next: np.ndarray, dt: float):
        """``(slope, dJv, m_contact)`` for the implicit kernels: bias'(phi)/dt on the normal and
        limit rows, d(J w)/dq at w = v+ on the contact rows."""
        m_contact = state.m_contact
        dJv = self.kin.velocity_derivative(state.geo, v_next) if m_contact else np.zeros((0, self.nv))
        slope = np.zeros(state.J.shape[0])
        slope[state.normal_rows] = state.bias_slope / dt
        return slope, dJv, m_contact

    def _lcp_jacobian(self, state, modes, terms, G):
        clamp, bounded, signs = modes
        slope, dJv, m_contact = terms
        return _kernels.implicit_velocity_jacobian(state.J, state.Minv, clamp, bounded, signs, state.lcp.normal_of,
                                                   state.lcp.mu, slope, dJv, m_contact, G)

    def velocity_jacobian(self, state: ContactState, G: np.ndarray, v_next: np.ndarray, dt: float) -> np.ndarray:
        """``dv+/dtheta`` (nv, ncols) from ``G = dv+/dtheta`` at fixed lambda; q-columns come first.

        The reduced system over the clamping rows is solved in a compiled kernel
        (plain solve, least squares when the clamping set is rank-deficient, as
        for a box flat on the ground: any exact solution gives the same dv+).
        """
        terms = self._jacobian_terms(state, v_next, dt)
        G = np.ascontiguousarray(G)
        if state.relaxed is not None:
            return self._relaxed_jacobian(state, terms, G)
        if state.groups is not None:
            start, size, mu = state.groups
            slope, dJv, m_contact = terms
            return _kernels.implicit_velocity_jacobian_ncp(state.J, state.Minv, state.A, state.b, state.lam, start,
                                                           size, mu, state.modes, state.dirs, slope, dJv,
                                                           m_contact, G)
        return self._lcp_jacobian(state, self._derivative_modes(state), terms, G)

    def _relaxed_jacobian(self, state: ContactState, terms, G):
        """Implicit differentiation of the relaxed residual (:mod:`contact.relaxed`): ``dc/dtheta`` at
        fixed lambda is ``J G + K`` (K: bias slope and d(J w)/dq on the q-columns), ``dphi/dq = J_n``."""
        slope, dJv, m_contact = terms
        nv = self.nv
        J = state.J
        db = J @ G
        db[:, :nv] += slope[:, None] * J
        db[:m_contact, :nv] += dJv
        dphi = np.zeros_like(db)
        dphi[state.normal_rows, :nv] = J[state.normal_rows]
        dlam = relaxed_lambda_jacobian(state.relaxed, state.relaxed_solution, db, dphi)
        return G + state.MJt @ dlam

    def _derivative_modes(self, state: ContactState):
        return _kernels.derivative_modes(state.A, state.b, state.lam, state.lcp.normal_of)

    def aware_velocity_jacobian(self, state: ContactState, G: np.ndarray, v_next: np.ndarray, dt: float,
                                dl_dv: np.ndarray):
        """``(dv+/dtheta, reclassified)``: Nimble's complementarity-aware choice (LCP only; the NCP's
        Jacobian is returned as is).

        ``dl_dv`` is the loss gradient with respect to v+. A normal (or limit) row whose impulse
        would lower the loss (``dl/dlambda_i = dl_dv . M^-1 J_i' < 0``: the optimizer wants the
        bodies apart) is read as separating, one whose impulse would raise it as clamping (its
        friction rows then stick); friction rows of unchanged rows keep their modes. The
        reclassified Jacobian is kept when it gives the larger ``|dl/dv|^2 + |dl/du|^2 / dt``
        (``G``'s columns: q, v, then the controls).
        """
        if state.lcp is None:  # NCP or relaxed: the exact Jacobian
            return self.velocity_jacobian(state, G, v_next, dt), False
        terms = self._jacobian_terms(state, v_next, dt)
        G = np.ascontiguousarray(G)
        modes = self._derivative_modes(state)
        full = self._lcp_jacobian(state, modes, terms, G)
        clamp, bounded, signs = modes  # fresh arrays from the kernel: reclassify in place
        normal_of = state.lcp.normal_of
        normal = np.flatnonzero(normal_of < 0)
        want = (state.MJt.T @ dl_dv)[normal] > 0  # clamp where an impulse would raise the loss
        flip = normal[want != clamp[normal]]
        if not len(flip):
            return full, False
        clamp[flip] = ~clamp[flip]
        rows = np.isin(normal_of, flip)  # their friction rows follow them
        clamp[rows] = clamp[normal_of[rows]]
        bounded[rows] = False
        signs[rows] = 0.0
        alt = self._lcp_jacobian(state, (clamp, bounded, signs), terms, G)
        nv = self.nv

        def strength(F):
            return float(np.sum((F[:, nv:2 * nv].T @ dl_dv) ** 2) + np.sum((F[:, 2 * nv:].T @ dl_dv) ** 2) / dt)

        return (alt, True) if strength(alt) > strength(full) else (full, False)
