"""The differentiable simulator: one time step of an articulated rigid-body system and its Jacobians.

Notation (shared with ``trajopt``): ``q`` (nq) configuration, ``v`` (nv) velocity,
``x = concat(q, v)`` (nx = nq + nv), ``u`` (nu) actuated controls with
``tau = B u`` (B: nv x nu selection), tangent-space increments ``dx`` (ndx = 2 nv).

One step, semi-implicit Euler::

    v+ = v + dt * ABA(q, v, B u)
    q+ = q (+) dt * v+                      (Lie-group integration, pin.integrate)

(the default ``integrator="euler"``; ``"bdf1"``/``"bdf2"``, the implicit steps for stiff springs and
dampers without contact, are in :mod:`dynamics.integrators`).

Joint viscous damping ``D = diag(d)`` is integrated implicitly (``damping="implicit"``, the
default), as MuJoCo's Euler integrator does::

    (M(q) + dt D) (v+ - v) = dt (B u + tau_spring - D v - b(q, v)) (+ J^T lambda with contact)

Stable for any ``d >= 0`` (one damped joint: ``v_k = v_0 / (1 + dt d / I)^k``, monotone);
explicit damping (``v+ = v + dt M^-1 (... - D v)``) diverges once ``d dt / I > 2``. It is
exact with Pinocchio's armature: the step uses a copy of the model whose armature is the
model's own plus ``dt d``, so ``ABA`` of that copy at ``tau - D v`` is the left-hand side's
solve, and ``computeMinverse`` / ``computeABADerivatives`` of the copy give the contact
Delassus operator ``J (M + dt D)^-1 J^T`` and the exact Jacobians (``d (M + dt D)^-1/dq`` is
``dM^-1/dq``'s, since ``dt D`` is constant). Without damping the copy is the model itself.

Jacobians ``Fx = d x+ / d x`` (ndx x ndx) and ``Fu = d x+ / d u`` (ndx x nu) are in
the tangent space: a perturbation ``dx`` of ``x`` means ``x (+) dx`` and the
output perturbation is ``difference(x+, x+')`` (pin.integrate / pin.difference
conventions), so free-flyer bases work. They come from
``pin.computeABADerivatives`` and ``pin.dIntegrate``; no finite differences.

With the compiled core and hard LCP or NCP contact, relaxed contact (or none), :meth:`Simulator.step` and :meth:`Simulator.rollout`'s
loop run whole steps in one C++ call each (``cpp/src/fused_step.cpp``: input checks, ``B u`` and the passive
torques, ABA, the fused contact solve, the integration with the position correction, the state bounds), bit
for bit the Python path's (``Simulator._step``, the reference; tests/test_core_step.py); a step that would
raise, or that the collision detector hands back, runs on the Python path, which raises its own errors.
:meth:`Simulator.step_derivatives` (without ``adjoint``/``params``) and the loop of ``rollout_derivatives`` /
``knot_derivatives`` run the step and all its Jacobians in one C++ call per knot the same way
(``FusedStep.step_derivatives``: the velocity Jacobian through the contact solve, the passive terms, the position
correction's Jacobian, dIntegrate's chain); the states are bit for bit, the Jacobians too on Euclidean models
without a position correction, else equal to round-off (Eigen's products where numpy's BLAS ran, ~1e-16).

Model and data are apart: a :class:`Simulator` describes the system; a
:class:`SimData` (``sim.create_data()``) is the workspace that holds Pinocchio's
``Data`` and buffers. One simulator serves every knot of a horizon; pass a knot's
workspace as ``data=`` to keep knots apart, or let the simulator use its own.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
import pinocchio as pin

from .contact_step import MAX_FRICTION, FusedContactState
from .robots import load_urdf_geometry

_BIG = 1e300  # Pinocchio stores "no limit" as DBL_MAX; anything above this means unbounded


class SimulationError(RuntimeError):
    """A step produced a non-finite state (the simulation diverged).

    ``xs`` holds the states computed before the failure (for a rollout), so a
    caller can still inspect or save what it had.
    """

    def __init__(self, message: str, xs: np.ndarray | None = None):
        super().__init__(message)
        self.xs = xs


class ModelError(ValueError):
    """A model or a simulator option that cannot give physical results (see :func:`validate_model`).

    The message names the link or joint and the offending value, and what is allowed.
    """


#: Relative tolerance of the inertia checks (symmetry, positive semi-definiteness, triangle
#: inequality), on the scale of the largest principal moment.
INERTIA_RTOL = 1e-6
#: The joint-space inertia matrix at the reference configuration is singular when its smallest
#: eigenvalue is below this fraction of its largest (about 1000 machine epsilons).
SINGULAR_RTOL = 1e3 * np.finfo(float).eps
#: The farthest a joint may sit from its parent joint (m): 10 km, far beyond any robot, where positions still
#: resolve ~2e-12 m (a 1e100 m placement, which ``with_parameters`` took, overflowed the step's Jacobians).
MAX_JOINT_OFFSET = 1e4


def _parameters():
    """The module :mod:`dynamics.parameters` (it imports this one: imported on first use, then an attribute
    read; an import statement per ``step_derivatives(params=...)`` call cost ~0.4 us)."""
    global _PARAMETERS
    if _PARAMETERS is None:
        from . import parameters

        _PARAMETERS = parameters
    return _PARAMETERS


_PARAMETERS = None


def _link_name(model: pin.Model, j: int) -> str:
    """``link 'name' (joint 'jname')`` for joint ``j``: the first body frame carried by the joint."""
    for f in model.frames:
        if f.parentJoint == j and f.type == pin.FrameType.BODY:
            return f"link {f.name!r} (joint {model.names[j]!r})"
    return f"joint {model.names[j]!r}"


_F64 = np.dtype(np.float64)
#: what an object array may hold that NumPy would take for a number (NaN, a parse, a real part): as_numbers refuses it
_NOT_NUMBERS = (str, bytes, type(None), complex, np.complexfloating, bool, np.bool_)


def as_numbers(value) -> np.ndarray:
    """``value`` as a float array; TypeError for None, text (a string, bytes, an array of strings), booleans and
    complex numbers, which NumPy would read as NaN, parse, take as 0/1 or cut to their real part; ValueError for an
    integer past float's range, and ValueError or TypeError from NumPy for anything else that is no array of
    numbers."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(type(value).__name__)
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    if value.dtype.kind in "USVcb" or (value.dtype.kind == "O" and any(isinstance(e, _NOT_NUMBERS) for e in value.flat)):
        raise TypeError(f"elements of type {value.dtype}" if value.dtype.kind != "O" else
                        "text, None, bool or complex elements")
    try:
        return np.asarray(value, dtype=float)
    except OverflowError:  # an int past float's range (10**400): NumPy's bare OverflowError named nothing
        raise ValueError("a number beyond float's range") from None


def _float_array(value, what: str, shape: str) -> np.ndarray:
    """``value`` as a float array; ValueError naming ``what`` (and its expected ``shape``) when it is no array of
    numbers (None, a string, a dict...), rather than NumPy's own message."""
    try:
        return as_numbers(value)
    except (TypeError, ValueError) as exc:
        why = str(exc)
    raise ValueError(f"{what} must be an array of numbers of shape {shape}, got {value!r:.80} ({why})")


def _finite_vector(value, what: str, n: int) -> np.ndarray:
    """``value`` as a float vector of ``n`` finite numbers; ValueError naming ``what`` (its shape, or the indices
    of its NaN or infinite entries) otherwise. The state-space utilities' check: no unit-norm test (a solver may
    hand them a guess between two states), which :meth:`Simulator._check_x` adds for steps."""
    x = _vector(value, what, n)
    _check_finite(x, what)
    return x


def _vector(value, what: str, n: int) -> np.ndarray:
    """:func:`_finite_vector` without the finiteness test, which the hot utilities (``state_difference`` in DDP's
    line search and the state costs, per knot and trial) make once on their result (:func:`_finite_result`): a
    float64 vector of the right size is taken as it is (0.2 us; the whole check cost 5 us a call, a catapult
    step 24 us)."""
    if type(value) is np.ndarray and value.dtype is _F64 and value.shape == (n,):
        return value
    x = _float_array(value, what, f"({n},)")
    if x.shape != (n,):
        raise ValueError(f"{what} has shape {x.shape}, expected ({n},)")
    return x


def _finite_result(out: np.ndarray, *named) -> np.ndarray:
    """``out`` (a vector) when it is finite, else the ValueError of the first input of ``named`` (``(array, what)``
    pairs) that holds a NaN or an infinity; ``out`` too when none does (a square norm that overflowed on large
    entries). For results that read every input entry (the Jacobians read no velocity: :func:`_finite_inputs`)."""
    if not math.isfinite(out @ out):
        _finite_inputs(*named)
    return out


def _finite_inputs(*named) -> None:
    """:func:`_check_finite` on each ``(array, what)`` of ``named`` after one square-norm test of them all."""
    if not math.isfinite(sum(x @ x for x, _ in named)):
        for x, what in named:
            _check_finite(x, what)


def _check_finite(x: np.ndarray, what: str) -> None:
    """ValueError naming ``what`` and the indices of its NaN or infinite entries, if any (a sum or a square norm
    that overflows on large finite entries is no such entry)."""
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"{what} contains non-finite values at indices {bad.tolist()}")


def dof_joints(model: pin.Model) -> list[int]:
    """The joint id of each velocity coordinate (nv entries; Python ints, which Pinocchio's name lists take)."""
    return [j for j in range(1, model.njoints) for _ in range(model.joints[j].nv)]


def validate_model(model: pin.Model) -> None:
    """Raise :class:`ModelError` if ``model`` cannot be simulated; return None otherwise.

    Checks, for every joint but the universe (the masses and inertias are those of the
    body each joint carries, fixed links merged in, as Pinocchio stores them):

    * mass finite and ``>= 0``; a mass of 0 is allowed (massless intermediate links, as in
      MJCF bodies with several joints) as long as something with mass moves with the joint
      (its subtree's total mass is positive), since otherwise the joint has no inertia;
    * centre of mass finite and at most :data:`MAX_JOINT_OFFSET` from its joint; rotational
      inertia (about the centre of mass) finite, symmetric and positive semi-definite, and its
      principal moments obey the triangle inequality
      ``I_a <= I_b + I_c`` (true of every real mass distribution), all to the relative
      tolerance :data:`INERTIA_RTOL` of the largest moment. A zero moment (a point mass, a
      rod) is allowed here; whether the whole model is singular is checked next;
    * the joint-space inertia matrix ``M(q0)`` at the neutral configuration clamped into the
      limits is positive definite (smallest eigenvalue above :data:`SINGULAR_RTOL` times the
      largest); otherwise the error names the joint that dominates the singular direction;
    * position limits not NaN and not crossed (``lower <= upper``);
    * joint placements finite, each at most :data:`MAX_JOINT_OFFSET` from its parent joint;
    * joint names unique (controls, limits and parameters are named by them).
    """
    seen = {}
    for j in range(1, model.njoints):
        if model.names[j] in seen:
            raise ModelError(f"joints {seen[model.names[j]]} and {j} are both named {model.names[j]!r}: joint names "
                             "must be unique (actuated joints, limits and parameters are named by them)")
        seen[model.names[j]] = j
    lo, hi = np.asarray(model.lowerPositionLimit), np.asarray(model.upperPositionLimit)
    for j in range(1, model.njoints):
        M = model.jointPlacements[j]
        if not np.isfinite(M.homogeneous).all():
            raise ModelError(f"joint {model.names[j]!r} has a non-finite placement in its parent:\n{M}")
        offset = float(np.linalg.norm(M.translation))
        if offset > MAX_JOINT_OFFSET:
            raise ModelError(f"joint {model.names[j]!r} is placed {offset:.6g} m from its parent joint; at most "
                             f"{MAX_JOINT_OFFSET:g} m is simulated (beyond it the step's floating-point arithmetic "
                             "loses its digits and its Jacobians overflow)")
        jm = model.joints[j]
        sl = slice(jm.idx_q, jm.idx_q + jm.nq)
        if np.isnan(lo[sl]).any() or np.isnan(hi[sl]).any():
            raise ModelError(f"joint {model.names[j]!r} has NaN position limits: lower {lo[sl]}, upper {hi[sl]}")
        if (lo[sl] > hi[sl]).any():
            raise ModelError(f"joint {model.names[j]!r} has crossed position limits: lower {lo[sl]} > upper "
                             f"{hi[sl]} (lower must be <= upper)")
    for j in range(1, model.njoints):
        I = model.inertias[j]
        m, c, Ic = float(I.mass), np.asarray(I.lever), np.asarray(I.inertia)
        where = _link_name(model, j)
        if not math.isfinite(m) or m < 0:
            raise ModelError(f"{where} has mass {m!r}; a mass must be finite and >= 0 kg")
        if not (np.isfinite(c).all() and np.isfinite(Ic).all()):
            raise ModelError(f"{where} has a non-finite centre of mass {c} or inertia {Ic.tolist()}")
        if math.hypot(*c) > MAX_JOINT_OFFSET:  # hypot: no overflow on a huge COM
            raise ModelError(f"{where} has its centre of mass {math.hypot(*c):.6g} m from its joint; at "
                             f"most {MAX_JOINT_OFFSET:g} m is simulated (as for a joint's placement)")
        # Relative to the largest moment, or to the mass at a 1 mm radius of gyration when that is larger:
        # a point mass's inertia, summed from merged links, comes out as round-off (icub: -5.4e-20 kg m^2).
        scale = max(float(np.abs(Ic).max()), m * 1e-6, 1e-300)
        if np.abs(Ic - Ic.T).max() > INERTIA_RTOL * scale:
            raise ModelError(f"{where} has a non-symmetric inertia {Ic.tolist()}")
        moments = np.linalg.eigvalsh(Ic)
        if moments[0] < -INERTIA_RTOL * scale:
            raise ModelError(f"{where} has an inertia that is not positive semi-definite: principal moments "
                             f"{moments.tolist()} (kg m^2) must be >= 0")
        a, b, cc = moments
        if cc > (a + b) * (1 + INERTIA_RTOL) + INERTIA_RTOL * scale:
            raise ModelError(f"{where} has principal moments of inertia {moments.tolist()} (kg m^2) that violate "
                             f"the triangle inequality ({cc:.6g} > {a:.6g} + {b:.6g}): no mass distribution has them")
    total = [0.0] * model.njoints
    for j in range(model.njoints - 1, 0, -1):
        total[j] += float(model.inertias[j].mass)
        total[model.parents[j]] += total[j]
    for j in range(1, model.njoints):
        if model.joints[j].nv and total[j] <= 0.0:
            raise ModelError(f"{_link_name(model, j)} has mass {model.inertias[j].mass!r} and carries no body with "
                             "mass: the joint has no inertia (give the link or one of its children a mass > 0)")
    if model.nv == 0:
        return
    q0 = np.clip(pin.neutral(model), lo, hi)
    M = pin.crba(model, model.createData(), q0).copy()
    M = 0.5 * (M + M.T)
    if not np.isfinite(M).all():
        raise ModelError("the joint-space inertia matrix at the neutral configuration is not finite")
    w, V = np.linalg.eigh(M)
    if w[0] <= SINGULAR_RTOL * max(w[-1], 1e-300):
        j = dof_joints(model)[int(np.argmax(np.abs(V[:, 0])))]
        raise ModelError(f"the mass matrix is singular at the neutral configuration (smallest eigenvalue {w[0]:.3g}, "
                         f"largest {w[-1]:.3g}) along the motion of joint {model.names[j]!r}: a link it moves has "
                         "no mass or a zero moment of inertia about the joint axis (a point mass on a free or "
                         f"spherical joint), or the masses and inertias span more than {1 / SINGULAR_RTOL:.2g} "
                         "times (e.g. a mass far larger than a rotational inertia, or one link far heavier than "
                         "another)")


def _real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _check_options(model, geometry, *, dt, ground, friction, margin, planar) -> None:
    """The :class:`Simulator` options that :func:`validate_model` does not see; :class:`ModelError`."""
    if not (_real(dt) and math.isfinite(dt) and dt > 0):
        raise ModelError(f"dt must be a positive finite number of seconds, got {dt!r}")
    if ground is not None:
        if not (_real(ground) and math.isfinite(ground)):
            raise ModelError(f"ground must be a finite height (m) or None, got {ground!r}")
        if geometry is None or geometry.ngeoms == 0:
            raise ModelError(f"ground={ground!r} was given but model {model.name!r} has no collision geometry, so "
                             "nothing could touch it (load the geometry, or add collision shapes)")
    if not isinstance(friction, Mapping) and not (_real(friction) and 0 <= friction <= MAX_FRICTION):  # NaN fails
        raise ModelError(f"friction must be a coefficient in [0, {MAX_FRICTION:g}] (or a mapping per collision pair; "
                         f"larger ones lose the contact solve's precision silently), got {friction!r}")
    if not (_real(margin) and math.isfinite(margin) and margin >= 0):
        raise ModelError(f"margin must be a finite distance >= 0 (m), got {margin!r}")
    if planar:
        check_planar(model)


def _penalty_parameters(contact, **values):
    """The compliant model's parameters (``contact="penalty"``; None: the defaults of
    :mod:`contact.penalty`), checked; None for the other models, which refuse them."""
    if contact == "penalty":
        from contact.penalty import PenaltyParameters

        return PenaltyParameters.checked(**values)
    given = [f"contact_{k}" for k, v in values.items() if v is not None]
    if given:
        raise ValueError(f"{', '.join(given)} apply to contact='penalty' only, not contact={contact!r}")
    return None


def check_planar(model: pin.Model, *, samples: int = 3, seed: int = 0) -> None:
    """Raise :class:`ModelError` unless every body of ``model`` moves in the xy plane.

    ``planar=True`` keeps one friction direction per contact (``t = z x n``), which is right
    only if no point of any body can move along z. In the world frame that means, for every
    joint's Jacobian, a zero linear-z row and zero angular-x and -y rows (rotations about z
    only). Checked at the neutral configuration and ``samples`` random ones (seeded) to
    ``1e-9`` of the Jacobian's scale; the error names the first joint that leaves the plane.
    """
    rng = np.random.default_rng(seed)
    data = model.createData()
    q0 = pin.neutral(model)
    for k in range(samples + 1):
        q = q0 if k == 0 else pin.integrate(model, q0, rng.uniform(-1.0, 1.0, model.nv))
        pin.computeJointJacobians(model, data, q)
        for j in range(1, model.njoints):
            Jw = pin.getJointJacobian(model, data, j, pin.ReferenceFrame.WORLD)
            scale = max(1.0, float(np.abs(Jw).max()))
            off = np.abs(Jw[[2, 3, 4]]).max(initial=0.0)
            if off > 1e-9 * scale:
                raise ModelError(f"planar=True, but joint {model.names[j]!r} moves its body out of the xy plane "
                                 f"(velocity along z or rotation about x/y up to {off:.3g} per unit joint speed); "
                                 "planar scenes must move in the xy plane (z is dropped). Use planar=False.")


#: The parts of q that live on a unit sphere, by joint type: (offset in the joint's q, size, what it is).
_UNIT_PARTS = {
    "JointModelFreeFlyer": (3, 4, "quaternion"),
    "JointModelSpherical": (0, 4, "quaternion"),
    "JointModelPlanar": (2, 2, "unit complex (cos, sin)"),
    "JointModelRUBX": (0, 2, "unit complex (cos, sin)"),
    "JointModelRUBY": (0, 2, "unit complex (cos, sin)"),
    "JointModelRUBZ": (0, 2, "unit complex (cos, sin)"),
    "JointModelRevoluteUnboundedUnaligned": (0, 2, "unit complex (cos, sin)"),
}
#: Largest accepted ``| |quaternion| - 1 |`` in a state (see ``Simulator.normalize_state``).
UNIT_TOL = 1e-6


def _unit_blocks(model: pin.Model) -> list[tuple[str, int, int, str]]:
    """``(joint name, first q index, size, what)`` of every unit-norm part of q."""
    out = []
    for j in range(1, model.njoints):
        part = _UNIT_PARTS.get(model.joints[j].shortname())
        if part is not None:
            off, n, what = part
            out.append((model.names[j], model.joints[j].idx_q + off, n, what))
    return out


class SimData:
    """Per-knot workspace of a :class:`Simulator`: Pinocchio ``Data`` and buffers.

    Solvers never look inside; they pass it back to the simulator that made it.
    """

    __slots__ = ("pin", "tau", "geom", "contact", "stats", "kept", "layout", "owner")

    def __init__(self, sim: "Simulator"):
        self.pin = sim._step_model.createData()
        self.tau = np.zeros(sim.nv)
        cm = sim.contact_model
        self.geom = cm.scene.create_data() if cm is not None else None
        #: what Simulator._workspace checks of another simulator's workspace (velocities, joints, contact or none,
        #: speculative margins) before adopting it
        self.layout = (sim.nv, sim.model.njoints, cm is None, cm is not None and cm.scene.speculative)
        self.contact = None  # ContactState of the last step
        # steps with contact, steps with a warm-start guess, guesses that held, complementarity-aware
        # reclassifications, Jacobians that reused a kept contact solve instead of solving again
        self.stats = {"contact_steps": 0, "guesses": 0, "warm_hits": 0, "aware_switches": 0, "reused": 0}
        # the contact solves of the last Simulator.KEPT_SOLVES steps: (x, u) bytes -> (v+, ContactState or None)
        self.kept = OrderedDict()
        #: the simulator whose steps the contact state and the kept solves are (Simulator._workspace)
        self.owner = sim._owner_token


class Simulator:
    """A rigid-body system stepped with semi-implicit Euler (or BDF1/BDF2), with analytical step Jacobians.

    Parameters
    ----------
    model:
        A ``pinocchio.Model`` (built in code, e.g. with :class:`dynamics.ModelBuilder`,
        or loaded by :meth:`from_urdf` / :meth:`from_mjcf`).
    geometry:
        Its collision ``pinocchio.GeometryModel`` (optional; used by contact).
    dt:
        Time step in seconds.
    actuated:
        Names of the actuated joints, in order; their velocity coordinates form
        ``u``. Default: every joint except a free-flyer base.
    torque_limits:
        Symmetric bound on ``|u|`` (scalar or one per control), or ``(nu, 2)``
        ``(lower, upper)`` pairs (an MJCF ``ctrlrange``). Default: the model's
        effort limits (from the URDF), ``inf`` where none is given.
        The step does not clip; solvers read ``u_lower``/``u_upper`` as bounds.
    name:
        A label for messages and plots (default: the model's name).
    ground:
        Height of a ground half-space (its normal is "up", opposite to gravity).
    friction:
        Coulomb friction coefficient ``mu >= 0`` of every contact, or per collision pair as ``restitution``
        takes it: a mapping ``{(objectA, objectB): mu}`` over collision-object names (either order; ``"ground"``
        is the ground half-space) with an optional ``"default"`` entry for the pairs it does not list (without
        one every colliding pair must be listed). Each contact takes its pair's ``mu`` in every contact model
        (LCP, NCP, relaxed, penalty); the Jacobians keep their structure. ``sim.friction`` is the one number
        (or the mapping's ``"default"``, None without one). With friction per pair the Python contact step
        runs (the fused compiled LCP step takes one ``mu``). Parameters: ``"friction"`` (the number, or the
        default) and ``"friction:<objectA>|<objectB>"`` per listed pair (:mod:`dynamics.parameters`).
    contact:
        Contact model: ``"lcp"`` (boxed LCP with a friction pyramid, Nimble),
        ``"ncp"`` (Coulomb cone, De Saxce) -- see :mod:`dynamics.contact_step` --,
        ``"relaxed"`` (the cone on its central path, ``smoothing > 0`` required) or ``"penalty"``
        (compliant: a smooth spring-damper and regularized friction, :mod:`contact.penalty`).
    smoothing:
        ``kappa >= 0`` (J): relax complementarity to ``lambda_n c_n = kappa`` (and the
        friction bounds by a barrier), so contacts act at a distance, ``~kappa / phi``,
        and every gradient sees them (:mod:`contact.relaxed`). 0 (default) is hard
        contact. ``with_smoothing(kappa)`` gives the same system at another kappa.
    smoothing_distance:
        With ``smoothing > 0``: pairs closer than this (m) feel the relaxed force,
        which fades smoothly to zero at that distance.
    planar:
        The system moves in the xy plane: one friction direction per contact.
    margin:
        Contacts closer than this (m) enter the step as speculative contacts.
    speculative:
        Each collision pair's margin grows with its bodies' motion: ``max(margin, d_A + d_B)``, ``d``
        a bound on how far a body's points move along the step's path at the free velocity (its
        twist at ``q``, and a second-order term for a chain's links, whose paths curve:
        :meth:`contact.detection.CollisionScene._margins`), then at the larger of it and ``v+``
        while the contact impulses grow some margin and bring a new contact (a struck ball; at most
        two more solves), so a pair that can close its gap within the step is in the contact
        problem before it does (a gripper striking the ground at 17 m/s with dt = 2 ms). Without it (default), points faster than ``margin / dt`` (5 m/s at the
        defaults) cross the margin in one step and start the next inside, where the penetration
        correction takes them out over several steps. The step's constraints stay linear in ``v+``: a
        link turning 0.2 rad in one step can still end a few mm inside. Speculative contacts can act early on a
        pair that would have missed: a ball falling past a sphere within ``dt`` of its speed is
        deflected by the sphere's oblique normal (ghost contacts). Hard (and relaxed) contact with
        ``integrator="euler"`` only; a relaxed model's force still fades at
        ``smoothing_distance``; a half-space or plane on a moving body is refused.
    erp:
        Fraction of a penetration deeper than ``slop`` corrected per step.
    recovery:
        ``"position"`` (default): a penetration deeper than ``slop`` is removed by a position-only
        correction that never enters the velocity (split impulse, :mod:`dynamics.contact_step`
        item 5). Bound: per step at most ``erp`` of the excess depth ``depth - slop`` is removed
        (0.2 by default: 5 cm goes in ~28 steps) and no velocity is added beyond the ``slop / dt``
        (0.1 m/s at 1 ms) every contact may separate at; a cube 5 cm in the ground rises to the
        surface and stops. Exact Jacobians through the correction. ``"velocity"``: the former
        push-out, ``erp`` of the depth per step as a velocity that stays (a cube 5 cm deep flies
        3.9 m); kept for scenes tuned with it (the catapult).
    joint_limits:
        Treat finite position limits of 1-dof joints as unilateral constraints.
    exclude_pairs:
        Names of collision-object pairs that never collide.
    self_collision:
        Bodies of the model collide with each other (except those joined by a
        joint). ``from_urdf``/``from_mjcf`` default to False: a robot file's
        links overlap in many places that only an SRDF could sort out.
    collision_pairs:
        Names of the collision-object pairs that collide, instead of the
        ``self_collision`` rule (the ground still collides with every body).
    joint_stiffness, spring_reference, joint_damping:
        Passive joint springs and viscous damping, per velocity coordinate (nv,) or
        one scalar for all: ``tau_p = -k (q - q_ref) - d v`` is added to ``B u`` in the
        step and in its Jacobians (``d tau_p/dq = -k``, ``d tau_p/dv = -d``, through
        ``M^-1``). ``k`` (N m/rad or N/m) and ``d`` (N m s/rad or N s/m) are >= 0;
        a spring needs a joint whose configuration is its velocity's integral
        (revolute, prismatic: nq = nv). MJCF ``stiffness``/``springref``/``damping``.
    damping:
        How ``joint_damping`` is integrated. ``"implicit"`` (default): MuJoCo's scheme (its Euler
        integrator, and "implicitfast" for joint damping), ``(M + dt D)(v+ - v) = dt (tau - b - D v)
        + J^T lambda``: contact impulses act through the same ``(M + dt D)^-1``; unconditionally
        stable for any ``d >= 0`` (see the module docstring). ``"explicit"``: ``v+ = v + dt M^-1
        (tau - b - D v)``, stable only while ``d dt / I < 2`` for every damped joint (kept for
        comparison). Both give the same numbers, bit for bit, when no joint is damped.
    restitution:
        Newton's coefficient of restitution ``e`` in [0, 1] (0, the default: inelastic, today's step bit for
        bit). A number for every collision pair, or a mapping ``{(objectA, objectB): e}`` over collision-object
        names (either order; ``"ground"`` is the ground half-space), unlisted pairs 0 (or the mapping's
        ``"default"`` entry). Parameters (with some ``e > 0``): ``"restitution"`` (the number, or the default)
        and ``"restitution:<objectA>|<objectB>"`` per listed pair, exact ``Fp`` (:mod:`dynamics.parameters`). An impact
        (a contact approaching faster than ``restitution_threshold`` whose free motion reaches the surface
        within the step) leaves with ``c_n >= -e c_n^-``, ``c_n^-`` its pre-step normal velocity; exact
        Jacobians (``dv+/dv = -e`` along a ball's bouncing normal). Friction acts during the impact as in any
        contact step (Nimble). Joint limits never bounce. With ``e > 0`` on any pair the Python contact step
        runs (the fused compiled LCP step does not know restitution). See :mod:`dynamics.contact_step`.
    restitution_threshold:
        Slower impacts (m/s of approach) are inelastic (default 0.1: above what resting contact produces,
        ``g dt`` per step and ``slop / dt``; a 0.1 m/s bounce rises 0.5 mm). A finite speed >= 0.
    contact_stiffness, contact_damping, contact_width, contact_slip_velocity:
        With ``contact="penalty"`` (compliant contact, :mod:`contact.penalty`): the spring ``k`` (N/m per
        contact point, default 2500: a 1 kg cube sinks ~1 mm on its 4 corners), the damping ``d`` (N s/m,
        default 50), the smoothing width ``w`` (m, default 1e-3: the force starts, C^1, at a gap of ``w``)
        and the friction's slip-velocity scale ``v_s`` (m/s, default 1e-3). None: the default. Stable while
        ``dt < 2 sqrt(m_eff / k)`` for every contact's effective mass. Other models refuse them.
    integrator:
        ``"euler"`` (default): semi-implicit Euler, the step above. ``"bdf1"`` (backward Euler) or ``"bdf2"``
        (DiffHand/RedMax's BDF2): the implicit step, solved by Newton with the exact Jacobian of the smooth
        dynamics and differentiated implicitly; springs, damping and all other forces at the new state, so
        stiff joint springs and dampers stay stable at any ``dt`` (:mod:`dynamics.integrators`). BDF2 is a
        two-step method: ``step``/``step_derivatives`` need ``previous=x_prev`` (``step_derivatives`` then
        returns ``(x+, Fx, Fu, Fprev)``); ``rollout`` starts with one BDF1 step; ``rollout_derivatives``,
        ``knot_derivatives`` and the solvers refuse it (take ``"bdf1"``). Contact: compliant only
        (``contact="penalty"``, its forces at the new state inside the Newton solve, exact Jacobians; DiffHand's
        combination); hard contact (LCP, NCP, relaxed) with BDF raises ValueError at construction (use
        ``"euler"`` with it, or ``contact="penalty"``), as do ``damping="explicit"``, complementarity-aware
        Jacobians and ``params=``/``impulses=`` with BDF. ``sim.contacts`` is not reported for BDF steps.

    Contact is active when the model has collision pairs (geometry of two bodies
    not joined by a joint, or anything against ``ground``) or joint limits.

    The model and options are checked at construction (:func:`validate_model`; bad values raise
    :class:`ModelError` naming the link, joint or option). A step raises :class:`SimulationError`
    when it produces a state beyond :attr:`MAX_VELOCITY` (any velocity coordinate, m/s or rad/s)
    or :attr:`MAX_POSITION` (any configuration coordinate, m or rad), a non-finite one, or when
    the contact solve fails (raises or returns non-finite impulses); ``rollout`` names the step. A state given
    beyond those bounds is refused before any work (ValueError naming the coordinate).
    The bounds are far above anything physical for robots, and far below the 1e50 a
    near-singular model reaches before its numbers overflow.
    """

    #: Largest accepted |v| of any velocity coordinate, given or after a step (m/s or rad/s).
    MAX_VELOCITY = 1e4
    #: Largest accepted |q| of any configuration coordinate, given or after a step (m or rad).
    MAX_POSITION = 1e6
    #: Largest accepted friction coefficient (:data:`dynamics.contact_step.MAX_FRICTION`).
    MAX_FRICTION = MAX_FRICTION
    #: How many steps' contact solves a workspace keeps (oldest dropped first), so that the Jacobians of a
    #: step just taken (``step_derivatives`` at the same ``x``, ``u``, bit for bit) skip its collision
    #: detection and contact solve. A solver's accepted rollout is its last one and its Jacobians follow
    #: it, so one horizon is enough: 512 covers the longest registered one (500 steps); a longer one
    #: reuses the solves of its last 512 steps. Memory per kept step, measured: catapult 5 KB, Go1
    #: 29 KB, Talos 105 KB (54 MB for 512 steps); 0 keeps none.
    KEPT_SOLVES = 512

    def __init__(
        self,
        model: pin.Model,
        *,
        geometry: pin.GeometryModel | None = None,
        dt: float = 1e-3,
        actuated: Sequence[str] | None = None,
        torque_limits: float | Sequence[float] | None = None,
        name: str | None = None,
        ground: float | None = None,
        friction: float | dict = 1.0,
        contact: str = "lcp",
        planar: bool = False,
        margin: float = 5e-3,
        speculative: bool = False,
        erp: float = 0.2,
        joint_limits: bool = True,
        exclude_pairs: Sequence[tuple[str, str]] | None = None,
        self_collision: bool = True,
        collision_pairs: Sequence[tuple[str, str]] | None = None,
        smoothing: float = 0.0,
        smoothing_distance: float = 0.05,
        recovery: str = "position",
        joint_stiffness: float | Sequence[float] | None = None,
        spring_reference: float | Sequence[float] | None = None,
        joint_damping: float | Sequence[float] | None = None,
        damping: str = "implicit",
        restitution: float | dict = 0.0,
        restitution_threshold: float = 0.1,
        contact_stiffness: float | None = None,
        contact_damping: float | None = None,
        contact_width: float | None = None,
        contact_slip_velocity: float | None = None,
        integrator: str = "euler",
    ):
        if not isinstance(model, pin.Model):
            raise TypeError(f"Simulator needs a pinocchio.Model, got {type(model).__name__}")
        if isinstance(speculative, (bool, np.bool_)) and speculative and (contact == "penalty" or integrator != "euler"):
            raise ValueError(f"speculative=True applies to hard (and relaxed) contact stepped by the euler integrator, "
                             f"not contact={contact!r} with integrator={integrator!r}: a compliant contact's force "
                             "is its penetration's, and the implicit integrators detect without the step's velocity")
        if model.nv == 0:
            raise ValueError("the model has no degrees of freedom")
        _check_options(model, geometry, dt=dt, ground=ground, friction=friction, margin=margin, planar=planar)
        validate_model(model)
        self._options = dict(dt=dt, actuated=actuated, torque_limits=torque_limits, name=name, ground=ground,
                             friction=friction, contact=contact, planar=planar, margin=margin,
                             speculative=speculative, erp=erp,
                             joint_limits=joint_limits, exclude_pairs=exclude_pairs, self_collision=self_collision,
                             collision_pairs=collision_pairs, smoothing=smoothing,
                             smoothing_distance=smoothing_distance, recovery=recovery,
                             joint_stiffness=joint_stiffness, spring_reference=spring_reference,
                             joint_damping=joint_damping, damping=damping, restitution=restitution,
                             restitution_threshold=restitution_threshold, contact_stiffness=contact_stiffness,
                             contact_damping=contact_damping, contact_width=contact_width,
                             contact_slip_velocity=contact_slip_velocity, integrator=integrator)
        penalty = _penalty_parameters(contact, stiffness=contact_stiffness, damping=contact_damping,
                                      width=contact_width, slip_velocity=contact_slip_velocity)
        self.model = model
        self.geometry = geometry
        self.dt = float(dt)
        self.name = name or model.name or "model"
        self.nq, self.nv = model.nq, model.nv
        self.nx, self.ndx = model.nq + model.nv, 2 * model.nv

        self.actuated_joints = self._select_actuated(actuated)
        idx = []
        for jname in self.actuated_joints:
            j = model.joints[model.getJointId(jname)]
            idx.extend(range(j.idx_v, j.idx_v + j.nv))
        self.actuated_dofs = np.asarray(idx, dtype=np.intp)
        self.nu = len(idx)
        self.B = np.zeros((self.nv, self.nu))
        self.B[self.actuated_dofs, np.arange(self.nu)] = 1.0
        self.u_lower, self.u_upper = self._torque_limits(torque_limits)
        self._passive_setup(joint_stiffness, spring_reference, joint_damping)
        if damping not in ("implicit", "explicit"):
            raise ValueError(f"damping must be 'implicit' (MuJoCo's scheme, the default) or 'explicit', "
                             f"got {damping!r}")
        self.damping = damping
        #: The model the step runs on: ``model`` itself, or (implicit damping of damped joints) a copy
        #: whose armature is ``model.armature + dt * joint_damping`` (module docstring).
        self._step_model = self._damped_model()

        # Euclidean configuration space (only 1-dof revolute/prismatic-like joints):
        # integrate is q + v and its Jacobians are identities; skip those calls.
        self._euclidean = model.nq == model.nv and all(
            j.nq == j.nv for j in model.joints[1:]
        ) and not any(j.shortname() in ("JointModelFreeFlyer", "JointModelSpherical",
                                        "JointModelPlanar") for j in model.joints[1:])
        self._unit_blocks = _unit_blocks(model)
        self._all_actuated = self.nu == self.nv and np.array_equal(self.actuated_dofs, np.arange(self.nv))

        g = np.asarray(model.gravity.linear, dtype=float)
        up = -g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else np.array([0.0, 0.0, 1.0])
        from .contact_step import ContactModel

        cm = ContactModel(self._step_model, geometry, ground=ground, up=up, friction=friction, margin=margin,
                          planar=planar, erp=erp, joint_limits=joint_limits, exclude=exclude_pairs,
                          contact=contact, self_collision=self_collision, pairs=collision_pairs,
                          smoothing=smoothing, smoothing_distance=smoothing_distance, recovery=recovery,
                          restitution=restitution, restitution_threshold=restitution_threshold,
                          penalty=penalty, dt=self.dt, speculative=speculative)
        self.contact_model = cm if cm.enabled else None
        from .integrators import ImplicitStep, check_integrator

        check_integrator(integrator, contact=cm.enabled, damping=damping, model=contact, compliant=cm.compliant)
        #: ``"euler"`` (semi-implicit, the default), ``"bdf1"`` or ``"bdf2"`` (:mod:`dynamics.integrators`)
        self.integrator = integrator
        self._implicit = None if integrator == "euler" else ImplicitStep(self, integrator)
        self.smoothing = cm.kappa
        self.contact = contact if cm.enabled else "none"
        #: the friction coefficient of every contact, or with friction per pair its ``"default"`` (None: none)
        self.friction = cm.friction
        self._diag_v = np.arange(self.nv)
        # Diagonals of the (dq, dq) and (dv, dv) blocks of a flattened (ndx, ndx) matrix:
        # strided slices cost ~1 us where fancy indexing costs ~4 us.
        n, nv = self.ndx, self.nv
        self._diag_qq = slice(0, nv * n, n + 1)
        self._diag_vv = slice(nv * n + nv, None, n + 1)
        # a workspace's caches belong to the simulator that stepped on it last (Simulator._workspace)
        self._owner_token = object()
        self._data = SimData(self)
        self.mjcf = None  # what an MJCF file said (from_mjcf), else None
        #: The whole step in one compiled call (``cpp/src/fused_step.cpp``: :meth:`step` and :meth:`rollout`'s
        #: loop), or None: the Python path (:meth:`_step`, the reference). It applies with the core, hard LCP,
        #: NCP or relaxed contact on the fused contact solve (``contact_model.fused``) or no contact at all, and neither
        #: ``CONTACTRAJ_NO_FUSED`` nor ``CONTACTRAJ_NO_FUSED_STEP`` set; setting ``contact_model.fused`` to None
        #: turns it off too. Set it to None to run the reference.
        self._fused_step = self._make_fused_step()

    def _make_fused_step(self):
        """The compiled whole (semi-implicit Euler) step (see ``__init__``), or None where it does not apply."""
        if (self._implicit is not None or os.environ.get("CONTACTRAJ_NO_FUSED")
                or os.environ.get("CONTACTRAJ_NO_FUSED_STEP")):
            return None
        cm = self.contact_model
        if cm is None:
            from contact import core

            mod = core.module
        else:
            if cm.fused is None:
                return None
            mod = cm.kin.core
        if mod is None or not hasattr(mod, "FusedStep"):
            return None
        self._fused_lcp = None if cm is None else cm.fused
        limits = [] if cm is None else [[float(iq), float(iv), float(s), float(ref)] for iq, iv, s, ref in cm.limits]
        return mod.FusedStep(
            self._step_model, self.model, self.dt, self.actuated_dofs.astype(np.int64), bool(self._all_actuated),
            self._passive, self._damping, bool(self._damp_dofs.size), self._spring_dofs.astype(np.int64),
            self._spring_q.astype(np.int64), self._stiffness_k, self._spring_ref, self._euclidean,
            [[i, n] for _, i, n, _ in self._unit_blocks], UNIT_TOL, None if cm is None else cm.fused,
            cm is not None, cm is not None and cm.scene.npairs > 0, limits, 0.0 if cm is None else cm.margin,
            float(self.MAX_VELOCITY), float(self.MAX_POSITION), None if cm is None else cm._model0)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_urdf(
        cls,
        path: str | os.PathLike,
        *,
        floating_base: bool = False,
        package_dirs: Sequence[str] | None = None,
        load_geometry: bool = True,
        **kwargs,
    ) -> "Simulator":
        """Load a URDF. ``floating_base=True`` adds a free-flyer root joint.

        Collision geometry is loaded too (``load_geometry``): mesh paths are resolved
        by :func:`dynamics.robots.load_urdf_geometry` (``package_dirs`` first, then
        next to the URDF and up its folders; a missing mesh raises
        ``FileNotFoundError`` naming it and where it was looked for). Meshes collide
        as their convex hulls (see :mod:`contact.detection`). Other keywords go to
        :class:`Simulator`.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"URDF file not found: {path}")
        try:
            if floating_base:
                model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
            else:
                model = pin.buildModelFromUrdf(path)
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"could not parse URDF {path}: {exc}") from exc
        geometry = None
        if load_geometry:
            try:
                geometry = load_urdf_geometry(model, path, package_dirs)
            except (ValueError, RuntimeError) as exc:
                raise FileNotFoundError(
                    f"could not load the collision geometry of {path}: {exc}. Pass package_dirs= (the "
                    "folders that contain the packages named in package:// paths), or load_geometry=False."
                ) from exc
        kwargs.setdefault("self_collision", False)
        return cls(model, geometry=geometry, **kwargs)

    @classmethod
    def from_mjcf(cls, path: str | os.PathLike, *, load_geometry: bool = True, **kwargs) -> "Simulator":
        """Load a MuJoCo MJCF file (a ``<freejoint>`` gives a free-flyer base).

        See :mod:`dynamics.mjcf` for what is read. From the file, unless the keyword
        is given: the actuated joints (``<motor>``, ``<position>``; none without
        actuators, as in MuJoCo) and the bounds of
        ``u`` (``u = gear * ctrl`` for a motor, ``gear * kp * ctrl`` for a position
        servo, whose ``-gear^2 kp q`` is a joint spring), ``ground`` (the height of a
        horizontal worldbody plane), ``joint_stiffness``/``spring_reference``/
        ``joint_damping`` (joint ``stiffness``/``springref``/``damping``, servos
        included). What the file says and the simulation does not represent is
        listed in one warning. The loader's :class:`~dynamics.mjcf.MJCFInfo` is
        kept as ``sim.mjcf``. Other keywords go to :class:`Simulator`.
        """
        from .mjcf import load_mjcf

        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"MJCF file not found: {path}")
        model, geometry, info = load_mjcf(path, load_geometry=load_geometry)
        kwargs.setdefault("self_collision", False)
        if info.ground is not None and load_geometry:
            kwargs.setdefault("ground", info.ground)
        dof_names = [model.names[j] for j in dof_joints(model)]

        def per_dof(table):
            return np.array([table.get(n, 0.0) for n in dof_names])

        if info.stiffness:
            kwargs.setdefault("joint_stiffness", per_dof(info.stiffness))
            kwargs.setdefault("spring_reference", per_dof(info.springref))
        if info.damping:
            kwargs.setdefault("joint_damping", per_dof(info.damping))
        if "actuated" not in kwargs:  # MuJoCo: no actuator, no control
            kwargs["actuated"] = info.actuated
            if "torque_limits" not in kwargs:  # the control ranges, (lower, upper) per control
                nvs = [model.joints[model.getJointId(j)].nv for j in info.actuated]
                kwargs["torque_limits"] = np.array([info.u_range[j] for j, n in zip(info.actuated, nvs)
                                                    for _ in range(n)]).reshape(-1, 2)
        sim = cls(model, geometry=geometry, **kwargs)
        sim.mjcf = info
        return sim

    def _select_actuated(self, actuated):
        model = self.model
        if actuated is None:
            return [model.names[j] for j in range(1, model.njoints)
                    if model.joints[j].nv > 0 and model.joints[j].shortname() != "JointModelFreeFlyer"]
        names = list(actuated)
        for n in names:
            if not isinstance(n, str) or not model.existJointName(n):
                raise ValueError(f"actuated joint {n!r} is not in the model; joints: {list(model.names)[1:]}")
        if len(set(names)) != len(names):
            raise ValueError(f"actuated joints listed twice: {names}")
        return names

    def _torque_limits(self, limits):
        if limits is None:
            hi = np.asarray(self.model.effortLimit, dtype=float)[self.actuated_dofs].copy()
            hi[~(hi < _BIG)] = np.inf
            hi[hi <= 0.0] = np.inf  # URDFs use effort="0" for "not given"
        else:
            hi = np.asarray(limits, dtype=float)
            if hi.ndim == 2:
                if hi.shape != (self.nu, 2):
                    raise ValueError(f"torque_limits has shape {hi.shape}; (lower, upper) pairs need ({self.nu}, 2)")
                if np.isnan(hi).any() or np.any(hi[:, 0] > hi[:, 1]):
                    raise ValueError(f"torque_limits pairs must be (lower, upper) with lower <= upper, got "
                                     f"{hi.tolist()}")
                return hi[:, 0].copy(), hi[:, 1].copy()
            if hi.ndim == 0:
                hi = np.full(self.nu, float(hi))
            if hi.shape != (self.nu,):
                raise ValueError(f"torque_limits has shape {hi.shape}, expected a scalar or ({self.nu},)")
            if np.any(np.isnan(hi)) or np.any(hi <= 0):
                raise ValueError(f"torque_limits must be positive, got {hi}")
            hi = hi.copy()
        return -hi, hi

    # -- relaxed contact ------------------------------------------------------------------
    def with_smoothing(self, kappa: float, *, distance: float | None = None) -> "Simulator":
        """The same system with relaxed contact ``kappa`` (0: hard contact, this simulator's own model:
        ``"relaxed"`` becomes ``"ncp"``). A new simulator; this one is unchanged."""
        opts = dict(self._options, smoothing=kappa)
        if distance is not None:
            opts["smoothing_distance"] = distance
        if opts["contact"] == "relaxed" and not (kappa > 0):
            opts["contact"] = "ncp"
        return Simulator(self.model, geometry=self.geometry, **opts)

    @property
    def hard(self) -> "Simulator":
        """This system with hard contact (itself when its smoothing is 0)."""
        return self if self.smoothing == 0 else self.with_smoothing(0.0)

    @property
    def smoothing_scale(self) -> float:
        """The mean weight (N) of the moving bodies: the unit of the automatic smoothing schedule
        (``kappa = weight x hover distance``, :func:`contact.relaxed.auto_schedule`)."""
        masses = [self.model.inertias[j].mass for j in range(1, self.model.njoints)]
        g = float(np.linalg.norm(self.model.gravity.linear)) or 9.81
        moving = [m for m in masses if m > 0]
        return g * (sum(moving) / len(moving) if moving else 1.0)

    # -- workspaces and input checks --------------------------------------------------
    def create_data(self) -> SimData:
        """A fresh workspace (one per knot when knots must not share buffers)."""
        return SimData(self)

    def _active_fused_step(self):
        """The compiled whole step if it still matches the contact model (None: the Python step; a contact
        model whose fused solve was switched off after construction, e.g. by a test, is no longer it)."""
        fs = self._fused_step
        if fs is None or not (self.contact_model is None or self.contact_model.fused is self._fused_lcp):
            return None
        return fs

    def _workspace(self, data, *, adopt: bool = True) -> SimData:
        """``data`` (None: the simulator's own); a workspace made by another simulator (other sizes,
        contact or none) raises ValueError instead of failing deep inside Pinocchio. One of a simulator of
        the same sizes (``with_parameters``, ``with_smoothing``, other actuated joints or margins) is made anew
        in place for this one (``adopt``; otherwise ValueError): its last contact state carries the other's
        coefficients per row (friction), its kept solves the other's velocities, its collision requests the
        other's margins and its torque buffer the other's controls on joints this one does not actuate."""
        if data is None:
            return self._data
        if getattr(data, "owner", None) is self._owner_token:  # made or adopted here: sizes checked
            return data
        if not isinstance(data, SimData) or data.layout[:3] != self._data.layout[:3]:
            raise ValueError(f"data= is not a workspace of this simulator ({self.name}): make it with "
                             "sim.create_data() on the simulator you step")
        if data.layout[3] != self._data.layout[3]:  # speculative or not: refused as other sizes are
            raise ValueError(f"data= is a workspace of a simulator with{'' if data.layout[3] else 'out'} speculative "
                             f"margins, {self.name} has{'' if self._data.layout[3] else ' none'}: make it with "
                             "sim.create_data() on the simulator you step")
        if not adopt:
            raise ValueError(f"data= was last stepped by another simulator than {self.name} (one of the same sizes: "
                             "with_parameters, with_smoothing...): its contacts are that simulator's; ask it")
        SimData.__init__(data, self)
        return data

    def _check_x(self, x, what="state x"):
        x = _float_array(x, what, f"({self.nx},)")
        if x.shape != (self.nx,):
            raise ValueError(
                f"{what} has shape {x.shape}, expected ({self.nx},) = nq {self.nq} + nv {self.nv} for {self.name}"
            )
        if not math.isfinite(x.sum()):
            _check_finite(x, what)
        self._check_within_bounds(x, what, f": no state of {self.name} to step from")
        for name, i, n, kind in self._unit_blocks:
            part = x[i:i + n]
            norm = math.sqrt(float(part @ part))
            if abs(norm - 1.0) > UNIT_TOL:
                raise ValueError(f"{what}: the {kind} of joint {name!r} (q[{i}:{i + n}] = {part.tolist()}) has norm "
                                 f"{norm:.9g}, not 1 (tolerance {UNIT_TOL:g}); use sim.normalize_state(x)")
        return x

    def _check_within_bounds(self, x, what: str, tail: str = "") -> None:
        """ValueError when the state (or configuration: ``len(x) == nq``) ``x`` has a coordinate beyond
        :attr:`MAX_POSITION` (q, checked first) or :attr:`MAX_VELOCITY` (v), the bounds of every state a step may
        produce: coal's collision detection crashed the process at |q| = 1e160."""
        nq = self.nq
        for part, start, top, bound in ((x[:nq], 0, self.MAX_POSITION, "|q| <= MAX_POSITION = {:g} (m or rad)"),
                                        (x[nq:], nq, self.MAX_VELOCITY, "|v| <= MAX_VELOCITY = {:g} (m/s or rad/s)")):
            a = np.abs(part)
            if a.size and a.max() > top:
                i = start + int(np.argmax(a))
                raise ValueError(f"{what}: {self._coordinate(i)} = {x[i]:.3g} is beyond the bound {bound.format(top)} "
                                 f"of every state a step may produce{tail}")

    def normalize_state(self, x) -> np.ndarray:
        """A copy of ``x`` with every quaternion (free-flyer, spherical) and unit complex number (planar,
        unbounded revolute joints) of q divided by its norm. A zero (or non-finite) one has no direction:
        :class:`ValueError` naming the joint."""
        x = _float_array(x, "state x", f"({self.nx},)").copy()
        if x.shape != (self.nx,):
            raise ValueError(f"state x has shape {x.shape}, expected ({self.nx},) for {self.name}")
        for name, i, n, kind in self._unit_blocks:
            norm = float(np.linalg.norm(x[i:i + n]))
            if not (math.isfinite(norm) and norm > 1e-12):
                raise ValueError(f"the {kind} of joint {name!r} (q[{i}:{i + n}] = {x[i:i + n].tolist()}) has norm "
                                 f"{norm:g}: it cannot be normalized (it encodes no rotation)")
            x[i:i + n] /= norm
        return x

    def _check_u(self, u):
        u = _float_array(u, "control u", f"({self.nu},)")
        if u.shape != (self.nu,):
            if self.nu == 0 and u.size == 0:
                return np.zeros(0)
            raise ValueError(f"control u has shape {u.shape}, expected ({self.nu},) for {self.name} "
                             f"(actuated joints: {self.actuated_joints})")
        if self.nu and not math.isfinite(u.sum()):
            bad = np.flatnonzero(~np.isfinite(u))
            raise ValueError(f"control u contains non-finite values at indices {bad.tolist()}")
        return u

    def _tau(self, u, data, q=None, v=None):
        """``B u``, plus the passive spring and damping torque when ``q``, ``v`` are given."""
        if self._all_actuated:
            tau = u
        else:
            tau = data.tau
            tau[self.actuated_dofs] = u
        if self._passive and q is not None:
            tau = tau - self._damping * v if self._damp_dofs.size else tau.copy()
            tau[self._spring_dofs] -= self._stiffness_k * (q[self._spring_q] - self._spring_ref)
        return tau

    # -- passive joint springs and damping -------------------------------------------------
    def _passive_setup(self, stiffness, reference, damping):
        def per_dof(name, val, nonneg):
            if val is None:
                return np.zeros(self.nv)
            a = np.asarray(val, dtype=float)
            if a.ndim == 0:
                a = np.full(self.nv, float(a))
            if a.shape != (self.nv,):
                raise ValueError(f"{name} has shape {a.shape}, expected a scalar or ({self.nv},) (one per "
                                 f"velocity coordinate: {self.state_names()[self.nx - self.nv:]})")
            bad = ~np.isfinite(a) | ((a < 0) if nonneg else False)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{name}[{i}] = {float(a[i])!r} ({self._dof_joint(i)}) must be finite"
                                 + (" and >= 0" if nonneg else ""))
            return a.copy()

        k = per_dof("joint_stiffness", stiffness, True)
        r = per_dof("spring_reference", reference, False)
        self._damping = per_dof("joint_damping", damping, True)
        dofs = np.flatnonzero(k)
        qidx = []
        joint_of = dof_joints(self.model)
        for i in dofs:
            jid = joint_of[i]
            jm = self.model.joints[jid]
            if jm.nq != jm.nv:
                raise ValueError(f"joint_stiffness[{i}] = {k[i]:g} on joint {self.model.names[jid]!r} "
                                 f"({jm.shortname()}, nq {jm.nq} != nv {jm.nv}): springs need a revolute or "
                                 "prismatic joint")
            qidx.append(jm.idx_q + (i - jm.idx_v))
        self._spring_dofs = dofs
        self._spring_q = np.asarray(qidx, dtype=np.intp)
        self._stiffness_k = k[dofs]
        self._spring_ref = r[dofs]
        self.joint_stiffness, self.spring_reference, self.joint_damping = k, r, self._damping
        self._damp_dofs = np.flatnonzero(self._damping)
        self._passive = bool(dofs.size or self._damp_dofs.size)

    def _dof_joint(self, i):
        return f"joint {self.model.names[dof_joints(self.model)[i]]!r}"

    def _damped_model(self) -> pin.Model:
        """The step's model: with implicit damping of any joint, a copy of ``self.model`` whose armature
        (Pinocchio's rotor inertia, added to the diagonal of M in ABA, CRBA, ``computeMinverse`` and
        ``computeABADerivatives``) is the model's own plus ``dt d``; ``ABA`` of it at ``tau - D v`` is
        ``(M + dt D)^-1 (tau - D v - b)``. Otherwise ``self.model`` itself (no copy: same numbers)."""
        if self.damping == "explicit" or not self._damp_dofs.size:
            return self.model
        m = self.model.copy()
        m.armature = np.asarray(self.model.armature, dtype=float) + self.dt * self._damping
        return m

    def _add_passive_jacobian(self, dv_dqv, minv):
        """``dv+/d(q, v) += dt M^-1 d tau_p/d(q, v)`` for the (nv, >= 2 nv) block ``dv_dqv``; ``minv`` is the
        step model's (``(M + dt D)^-1`` with implicit damping, whose ``-dt (M + dt D)^-1 D`` is the damping's
        share of ``dv+/dv``)."""
        nv, dt = self.nv, self.dt
        if self._spring_dofs.size:
            dv_dqv[:, self._spring_dofs] -= dt * minv[:, self._spring_dofs] * self._stiffness_k
        if self._damp_dofs.size:
            dv_dqv[:, nv + self._damp_dofs] -= dt * minv[:, self._damp_dofs] * self._damping[self._damp_dofs]

    # -- the step -----------------------------------------------------------------------
    def step(self, x, u, *, data: SimData | None = None, previous=None) -> np.ndarray:
        """``x+ = f(x, u)``: one step of the simulator's integrator (semi-implicit Euler by default). Returns
        a new (nx,) array. ``previous``: the state before ``x``, required by ``integrator="bdf2"`` only."""
        if self._implicit is not None:
            prev = self._implicit._previous(previous)
            return self._implicit.step(self._check_x(x), self._check_u(u), prev, self._workspace(data))
        if previous is not None:
            self._implicit_only("previous=")
        d = self._workspace(data)
        fs = self._active_fused_step()
        if fs is not None:
            out = np.empty(self.nx)
            prev = self._fused_previous(d)
            try:
                code, st = fs.step(d.pin, d.geom, x, u, prev, out)
            except TypeError:  # not an array at all (None, a dict...): the checks of the Python path name it
                code = -1
            if code >= 0:  # else (bad or doubtful input, a step that raises, a hand-back): the Python path
                self._fused_bookkeeping(d, x, u, out, code, st)
                return out
        return self._step(self._check_x(x), self._check_u(u), d)

    def _fused_previous(self, d):
        """The previous contact solve of workspace ``d`` as the fused contact solve takes it."""
        c = d.contact
        if c is None:
            return None
        if isinstance(c, FusedContactState):
            return c.core
        return self.contact_model.fused_previous(c)

    def _fused_bookkeeping(self, d, x, u, out, code, st):
        """What :meth:`_step` does to workspace ``d`` besides the numbers, after a compiled step of ``code``
        (``FusedStep.step``: 0 no contact model, 1 nothing near, 2 a contact solve ran, ``st`` its state)."""
        if code == 2:
            state = self.contact_model.fused_state(st)
            self._record_contact(d, state)
            self._keep(d, x, u, out[self.nq:], state)
        elif code == 1:
            d.contact = None

    @staticmethod
    def _record_contact(d, state):
        """Workspace ``d`` after a contact solve of ``state`` (None: no rows): its contact and its counters."""
        d.contact = state
        if state is not None:
            stats = d.stats
            stats["contact_steps"] += 1
            stats["guesses"] += state.guessed
            stats["warm_hits"] += state.warm_hit

    def _keep(self, d, x, u, v_next, state):
        """Keep the contact solve of step ``(x, u)`` (``v+`` copied) for its Jacobians (:attr:`KEPT_SOLVES`)."""
        kept = d.kept
        kept[x.tobytes() + u.tobytes()] = (v_next.copy(), state)
        if len(kept) > self.KEPT_SOLVES:
            kept.popitem(last=False)

    def _step(self, x, u, d):
        """:meth:`step` on a checked state and control (a rollout checks each once, not per knot)."""
        nq = self.nq
        q, v = x[:nq], x[nq:]
        out = np.empty(self.nx)
        v_next = out[nq:]
        state = self._velocity(q, v, self._tau(u, d, q, v), d, v_next)
        if state is not False:  # a contact solve ran: kept for the Jacobians of this same step
            self._keep(d, x, u, v_next, state)
        self._integrate(q, v_next, None if state is None or state is False else state.correction, out)
        return self._check_next(out, x, u)

    def _velocity(self, q, v, tau, d, v_next):
        """``v+`` into ``v_next``: the free velocity ``v + dt ABA(q, v, tau)`` (on the step's model), then
        the contact solve where something may touch. Returns the contact state (None: nothing in
        contact), or False when no solve ran (no contact model, or nothing near)."""
        a = pin.aba(self._step_model, d.pin, q, v, tau)
        np.multiply(a, self.dt, out=v_next)
        v_next += v
        if self.contact_model is None:
            return False
        if not self.contact_model.may_touch(q, v_next, self.dt):
            d.contact = None
            return False
        v_next[:] = self._solve_contacts(q, v_next, d, v)
        return d.contact

    def _integrate(self, q, v_next, correction, out):
        """``q+ = q (+) (dt v+ + dq_c)`` into ``out[:nq]``; returns the increment (None on Euclidean
        models, where it is not formed)."""
        nq = self.nq
        if self._euclidean:
            np.multiply(v_next, self.dt, out=out[:nq])
            out[:nq] += q
            if correction is not None:
                out[:nq] += correction.dq
            return None
        dq = v_next * self.dt
        if correction is not None:
            dq += correction.dq
        out[:nq] = pin.integrate(self.model, q, dq)
        return dq

    def _solve_contacts(self, q, v_free, d, v=None):
        if not math.isfinite(v_free.sum()):
            raise SimulationError(f"{self.name}: the free velocity is non-finite before contact; "
                                  "the simulation diverged")
        try:
            v_next, state = self.contact_model.solve(self._step_model, d.pin, d.geom, q, v_free, self.dt,
                                                     d.contact, v)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            raise SimulationError(f"{self.name}: the {self.contact} contact solve failed: {exc}") from exc
        if not math.isfinite(v_next.sum()):
            raise SimulationError(f"{self.name}: the {self.contact} contact solve returned non-finite impulses "
                                  f"(max|v_free| = {np.abs(v_free).max():.3g}); the simulation diverged")
        self._record_contact(d, state)
        return v_next

    #: Contact models whose step_derivatives(adjoint=...) is defined: the LCP's (Nimble's
    #: clamping/separating reclassification), the relaxed model's (its exact Jacobian already sees
    #: contacts not yet made), and no contact at all (the exact Jacobian).
    COMPLEMENTARITY_AWARE_CONTACTS = ("lcp", "relaxed", "none")

    def _implicit_only(self, what):
        raise ValueError(f"{what} is for integrator='bdf2' (the state before x); integrator={self.integrator!r} "
                         "is a one-step method")

    def check_complementarity_aware(self) -> None:
        """``ValueError`` unless complementarity-aware Jacobians are defined for this contact model.

        Nimble's reclassification reads each normal row of the LCP as clamping or separating by the
        sign of the loss gradient. The Coulomb cone (``contact="ncp"``) has no such definition here:
        a sticking contact can leave the cone's interior through breaking *or* sliding, and the aware
        choice between them is not Nimble's; rather than run the LCP's classification on the cone's
        modes, or silently return the exact Jacobian, the combination is refused.
        BDF integrators take compliant contact only (:mod:`dynamics.integrators`), which has no
        complementarity to reclassify: refused too.
        """
        if self.integrator != "euler":
            raise ValueError(f"complementarity-aware Jacobians (step_derivatives(adjoint=...), --complementarity-aware) "
                             f"need contact with a complementarity (LCP, relaxed), which integrator={self.integrator!r} "
                             "does not take (compliant contact only): use integrator='euler'")
        if self.contact not in self.COMPLEMENTARITY_AWARE_CONTACTS:
            raise ValueError(
                f"complementarity-aware Jacobians (complementarity_aware=True, step_derivatives(adjoint=...), "
                f"--complementarity-aware) are defined for contact='lcp' (Nimble's reclassification) and "
                f"'relaxed', not for contact={self.contact!r}: use contact='lcp' (--contact lcp), or smoothing "
                f"(relaxed contact, --smoothing auto) with the {self.contact!r} model")

    def step_derivatives(self, x, u, *, data: SimData | None = None, adjoint=None, params=None,
                         impulses: bool = False, previous=None):
        """``(x+, Fx, Fu)``: the step and its tangent-space Jacobians.

        ``params`` (parameter names, :meth:`parameter_names`): also ``Fp`` (ndx, total size), the exact
        derivative of ``x+`` with respect to those parameters: ``(x+, Fx, Fu, Fp)``. ``impulses=True``
        appends a :class:`dynamics.parameters.StepImpulses` (the contact impulses and their Jacobians
        with respect to x, u and the parameters). ``x+``, ``Fx``, ``Fu`` are the same numbers as without
        them (the fused core where it runs); ``Fp`` under LCP, NCP and relaxed contact (the compiled core for the
        fused step's LCP, NCP and relaxed states and steps without contact, in the step's own call; Python for
        per-pair coefficients and restitution; penalty contact is not covered); see :mod:`dynamics.parameters`.

        ``Fx`` is (ndx, ndx), ``Fu`` is (ndx, nu); rows and columns are ordered
        ``(dq, dv)``. Returned arrays are fresh (safe to keep). ``x+`` is :meth:`step`'s, bit for
        bit; right after ``step(x, u)`` the Jacobians reuse its contact solve (:attr:`KEPT_SOLVES`).

        ``adjoint`` (ndx,), the gradient of a loss with respect to ``x+``, asks for Nimble's
        *complementarity-aware* Jacobians (LCP contact only): besides the exact active set,
        contacts are reclassified by whether the loss wants them apart (separating) or pushed
        (clamping), and the Jacobians of whichever classification gives the larger
        ``|dl/dv|^2 + |dl/du|^2 / dt`` are returned. Not the derivative of the step where they
        differ: a search direction out of the zero gradients of clamping contacts. Not with ``params`` or
        ``impulses`` (ValueError: those Jacobians are exact, another linearization than these).

        ``previous`` (``integrator="bdf2"`` only, required there): the state before ``x``; then
        ``(x+, Fx, Fu, Fprev)`` with ``Fx = dx+/dx`` at fixed ``previous`` and ``Fprev = dx+/dprevious``
        (ndx, ndx) (:mod:`dynamics.integrators`).
        """
        if self._implicit is not None:
            return self._implicit_derivatives(x, u, data, adjoint, params, impulses, previous)
        if previous is not None:
            self._implicit_only("previous=")
        if adjoint is not None:
            self.check_complementarity_aware()
            if params is not None or impulses:  # Fp and the impulses' Jacobians are exact: not the same linearization
                raise ValueError("adjoint= (complementarity-aware Jacobians: a search direction, not the step's "
                                 "derivative) cannot be combined with params= or impulses=, which are exact; ask "
                                 "for them in a call without adjoint=")
        if params is not None or impulses:
            if not isinstance(impulses, (bool, np.bool_)):  # "no" or a list would ask for them (off the state path)
                raise TypeError(f"impulses must be True or False, got {impulses!r:.40}")
            return _parameters().step_derivatives(self, x, u, params, impulses, data)
        _, _, _, out, Fx, Fu = self._state_derivatives(x, u, data, adjoint)
        return out, Fx, Fu

    def _state_derivatives(self, x, u, data, adjoint):
        """``(x, u, d, x+, Fx, Fu)``: one step and its state Jacobians in the workspace ``d`` of ``data`` -- the
        fused call where it applies (it checks ``x`` and ``u`` itself and hands bad or doubtful input back),
        else the checks and the Python path; ``x``, ``u`` as the caller gave them after a fused call, checked
        arrays otherwise."""
        out = np.empty(self.nx)
        Fx = np.empty((self.ndx, self.ndx))
        Fu = np.empty((self.ndx, self.nu))
        d = self._workspace(data)
        fs = self._active_fused_step() if adjoint is None else None
        if fs is not None and self._fused_derivatives(fs, x, u, d, out, Fx, Fu):
            return x, u, d, out, Fx, Fu
        x, u = self._check_x(x), self._check_u(u)
        if adjoint is not None:
            adjoint = np.asarray(adjoint, dtype=float)
            if adjoint.shape != (self.ndx,):
                raise ValueError(f"adjoint has shape {adjoint.shape}, expected ({self.ndx},)")
        self._step_derivatives(x, u, d, out, Fx, Fu, adjoint)
        return x, u, d, out, Fx, Fu

    def _fused_derivatives(self, fs, x, u, d, out, Fx, Fu, plan=None, Fp=None) -> bool:
        """:meth:`_step_derivatives` (no adjoint) in one compiled call (``FusedStep.step_derivatives``), with the
        workspace bookkeeping here: False when the step is for the Python path (bad or doubtful input, a step
        that raises, a hand-back, a kept solve of the Python path), with nothing of ``d`` touched. With a
        ``ParameterPlan`` ``plan`` (dynamics/parameters.py) the same call writes its ``Fp`` when it returns True."""
        kept = None
        if d.kept and type(x) is np.ndarray and type(u) is np.ndarray:
            kept = d.kept.get(x.tobytes() + u.tobytes())
        if kept is None:
            args = (self._fused_previous(d), None, None)
        else:
            s = kept[1]
            if s is not None and not isinstance(s, FusedContactState):
                return False
            args = (None, kept[0], None if s is None else s.core)
        try:
            code, st = fs.step_derivatives(d.pin, d.geom, x, u, *args, out, Fx, Fu, plan, Fp)
        except TypeError:  # not an array at all (None, a dict...): the checks of the Python path name it
            return False
        if code < 0:
            return False
        if code == 3:  # the kept solve of step(x, u) served (as _step_derivatives' kept branch)
            d.contact = kept[1]
            d.stats["reused"] += 1
        elif code == 2:
            self._record_contact(d, self.contact_model.fused_state(st))
        elif code == 1:
            d.contact = None
        return True

    def _implicit_derivatives(self, x, u, data, adjoint, params, impulses, previous):
        """:meth:`step_derivatives` of a BDF integrator."""
        if adjoint is not None:
            self.check_complementarity_aware()
        if params is not None or impulses:
            raise ValueError(f"params= and impulses= are computed for integrator='euler' only, not "
                             f"integrator={self.integrator!r}")
        prev = self._implicit._previous(previous, "step_derivatives")
        out, Fx, Fu, Fprev = self._implicit.step_derivatives(self._check_x(x), self._check_u(u), prev,
                                                             self._workspace(data))
        return (out, Fx, Fu) if prev is None else (out, Fx, Fu, Fprev)

    def _step_derivatives(self, x, u, d, out, Fx, Fu, adjoint=None):
        """:meth:`step_derivatives` on a checked state and control, into ``out`` (nx), ``Fx`` (ndx, ndx)
        and ``Fu`` (ndx, nu). ``out`` gets the bits :meth:`step` would give: the free velocity comes
        from ``pin.aba`` here too (``computeABADerivatives``' own ``ddq`` differs in the last bits). A step
        that :meth:`step` has taken at the same ``x``, ``u`` (bit for bit) on this workspace, among its
        last :attr:`KEPT_SOLVES`, reuses that step's collision detection and contact solve."""
        nq, nv, dt = self.nq, self.nv, self.dt
        q, v = x[:nq], x[nq:]
        tau = self._tau(u, d, q, v)
        v_next = out[nq:]
        dv = Fx[nv:]
        state = None
        kept = d.kept.get(x.tobytes() + u.tobytes()) if d.kept else None
        if kept is not None:  # step() solved this contact problem already: its v+ and state serve here
            v_next[:] = kept[0]
            state = d.contact = kept[1]
            d.stats["reused"] += 1
        else:
            state = self._velocity(q, v, tau, d, v_next)
            if state is False:
                state = None
        if state is None:
            ddq_dq, ddq_dv, minv = pin.computeABADerivatives(self._step_model, d.pin, q, v, tau)
            np.multiply(ddq_dq, dt, out=dv[:, :nv])
            np.multiply(ddq_dv, dt, out=dv[:, nv:])
            Fx.reshape(-1)[self._diag_vv] += 1.0
            if self._passive:
                self._add_passive_jacobian(dv, minv)
            if self._all_actuated:
                np.multiply(minv, dt, out=Fu[nv:])
            else:
                np.multiply(minv[:, self.actuated_dofs], dt, out=Fu[nv:])
        else:
            self._contact_velocity_jacobian(q, v, tau, v_next, state, d, dv, Fu[nv:], adjoint)

        # deep penetration: the position correction dq_c(q) joins the configuration update only
        correction = None if state is None else state.correction
        dq = self._integrate(q, v_next, correction, out)
        if self._euclidean:
            np.multiply(dv, dt, out=Fx[:nv])
            Fx.reshape(-1)[self._diag_qq] += 1.0
            np.multiply(Fu[nv:], dt, out=Fu[:nv])
            if correction is not None:
                Fx[:nv, :nv] += self.contact_model.correction_jacobian(state, q)
        else:
            J0, J1 = pin.dIntegrate(self.model, q, dq)
            if correction is not None:
                J0 = J0 + J1 @ self.contact_model.correction_jacobian(state, q)
            J1 = J1 * dt
            np.matmul(J1, dv, out=Fx[:nv])
            Fx[:nv, :nv] += J0
            np.matmul(J1, Fu[nv:], out=Fu[:nv])
        self._check_next(out, x, u)

    def _contact_velocity_jacobian(self, q, v, tau, v_next, state, d, dv_dx, dv_du, adjoint=None):
        """Fill ``dv+/dx`` (nv, ndx) and ``dv+/du`` (nv, nu) through the contact solve."""
        nv, dt, cm = self.nv, self.dt, self.contact_model
        if adjoint is None and cm.fused is not None and isinstance(state, FusedContactState):
            cm.fused.jacobian(self._step_model, d.pin, state.core, q, v, tau, v_next, dt, self.actuated_dofs,
                              self._spring_dofs, self._stiffness_k, self._damp_dofs, self._damping, dv_dx, dv_du)
            return
        tau_total = tau + state.J.T @ state.lam / dt
        ddq_dq, ddq_dv, minv = pin.computeABADerivatives(self._step_model, d.pin, q, v, tau_total)
        dv_fixed = np.empty((nv, self.ndx + self.nu))
        np.multiply(ddq_dq, dt, out=dv_fixed[:, :nv])
        if state.geo is not None:
            dv_fixed[:, :nv] += minv @ cm.kin.force_derivative(state.geo, state.lam[:state.m_contact])
        np.multiply(ddq_dv, dt, out=dv_fixed[:, nv:2 * nv])
        dv_fixed[:, nv:2 * nv] += np.eye(nv)
        dv_fixed[:, 2 * nv:] = dt * minv[:, self.actuated_dofs]
        if self._passive:
            self._add_passive_jacobian(dv_fixed, minv)
        if adjoint is None:
            full = cm.velocity_jacobian(state, dv_fixed, v_next, dt)
        else:  # complementarity-aware: dl/dv+ from dl/dx+, with x+ = (q (+) dt v+, v+)
            J1 = np.eye(nv) if self._euclidean else pin.dIntegrate(self.model, q, v_next * dt)[1]
            full, switched = cm.aware_velocity_jacobian(state, dv_fixed, v_next, dt,
                                                        adjoint[nv:] + dt * (J1.T @ adjoint[:nv]))
            d.stats["aware_switches"] += switched
        dv_dx[:] = full[:, :2 * nv]
        dv_du[:] = full[:, 2 * nv:]

    # -- physical parameters (dynamics.parameters) ---------------------------------------
    def parameter_names(self) -> list[str]:
        """The names of this system's physical parameters: ``"friction"`` (with contact; and
        ``"friction:<A>|<B>"`` per pair where pairs have their own), ``"restitution"`` (and
        ``"restitution:<A>|<B>"``) where some pair has a coefficient of restitution, then per joint
        ``"mass:<link>"``, ``"com:<link>"`` (3), ``"inertia:<link>"`` (6, Pinocchio's order xx, xy, yy, xz,
        yz, zz, about the centre of mass), then ``"placement:<joint>"`` (6, a tangent increment, ``M' = M
        exp6(delta)``). See :mod:`dynamics.parameters`."""
        return _parameters().names(self)

    def parameter_size(self, names) -> int:
        """The total size of the parameters ``names`` (a name or a sequence of names)."""
        return _parameters().size(self, names)

    def get_parameters(self, names) -> np.ndarray:
        """The values of the parameters ``names``, concatenated in the order given (placements: 0)."""
        return _parameters().get(self, names)

    def with_parameters(self, names, values) -> "Simulator":
        """The same system with the parameters ``names`` set to ``values`` (this simulator is unchanged).
        ValueError naming the parameter on an unknown name, a wrong size, a non-finite value, a mass < 0,
        a negative friction, a restitution outside [0, 1], or an inertia that is not positive semi-definite or
        breaks the triangle inequality (a point mass's zero inertia is valid, as in :func:`validate_model`);
        :class:`ModelError` naming the parameters set when the new model fails the model's own checks (a
        joint left with no mass to move, a singular mass matrix, a planar system leaving its plane). A mass of 0 is
        taken, as :func:`validate_model` takes it (massless intermediate links), so ``with_parameters(names,
        get_parameters(names))`` holds for every simulator."""
        return _parameters().with_values(self, names, values)

    @property
    def contacts(self):
        """The contacts of the last step on the default workspace (:class:`ContactReport`)."""
        return self.contact_report()

    def contact_report(self, data: SimData | None = None):
        """The contacts of the last step taken on the workspace ``data`` (None: the default one, as
        :attr:`contacts`): a :class:`ContactReport` (empty before any step with contact), or None
        when the system has no contact at all."""
        if self.contact_model is None:
            return None
        return self.contact_model.report(self._workspace(data, adopt=False).contact)  # a read: no adoption

    @property
    def planar(self) -> bool:
        """The system moves in the xy plane (``planar=True``: one friction direction per contact)."""
        return bool(self._options["planar"])

    @property
    def collision_geometry(self):
        """The ``pinocchio.GeometryModel`` collision detection runs on (None without contact): a copy of
        :attr:`geometry` whose meshes are their convex hulls, plus the ground half-space when ``ground`` is
        given (a static object on the world, ``parentJoint`` 0). Read it; changing it changes the contacts."""
        return None if self.contact_model is None else self.contact_model.scene.geometry

    @property
    def contact_rows(self) -> int:
        """Rows per contact in contact-frame quantities (impulses, :meth:`contact_jacobian`): 2 when
        planar (normal, tangent), 3 otherwise (normal, two tangents)."""
        return 2 if self.planar else 3

    def contact_jacobian(self, q):
        """Collision detection and the contact Jacobian at the configuration ``q``, without a step.

        Returns ``(contacts, J)``: ``contacts`` the :class:`contact.detection.Contacts` found at ``q``
        (``points``, ``normals``, ``phi``, ``body_a``/``body_b`` joint indices, ... ; ``len(contacts)``
        of them, in the order the step uses), and ``J`` (``len(contacts) * contact_rows``, nv) mapping
        ``v`` to each contact's relative velocity in its contact frame (rows: normal, then tangents).
        Joint limits are not included. A system without contact returns no contacts.
        """
        from contact.detection import Contacts

        q = _finite_vector(q, "configuration q", self.nq)
        self._check_within_bounds(q, "configuration q")
        cm = self.contact_model
        if cm is None:
            return Contacts.empty(), np.zeros((0, self.nv))
        data = self.model.createData()
        contacts = cm.scene.detect(self.model, data, cm.scene.create_data(), q)
        _, J, _ = cm._row_geometry(self.model, data, q, contacts, [])  # the step's rows, without limits
        return contacts, J

    @property
    def warm_start_stats(self) -> dict:
        """Counts on the default workspace: steps with contact (contact solves), warm-start guesses, guesses
        that held, complementarity-aware reclassifications, and Jacobians that reused a kept contact solve
        (``reused``: :attr:`KEPT_SOLVES`)."""
        return dict(self._data.stats)

    def _check_next(self, out, x, u):
        """``out`` if it is a sane state; :class:`SimulationError` naming the coordinate otherwise
        (non-finite, or beyond :attr:`MAX_VELOCITY` / :attr:`MAX_POSITION`)."""
        nq = self.nq
        vmax = float(np.abs(out[nq:]).max())
        qmax = float(np.abs(out[:nq]).max())
        if vmax <= self.MAX_VELOCITY and qmax <= self.MAX_POSITION:
            return out
        cause = (f"(max|x| = {np.abs(x).max():.3g}, max|u| = {np.abs(u).max(initial=0.0):.3g}); "
                 "the simulation diverged")
        if not math.isfinite(out.sum()):
            i = int(np.flatnonzero(~np.isfinite(out))[0])
            raise SimulationError(f"{self.name}: the step produced a non-finite state ({self._coordinate(i)} = "
                                  f"{out[i]}) from a finite state and control {cause}")
        if vmax > self.MAX_VELOCITY:
            i = nq + int(np.argmax(np.abs(out[nq:])))
            bound = f"|v| <= MAX_VELOCITY = {self.MAX_VELOCITY:g}"
        else:
            i = int(np.argmax(np.abs(out[:nq])))
            bound = f"|q| <= MAX_POSITION = {self.MAX_POSITION:g}"
        raise SimulationError(f"{self.name}: the step produced {self._coordinate(i)} = {out[i]:.3g}, beyond the "
                              f"bound {bound} {cause}")

    def _coordinate(self, i: int) -> str:
        """``q[3] (joint 'root')`` for state index ``i``."""
        nq, m = self.nq, self.model
        kind, k = ("q", i) if i < nq else ("v", i - nq)
        for j in range(1, m.njoints):
            jm = m.joints[j]
            start, n = (jm.idx_q, jm.nq) if kind == "q" else (jm.idx_v, jm.nv)
            if start <= k < start + n:
                return f"{kind}[{k}] (joint {m.names[j]!r})"
        return f"{kind}[{k}]"

    def _check_controls(self, us, what: str) -> np.ndarray:
        """``us`` as a (T, nu) float array (a (T,) one when nu = 1), or a ValueError naming ``what``'s step."""
        us = _float_array(us, "controls us", f"(T, {self.nu})")
        if us.ndim == 1 and self.nu == 1:
            us = us[:, None]
        if us.ndim != 2 or us.shape[1] != self.nu:
            raise ValueError(f"controls us have shape {us.shape}, expected (T, {self.nu}) for {self.name}")
        for t in np.flatnonzero(~np.isfinite(us).all(axis=1))[:1]:
            raise ValueError(f"{what} {t}: control u contains non-finite values at indices "
                             f"{np.flatnonzero(~np.isfinite(us[t])).tolist()}")
        return us

    def rollout(self, x0, us, *, data: SimData | None = None, previous=None) -> np.ndarray:
        """States ``xs`` (T+1, nx) from ``x0`` under controls ``us`` (T, nu).

        ``integrator="bdf2"``: the first step is BDF1, or BDF2 from ``previous`` (the state before ``x0``)
        when given; other integrators refuse ``previous``.

        Raises :class:`SimulationError` (carrying the states reached so far in
        ``.xs``) if the simulation diverges.
        """
        x0 = self._check_x(x0, "initial state x0")
        us = self._check_controls(us, "rollout step")
        d = self._workspace(data)
        if self._implicit is not None:
            if previous is not None:
                previous = self._implicit._previous(previous, "rollout")
            return self._implicit.rollout(x0, us, previous, d)
        if previous is not None:
            self._implicit_only("previous=")
        T = len(us)
        xs = np.empty((T + 1, self.nx))
        xs[0] = x0
        fs = self._active_fused_step()
        if fs is not None:
            us = np.ascontiguousarray(us)
        t = 0
        while t < T:
            if fs is not None:  # compiled steps until the end or one for the Python path
                t0 = t
                t, codes, states = fs.rollout(d.pin, d.geom, xs, us, t0, self._fused_previous(d))
                for k, code in enumerate(codes):
                    if code:
                        self._fused_bookkeeping(d, xs[t0 + k], us[t0 + k], xs[t0 + k + 1], code, states[k])
                if t == T:
                    break
            try:
                xs[t + 1] = self._step(xs[t], us[t], d)  # each x+ passed _check_next
            except SimulationError as exc:
                raise SimulationError(f"rollout step {t}: {exc}", xs=xs[: t + 1].copy()) from None
            except ValueError as exc:
                raise ValueError(f"rollout step {t}: {exc}") from None
            t += 1
        return xs

    def rollout_derivatives(self, x0, us, *, data: SimData | None = None):
        """``(xs, Fx, Fu)``: the states ``xs`` (T+1, nx) from ``x0`` under ``us`` (T, nu) and every
        step's Jacobians, ``Fx`` (T, ndx, ndx) and ``Fu`` (T, ndx, nu), in one call.

        Each step runs collision detection and the contact solve once, for its next state and its
        Jacobians together (:meth:`step_derivatives` returns both), warm-started from the previous
        step as in :meth:`rollout`; a step that :meth:`step` has just taken at the same ``x``, ``u``
        reuses that solve (:attr:`KEPT_SOLVES`). The numbers are those of a loop of
        :meth:`step_derivatives`, and ``xs`` is ``rollout(x0, us)``, bit for bit. Errors as
        :meth:`rollout`'s: :class:`SimulationError` naming the step, carrying the states so far.
        """
        x0 = self._check_x(x0, "initial state x0")
        us = self._check_controls(us, "rollout step")
        d = self._workspace(data)
        T = len(us)
        xs = np.empty((T + 1, self.nx))
        xs[0] = x0
        # xs[:-1] and xs[1:] are views of one array: knot t + 1's state is written before it is read
        Fx, Fu = self._derivatives_loop(xs[:-1], xs[1:], us, d, "rollout step", rollout=xs)
        return xs, Fx, Fu

    def _derivatives_loop(self, xin, xout, us, d, label, *, rollout=None, check=False):
        """``_step_derivatives`` from each ``xin[t]`` under ``us[t]`` into ``xout[t]``; returns ``(Fx, Fu)``.
        Errors are prefixed with ``label t``; a :class:`SimulationError` carries the rollout's states so
        far when ``rollout`` (the (T+1, nx) array ``xin``/``xout`` view) is given. ``check``: each
        ``xin[t]`` is checked first (knot states that are not a rollout's)."""
        if self._implicit is not None:
            return self._implicit.derivatives_loop(xin, xout, us, d, label, rollout=rollout, check=check)
        T = len(us)
        Fx = np.empty((T, self.ndx, self.ndx))
        Fu = np.empty((T, self.ndx, self.nu))
        fs = self._active_fused_step()
        if fs is not None:
            us = np.ascontiguousarray(us)
        for t in range(T):
            # one compiled call per knot (FusedStep.step_derivatives), else the Python path, which raises
            if fs is not None and self._fused_derivatives(fs, xin[t], us[t], d, xout[t], Fx[t], Fu[t]):
                continue
            x = self._check_x(xin[t], f"{label} {t}: state xs[{t}]") if check else xin[t]
            try:
                self._step_derivatives(x, us[t], d, xout[t], Fx[t], Fu[t])
            except SimulationError as exc:
                states = None if rollout is None else rollout[: t + 1].copy()
                raise SimulationError(f"{label} {t}: {exc}", xs=states) from None
            except ValueError as exc:
                if rollout is None:
                    raise
                raise ValueError(f"{label} {t}: {exc}") from None
        return Fx, Fu

    def knot_derivatives(self, xs, us, *, data: SimData | None = None):
        """``(xs_next, Fx, Fu)``: for every knot ``t`` the step from ``xs[t]`` under ``us[t]`` --
        its next state ``xs_next[t]`` (T, nx) and Jacobians ``Fx[t]`` (T, ndx, ndx), ``Fu[t]``
        (T, ndx, nu) -- in one call (multiple shooting: the knot states need not be a rollout, and
        ``xs_next[t] - xs[t + 1]`` is the defect).

        ``xs`` has T or T+1 rows (a trajectory's last state starts no step and is ignored). Same
        numbers as a loop of :meth:`step_derivatives` over the knots, warm starts included (each
        knot's contact solve starts from the previous knot's); a knot just taken by :meth:`step`
        reuses its solve. Errors name the knot: ValueError for a bad state or control,
        :class:`SimulationError` when a step diverges.
        """
        us = self._check_controls(us, "knot")
        T = len(us)
        xs = _float_array(xs, "knot states xs", f"({T}, {self.nx})")
        if xs.ndim != 2 or xs.shape[1] != self.nx or len(xs) not in (T, T + 1):
            raise ValueError(f"knot states xs have shape {xs.shape}, expected ({T}, {self.nx}) or "
                             f"({T + 1}, {self.nx}) for {T} controls on {self.name}")
        xs_next = np.empty((T, self.nx))
        Fx, Fu = self._derivatives_loop(xs, xs_next, us, self._workspace(data), "knot", check=True)
        return xs_next, Fx, Fu

    # -- state space (tangent-space maps) -------------------------------------------------
    def state_integrate(self, x, dx) -> np.ndarray:
        """``x (+) dx``: q moved on its Lie group by ``dx[:nv]``, v by ``dx[nv:]``."""
        x, dx = _vector(x, "state x", self.nx), _vector(dx, "tangent vector dx", self.ndx)
        nq, nv = self.nq, self.nv
        q = pin.integrate(self.model, x[:nq], dx[:nv])
        return _finite_result(np.concatenate((q, x[nq:] + dx[nv:])), (x, "state x"), (dx, "tangent vector dx"))

    def state_difference(self, x0, x1) -> np.ndarray:
        """``dx`` with ``x1 = x0 (+) dx`` (ndx,)."""
        x0, x1 = _vector(x0, "state x0", self.nx), _vector(x1, "state x1", self.nx)
        nq = self.nq
        return _finite_result(np.concatenate((pin.difference(self.model, x0[:nq], x1[:nq]), x1[nq:] - x0[nq:])),
                              (x0, "state x0"), (x1, "state x1"))

    def state_difference_jacobians(self, x0, x1):
        """``(J0, J1)``: derivatives of ``state_difference(x0, x1)`` w.r.t. x0 and x1 (ndx x ndx each)."""
        nq, nv = self.nq, self.nv
        x0, x1 = _vector(x0, "state x0", self.nx), _vector(x1, "state x1", self.nx)
        _finite_inputs((x0, "state x0"), (x1, "state x1"))
        J0 = np.zeros((self.ndx, self.ndx))
        J1 = np.zeros((self.ndx, self.ndx))
        J0[:nv, :nv], J1[:nv, :nv] = pin.dDifference(self.model, x0[:nq], x1[:nq])
        J0[self._diag_v + nv, self._diag_v + nv] = -1.0
        J1[self._diag_v + nv, self._diag_v + nv] = 1.0
        return J0, J1

    def state_integrate_jacobians(self, x, dx):
        """``(Jx, Jdx)``: derivatives of ``state_integrate(x, dx)`` w.r.t. x (tangent) and dx (ndx x ndx each)."""
        nq, nv = self.nq, self.nv
        x, dx = _vector(x, "state x", self.nx), _vector(dx, "tangent vector dx", self.ndx)
        _finite_inputs((x, "state x"), (dx, "tangent vector dx"))
        Jx = np.eye(self.ndx)
        Jdx = np.eye(self.ndx)
        Jx[:nv, :nv], Jdx[:nv, :nv] = pin.dIntegrate(self.model, x[:nq], dx[:nv])
        return Jx, Jdx

    def inverse_mass_matrix(self, q) -> np.ndarray:
        """``M(q)^-1`` (nv, nv): how an impulse ``p`` applied to a state changes its velocity (``dv = M^-1 p``).

        The model's own M (its armature included); with implicit damping the step's contact impulses act
        through ``(M + dt D)^-1`` instead (module docstring)."""
        q = _finite_vector(q, "configuration q", self.nq)
        return pin.computeMinverse(self.model, self.model.createData(), q).copy()

    def default_state(self) -> np.ndarray:
        """The configuration written in the model file (MJCF ``qpos0``) at rest, else the neutral one."""
        refs = self.model.referenceConfigurations
        if "qpos0" in refs:
            return np.concatenate((self._clamp_to_limits(np.array(refs["qpos0"], dtype=float)), np.zeros(self.nv)))
        return self.neutral_state()

    def neutral_state(self) -> np.ndarray:
        """The neutral configuration (identity quaternions, zero angles) at rest, with every coordinate of a
        joint whose q is its own tangent (revolute, prismatic, translations) clamped into its finite position
        limits (many robot files have 0 outside a joint's range; the step would push it back violently)."""
        return np.concatenate((self._clamp_to_limits(pin.neutral(self.model)), np.zeros(self.nv)))

    def _clamp_to_limits(self, q: np.ndarray) -> np.ndarray:
        """``q`` with the coordinates of joints whose q is its own tangent (nq == nv: not quaternions
        nor unit complex numbers) clipped into their position limits (infinite ones clip nothing)."""
        m = self.model
        own = np.zeros(m.nq, dtype=bool)
        for jm in m.joints[1:]:
            if jm.nq == jm.nv:
                own[jm.idx_q:jm.idx_q + jm.nq] = True
        q[own] = np.clip(q[own], m.lowerPositionLimit[own], m.upperPositionLimit[own])
        return q

    def shapes_2d(self, q) -> list[tuple[str, np.ndarray]]:
        """The collision shapes at ``q`` projected on the xy plane, for drawing planar scenes.

        Returns ``(kind, points)`` pairs: ``("polygon", (k, 2) corners)`` for boxes,
        ``("circle", [x, y, r])`` for spheres, ``("segment", [x0, y0, x1, y1, r])`` for
        capsules and cylinders (their axis and radius).
        """
        import coal

        if self.geometry is None:
            return []
        gdata = pin.GeometryData(self.geometry)
        pin.updateGeometryPlacements(self.model, self._data.pin, self.geometry, gdata,
                                     _finite_vector(q, "configuration q", self.nq))
        out = []
        for k, obj in enumerate(self.geometry.geometryObjects):
            M, g = gdata.oMg[k], obj.geometry
            if isinstance(g, coal.Box):
                h = g.halfSide
                corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h
                P = corners @ M.rotation.T + M.translation
                out.append(("polygon", _hull_2d(P[:, :2])))
            elif isinstance(g, coal.Sphere):
                out.append(("circle", np.r_[M.translation[:2], g.radius]))
            elif isinstance(g, (coal.Capsule, coal.Cylinder)):
                half = g.halfLength
                a, b = M.act(np.array([0, 0, -half])), M.act(np.array([0, 0, half]))
                out.append(("segment", np.r_[a[:2], b[:2], g.radius]))
        return out

    def state_names(self) -> list[str]:
        """Labels of the nx state entries (``q:joint[i]``, ``v:joint[i]``), for plots and tables."""
        qn, vn = [], []
        for j in range(1, self.model.njoints):
            jm, name = self.model.joints[j], self.model.names[j]
            qn += [name] if jm.nq == 1 else [f"{name}[{i}]" for i in range(jm.nq)]
            vn += [name] if jm.nv == 1 else [f"{name}[{i}]" for i in range(jm.nv)]
        return [f"q:{n}" for n in qn] + [f"v:{n}" for n in vn]

    def __repr__(self):
        return (f"Simulator({self.name!r}, nq={self.nq}, nv={self.nv}, nu={self.nu}, dt={self.dt:g})")


def _hull_2d(P: np.ndarray) -> np.ndarray:
    """Convex hull of 2-D points (monotone chain), counter-clockwise."""
    pts = sorted({(round(float(x), 12), round(float(y), 12)) for x, y in P})
    if len(pts) <= 2:
        return np.array(pts)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])
