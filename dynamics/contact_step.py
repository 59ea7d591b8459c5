"""The contact part of a step, and its implicit Jacobians (DESIGN.md "One step", "Its Jacobians").

Given the free velocity ``v_f = v + dt ABA(q, v, tau)``:

1. contacts at ``q`` (coal, :mod:`contact.detection`) and joint-limit rows;
2. ``J`` (m x nv) in the contact frames, Delassus ``A = J M^-1 J^T``,
   ``b = J v_f + bias(phi) / dt`` on normal and limit rows, where
   ``bias(phi) = max(phi, -slop)``: a gap may close within the step but not be
   crossed, and a penetration shallower than ``slop`` is removed in the step; a
   deeper one gets no more than a ``slop``-deep one: its contact separates at
   ``slop / dt`` at most (0.1 m/s at dt = 1 ms; 0.5 mm of rise against gravity),
   whatever its depth. ``bias`` is continuous with a kink at ``-slop``, not at 0
   where resting contacts sit, so their Jacobians are smooth;
3. impulses ``lambda`` from the contact problem: with ``contact="lcp"`` the boxed LCP
   (:mod:`contact.lcp`, Nimble): normal ``lambda_n >= 0`` complementary to ``c_n >= 0``,
   friction ``|lambda_t| <= mu lambda_n`` per tangent direction (a pyramid);
   with ``contact="ncp"`` the Coulomb cone with the De Saxce correction
   (:mod:`contact.ncp`): ``|lambda_T| <= mu lambda_n``, sliding opposite to the slip;
4. ``v+ = v_f + M^-1 J^T lambda``;
5. deep penetration (``phi < -slop``) is removed by position only (split impulse /
   post-stabilization, as Bullet's split impulse): a displacement ``dq_c`` added to the
   configuration update ``q+ = q (+) (dt v+ + dq_c)`` and never to ``v+``, so it gains no
   kinetic energy. ``dq_c = M^-1 J_d^T lambda_c`` is the mass-metric smallest displacement
   with ``J_d dq_c = erp (-phi_d - slop)`` on the deep normal and limit rows ``d`` (least
   squares, ``lambda_c = (J_d M^-1 J_d^T)^+ e``; normal rows only, so the same for every
   contact model). It only pushes: a row whose multiplier would pull (``lambda_c < 0``) leaves
   it, the most negative first, and the rest is solved again (nearly parallel rows of
   opposite intent -- a box squeezed between the floor and two links -- otherwise met their
   targets with huge multipliers of both signs: 12 cm and 6.5 rad in one step). Bound: each step moves every deep row out by ``erp`` of its excess
   depth (``0.2 (depth - slop)`` by default, i.e. at most ``erp`` times the deepest
   penetration), so ``depth - slop`` shrinks by ``1 - erp`` per step: 5 cm to ``slop``
   in ``log(500) / -log(0.8) ~ 28`` steps; the velocity never carries it
   (see :meth:`ContactModel.correction_jacobian` for its exact derivative). A joint that
   ``v+`` puts on one of its limits (a limit row of the problem, not deep, with
   ``phi + dt s v+ <= slop``) is held there: its row joins ``J_d`` with ``e = 0``, so the
   correction cannot push it through the limit (it did: a deep contact on the catapult's
   arm moved a joint resting on its limit 1 cm past it). Contact rows are not held.

Joint limits: a limit's row is in the problem when the joint is within the margin of it, or
when ``v+`` would carry the joint across it in this step (an outer active-set check: the
limit is added and the problem solved again, at most once per limit). Without it, impulses of
the other rows (``M^-1`` couples the joints) or a fast free motion pushed joints through limits
whose rows were not in the problem (the catapult's arm, 9.5 cm past its limit in one step).

Restitution (Newton's impact law, Nimble IV-D; ``restitution=e`` on the simulator, global or per
collision pair). A contact row *impacts* in a step when its pre-step normal velocity ``c_n^- = J_n(q) v``
approaches faster than ``restitution_threshold`` (``c_n^- < -threshold``) and its free motion reaches the
surface within the step (``b_n < 0`` above: hard contact would act on it). Its target becomes
``c_n >= -e c_n^-`` instead of ``c_n + bias(phi)/dt >= 0``: the adapters get ``b_n = J_n v_f + e J_n v +
min(bias(phi), 0) / dt`` (the speculative gap allowance dropped, a penetration's push-out kept), the same
``b`` for the LCP, the NCP and the relaxed model, with no model-specific branch. The pre-step velocity
``v`` (as Nimble), not ``v_f``: with it a frictionless ``e = 1`` bounce conserves semi-implicit Euler's
free-flight invariant ``v v_f / 2 + g h`` exactly, wherever in the gap the impact step starts (a ball
reaching the ground gets ``v+ = -e v``: ``dv+/dv = -e``, the bounce Jacobian). It bounces when its free
motion would cross the surface, up to ``|c_n^-| dt`` early. Its Jacobian: the new term adds
``e J_n`` to ``dc`` on the v-columns and ``e d(J_n w)/dq`` at ``w = v`` on the q-columns of the impact
rows, and ``bias'`` is 0 on an impact row with a gap. Joint-limit rows never bounce. The fused compiled
step does not know restitution: with any ``e > 0`` the Python path runs (``fused = None``).

Compliant contact (``contact="penalty"``, :mod:`contact.penalty`) goes through the same adapter call: its
adapter says ``compliant``, and the step then puts no bias in ``b`` (``b = J v_f``: the spring sees the
penetration through ``phi``), makes no position correction (a penetration is the spring's state) and
refuses restitution (the damping sets the bounce); ``bias_slope`` is 0 on its rows. It is never fused.

``M`` is the step's: with implicit joint damping ``M + dt D`` (the simulator hands over a model
whose armature carries ``dt D``, see :mod:`dynamics.simulator`), so the impulses act through the
same operator as the free motion, in ``A``, in ``v+`` and in the position correction.

With ``contact="lcp"`` or ``contact="ncp"`` (no smoothing) or relaxed contact (smoothing kappa > 0), when the
compiled core is available, items 1-5 run in one C++ call (``ContactModel.fused``, ``cpp/src/step.cpp``; the NCP's
solve in ``cpp/src/ncp.cpp``, the relaxed one in ``cpp/src/relaxed.cpp``), and so does the simulator's contact
velocity Jacobian (ABA derivatives at ``tau + J^T lambda / dt``, ``dv_fixed``, the model's linearization, the
implicit solve); its :class:`FusedContactState` (:class:`FusedNCPState`, :class:`FusedRelaxedState`) makes the
Python objects of :class:`ContactState` only when asked. A relaxed solve that finds no central point hands the
step back to the Python path (which falls back to hard contact and counts it). The Python code below stays the
reference (the complementarity-aware Jacobians, ``CONTACTRAJ_NO_CORE`` / ``CONTACTRAJ_NO_FUSED``, a core without
``ncp_solve`` / ``relaxed_solve``), tests/test_core_fused.py, test_core_ncp.py and test_core_relaxed.py compare
the two.

Every model is reached through its adapter (:mod:`contact.adapter`): the step builds the
rows (:class:`contact.RowLayout`), ``A``, ``b`` and ``phi``, and asks the adapter for its
problem, its solution, and the linearization of its optimality residual. The step owns
no model-specific branch.

Jacobians, by the implicit function theorem on that residual. With ``dv_fixed = dv+/dtheta``
at fixed lambda (ABA derivatives at ``tau + J^T lambda / dt`` plus
``M^-1 d(J^T lambda)/dq``), the contact velocity ``c = J v+`` moves at fixed lambda by::

    dc_theta = J dv_fixed + K,    K = d(J w)/dq at w = v+  plus  bias'(phi) J_n / dt   (q-columns)

and the distances by ``dphi_theta = J_n`` (q-columns; only the relaxed residual uses them).
:func:`contact.lambda_jacobian` turns them into ``dlambda/dtheta`` (one reduced system per
step, least squares when rank-deficient), and ``dv+ = dv_fixed + M^-1 J^T dlambda``. What the
reduced system holds per model (clamping rows ``dc = 0``, bounded friction following its
normal, a sliding contact staying on the cone opposite to the slip, the central path of
the relaxed model) is written once, in the model's module.
"""

from __future__ import annotations

import os
import warnings

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from contact import RowLayout, adapter, fixed_impulse_velocity_derivative
from contact.adapter import RANK_RTOL
from contact import velocity_jacobian as implicit_velocity_jacobian
from contact.detection import CollisionScene, Contacts
from contact.kinematics import ContactGeometry, ContactKinematics
from contact.lcp import BoxedLCP, LCPSolution
from contact.relaxed import CentralPathError

#: Penetration depth (m) below which no extra push-out is applied (see ``bias``).
SLOP = 1e-4
#: speculative margins: solves again with the margins the solve's own velocities need, at most this many times
SPECULATIVE_ROUNDS = 2
#: Default ``restitution_threshold`` (m/s): slower impacts are inelastic (module docstring, "Restitution").
#: Above the approach speeds that resting contact produces (gravity adds ``g dt`` = 0.01 m/s per 1 ms
#: step; the penetration bias separates at ``slop / dt`` = 0.1 m/s at most) and below what a bounce is
#: worth modelling (0.1 m/s at ``e = 1`` rises 0.5 mm); game engines use more (Bullet and PhysX 0.2 m/s,
#: Box2D 1 m/s) because they want stacks to fall asleep.
RESTITUTION_THRESHOLD = 0.1


@dataclass
class Impact:
    """The impact rows of one step (module docstring, "Restitution"): ``rows`` (k,) rows of ``J``,
    ``e`` (k,) their coefficients, ``v`` (nv,) the pre-step velocity (their ``c_n^- = J[rows] v``)."""

    rows: np.ndarray
    e: np.ndarray
    v: np.ndarray


@dataclass
class PairCoefficients:
    """A contact coefficient (``friction`` or ``restitution``) over the collision pairs of a scene.

    ``value`` (npairs,) each pair's coefficient; ``default`` the number every pair takes (given as a
    number) or the mapping's ``"default"`` entry (None: a mapping without one); ``listed`` the mapping's
    pairs, ``{pair name: (pair index, the key as given)}`` (empty for a number). Pair names are
    :func:`pair_name`'s."""

    value: np.ndarray
    default: float | None
    listed: dict

    @property
    def per_pair(self) -> bool:
        """Given per pair (a mapping), not one number."""
        return bool(self.listed) or self.default is None


def pair_name(scene: CollisionScene, k: int) -> str:
    """``"<objectA>|<objectB>"``: the collision-object names of pair ``k`` of ``scene`` in the scene's order,
    the ground half-space last as ``"ground"``: the ``<pair>`` of the ``"friction:<pair>"`` and
    ``"restitution:<pair>"`` parameters."""
    objs = scene.geometry.geometryObjects
    names = ["ground" if objs[i].name == "__ground__" else objs[i].name for i in scene._pairs[k]]
    if objs[scene._pairs[k][0]].name == "__ground__":
        names.reverse()
    return "|".join(names)


#: The largest friction coefficient taken: far past any material (rubber on concrete ~1) and past sticking
#: (catapult, 300 steps at full torque: every coefficient from 1e2 to 1e8 gives the same path to 2e-12), while larger
#: ones lose the contact solve's precision silently (NCP: 9 mm off at 1e9, the box thrown 72 m off at 1e12;
#: measured 2026-11-28). For no slip, give this.
MAX_FRICTION = 1e6


def pair_coefficients(scene: CollisionScene, value, what: str, *, upper: float,
                      unlisted: float | None) -> PairCoefficients:
    """``value`` for ``what`` (``"friction"``: in [0, ``upper`` = :data:`MAX_FRICTION`]; ``"restitution"``: in
    [0, ``upper`` = 1]) as a
    :class:`PairCoefficients`: a number for every pair, or a mapping ``{(nameA, nameB): x}`` over
    collision-object names (either order; ``"ground"`` names the ground half-space unless an object has that
    name) with an optional ``"default"`` entry for the pairs it does not list; without one, unlisted pairs take
    ``unlisted`` (None: every pair must be listed). ``ValueError`` for a bad value, a name that is no collision
    object, a pair that does not collide in the scene, a pair listed twice, or unlisted pairs without a
    default."""
    rule = ("a number in [0, 1] (0: inelastic, 1: elastic)" if what == "restitution" else
            f"a number in [0, {upper:g}] (larger ones lose the contact solve's precision silently)")

    def check(x, where):
        ok = _number(x) and 0.0 <= x <= upper  # NaN fails
        if not ok:
            raise ValueError(f"{what}{where} must be {rule}, got {x!r}")
        return float(x)

    npairs = scene.npairs
    if not isinstance(value, Mapping):
        x = check(value, "")
        return PairCoefficients(np.full(npairs, x), x, {})
    objs = scene.geometry.geometryObjects
    names = {o.name: i for i, o in enumerate(objs)}
    if "ground" not in names and "__ground__" in names:
        names["ground"] = names["__ground__"]
    index = {frozenset(p): k for k, p in enumerate(scene._pairs)}
    default = check(value["default"], "['default']") if "default" in value else None
    out = np.full(npairs, np.nan)
    listed = {}
    for key, x in value.items():
        if key == "default":
            continue
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(n, str) for n in key)):
            raise ValueError(f"{what} per pair takes (nameA, nameB) keys (and an optional 'default'), got {key!r}")
        missing = [n for n in key if n not in names]
        if missing:
            raise ValueError(f"{what} pair {key!r}: no collision object named {missing}; objects: "
                             f"{sorted(n for n in names if n != '__ground__')}")
        k = index.get(frozenset((names[key[0]], names[key[1]])))
        if k is None:
            raise ValueError(f"{what} pair {key!r}: these objects are not a collision pair of the scene "
                             "(same body, excluded, or self-collision off)")
        name = pair_name(scene, k)
        if name in listed:
            raise ValueError(f"{what} pair {key!r} is listed twice (also as {listed[name][1]!r})")
        out[k] = check(x, f"[{key!r}]")
        listed[name] = (k, key)
    rest = default if default is not None else unlisted
    left = np.isnan(out)
    if left.any():
        if rest is None:
            raise ValueError(f"{what} per pair: no value for the collision pairs "
                             f"{[pair_name(scene, k) for k in np.flatnonzero(left)][:8]} (list them, or give a "
                             f"'default' entry for the pairs not listed)")
        out[left] = rest
    return PairCoefficients(out, default, listed)


def pair_restitution(scene: CollisionScene, restitution, threshold) -> PairCoefficients:
    """The restitution over the collision pairs of ``scene`` (:func:`pair_coefficients`, unlisted pairs 0);
    ``ValueError`` as there, or for a bad ``threshold``."""
    if not (_number(threshold) and np.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"restitution_threshold must be a finite speed >= 0 (m/s), got {threshold!r}")
    return pair_coefficients(scene, restitution, "restitution", upper=1.0, unlisted=0.0)


def _number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


@dataclass
class ContactReport:
    """The contacts of the last step (``sim.contacts``); nc contacts, r rows each.

    ``points``/``normals`` (nc, 3) world frame (normal from body B to body A),
    ``phi`` (nc,) signed distances, ``impulses`` (nc, r) contact-frame impulses
    (normal first), ``modes`` (nc,) mode of each contact (``contact.lcp.Mode`` of its
    normal row for the LCP, ``contact.ncp.NCPMode`` for the NCP, 0 when relaxed),
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
    """What one step's contact solve leaves for its Jacobians and the next step (kept in the workspace).

    ``problem``/``solution`` are the adapter's (:mod:`contact.adapter`); ``lam`` (m,) the impulses.
    """

    geo: ContactGeometry | None
    J: np.ndarray  # (m, nv): contact rows then limit rows
    Minv: np.ndarray
    MJt: np.ndarray  # Minv J^T
    normal_rows: np.ndarray  # rows that carry a bias(phi) term
    bias_slope: np.ndarray  # bias'(phi) on those rows
    key: tuple
    layout: RowLayout
    problem: object
    solution: object
    warm_hit: bool = False  # the warm start held
    guessed: bool = False  # a warm start was tried (same rows as the last step)
    adapter: object = None  # the adapter that solved this step (a relaxed model's hard fallback)
    correction: "Correction | None" = None  # the position correction of deep rows (None: no deep row)
    impact: "Impact | None" = None  # the rows that bounce this step (None: none)

    @property
    def lam(self) -> np.ndarray:
        """The impulses (m,)."""
        return self.solution.lam

    @property
    def m_contact(self) -> int:
        """Number of contact rows (the limit rows follow them)."""
        return 0 if self.geo is None else self.geo.J.shape[0]


#: A correction row whose multiplier is below ``-CORRECTION_PULL max|lam|`` pulls, and leaves the correction
#: (:meth:`ContactModel._reference_correction`; the compiled core's twin in ``cpp/src/kinematics.hpp``).
CORRECTION_PULL = 1e-9


@dataclass
class Correction:
    """The position correction of one step (module docstring, item 5).

    ``rows`` (k,) the deep rows of ``J``, then the held limit rows (target 0: the module
    docstring); ``dq`` (nv,) the tangent displacement added to ``dt v+``; ``lam`` (k,) its
    impulse-like multipliers; ``W`` (nv, k) ``M^-1 J_d^T``; ``A`` (k, k) ``J_d M^-1 J_d^T``;
    ``held`` how many of ``rows`` (the last ones) are held limit rows.
    """

    rows: np.ndarray
    dq: np.ndarray
    lam: np.ndarray
    W: np.ndarray
    A: np.ndarray
    held: int = 0


class FusedContactState:
    """A :class:`ContactState` whose data stay in the compiled core (``core``: the fused step's
    ``StepState``, :meth:`ContactModel.solve` with ``contact="lcp"``; NCP: :class:`FusedNCPState`): the same attributes, each made
    (numpy views, Python objects) only when something asks for it (the report, the adjoint path, the
    position correction's Jacobian, the reference path of the next step), so a fused step builds none."""

    __slots__ = ("core", "adapter", "_friction", "_cache")

    def __init__(self, core, adapter, friction: float):
        self.core = core
        self.adapter = adapter
        self._friction = friction
        self._cache = {}

    def _get(self, name, make):
        c = self._cache
        if name not in c:
            c[name] = make()
        return c[name]

    @property
    def warm_hit(self) -> bool:
        return bool(self.core.warm_hit)

    @property
    def guessed(self) -> bool:
        return bool(self.core.guessed)

    @property
    def m_contact(self) -> int:
        return self.core.nc * self.core.r

    @property
    def J(self) -> np.ndarray:
        return self.core.J

    @property
    def Minv(self) -> np.ndarray:
        return self.core.Minv

    @property
    def MJt(self) -> np.ndarray:
        return self.core.MJt

    @property
    def normal_rows(self) -> np.ndarray:
        return self._get("normal_rows", lambda: self.core.normal_rows.astype(np.intp))

    @property
    def bias_slope(self) -> np.ndarray:
        return self.core.bias_slope

    @property
    def geo(self) -> ContactGeometry | None:
        def make():
            c = self.core
            if c.nc == 0:
                return None
            nc, r, nv = c.nc, c.r, c.J.shape[1]
            J, D, dD, dp, J6A, J6B = c.geometry
            return ContactGeometry(Contacts(*c.contacts), J, D.reshape(nc, 3, r), dD.reshape(nc, r, 3, nv),
                                   dp.reshape(nc, 3, nv), J6A.reshape(nc, 6, nv), J6B.reshape(nc, 6, nv), r)
        return self._get("geo", make)

    @property
    def key(self) -> tuple:
        def make():
            k = self.core.key
            nc = k[0]
            return (tuple(k[1:1 + nc]), nc, tuple(k[2 + nc:]))
        return self._get("key", make)

    @property
    def layout(self) -> RowLayout:
        return self._get("layout", lambda: RowLayout(self.core.nc, self.core.r, self.core.nlim, self._friction))

    @property
    def problem(self) -> BoxedLCP:
        def make():
            A, b, normal_of, mu = self.core.problem
            return BoxedLCP(A=A, b=b, normal_of=normal_of.astype(np.intp), mu=mu)
        return self._get("problem", make)

    @property
    def solution(self) -> LCPSolution:
        def make():
            x, w, modes, signs, solved, res, hit, its = self.core.solution
            return LCPSolution(x, w, modes, signs, "solved" if solved else "inexact", float(res), bool(hit), int(its))
        return self._get("solution", make)

    @property
    def lam(self) -> np.ndarray:
        return self.solution.lam

    @property
    def correction(self) -> Correction | None:
        if not self.core.has_correction:
            return None

        def make():
            c = self.core.correction
            if c is None:
                return None
            rows, dq, lam, W, A, held = c
            return Correction(rows.astype(np.intp), dq, lam, W, A, held)
        return self._get("correction", make)


class FusedNCPState(FusedContactState):
    """A :class:`FusedContactState` of NCP contact (``contact="ncp"``: the fused step's ``StepState`` holds the
    Coulomb-cone NCP of ``cpp/src/ncp.cpp``): its ``problem`` and ``solution`` are :class:`contact.ncp.NCPProblem`
    and :class:`contact.ncp.NCPSolution`, made only when asked. Not a ``FusedContactState`` by ``type`` (code that
    reads the LCP's fields checks ``type``); the compiled parameter Jacobians take it too."""

    __slots__ = ()

    @property
    def problem(self):
        def make():
            from contact.ncp import NCPProblem

            A, b, start, size, mu = self.core.ncp
            return NCPProblem(A, b, start, size, mu)
        return self._get("problem", make)

    @property
    def solution(self):
        def make():
            from contact.ncp import NCPSolution

            lam, c, modes, solved, res, hit, its, dirs = self.core.ncp_solution
            return NCPSolution(lam, c, modes, "solved" if solved else "inexact", float(res), bool(hit), int(its), dirs)
        return self._get("solution", make)


class FusedRelaxedState(FusedContactState):
    """A :class:`FusedContactState` of relaxed contact (``smoothing`` kappa > 0: the fused step's ``StepState``
    holds the central-path problem of ``cpp/src/relaxed.cpp``): its ``problem`` and ``solution`` are
    :class:`contact.relaxed.RelaxedProblem` and :class:`contact.relaxed.RelaxedSolution`, made only when asked."""

    __slots__ = ()

    @property
    def problem(self):
        def make():
            from contact.relaxed import RelaxedProblem

            A, b, kind, normal_of, start, size, mu, weight, dweight, kappa = self.core.relaxed
            return RelaxedProblem(A, b, kind, normal_of, start, size, mu, weight, dweight, float(kappa))
        return self._get("problem", make)

    @property
    def solution(self):
        def make():
            from contact.relaxed import RelaxedSolution

            lam, c, its, res, conv, K, hit, keep = self.core.relaxed_solution
            return RelaxedSolution(lam, c, int(its), float(res), bool(conv), K, bool(hit), keep)
        return self._get("solution", make)


class ContactModel:
    """Everything about contact that does not change between steps."""

    def __init__(self, model: pin.Model, geometry, *, ground, up, friction: float, margin: float,
                 planar: bool, erp: float, joint_limits: bool, exclude=None, contact: str = "lcp",
                 self_collision: bool = True, pairs=None, smoothing: float = 0.0,
                 smoothing_distance: float = 0.05, recovery: str = "position", restitution=0.0,
                 restitution_threshold: float = RESTITUTION_THRESHOLD, penalty=None, dt: float | None = None,
                 speculative: bool = False):
        if recovery not in ("position", "velocity"):
            raise ValueError(f"recovery must be 'position' (bounded, the default) or 'velocity' (the former "
                             f"push-out), got {recovery!r}")
        self.recovery = recovery
        if not isinstance(friction, Mapping) and not (0.0 <= friction <= MAX_FRICTION):  # NaN fails
            raise ValueError(f"friction must be a coefficient in [0, {MAX_FRICTION:g}], got {friction!r}")
        if not 0.0 < erp <= 1.0:
            raise ValueError(f"erp must be in (0, 1], got {erp!r}")
        if not (isinstance(smoothing, (int, float, np.floating)) and np.isfinite(smoothing) and smoothing >= 0):
            raise ValueError(f"smoothing (kappa) must be a finite number >= 0, got {smoothing!r}")
        if not (np.isfinite(smoothing_distance) and smoothing_distance > 0):
            raise ValueError(f"smoothing_distance must be a positive finite distance (m), got {smoothing_distance!r}")
        self.contact = contact
        self.kappa = float(smoothing)
        self.relaxed_fallbacks = 0  # relaxed steps that fell back to hard contact (see solve)
        self.smoothing_distance = float(smoothing_distance)
        #: the contact model, through its adapter (:mod:`contact.adapter`); checks ``contact``
        self.adapter = adapter(contact, smoothing=self.kappa, smoothing_distance=self.smoothing_distance,
                               penalty=penalty, dt=dt)
        #: a compliant model (penalty): penetration is its state, so no bias in b, no position correction
        self.compliant = bool(getattr(self.adapter, "compliant", False))
        #: where the relaxed solve finds no central point, the step falls back to hard contact
        self.hard_adapter = adapter("lcp" if contact == "lcp" else "ncp")
        if self.kappa > 0:  # relaxed forces reach out to the smoothing distance, and fade there
            margin = self.smoothing_distance
        margin = max(margin, getattr(self.adapter, "reach", 0.0))  # a compliant model's force reaches its width
        if not isinstance(speculative, (bool, np.bool_)):
            raise TypeError(f"speculative must be True or False, got {speculative!r}")
        self.scene = CollisionScene(model, geometry, ground=ground, up=up, margin=margin, planar=planar,
                                    exclude=exclude, self_collision=self_collision, pairs=pairs,
                                    speculative=bool(speculative),
                                    **({"patch_depth": margin} if self.compliant else {}))
        #: the restitution as given, by pair (its parameters: :mod:`dynamics.parameters`)
        self.restitution_pairs = pair_restitution(self.scene, restitution, restitution_threshold)
        #: restitution per collision pair (npairs,), None when every pair is inelastic (module docstring)
        self.restitution = self.restitution_pairs.value if self.restitution_pairs.value.any() else None
        #: the friction as given, by pair; ``pair_friction`` (npairs,) each pair's ``mu``, None when one number
        #: holds for every contact (``friction``)
        self.friction_pairs = pair_coefficients(self.scene, friction, "friction", upper=MAX_FRICTION, unlisted=None)
        self.pair_friction = self.friction_pairs.value if self.friction_pairs.per_pair else None
        self.restitution_threshold = float(restitution_threshold)
        if self.compliant and self.restitution is not None:
            raise ValueError(f"restitution applies to the hard and relaxed models; contact={contact!r} bounces "
                             "by its spring and damping (contact_damping sets the coefficient of restitution)")
        self.kin = ContactKinematics(model, planar=planar)
        self.rows = self.kin.rows
        #: one ``mu`` for every contact; with friction per pair its ``"default"`` entry (None: none)
        self.friction = self.friction_pairs.default
        self.margin = float(margin)
        self.erp = float(erp)
        self.slop = SLOP
        self.nv = model.nv
        # no gravity: ABA(q, 0, tau) = M^-1 tau (for the correction's derivative); the step's model, so its
        # armature (with implicit damping: plus dt D) is the same as in the step's M^-1
        self._model0 = model.copy()
        self._model0.gravity = pin.Motion.Zero()
        self._data0 = None
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
        #: the fused hard-contact step of the compiled core (``cpp/src/step.cpp``: :meth:`solve` and the
        #: simulator's contact Jacobian in one call each; ``contact="ncp"`` solves the Coulomb-cone NCP of
        #: ``cpp/src/ncp.cpp`` there, with a core that has it), or None: the Python path (the reference; also
        #: for relaxed contact, without the core, or with CONTACTRAJ_NO_FUSED set). Set it to None to run the
        #: reference.
        self.fused = None
        core_mod = self.kin.core
        ncp = contact == "ncp" and self.kappa == 0 and core_mod is not None and hasattr(core_mod, "ncp_solve")
        relaxed = (self.kappa > 0 and contact in ("lcp", "ncp", "relaxed") and core_mod is not None
                   and hasattr(core_mod, "relaxed_solve"))
        #: the fused solve is the NCP's (its states are :class:`FusedNCPState`)
        self._fused_ncp = ncp
        #: the fused solve is the relaxed model's (its states are :class:`FusedRelaxedState`)
        self._fused_relaxed = relaxed
        kind = {"ncp": True} if ncp else {}
        if relaxed:
            kind = {"kappa": self.kappa, "distance": self.smoothing_distance, "cone": bool(self.adapter.cone)}
        # the compiled step knows neither restitution nor friction per pair
        if ((contact == "lcp" and self.kappa == 0 or ncp or relaxed) and not os.environ.get("CONTACTRAJ_NO_FUSED")
                and self.restitution is None and self.pair_friction is None
                and core_mod is not None and hasattr(core_mod, "FusedLCP")
                and (self.scene.npairs == 0 or self.scene._detector is not None)):
            self.fused = core_mod.FusedLCP(self.scene._detector, self.kin.support, self.kin.mask, self.rows,
                                           bool(planar), self.friction, self.margin, self.slop, self.erp,
                                           recovery == "velocity", [[float(x) for x in row] for row in lim],
                                           **kind)

    # -- the step's contact part ------------------------------------------------------------
    def may_touch(self, q, v_free, dt) -> bool:
        """False when nothing can be in contact at ``q`` (no collision pairs, no limit near, and the free
        velocity ``v_free`` carries no joint across a limit in this step)."""
        if self.scene.npairs:
            return True
        margin = self.margin
        return any(s * (q[iq] - ref) < margin or s * (q[iq] + dt * v_free[iv] - ref) < 0.0
                   for iq, iv, s, ref in self.limits)

    def _near_limits(self, q) -> set[int]:
        """Indices of the limits within the margin at ``q`` (their rows are in every solve)."""
        margin = self.margin
        return {k for k, (iq, _, s, ref) in enumerate(self.limits) if s * (q[iq] - ref) < margin}

    def _crossed_limits(self, q, v_next, dt, active) -> list[int]:
        """Indices of the limits not in ``active`` that ``v+`` carries across in this step
        (``s (q + dt v+ - ref) < 0``): the outer active-set check of :meth:`solve`."""
        return [k for k, (iq, iv, s, ref) in enumerate(self.limits)
                if k not in active and s * (q[iq] + dt * v_next[iv] - ref) < 0.0]

    def solve(self, model, data, gdata, q, v_free, dt, previous: ContactState | None, v=None):
        """``(v+, ContactState or None)``; forward kinematics at q has been run by detection. ``v`` (nv,):
        the pre-step velocity, which restitution needs (ignored without it)."""
        if self.fused is not None:
            # one compiled call; None: the detector handed this configuration back to Python
            out = self.fused.solve(model, data, gdata, q, v_free, dt, self.fused_previous(previous))
            if out is not None:
                v_next, st = out
                return v_next, self.fused_state(st)
        return self._reference_solve(model, data, gdata, q, v_free, dt, previous, v)

    def coefficients(self, kind: str) -> PairCoefficients:
        """The contact coefficient ``kind`` (``"friction"`` or ``"restitution"``) by collision pair."""
        return self.friction_pairs if kind == "friction" else self.restitution_pairs

    def fused_state(self, st) -> FusedContactState | None:
        """The Python face of a compiled solve's ``StepState`` ``st`` (None: nothing in contact)."""
        if st is None:
            return None
        cls = FusedNCPState if self._fused_ncp else FusedRelaxedState if self._fused_relaxed else FusedContactState
        return cls(st, self.adapter, self.friction)

    def fused_previous(self, previous: ContactState | None):
        """``previous`` as the fused contact solve takes it: its StepState, the key and active set of a state
        of the Python path, or None (no previous solve, or one of another contact model)."""
        if isinstance(previous, FusedContactState):
            return previous.core
        if previous is not None and previous.adapter is self.adapter:  # a state of the Python path
            pairs, nc, lims = previous.key
            sol = previous.solution
            if self._fused_relaxed:  # the relaxed model's warm start: the impulses
                return ([nc, *pairs, -1, *lims], sol.lam)
            if self._fused_ncp:  # the NCP's warm start: modes, impulses and friction directions
                dirs = sol.dirs if sol.dirs is not None else np.zeros((len(sol.modes), 2))
                return ([nc, *pairs, -1, *lims], sol.modes, sol.lam, dirs)
            return ([nc, *pairs, -1, *lims], sol.modes, sol.signs)
        return None

    def _reference_solve(self, model, data, gdata, q, v_free, dt, previous: ContactState | None, v=None):
        """:meth:`solve` in Python (the reference; NCP and relaxed contact always run it). ``v``: the
        pre-step velocity (restitution).

        A joint limit enters as a row when the joint is within the margin of it, or when the step's
        velocity would carry the joint across it: limit rows act only near their limits, and impulses
        of the other rows (through ``M^-1``'s coupling) or a large free velocity can push a joint through
        a limit whose row is not in the problem. So after each solve the limits that ``v+`` crosses are
        added and the problem solved again (at most once per limit); with its row the joint lands on the
        limit (``phi + dt s v+ >= 0``). Where ``v+`` crosses no inactive limit, nothing changes."""
        bound = v_free  # the velocity the speculative margins cover (a scene's own choice: ignored without them)
        contacts = self.scene.detect(model, data, gdata, q, bound, dt)
        active = self._near_limits(q)
        for round_ in range(SPECULATIVE_ROUNDS + 1):
            while True:
                v_next, state = self._solve_rows(model, data, q, v_free, dt, previous, contacts,
                                                 [self.limits[k] for k in sorted(active)], v)
                # (a compliant model's limits are springs: they may be crossed, by design)
                crossed = [] if self.compliant else self._crossed_limits(q, v_next, dt, active)
                if not crossed:
                    break
                active.update(crossed)
            # the impulses changed the velocities: margins at the larger of both, and the solve again when some
            # pair's grew (a ball struck hard enough to reach the ground in this step)
            if round_ == SPECULATIVE_ROUNDS or not self.scene.speculative:
                return v_next, state
            bound = np.maximum(np.abs(bound), np.abs(v_next))
            if not self.scene.margins_grow(model, data, gdata, q, bound, dt):
                return v_next, state
            grown = self.scene.detect(model, data, gdata, q, bound, dt)
            if len(grown) == len(contacts) and np.array_equal(grown.pair, contacts.pair):
                return v_next, state  # no contact joined: the same problem
            contacts = grown

    def _solve_rows(self, model, data, q, v_free, dt, previous, contacts, limit_rows, v=None):
        """One contact solve with the detected ``contacts`` and the joint-limit rows ``limit_rows``."""
        nc, r = len(contacts), self.rows
        if nc == 0 and not limit_rows:
            return v_free, None
        geo, J, phi = self._row_geometry(model, data, q, contacts, limit_rows)
        normal_rows = np.concatenate((np.arange(nc) * r, nc * r + np.arange(len(limit_rows)))).astype(np.intp)
        deep = phi < -self.slop
        if self.compliant:  # penetration is the compliant model's state: no bias, no correction
            deep[:] = False
            bias_slope = np.zeros_like(phi)
            bias = np.zeros_like(phi)
        elif self.recovery == "velocity":  # the former push-out, kept in v+ (see ContactModel)
            bias_slope = np.where(deep, self.erp, 1.0)
            bias = np.where(deep, -self.slop + self.erp * (phi + self.slop), phi)
        else:
            bias_slope = np.where(deep, 0.0, 1.0)
            bias = np.where(deep, -self.slop, phi)
        Minv = pin.computeMinverse(model, data, q).copy()
        MJt = Minv @ J.T
        A = J @ MJt
        b = J @ v_free
        b[normal_rows] += bias / dt
        impact = None
        if self.restitution is not None and nc and v is not None:
            impact = self._impacts(contacts, J, v, b, normal_rows[:nc], bias, bias_slope, phi, dt)
        key = (tuple(contacts.pair.tolist()), len(contacts), tuple(x[0] * 2 + (x[2] > 0) for x in limit_rows))
        same = previous is not None and previous.key == key
        layout = previous.layout if same else RowLayout(nc, r, len(limit_rows), self.contact_friction(contacts))
        used = self.adapter
        warm = same and previous.adapter is used
        problem = used.problem(A, b, layout, phi, previous.problem if warm else None)
        try:
            sol = used.solve(problem, previous.solution if warm else None)
        except CentralPathError as exc:
            # No point on the central path was found (seen on rank-deficient, nearly infeasible
            # problems: a joint pushed past its limit while a link lies on the floor). This step is
            # taken with hard contact instead -- its state and its Jacobians, consistently -- and counted.
            self.relaxed_fallbacks += 1
            if self.relaxed_fallbacks == 1:
                warnings.warn(f"relaxed contact: {exc}; such steps use hard contact (counted in "
                              "ContactModel.relaxed_fallbacks)", RuntimeWarning, stacklevel=2)
            used = self.hard_adapter
            warm = same and previous.adapter is used
            problem = used.problem(A, b, layout, phi, previous.problem if warm else None)
            sol = used.solve(problem, previous.solution if warm else None)
        v_next = v_free + MJt @ sol.lam
        state = ContactState(geo, J, Minv, MJt, normal_rows, bias_slope, key, layout, problem, sol,
                             warm_hit=bool(sol.warm_start_hit), guessed=warm, adapter=used)
        state.impact = impact
        if self.recovery == "position" and deep.any():
            rows, phis = normal_rows[deep], phi[deep]
            held = self._held_limit_rows(J, phi, normal_rows, nc, deep, v_next, dt)
            if len(held):
                rows = np.concatenate([rows, held])
                phis = np.concatenate([phis, np.full(len(held), -self.slop)])  # e = erp (slop - slop) = 0
            state.correction = self._correction(J, MJt, rows, phis, len(held))
        return v_next, state

    def compliant_rows(self, model, data, gdata, q):
        """The rows of the compliant model at ``q`` for an implicit integrator (:mod:`dynamics.integrators`):
        ``(geo, J, phi, layout)`` -- the contacts detected at ``q`` (their geometry, None without any) and the
        limits within the margin, ``J`` (m, nv) and the distances ``phi`` (nc + nlim,) of their normal rows, as
        :meth:`_solve_rows` builds them -- or None when nothing is near."""
        contacts = self.scene.detect(model, data, gdata, q)
        limit_rows = [self.limits[k] for k in sorted(self._near_limits(q))]
        nc, r = len(contacts), self.rows
        if nc == 0 and not limit_rows:
            return None
        geo, J, phi = self._row_geometry(model, data, q, contacts, limit_rows)
        return geo, J, phi, RowLayout(nc, r, len(limit_rows), self.contact_friction(contacts))

    def _row_geometry(self, model, data, q, contacts, limit_rows):
        """``(geo, J, phi)`` of the detected ``contacts`` (their geometry, None without any; detection ran the
        kinematics at ``q``) and the joint-limit rows ``limit_rows``: ``J`` (nc r + nlim, nv) and the distances
        ``phi`` (nc + nlim,) of their normal rows."""
        nc, r = len(contacts), self.rows
        J = np.zeros((nc * r + len(limit_rows), self.nv))
        geo = None
        if nc:
            pin.computeJointJacobians(model, data)  # at q: detection ran the kinematics
            geo = self.kin.geometry(data, contacts)
            J[: nc * r] = geo.J
        phi = np.empty(nc + len(limit_rows))
        phi[:nc] = contacts.phi
        for k, (iq, iv, s, ref) in enumerate(limit_rows):
            J[nc * r + k, iv] = s
            phi[nc + k] = s * (q[iq] - ref)
        return geo, J, phi

    def contact_friction(self, contacts: Contacts):
        """The friction coefficient of ``contacts``: one number, or (nc,) with friction per pair."""
        return self.friction if self.pair_friction is None else self.pair_friction[contacts.pair]

    def _held_limit_rows(self, J, phi, normal_rows, nc, deep, v_next, dt) -> np.ndarray:
        """The limit rows the position correction holds (module docstring, item 5): not deep, and
        ``v+`` puts the joint within ``slop`` of the limit (``phi + dt J_l v+ <= slop``)."""
        lim = np.arange(nc, len(phi))
        rows = normal_rows[lim]
        landing = phi[lim] + dt * (J[rows] @ v_next)
        return rows[~deep[lim] & (landing <= self.slop)]

    def _impacts(self, contacts, J, v, b, rows, bias, bias_slope, phi, dt) -> Impact | None:
        """Newton's impact law on the impact rows (module docstring, "Restitution"): updates ``b`` and
        ``bias_slope`` in place on them; returns their :class:`Impact` (None: no row impacts)."""
        e = self.restitution[contacts.pair]
        c_pre = J[rows] @ v
        k = np.flatnonzero((e > 0) & (c_pre < -self.restitution_threshold) & (b[rows] < 0))
        if not k.size:
            return None
        gap = phi[k] > 0  # bias(phi) = phi there: its allowance goes, the bounce replaces it
        b[rows[k]] += e[k] * c_pre[k] - np.where(gap, bias[k], 0.0) / dt
        bias_slope[k[gap]] = 0.0
        return Impact(rows[k], e[k], v.copy())

    def _correction(self, J, MJt, rows, phi_deep, held: int = 0) -> Correction:
        """The position correction on the deep rows ``rows`` with distances ``phi_deep``, the last ``held`` of them
        held limit rows (module docstring); ``MJt`` is the step's ``M^-1 J^T``, whose deep columns are ``W``. In
        the compiled core when it is available (its least squares keeps numpy's cutoff ``s > RANK_RTOL s_max``:
        see ``cpp/src/kinematics.hpp``)."""
        if self.kin.core is None:
            return self._reference_correction(J, MJt, rows, phi_deep, held)
        dq, lam, W, A, keep = self.kin.core.position_correction(J, MJt, rows, phi_deep, self.erp, self.slop)
        keep = np.asarray(keep, dtype=np.intp)
        return Correction(rows[keep], dq, lam, W, A, int(np.count_nonzero(keep >= len(rows) - held)))

    def _reference_correction(self, J, MJt, rows, phi_deep, held: int = 0) -> Correction:
        """Least squares ``A lam = e`` on the rows kept (all at first); while the smallest multiplier pulls
        (``lam_a < -CORRECTION_PULL max|lam|``) its row leaves (the first such minimum) and the rest is solved
        again: a correction pushes bodies apart, never pulls (a split impulse's ``lam >= 0``). Nearly parallel
        rows of opposite intent (a box squeezed between the floor and two links) otherwise met their targets
        with multipliers of 1e3-1e4 and opposite signs, a displacement of 12 cm and 6.5 rad in one step."""
        e_all = self.erp * (-phi_deep - self.slop)
        keep = np.arange(len(rows))
        while True:
            W = MJt[:, rows[keep]]
            A = J[rows[keep]] @ W
            lam = np.linalg.lstsq(A, e_all[keep], rcond=RANK_RTOL)[0]
            if not len(keep):
                break
            worst = int(np.argmin(lam))
            if not lam[worst] < -CORRECTION_PULL * np.abs(lam).max():
                break
            keep = np.delete(keep, worst)
        return Correction(rows[keep], W @ lam, lam, W, A, int(np.count_nonzero(keep >= len(rows) - held)))

    def correction_jacobian(self, state: ContactState, q: np.ndarray) -> np.ndarray:
        """``d dq_c / dq`` (nv, nv) in the tangent space (``dq_c`` depends on q only, not on v or u).

        Implicit differentiation of the correction's optimality conditions ``M dq_c = J_d^T lambda_c``,
        ``J_d dq_c = e = erp (-phi_d - slop)``::

            d dq_c = D + W dlambda,   A dlambda = de - K - J_d D

        with ``D = d(M^-1 J_d^T lambda_c)/dq`` at fixed ``lambda_c`` (ABA derivatives of a gravity-free copy
        of the model at zero velocity, plus ``M^-1 d(J^T lambda)/dq``), ``K = d(J_d w)/dq`` at ``w = dq_c``
        (the kinematic term of the velocity Jacobian), ``de = -erp J_d`` (``dphi/dq = J_n``) and the
        least-squares solve with the same rank cutoff as the contact solve (a box flat in the ground has 4
        deep rows of rank 3)."""
        c, nv = state.correction, self.nv
        Jd = state.J[c.rows]
        if self._data0 is None:  # one workspace for the gravity-free model, made on first use
            self._data0 = self._model0.createData()
        ddq_dq, _, _ = pin.computeABADerivatives(self._model0, self._data0, q, np.zeros(nv), Jd.T @ c.lam)
        D = ddq_dq.copy()
        K = np.zeros((len(c.rows), nv))
        # held limit rows have e = 0, so de = 0 there instead of -erp J_d: folded into K (constant rows of
        # J: no kinematic term of their own), as the compiled solve takes one erp
        if c.held:
            K[-c.held:] = -self.erp * Jd[-c.held:]
        mc = state.m_contact
        if mc:
            on_contacts = c.rows < mc
            lam_full = np.zeros(mc)
            lam_full[c.rows[on_contacts]] = c.lam[on_contacts]
            D += state.Minv @ self.kin.force_derivative(state.geo, lam_full)
            K[on_contacts] = self.kin.velocity_derivative(state.geo, c.dq)[c.rows[on_contacts]]
        if self.kin.core is not None:
            return self.kin.core.correction_jacobian(c.A, c.W, Jd, K, D, self.erp)
        rhs = -self.erp * Jd - K - Jd @ D
        dlam = np.linalg.lstsq(c.A, rhs, rcond=RANK_RTOL)[0]
        return D + c.W @ dlam

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
        modes = state.adapter.contact_modes(state.solution, state.layout)
        return ContactReport(c.points.copy(), c.normals.copy(), c.phi.copy(),
                             state.lam[: nc * r].reshape(nc, r).copy(), modes.copy(),
                             c.body_a.copy(), c.body_b.copy(), state.lam[nc * r:].copy())

    # -- Jacobians ------------------------------------------------------------------------------
    def _implicit_data(self, state: ContactState, dv_fixed: np.ndarray, v_next: np.ndarray, dt: float, with_phi: bool):
        """``(dc_theta, dphi_theta)`` (m, ncols each): how the contact velocities ``c = J v+`` move at fixed
        impulses, ``J dv_fixed + K`` (K: bias'(phi)/dt J_n and d(J w)/dq at w = v+, on the q-columns; on impact
        rows the restitution term ``e J_n v``'s, on the q- and v-columns: ``dv_fixed``'s columns are q, v, u), and the
        distances (``J_n`` on the q-columns of the normal rows; None unless ``with_phi``)."""
        nv, J, rows = self.nv, state.J, state.normal_rows
        dJv = self.kin.velocity_derivative(state.geo, v_next) if state.m_contact else np.zeros((0, nv))
        dc = fixed_impulse_velocity_derivative(J, dv_fixed, rows, state.bias_slope / dt, dJv)
        imp = getattr(state, "impact", None)  # a FusedContactState never has one
        if imp is not None:  # c_n += e J_n(q) v on the impact rows: e J_n on v, e d(J_n w)/dq at w = v on q
            dc[imp.rows, nv:2 * nv] += imp.e[:, None] * J[imp.rows]
            dc[imp.rows, :nv] += imp.e[:, None] * self.kin.velocity_derivative(state.geo, imp.v)[imp.rows]
        dphi = None
        if with_phi:
            dphi = np.zeros_like(dc)
            dphi[rows, :nv] = J[rows]
        return dc, dphi

    def velocity_jacobian(self, state: ContactState, dv_fixed: np.ndarray, v_next: np.ndarray, dt: float) -> np.ndarray:
        """``dv+/dtheta`` (nv, ncols) from ``dv_fixed = dv+/dtheta`` at fixed lambda; q-columns come first.

        The adapter linearizes its residual at the solution; one reduced system gives
        ``dlambda/dtheta`` (least squares when the clamping set is rank-deficient, as for a box
        flat on the ground: any exact solution gives the same dv+).
        """
        lin, dc, dphi = self._linearized(state, dv_fixed, v_next, dt)
        return implicit_velocity_jacobian(lin, dc, dphi, state.MJt, dv_fixed)

    def _linearized(self, state: ContactState, dv_fixed: np.ndarray, v_next: np.ndarray, dt: float):
        """``(lin, dc, dphi)``: the adapter's linearization at the solution and the data it acts on."""
        lin = state.adapter.linearize(state.problem, state.solution)
        return (lin, *self._implicit_data(state, dv_fixed, v_next, dt, lin.Fphi is not None))

    def aware_velocity_jacobian(self, state: ContactState, dv_fixed: np.ndarray, v_next: np.ndarray, dt: float,
                                dl_dv: np.ndarray):
        """``(dv+/dtheta, reclassified)``: Nimble's complementarity-aware choice (the adapter's
        ``reclassify``: the LCP's; the other models return their exact Jacobian).

        ``dl_dv`` is the loss gradient with respect to v+. A normal (or limit) row whose impulse
        would lower the loss (``dl/dlambda_i = dl_dv . M^-1 J_i' < 0``: the optimizer wants the
        bodies apart) is read as separating, one whose impulse would raise it as clamping (its
        friction rows then stick); friction rows of unchanged rows keep their modes. The
        reclassified Jacobian is kept when it gives the larger ``|dl/dv|^2 + |dl/du|^2 / dt``
        (``dv_fixed``'s columns: q, v, then the controls).
        """
        lin, dc, dphi = self._linearized(state, dv_fixed, v_next, dt)
        full = implicit_velocity_jacobian(lin, dc, dphi, state.MJt, dv_fixed)
        alt_lin = state.adapter.reclassify(state.problem, state.solution, state.MJt.T @ dl_dv)
        if alt_lin is None:
            return full, False
        alt = implicit_velocity_jacobian(alt_lin, dc, dphi, state.MJt, dv_fixed)
        nv = self.nv

        def strength(F):
            return float(np.sum((F[:, nv:2 * nv].T @ dl_dv) ** 2) + np.sum((F[:, 2 * nv:].T @ dl_dv) ** 2) / dt)

        return (alt, True) if strength(alt) > strength(full) else (full, False)
