"""Physical parameters of a :class:`~dynamics.Simulator` by name, and one step's exact derivative w.r.t. them.

Names (``sim.parameter_names()``), each a block of a flat parameter vector ``p``:

=====================  ====  ===============================================================================
name                   size  value
=====================  ====  ===============================================================================
``friction``           1     the Coulomb coefficient ``mu`` of every contact (present when the system has contact);
                             with friction per pair (``friction={(a, b): mu, "default": mu0}``) the default,
                             which the pairs not listed take (absent without a ``"default"`` entry)
``friction:<pair>``    1     the ``mu`` of a collision pair listed in a per-pair ``friction`` mapping; ``<pair>`` is
                             ``<objectA>|<objectB>``, the collision-object names in the scene's order (``ground``
                             for the ground; :func:`dynamics.contact_step.pair_name`)
``restitution``        1     Newton's ``e`` of every pair, or a per-pair mapping's ``"default"`` (present when some
                             pair has ``e > 0``)
``restitution:<pair>`` 1     the ``e`` of a pair listed in a per-pair ``restitution`` mapping
``mass:<link>``        1     the mass (kg) of the body joint ``j`` carries
``com:<link>``         3     its centre of mass ``c`` (m) in the joint frame
``inertia:<link>``     6     its rotational inertia about the centre of mass, ``I_C``, in Pinocchio's order
                             ``(xx, xy, yy, xz, yz, zz)`` (kg m^2)
``placement:<joint>``  6     a tangent increment ``delta = (linear, angular)`` of the joint's placement in its
                             parent: ``M' = M exp6(delta)``; its value is always 0 (an increment from the
                             simulator's own placement), ``with_parameters`` applies it
=====================  ====  ===============================================================================

``<link>`` is the body a joint carries as Pinocchio stores it (fixed links merged in), named by the first
body frame of the joint (the joint's name if it has none; a name two joints would share gets ``@<joint name>``,
:func:`link_names`). Mass, COM and inertia are independent: changing
the mass keeps ``c`` and ``I_C``. Planar systems (``planar=True``) refuse placement increments that turn a joint
axis out of the plane (angular x and y: ``with_parameters`` checks the model stays planar, ModelError naming the
parameters); a linear z increment keeps the motion planar and is taken (it moves the body along z, as in 3-D:
collision detection is 3-D, so 1 m off the catapult's bat misses the box). The out-of-plane components keep
their columns in ``Fp``. Linear z's is 0 (nothing in the planar dynamics moves with it; the normals have no z).
Angular x's and y's are the derivative of the step as the axis leaves the plane (the 3-D dynamics, which the
planar model cannot step): 0 when the bodies the joint carries are symmetric about their plane of motion (the
mirror image through it maps the tilt to its opposite, so the motion is even in it: the catapult, the worm), not
in general -- a body off that symmetry (a COM off the plane, ``com`` z; products of inertia ``xz``, ``yz``) lets
the gravity and inertial forces of a tilted subtree act on the joints above it at first order.
tests/test_parameters.py checks the catapult's tilt columns are 0, and, with its COMs moved off the plane, that
they are not and equal central differences of the same model stepped in 3-D (in flight, where the planar and the
3-D steps coincide), and that linear z's stay 0 in contact. The inertial entries out of the plane (``com`` z;
``inertia`` but ``zz``) have 0 columns on any planar system: the joint torques of a motion in the plane do not
depend on them.

The step's derivative ``Fp = d x+ / d p`` (ndx, sum of sizes), chained as the state Jacobians are
(:mod:`dynamics.contact_step`), with a new right-hand-side block of columns:

1. At fixed contact impulses, the step's velocity is ``v+ = v + dt a`` with ``a = ABA(q, v, tau + J^T lambda /
   dt)`` on the step's model (its armature carries the implicit damping ``dt D``, which does not depend on
   ``p``). ``RNEA(q, v, a) = tau + J^T lambda / dt`` gives ``dv_fixed = dv+/dp = -dt M^-1 (dRNEA/dp - d(J^T lambda)/dp /
   dt)``.

   * inertial kinds: ``RNEA = Y(q, v, a) pi`` with ``Y`` Pinocchio's ``computeJointTorqueRegressor`` and ``pi``
     the 10 dynamic parameters ``(m, m c, I_O)`` of each body (``I_O = I_C + m (|c|^2 I - c c^T)``), so
     ``dRNEA/dp = Y_j dpi_j/dp`` (closed form of ``dpi/d(m, c, I_C)``); ``J`` does not depend on them;
   * placements: an *augmented model*, built once per set of placement joints, has a free-flyer joint
     inserted in front of each such joint at the joint's placement (the joint itself then at identity). At
     the identity configuration of the inserted joints the augmented model is the system itself, and a
     tangent increment ``delta`` of an inserted joint's configuration is ``M exp6(delta)``. So the
     derivatives with respect to ``delta`` are Pinocchio's derivatives with respect to the inserted joints'
     configuration (zero velocity and acceleration on them): ``computeRNEADerivatives`` for ``dRNEA/ddelta``
     (no inversion of the augmented mass matrix, whose inserted rows may be singular), and the contact
     kinematics of :mod:`contact.kinematics` on the augmented model for ``d(J^T lambda)/ddelta``,
     ``d(J w)/ddelta`` and ``dphi/ddelta = J_n`` (contact points, normals and distances move with the
     bodies the placement carries; the contacts found at ``q`` are mapped onto the augmented joints,
     detection is not run again);
   * friction and restitution: no fixed-impulse term.

2. The contact problem is linearized by its adapter at the solution (the same linearization as the
   state Jacobians use). Its right-hand side: ``dc = J dv_fixed + d(J w)/dp|_{w = v+} + bias'(phi) dphi/dp / dt``
   (the last two for placements). Restitution enters ``b`` linearly: an impact row's free velocity holds
   ``e c_n^-`` (``c_n^- = J_n(q) v``, the pre-step normal velocity, :mod:`dynamics.contact_step`), so at fixed
   impulses ``dc/de = c_n^-`` on the impact rows of the pairs the parameter covers, 0 elsewhere (a row that
   does not impact at this step has no ``e`` term; at ``e = 0`` exactly the step jumps as ``e`` leaves 0 on an
   approaching contact -- the speculative gap allowance goes -- and the column is the derivative of the
   inelastic branch it took, 0); placements move ``e J_n(q) v`` on the impact rows by ``e d(J_n w)/ddelta`` at
   ``w = v`` (as the state Jacobians' q-columns). Friction enters the bounds: for the boxed LCP a bounded friction row
   is ``lambda_i = s_i mu lambda_n``, so at fixed reduced unknowns ``dlambda_i/dmu = s_i lambda_n`` (``e``;
   ``c`` moves by ``A e``); for the NCP the sliding rows ``lambda_T + mu lambda_n c_T/|c_T| = 0`` (and the
   saturated ``lambda_T - mu lambda_n d = 0``) have the explicit partial ``dF/dmu``. Then::

       E dz = -(F_c (dc + A e) + dF/dp),   dlambda = e + P dz,   dv+ = dv_fixed + M^-1 J^T dlambda

   (least squares with the contact step's rank cutoff ``RANK_RTOL``, as in :func:`contact.lambda_jacobian`).

3. The position correction ``dq_c = M^-1 J_d^T lambda_c``, ``J_d dq_c = erp (-phi_d - slop)`` is
   differentiated as :meth:`~dynamics.contact_step.ContactModel.correction_jacobian` does for ``q``:
   ``D = -M^-1 (dRNEA_0(q, 0, dq_c)/dp - d(J_d^T lambda_c)/dp)`` (gravity-free), ``A dlambda_c = -erp dphi_d/dp -
   d(J_d w)/dp|_{w = dq_c} - J_d D``, ``d dq_c = D + W dlambda_c``.

4. ``q+ = q (+) (dt v+ + dq_c)``: ``dq+/dp = dIntegrate_ARG1 (dt dv+/dp + d dq_c/dp)``.

Paths: ``x+``, ``Fx`` and ``Fu`` are those of ``step_derivatives`` without ``params`` (the fused C++ core
where it runs, bit for bit); ``Fp`` and the impulse Jacobians by the compiled core (``cpp/src/params.cpp``,
``ParameterPlan``) for a step without contact and for the fused step's LCP, NCP and relaxed states, else by
:func:`_reference_jacobian` in Python (per-pair coefficients, restitution, the Python path's contact states),
which stays the reference the compiled one is tested against (``tests/test_core_params.py``, to 1e-11).

Relaxed contact (``with_smoothing``): the same chain on its residual (:mod:`contact.relaxed`), which also reads
the distances (``F_phi``: placements move them, ``dphi/ddelta = J_n``) and the friction coefficient (a friction
block's ``R_i = c_i + 2 kappa lambda_i / D``, ``D = (mu lambda_n)^2 - |lambda_T|^2``: ``dR_i/dmu = -4 kappa lambda_i
mu lambda_n^2 / D^2``). Penalty contact is not covered (NotImplementedError).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pinocchio as pin

from contact import core, lambda_jacobian
from contact.adapter import RANK_RTOL
from contact.detection import Contacts
from contact.kinematics import ContactKinematics
from contact.relaxed import friction_blocks

from .contact_step import FusedContactState, FusedNCPState, FusedRelaxedState

#: The compiled core's parameter Jacobian (``cpp/src/params.cpp``), or None (the Python path: no core, or a build
#: that predates it).
_core = core.module if core.available() and hasattr(core.module, "ParameterPlan") else None

#: Pinocchio's order of the 6 entries of a symmetric 3x3 inertia: xx, xy, yy, xz, yz, zz.
SYM = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
#: a tangential velocity below this (times max(1, |b|)) is no slip: at mu = 0 the friction column's sign
#: (LCP) or direction (NCP) is round-off there, and friction acts at second order only
SLIP_TOL = 1e-10
KINDS = {"friction": 1, "restitution": 1, "mass": 1, "com": 3, "inertia": 6, "placement": 6}
#: the contact coefficients among :data:`KINDS`: one number for all pairs, or one per collision pair
COEFFICIENTS = ("friction", "restitution")


@dataclass(frozen=True)
class Block:
    """One named parameter: ``kind`` (a key of :data:`KINDS`), the joint id it belongs to (0 for the contact
    coefficients), its ``size`` and ``offset`` in the flat vector; ``pair``: the collision pair of a per-pair
    coefficient (-1: the one number, or the per-pair mapping's default)."""

    name: str
    kind: str
    joint: int
    size: int
    offset: int
    pair: int = -1


@dataclass
class StepImpulses:
    """The contact impulses of one step and their Jacobians (``step_derivatives(..., impulses=True)``).

    ``lam`` (m,) impulses (N s) in the contact frames, rows as in ``sim.contacts``: ``nc`` contacts of
    ``rows`` rows each (normal first, then the tangents), then one row per active joint limit; ``dlam_dx``
    (m, ndx), ``dlam_du`` (m, nu) and ``dlam_dp`` (m, np; None without ``params``). Empty (m = 0) when
    nothing is in contact.

    Where the contacts are statically indeterminate (more rows than the motions they block: a box flat on the
    ground on four corners) the impulses are not unique. The Jacobians are those of the solution returned, its
    active set held (least squares, the contact step's rank cutoff): the generalized impulse ``J^T lambda`` and
    the step are unique and their derivatives exact, but a re-solve after a small change may return another
    solution, differing by internal forces. Central differences of ``lambda`` itself then need not match: on
    ur5-box's flat box, tilting the box's placement by +-1e-6 rad moved the load between diagonal corners by
    1e-3 N s (the difference 0.8-1.04 of the largest entry's derivative), while ``x+`` agreed with ``Fp`` to 5e-7
    and the generalized impulse differences with ``J^T dlam_dp`` (each side's own ``J``) to 5e-4 relative."""

    lam: np.ndarray
    dlam_dx: np.ndarray
    dlam_du: np.ndarray
    dlam_dp: np.ndarray | None
    nc: int
    rows: int


def vec6(S: np.ndarray) -> np.ndarray:
    """The 6 entries of a symmetric 3x3 matrix in Pinocchio's order (:data:`SYM`)."""
    return np.array([S[i, j] for i, j in SYM])


def mat6(w) -> np.ndarray:
    """The symmetric 3x3 matrix of 6 entries in Pinocchio's order."""
    S = np.empty((3, 3))
    for k, (i, j) in enumerate(SYM):
        S[i, j] = S[j, i] = w[k]
    return S


def link_names(model: pin.Model) -> list[str]:
    """The name of the body each joint carries (index: the joint id; 0, the universe, ``""``): its first body
    frame, else the joint's name; a name two joints would share (a joint without a body frame named after
    another joint's link, frames of the same name) becomes ``<name>@<joint>`` on each of them, and then, while
    still shared, ``@<joint id>`` is added: ``parameter_names()`` names every body once."""
    first = {}
    for f in model.frames:
        if f.type == pin.FrameType.BODY and 0 < f.parentJoint < model.njoints:
            first.setdefault(int(f.parentJoint), f.name)
    out = [""] + [first.get(j, model.names[j]) for j in range(1, model.njoints)]
    for rename in (lambda j: f"{out[j]}@{model.names[j]}", lambda j: f"{out[j]}@{j}"):
        counts = Counter(out[1:])
        out = [out[0]] + [rename(j) if counts[out[j]] > 1 else out[j] for j in range(1, model.njoints)]
    return out


def _coefficient_names(sim) -> list[tuple[str, str, int]]:
    """``(name, kind, pair)`` of the contact coefficients of ``sim``: friction, then restitution (with some
    ``e > 0``), each as one number (or a per-pair mapping's default, pair -1) and per listed pair."""
    cm = sim.contact_model
    if cm is None:
        return []
    out = []
    for kind in COEFFICIENTS:
        if kind == "restitution" and cm.restitution is None:  # inelastic everywhere: no parameter
            continue
        coeff = cm.coefficients(kind)
        if coeff.default is not None:
            out.append((kind, kind, -1))
        out += [(f"{kind}:{n}", kind, k) for n, (k, _) in coeff.listed.items()]
    return out


def names(sim) -> list[str]:
    """Every parameter name of ``sim`` (module docstring): the contact coefficients first, then per joint."""
    m = sim.model
    out = [n for n, _, _ in _coefficient_names(sim)]
    for link in link_names(m)[1:]:
        out += [f"mass:{link}", f"com:{link}", f"inertia:{link}"]
    out += [f"placement:{m.names[j]}" for j in range(1, m.njoints)]
    return out


def _table(sim) -> dict:
    """name -> (kind, joint id, pair), cached on the simulator (its model never changes)."""
    t = getattr(sim, "_parameter_table", None)
    if t is None:
        m = sim.model
        t = {n: (kind, 0, k) for n, kind, k in _coefficient_names(sim)}
        for j, link in enumerate(link_names(m)[1:], start=1):
            for kind in ("mass", "com", "inertia"):
                t.setdefault(f"{kind}:{link}", (kind, j, -1))
        for j in range(1, m.njoints):
            t.setdefault(f"placement:{m.names[j]}", ("placement", j, -1))
        sim._parameter_table = t
    return t


class Blocks(list):
    """The blocks of a parameter list (a list of :class:`Block`) with what each step reads of them, made once:
    ``key`` (the names), ``npar`` (the total size), ``placements`` (their joints) and ``friction`` (its offset,
    -1 when absent)."""

    def __init__(self, blocks):
        super().__init__(blocks)
        self.key = tuple(b.name for b in blocks)
        self.npar = sum(b.size for b in blocks)
        self.placements = [b.joint for b in blocks if b.kind == "placement"]
        self.friction = next((b.offset for b in blocks if b.kind == "friction"), -1)
        #: the compiled core takes one friction coefficient and no restitution (per-pair coefficients and
        #: restitution run the Python reference; their steps are not fused either)
        self.compiled = all(b.kind != "restitution" and b.pair < 0 for b in blocks)
        #: contact coefficients only (friction, restitution; one or per pair): without contact they move nothing
        self.coefficients_only = bool(blocks) and all(b.kind in COEFFICIENTS for b in blocks)
        #: the compiled step can compute their Fp in its own call (step_derivatives' first path)
        self.fusable = bool(blocks) and self.compiled


def resolve(sim, params) -> Blocks:
    """The blocks of ``params`` (a name or a sequence of names), in the order given; ValueError on an unknown
    or repeated name."""
    if type(params) is list or type(params) is tuple:  # the usual call: its blocks are cached (the checks passed)
        try:
            hit = sim.__dict__.get("_parameter_blocks", {}).get(tuple(params))
        except TypeError:  # unhashable entries: the checks below name them
            hit = None
        if hit is not None:
            return hit
    if isinstance(params, np.ndarray) and params.ndim == 0 and params.dtype.kind == "U":  # np.array("friction")
        params = str(params)
    if isinstance(params, str):
        params = [params]
    elif isinstance(params, (set, frozenset, Mapping, bytes, bytearray)) or not isinstance(params, Iterable):
        why = " (unordered: the values follow the names' order)" if isinstance(params, (set, frozenset)) else ""
        raise TypeError(f"parameter names must be a name or a sequence of names (sim.parameter_names()), got "
                        f"{type(params).__name__} {params!r}{why}")
    params = list(params)  # once: an iterator is used up by the key (its names were cached as none)
    cache = sim.__dict__.setdefault("_parameter_blocks", {})
    try:
        key = tuple(params)
        if key in cache:
            return cache[key]
    except TypeError:  # unhashable entries: the checks below name them
        key = None
    table = _table(sim)
    out, off, seen = [], 0, set()
    for name in params:
        if not isinstance(name, str) or name not in table:
            kinds = sorted({n.split(":")[0] for n in table})
            why = ""
            if (isinstance(name, str) and name.split(":")[0] == "restitution" and sim.contact_model is not None
                    and sim.contact_model.restitution is None):
                why = (" (restitution is a parameter only while some collision pair has e > 0; this simulator is "
                       "inelastic everywhere, e.g. after with_parameters set e = 0: build it with restitution=e)")
            raise ValueError(f"unknown parameter {name!r} for {sim.name}{why}; kinds present: {kinds}; "
                             f"names: sim.parameter_names() (e.g. {list(table)[:4]})")
        if name in seen:
            raise ValueError(f"parameter {name!r} is listed twice")
        seen.add(name)
        kind, j, pair = table[name]
        out.append(Block(name, kind, j, KINDS[kind], off, pair))
        off += KINDS[kind]
    out = Blocks(out)
    if key is not None:
        cache[key] = out
    return out


def size(sim, params) -> int:
    """The total size of the parameters ``params``."""
    return sum(b.size for b in resolve(sim, params))


def get(sim, params) -> np.ndarray:
    """The values of ``params``, concatenated (placements: zeros, see the module docstring)."""
    blocks = resolve(sim, params)
    out = np.zeros(sum(b.size for b in blocks))
    for b in blocks:
        sl = slice(b.offset, b.offset + b.size)
        if b.kind in COEFFICIENTS:
            cm = sim.contact_model
            coeff = cm.coefficients(b.kind)
            out[sl] = coeff.default if b.pair < 0 else coeff.value[b.pair]
        elif b.kind == "placement":
            out[sl] = 0.0
        else:
            I = sim.model.inertias[b.joint]
            out[sl] = {"mass": lambda: [I.mass], "com": lambda: np.asarray(I.lever),
                       "inertia": lambda: vec6(np.asarray(I.inertia))}[b.kind]()
    return out


def _check_inertia(name, Ic, mass):
    """The checks of :func:`dynamics.simulator.validate_model` on one inertia, to its tolerances, naming the
    parameter: positive semi-definite (a point mass's zero inertia is one the simulator takes: the model-level
    test, a singular mass matrix, follows at construction) and the triangle inequality."""
    from .simulator import INERTIA_RTOL

    w = np.linalg.eigvalsh(Ic)
    scale = max(float(np.abs(w).max()), mass * 1e-6, 1e-300)
    if w[0] < -INERTIA_RTOL * scale:
        raise ValueError(f"parameter {name!r}: the inertia {vec6(Ic).tolist()} (xx, xy, yy, xz, yz, zz) is not "
                         f"positive semi-definite (principal moments {w.tolist()} kg m^2)")
    if w[2] > (w[0] + w[1]) * (1 + INERTIA_RTOL) + INERTIA_RTOL * scale:
        raise ValueError(f"parameter {name!r}: the principal moments {w.tolist()} (kg m^2) violate the triangle "
                         f"inequality ({w[2]:.6g} > {w[0]:.6g} + {w[1]:.6g}): no mass distribution has them")
    diag = np.diag(Ic)
    if (diag < 0).any():  # within the PSD test's round-off tolerance: Pinocchio's own check (pin.Inertia), here named
        raise ValueError(f"parameter {name!r}: the inertia {vec6(Ic).tolist()} (xx, xy, yy, xz, yz, zz) has a negative "
                         f"moment about an axis (xx, yy, zz = {diag.tolist()} kg m^2); each must be >= 0")


def with_values(sim, params, values):
    """A new simulator with ``params`` set to ``values`` (the original unchanged); ValueError naming the
    parameter on a wrong size, a non-finite value, a mass < 0, a negative friction, a restitution outside
    [0, 1], or an inertia that is not positive semi-definite or breaks the triangle inequality (the checks and
    tolerances of :func:`dynamics.simulator.validate_model`, which the new simulator then runs on the model)."""
    from .simulator import ModelError, Simulator, as_numbers

    blocks = resolve(sim, params)
    n = sum(b.size for b in blocks)
    try:
        values = as_numbers(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values must be {n} number{'' if n == 1 else 's'} for parameters {[(b.name, b.size) for b in blocks]}, got "
                         f"{values!r:.80} ({exc})") from None
    if values.ndim == 0 and n == 1:
        values = values.reshape(1)
    if values.shape != (n,):
        raise ValueError(f"values have shape {values.shape}, expected ({n},) for parameters "
                         f"{[(b.name, b.size) for b in blocks]}")
    model = sim.model.copy()
    coefficients = {kind: sim._options[kind] for kind in COEFFICIENTS}
    body = {}
    for b in blocks:
        val = values[b.offset:b.offset + b.size]
        if not np.isfinite(val).all():
            raise ValueError(f"parameter {b.name!r} has non-finite values {val.tolist()}")
        if b.kind in COEFFICIENTS:
            x = float(val[0])
            if x < 0 or (b.kind == "restitution" and x > 1):
                raise ValueError(f"parameter {b.name!r} must be {'>= 0' if b.kind == 'friction' else 'in [0, 1]'}, "
                                 f"got {float(val[0])!r}")
            old = coefficients[b.kind]
            if isinstance(old, Mapping) or b.pair >= 0:  # per pair: a new mapping, the entry replaced
                coeff = sim.contact_model.coefficients(b.kind)
                key = "default" if b.pair < 0 else coeff.listed[b.name.split(":", 1)[1]][1]
                coefficients[b.kind] = {**old, key: x}
            else:
                coefficients[b.kind] = x
        elif b.kind == "placement":
            model.jointPlacements[b.joint] = model.jointPlacements[b.joint] * pin.exp6(pin.Motion(val))
        else:
            # >= 0 as the simulator's own model check (a massless intermediate link, as MJCF's bodies with several
            # joints make, is one): the simulator's parameters round-trip; a joint left with no mass at all is the
            # model check's ModelError below, naming the parameters
            if b.kind == "mass" and not val[0] >= 0:
                raise ValueError(f"parameter {b.name!r}: a mass must be >= 0 kg, got {float(val[0])!r}")
            body.setdefault(b.joint, {})[b.kind] = val
    inertia_names = {b.joint: b.name for b in blocks if b.kind == "inertia"}
    for j, kinds in body.items():
        I = model.inertias[j]
        m = float(kinds["mass"][0]) if "mass" in kinds else float(I.mass)
        c = np.array(kinds["com"]) if "com" in kinds else np.asarray(I.lever).copy()
        Ic = mat6(kinds["inertia"]) if "inertia" in kinds else np.asarray(I.inertia).copy()
        if "inertia" in kinds:
            _check_inertia(inertia_names[j], Ic, m)
        model.inertias[j] = pin.Inertia(m, c, Ic)
    opts = dict(sim._options, **coefficients)
    try:
        new = Simulator(model, geometry=sim.geometry, **opts)
    except ModelError as exc:  # the model-level checks (a singular mass matrix, a planar model leaving its plane)
        raise ModelError(f"with {_changed_entries(sim, blocks, values)}: {exc}") from None
    new.mjcf = sim.mjcf
    return new


def _changed_entries(sim, blocks, values, shown: int = 4) -> str:
    """The parameters of ``blocks`` whose ``values`` differ from ``sim``'s, as ``name = value`` (at most ``shown``
    of them, then how many more): what a model-level error is about, rather than every name and the whole vector
    (a panda's 127 numbers, of which one changed)."""
    old = get(sim, list(blocks.key))
    parts = []
    for b in blocks:
        val, was = values[b.offset:b.offset + b.size], old[b.offset:b.offset + b.size]
        if not np.array_equal(val, was):
            parts.append(f"{b.name} = {val.tolist() if b.size > 1 else float(val[0])!r}")
    if not parts:
        return "the parameters at their current values"
    more = f" and {len(parts) - shown} more changed" if len(parts) > shown else ""
    return f"parameter{'s' if len(parts) > 1 else ''} " + "; ".join(parts[:shown]) + more


# -- derivatives --------------------------------------------------------------------------------------
def dynamic_parameter_jacobian(I: pin.Inertia, kind: str) -> np.ndarray:
    """``d pi / d p`` (10, size) of Pinocchio's dynamic parameters ``pi = (m, m c, I_O)`` (``I_O = I_C + m
    (|c|^2 I - c c^T)``, order of :data:`SYM`) with respect to a ``mass``, ``com`` or ``inertia`` block."""
    m, c = float(I.mass), np.asarray(I.lever)
    if kind == "mass":
        out = np.zeros((10, 1))
        out[0, 0] = 1.0
        out[1:4, 0] = c
        out[4:, 0] = vec6(c @ c * np.eye(3) - np.outer(c, c))
        return out
    if kind == "com":
        out = np.zeros((10, 3))
        out[1:4] = m * np.eye(3)
        for k in range(3):
            e = np.zeros(3)
            e[k] = 1.0
            out[4:, k] = m * vec6(2 * c[k] * np.eye(3) - np.outer(e, c) - np.outer(c, e))
        return out
    out = np.zeros((10, 6))
    out[4:] = np.eye(6)
    return out


class _Augmented:
    """The system with a free-flyer joint inserted in front of each joint of ``joints`` (module docstring,
    item 1): its model (and a gravity-free copy), data, contact kinematics, and the index maps."""

    def __init__(self, sim, joints):
        model = sim._step_model
        aug = pin.Model()
        aug.name = model.name
        aug.gravity = model.gravity
        idmap = {0: 0}
        ff = {}
        for j in range(1, model.njoints):
            parent = idmap[model.parents[j]]
            place = model.jointPlacements[j]
            if j in joints:
                f = aug.addJoint(parent, pin.JointModelFreeFlyer(), place, f"{model.names[j]}__placement")
                ff[j] = f
                parent, place = f, pin.SE3.Identity()
            nj = aug.addJoint(parent, model.joints[j], place, model.names[j])
            aug.appendBodyToJoint(nj, model.inertias[j], pin.SE3.Identity())
            idmap[j] = nj
        self.idmap = np.zeros(model.njoints, dtype=np.intp)
        for j, nj in idmap.items():
            self.idmap[j] = nj
        dofs, qidx = [], []
        for j in range(1, model.njoints):
            a, o = aug.joints[idmap[j]], model.joints[j]
            dofs += list(range(a.idx_v, a.idx_v + o.nv))
            qidx += list(range(a.idx_q, a.idx_q + o.nq))
        self.dofs = np.asarray(dofs, dtype=np.intp)  # aug velocity index of each original dof
        self.qidx = np.asarray(qidx, dtype=np.intp)
        self.cols = {j: np.arange(aug.joints[f].idx_v, aug.joints[f].idx_v + 6) for j, f in ff.items()}
        arm = np.zeros(aug.nv)
        arm[self.dofs] = np.asarray(model.armature, dtype=float)
        aug.armature = arm
        self.model = aug
        self.data = aug.createData()
        self.model0 = aug.copy()
        self.model0.gravity = pin.Motion.Zero()
        self.data0 = self.model0.createData()
        self.q0 = pin.neutral(aug)
        self.kin = ContactKinematics(aug, planar=sim.contact_model.kin.planar) if sim.contact_model else None

    def q(self, q):
        out = self.q0.copy()
        out[self.qidx] = q
        return out

    def v(self, v):
        out = np.zeros(self.model.nv)
        out[self.dofs] = v
        return out

    def geometry(self, q, contacts: Contacts):
        """The contact geometry of ``contacts`` (found at ``q`` on the system) on the augmented model."""
        mp = self.idmap
        c = Contacts(contacts.points, contacts.normals, contacts.phi, mp[contacts.body_a], mp[contacts.body_b],
                     mp[contacts.normal_body], mp[contacts.point_body], contacts.radius, contacts.pair,
                     contacts.axis, contacts.gap, contacts.slide)
        pin.computeJointJacobians(self.model, self.data, self.q(q))
        return self.kin.geometry(self.data, c)


class _Workspace:
    """What the parameter derivatives keep between calls on one simulator: data, the gravity-free copy of
    the step's model, the augmented models by placement-joint set."""

    def __init__(self, sim):
        self.data = sim._step_model.createData()
        self.model0 = sim._step_model.copy()
        self.model0.gravity = pin.Motion.Zero()
        self.data0 = self.model0.createData()
        self.augmented = {}
        self.chains = {}
        self.plans = {}

    def chain(self, sim, blocks):
        """``d pi / d p`` (10 (njoints - 1), npar) of every body's dynamic parameters for the inertial blocks of
        ``blocks`` (zero columns elsewhere), or None when there is none; made once per parameter list."""
        return self._chains(sim, blocks)[0]

    def compact_chain(self, sim, blocks):
        """The same chain by columns, as the compiled core takes it: ``body`` (npar,) the joint whose 10 dynamic
        parameters column ``k`` moves (0: none) and ``dpi`` (10, npar) that column's 10 entries."""
        return self._chains(sim, blocks)[1]

    def _chains(self, sim, blocks):
        key = blocks.key if isinstance(blocks, Blocks) else tuple(b.name for b in blocks)
        if key not in self.chains:
            npar = sum(b.size for b in blocks)
            inertial = [b for b in blocks if b.kind in ("mass", "com", "inertia")]
            C = None
            body = np.zeros(npar, dtype=np.int64)
            dpi = np.zeros((10, npar))
            if inertial:
                C = np.zeros((10 * (sim.model.njoints - 1), npar))
                for b in inertial:
                    block = dynamic_parameter_jacobian(sim.model.inertias[b.joint], b.kind)
                    C[10 * (b.joint - 1):10 * b.joint, b.offset:b.offset + b.size] = block
                    body[b.offset:b.offset + b.size] = b.joint
                    dpi[:, b.offset:b.offset + b.size] = block
            self.chains[key] = (C, (body, dpi))
        return self.chains[key]

    def plan(self, sim, blocks):
        """The compiled core's ``ParameterPlan`` of ``blocks`` (``cpp/src/params.cpp``), made once per parameter
        list: the chain of the inertial columns and the placements' joints and offsets (the core computes the
        placement columns on the system's own model; the augmented model is the Python reference's)."""
        p = self.plans.get(blocks.key)
        if p is None:
            body, dpi = self.compact_chain(sim, blocks)
            cm = sim.contact_model
            pjoint = np.array([b.joint for b in blocks if b.kind == "placement"], dtype=np.int64)
            poffset = np.array([b.offset for b in blocks if b.kind == "placement"], dtype=np.int64)
            p = self.plans[blocks.key] = _core.ParameterPlan(
                sim._step_model, sim.model, self.data, self.model0, self.data0, body, dpi, blocks.friction,
                sim._euclidean, 0.0 if cm is None else float(cm.erp), pjoint, poffset,
                bool(cm is not None and cm.kin.planar))
        return p

    def aug(self, sim, joints) -> _Augmented:
        key = tuple(sorted(joints))
        if key not in self.augmented:
            self.augmented[key] = _Augmented(sim, set(key))
        return self.augmented[key]


def _workspace(sim) -> _Workspace:
    ws = getattr(sim, "_parameter_workspace", None)
    if ws is None:
        ws = sim._parameter_workspace = _Workspace(sim)
    return ws


def _rnea_derivative(sim, ws, blocks, npar, q, v, a, model, data, aug_model, aug_data, aug, fext_derivative):
    """``dRNEA(q, v, a)/dp - dF/dp`` (nv, npar) on ``model`` (the step's, or its gravity-free copy), where
    ``F = RNEA(q, v, a)`` is the generalized force of the contact impulses (``J^T lambda / dt`` in the step,
    ``J_d^T lambda_c`` in the correction); ``fext_derivative() -> (nv_aug, nv_aug)`` gives ``dF/dq_aug`` (or
    None without contact)."""
    nv = sim.nv
    chain = ws.chain(sim, blocks)
    if chain is not None and _core is not None:
        R = _core.parameter_regressor(model, data, q, v, a, *ws.compact_chain(sim, blocks))
    elif chain is not None:
        Y = np.asarray(pin.computeJointTorqueRegressor(model, data, q, v, a)).reshape(nv, -1)  # 1-D when nv = 1
        R = Y @ chain
    else:
        R = np.zeros((nv, npar))
    if aug is not None:
        R += _placement_rnea(blocks, npar, q, v, a, aug_model, aug_data, aug, fext_derivative)
    return R


def _placement_rnea(blocks, npar, q, v, a, aug_model, aug_data, aug, fext_derivative):
    """The placement columns of :func:`_rnea_derivative` (nv, npar; zero elsewhere), on the augmented model."""
    dtau_dq, _, _ = pin.computeRNEADerivatives(aug_model, aug_data, aug.q(q), aug.v(v), aug.v(a))
    dtau_dq = dtau_dq[aug.dofs]
    F = fext_derivative()
    R = np.zeros((len(aug.dofs), npar))
    for b in blocks:
        if b.kind == "placement":
            cols = aug.cols[b.joint]
            R[:, b.offset:b.offset + 6] = dtau_dq[:, cols] - (0.0 if F is None else F[aug.dofs][:, cols])
    return R


def _placement_columns(blocks, aug, M: np.ndarray) -> np.ndarray:
    """The placement columns of an (rows, nv_aug) matrix ``M`` laid out as the parameter vector."""
    out = np.zeros((M.shape[0], sum(b.size for b in blocks)))
    for b in blocks:
        if b.kind == "placement":
            out[:, b.offset:b.offset + 6] = M[:, aug.cols[b.joint]]
    return out


def _contact_columns(sim, state, blocks, kind) -> np.ndarray:
    """The column of each contact's coefficient ``kind`` (``"friction"`` or ``"restitution"``) among
    ``blocks`` (nc,), -1 where none of them covers it: the one number covers every contact, a per-pair
    mapping's default the pairs it does not list, ``"<kind>:<pair>"`` the contacts of its pair."""
    cm = sim.contact_model
    nc = state.m_contact // cm.rows
    col = np.full(nc, -1, dtype=np.intp)
    mine = [b for b in blocks if b.kind == kind]
    if not mine or not nc:
        return col
    coeff = cm.coefficients(kind)
    listed = np.array(sorted(k for k, _ in coeff.listed.values()), dtype=np.intp)
    pair = state.geo.contacts.pair if listed.size else np.zeros(nc, dtype=np.intp)
    for b in mine:
        col[(pair == b.pair) if b.pair >= 0 else ~np.isin(pair, listed)] = b.offset
    return col


def _restitution_term(sim, state, blocks, dc):
    """Adds ``dc/de = c_n^-`` on the impact rows (module docstring, item 2) to ``dc`` (m, npar)."""
    imp = getattr(state, "impact", None)
    if imp is None or not any(b.kind == "restitution" for b in blocks):
        return
    col = _contact_columns(sim, state, blocks, "restitution")[imp.rows // sim.contact_model.rows]
    on = col >= 0
    rows = imp.rows[on]
    dc[rows, col[on]] += state.J[rows] @ imp.v


def _friction_terms(sim, state, blocks, npar):
    """``(e, dF)``: the explicit impulse derivative ``e`` (m, npar) of the LCP's bounded rows and the
    explicit residual derivative ``dF`` (m, npar, on all rows; the reduced rows are taken later) of the
    NCP's sliding/saturated rows with respect to the friction parameters (each contact's column by
    :func:`_contact_columns`)."""
    m = len(state.lam)
    e = np.zeros((m, npar))
    dF = np.zeros((m, npar))
    if not any(b.kind == "friction" for b in blocks):
        return e, dF
    col = _contact_columns(sim, state, blocks, "friction")
    r = sim.contact_model.rows
    sol, prob = state.solution, state.problem
    name = getattr(state.adapter, "name", "")
    lam = state.lam
    slip_tol = SLIP_TOL * max(1.0, float(np.abs(prob.b).max()))  # a tangential velocity below it is no slip
    if name == "lcp":
        mu = prob.mu
        bounded = np.flatnonzero((np.asarray(sol.modes) == 3) & (mu > 0))  # friction rows: contact rows only
        k = col[bounded // r]
        on = k >= 0
        e[bounded[on], k[on]] = lam[bounded[on]] / mu[bounded[on]]
        # frictionless contacts (mu = 0): their friction rows sit at 0 (the box [-mu lam_n, mu lam_n] closed);
        # from mu = 0+ a slipping row's impulse is -sign(slip) mu lam_n: e = -sign(c_i) lam_n; a slip within
        # round-off of 0 (SLIP_TOL) is none: no friction acts at first order
        tie = np.asarray(prob.normal_of)
        frictionless = np.flatnonzero((mu == 0) & (tie >= 0))  # friction rows (limits' rows have no tie)
        frictionless = frictionless[frictionless // r < len(col)]
        frictionless = frictionless[col[frictionless // r] >= 0]
        if len(frictionless):
            c = (prob.A @ lam + prob.b)[frictionless]
            slip = np.abs(c) > slip_tol
            ln = np.maximum(lam[tie[frictionless]], 0.0)
            e[frictionless, col[frictionless // r]] = np.where(slip, -np.sign(c) * ln, 0.0)
    elif name == "ncp":
        c = prob.A @ lam + prob.b
        for g, (s, n) in enumerate(zip(prob.start, prob.size)):
            md = int(sol.modes[g])
            if n < 2 or md not in (2, 3) or col[g] < 0:
                continue
            k = col[g]
            ln = lam[s]
            if md == 2:
                ct = c[s + 1:s + n]
                nrm = float(np.linalg.norm(ct))
                if nrm <= slip_tol:
                    continue  # "sliding" without slip (mu = 0 puts every contact there): no direction, no term
                dF[s + 1:s + n, k] = ln * ct / nrm
            else:
                dF[s + 1:s + n, k] = -ln * sol.dirs[g, :n - 1]
    elif name == "relaxed":
        # a friction block's rows R_i = c_i + 2 kappa lam_i / D, D = s^2 - |lam_T|^2, s = mu lam_n:
        # dR_i/dmu = -4 kappa lam_i s lam_n / D^2 (a frictionless block, mu = 0, has R = lam_t: no column)
        for st, sz, n, mu in zip(*friction_blocks(prob), strict=True):
            k = col[n // r]
            if k < 0 or not lam[n] > 0.0:
                continue
            s = mu * lam[n]
            lt = lam[st:st + sz]
            D = s * s - float(lt @ lt)
            dF[st:st + sz, k] = -4.0 * prob.kappa * lt * s * lam[n] / (D * D)
    else:
        raise NotImplementedError(f"parameter derivatives under the {name!r} contact model are not implemented "
                                  "(LCP, NCP and relaxed are)")
    return e, dF


def _implicit(lin, dc, e, dF, A, dphi=None):
    """``dlambda`` (m, ncols): ``E dz = -(Fc (dc + A e) + F_phi dphi + dF[rows]); dlambda = e + P dz`` (module
    docstring), by :func:`contact.lambda_jacobian` (the compiled core where available): ``A e`` joins ``dc``; the
    residual's explicit terms (``dF``, and ``F_phi dphi`` for a model whose residual reads the distances: the
    relaxed one) ride on its distance slot (``F_phi`` the selection of the reduced rows)."""
    if lin.E.shape[0] == 0:
        return e.copy()
    rhs_dc = dc + A @ e if e.any() else dc
    explicit = None
    if lin.Fphi is not None and dphi is not None and dphi.any():
        explicit = lin.Fphi @ dphi
    if dF.any():
        if lin.P is not None:
            raise NotImplementedError("an explicit residual derivative with a reduced map P")
        explicit = dF[lin.unknowns] if explicit is None else explicit + dF[lin.unknowns]
    if explicit is None:
        return e + lambda_jacobian(lin if lin.Fphi is None else replace(lin, Fphi=None), rhs_dc, None)
    sel = np.zeros((len(lin.unknowns), dc.shape[0]))
    sel[np.arange(len(lin.unknowns)), lin.unknowns] = 1.0
    full = np.zeros_like(dc)
    full[lin.unknowns] = explicit
    return e + lambda_jacobian(replace(lin, Fphi=sel), rhs_dc, full)


def _compiled_states(module) -> tuple:
    """The contact-state types whose ``Fp`` the compiled ``module`` computes (none without one): the fused step's
    LCP, NCP and relaxed states; a core built before the NCP's and the relaxed model's were compiled (no
    ``parameter_plan_states``) takes the LCP's only."""
    if module is None:
        return ()
    took = getattr(module, "parameter_plan_states", ("lcp",))
    kinds = {"lcp": FusedContactState, "ncp": FusedNCPState, "relaxed": FusedRelaxedState}
    return tuple(kinds[k] for k in took if k in kinds)


#: The contact states whose parameter Jacobians the compiled core computes (cpp/src/params.cpp); the Python path's
#: states take the reference
_COMPILED_STATES = _compiled_states(_core)
#: the compiled step takes a ParameterPlan (FusedStep.step_derivatives(..., plan, Fp)); an older core does not
_FUSED_PLAN = _core is not None and bool(getattr(_core, "fused_step_parameters", False))


def backend() -> str:
    """What computes ``Fp`` here: the compiled core with its AVX2/FMA or SSE2 tiles (``CONTACTRAJ_CORE_NO_AVX2``
    forces SSE2), or the Python reference without a core (``trajopt bench --params`` names it)."""
    if _core is None:
        return "the Python reference (no compiled core)"
    tiles = _core.parameter_tiles() if hasattr(_core, "parameter_tiles") else "sse2"
    return f"the compiled core, {'AVX2/FMA' if tiles == 'avx2' else 'SSE2'} tiles"


def step_derivatives(sim, x, u, params, impulses, data):
    """``Simulator.step_derivatives`` with ``params`` and/or ``impulses`` (module docstring); exact Jacobians only
    (the simulator refuses ``adjoint=`` with them)."""
    blocks = Blocks([]) if params is None else resolve(sim, params)
    npar = blocks.npar
    if params is not None and not npar and not impulses:
        # an empty list: the state Jacobians' own call (the fused one where it runs) and no columns; through the
        # path below it cost the catapult's kept call 27.8 us against 21.4 us for the same numbers
        _, _, _, out, Fx, Fu = sim._state_derivatives(x, u, data, None)
        return out, Fx, Fu, np.zeros((sim.ndx, 0))
    if blocks.fusable and not impulses and _FUSED_PLAN and _core is not None:
        # the compiled step with its compiled parameter plan: Fp in the same call as Fx, Fu (no Python between them)
        fs = sim._active_fused_step()
        if fs is not None:
            out, Fx, Fu = np.empty(sim.nx), np.empty((sim.ndx, sim.ndx)), np.empty((sim.ndx, sim.nu))
            Fp = np.empty((sim.ndx, npar))
            if sim._fused_derivatives(fs, x, u, sim._workspace(data), out, Fx, Fu, _workspace(sim).plan(sim, blocks),
                                      Fp):
                return out, Fx, Fu, Fp
    nq = sim.nq
    # x+, Fx, Fu: the same numbers as step_derivatives without params (float64 arrays first: the fused call takes
    # them as they are, and the parameter part slices them)
    if type(x) is not np.ndarray or x.dtype != np.float64:
        x = sim._check_x(x)
    if type(u) is not np.ndarray or u.dtype != np.float64:
        u = sim._check_u(u)
    x, u, d, out, Fx, Fu = sim._state_derivatives(x, u, data, None)
    state = d.contact if sim.contact_model is not None else None
    if state is not None and blocks and getattr(state.adapter, "name", "") not in ("lcp", "ncp", "relaxed"):
        raise NotImplementedError(f"parameter derivatives under the {sim.contact!r} contact model are not "
                                  "implemented (LCP, NCP and relaxed are)")
    q, v = x[:nq], x[nq:]
    v_next = out[nq:]
    tau = sim._tau(u, d, q, v)  # float64 (u or the workspace's tau): the compiled call copies it
    ws = _workspace(sim)

    Fp = dlam_p = None
    if state is None and blocks.coefficients_only:  # in flight they act on nothing: no call for a zero Fp
        Fp = np.zeros((sim.ndx, npar))
    elif blocks and _core is not None and (state is None or type(state) in _COMPILED_STATES) and blocks.compiled:
        Fp, dlam_p = ws.plan(sim, blocks).compute(None if state is None else state.core, q, v, tau, v_next, sim.dt,
                                                  bool(impulses))
    elif blocks:
        tau = np.array(tau, dtype=float)
        aug = ws.aug(sim, blocks.placements) if blocks.placements else None
        geo_aug = None
        if state is not None and aug is not None and state.m_contact:
            geo_aug = aug.geometry(q, state.geo.contacts)
        Fp, dlam_p = _reference_jacobian(sim, ws, blocks, npar, q, v, tau, v_next, state, aug, geo_aug)

    if params is not None and Fp is None:  # an empty list: no columns, but the same tuple as any list of names
        Fp = np.zeros((sim.ndx, 0))
    result = (out, Fx, Fu) if Fp is None else (out, Fx, Fu, Fp)
    if impulses:
        result = result + (_impulses(sim, d, q, v, tau, v_next, state, blocks, dlam_p, npar, params is not None),)
    return result


def _acceleration_and_forces(sim, ws, q, v, tau, state, aug, geo_aug):
    """``(a, fext)``: the acceleration at ``tau + J^T lambda / dt`` (the impulses as forces; ``tau`` without
    contact) and ``fext()`` = d(J^T lambda / dt)/dq_aug on the augmented model (None without placements in
    contact), what the RNEA derivatives take."""
    dt = sim.dt
    tau_total = tau if state is None else tau + state.J.T @ state.lam / dt
    a = pin.aba(sim._step_model, ws.data, q, v, tau_total).copy()
    lam_c = None if state is None else state.lam[:state.m_contact]

    def fext():
        return None if geo_aug is None else aug.kin.force_derivative(geo_aug, lam_c) / dt

    return a, fext


def _add_placement_contact_terms(dc, blocks, aug, geo_aug, state, v_next, dt):
    """Adds the placements' fixed-impulse terms to ``dc`` (m, npar): the contact velocity ``J v+`` through
    ``J``'s placement derivative (contact rows), the bias through the distances (normal rows; an impact row's
    slope is the state's, 0 across a gap), and on the impact rows the restitution target ``e J_n(q) v`` through
    ``J_n``'s placement derivative at the pre-step velocity ``v`` (:mod:`dynamics.contact_step`, "Restitution":
    the state Jacobians' ``e d(J_n w)/dq`` at ``w = v``, here on the placements' columns)."""
    mc = state.m_contact
    dc[:mc] += _placement_columns(blocks, aug, aug.kin.velocity_derivative(geo_aug, aug.v(v_next)))
    on = state.normal_rows < mc
    nrows, slope = state.normal_rows[on], np.asarray(state.bias_slope)[on]
    dc[nrows] += slope[:, None] / dt * _placement_columns(blocks, aug, geo_aug.J[nrows])
    imp = getattr(state, "impact", None)
    if imp is not None:
        dJv = aug.kin.velocity_derivative(geo_aug, aug.v(imp.v))
        dc[imp.rows] += imp.e[:, None] * _placement_columns(blocks, aug, dJv[imp.rows])


def _reference_jacobian(sim, ws, blocks, npar, q, v, tau, v_next, state, aug, geo_aug):
    """``(Fp, dlambda/dp)`` (dlambda None without contact) in Python: the reference, and the path of the contact
    states the compiled core does not take (the Python path's states; per-pair coefficients, restitution)."""
    nv, ndx, dt = sim.nv, sim.ndx, sim.dt
    model, pdata = sim._step_model, ws.data
    dlam_p = None
    Minv = np.array(pin.computeMinverse(model, pdata, q)).reshape(nv, nv) if state is None else state.Minv
    a, fext = _acceleration_and_forces(sim, ws, q, v, tau, state, aug, geo_aug)
    R = _rnea_derivative(sim, ws, blocks, npar, q, v, a, model, pdata,
                         None if aug is None else aug.model, None if aug is None else aug.data, aug, fext)
    dv_fixed = -dt * (Minv @ R)
    if state is None:
        dv = dv_fixed
    else:
        J = state.J
        dc = J @ dv_fixed
        if geo_aug is not None:
            _add_placement_contact_terms(dc, blocks, aug, geo_aug, state, v_next, dt)
        _restitution_term(sim, state, blocks, dc)
        e, dF = _friction_terms(sim, state, blocks, npar)
        lin = state.adapter.linearize(state.problem, state.solution)
        A = state.problem.A
        dphi = None
        if lin.Fphi is not None and geo_aug is not None:  # the relaxed residual reads phi: dphi/ddelta = J_n
            dphi = np.zeros_like(dc)
            on = state.normal_rows < state.m_contact
            nrows = state.normal_rows[on]
            dphi[nrows] = _placement_columns(blocks, aug, geo_aug.J[nrows])
        dlam_p = _implicit(lin, dc, e, dF, A, dphi)
        dv = dv_fixed + state.MJt @ dlam_p
    Fp = np.empty((ndx, npar))
    Fp[nv:] = dv
    dqp = dt * dv
    corr = None if state is None else state.correction
    if corr is not None:
        dqp = dqp + _correction_derivative(sim, ws, blocks, npar, q, state, corr, aug, geo_aug)
    dq = v_next * dt if corr is None else v_next * dt + corr.dq
    if sim._euclidean:
        Fp[:nv] = dqp
    else:
        Fp[:nv] = pin.dIntegrate(sim.model, q, dq, pin.ArgumentPosition.ARG1) @ dqp
    return Fp, dlam_p


def _correction_derivative(sim, ws, blocks, npar, q, state, corr, aug, geo_aug):
    """``d dq_c/dp`` (nv, npar) of the position correction (module docstring, item 3)."""
    nv = sim.nv
    mc = state.m_contact
    rows = corr.rows
    Jd = state.J[rows]
    on_contacts = rows < mc
    lam_full = np.zeros(mc)
    lam_full[rows[on_contacts]] = corr.lam[on_contacts]

    def fext():
        return None if geo_aug is None else aug.kin.force_derivative(geo_aug, lam_full)

    R0 = _rnea_derivative(sim, ws, blocks, npar, q, np.zeros(nv), corr.dq, ws.model0, ws.data0,
                          None if aug is None else aug.model0, None if aug is None else aug.data0, aug, fext)
    D = -(state.Minv @ R0)
    rhs = -(Jd @ D)
    if geo_aug is not None:
        K = aug.kin.velocity_derivative(geo_aug, aug.v(corr.dq))
        cm = sim.contact_model
        crow = rows[on_contacts]
        rhs[on_contacts] -= _placement_columns(blocks, aug, K[crow])
        # de = -erp dphi_d/dp on the deep contact normal rows (phi moves as J_n)
        rhs[on_contacts] -= cm.erp * _placement_columns(blocks, aug, geo_aug.J[crow])
    dlam = np.linalg.lstsq(corr.A, rhs, rcond=RANK_RTOL)[0]
    return D + corr.W @ dlam


def _impulses(sim, d, q, v, tau, v_next, state, blocks, dlam_p, npar, with_params) -> StepImpulses:
    """The impulses and their Jacobians (the state/control columns by the reference path's ``dv_fixed``);
    ``dlam_dp`` (m, npar) whenever ``params`` were given (an empty list too: m x 0), else None."""
    nv, dt, ndx, nu = sim.nv, sim.dt, sim.ndx, sim.nu
    cm = sim.contact_model
    rows = cm.rows if cm is not None else 0
    if state is None:
        z = np.zeros(0)
        return StepImpulses(z, np.zeros((0, ndx)), np.zeros((0, nu)), np.zeros((0, npar)) if with_params else None,
                            0, rows)
    tau_total = tau + state.J.T @ state.lam / dt
    ddq_dq, ddq_dv, minv = pin.computeABADerivatives(sim._step_model, _workspace(sim).data, q, v, tau_total)
    dv_fixed = np.empty((nv, ndx + nu))
    dv_fixed[:, :nv] = dt * ddq_dq
    if state.geo is not None:
        dv_fixed[:, :nv] += minv @ cm.kin.force_derivative(state.geo, state.lam[:state.m_contact])
    dv_fixed[:, nv:2 * nv] = dt * ddq_dv + np.eye(nv)
    dv_fixed[:, 2 * nv:] = dt * minv[:, sim.actuated_dofs]
    if sim._passive:
        sim._add_passive_jacobian(dv_fixed, minv)
    lin, dc, dphi = cm._linearized(state, dv_fixed, v_next, dt)
    dlam = lambda_jacobian(lin, dc, dphi)
    nc = state.m_contact // rows if rows else 0
    if dlam_p is None and with_params:
        dlam_p = np.zeros((len(state.lam), npar))
    return StepImpulses(state.lam.copy(), dlam[:, :ndx].copy(), dlam[:, ndx:].copy(),
                        None if dlam_p is None else dlam_p.copy(), nc, rows)
