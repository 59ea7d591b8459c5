"""Build articulated models in code: joints, bodies with their inertia, collision shapes.

>>> b = ModelBuilder("pendulum")
>>> j = b.add_joint("revolute", axis="y", name="hinge", effort=5.0)
>>> b.add_body(j, box=(0.05, 0.05, 1.0), mass=1.0, offset=(0, 0, -0.5))
>>> model, geometry = b.build()

Every body is a solid primitive whose inertia is that of the primitive with the
given mass (uniform density) unless an explicit ``inertia`` is passed. The same
primitive is added to the collision model, attached to the joint, so contact
detection later sees exactly the shape whose inertia was used.
"""

from __future__ import annotations

from collections.abc import Sequence

import coal
import numpy as np
import pinocchio as pin

_AXES = {"x": 0, "y": 1, "z": 2}
_REVOLUTE = {"x": pin.JointModelRX, "y": pin.JointModelRY, "z": pin.JointModelRZ}
_PRISMATIC = {"x": pin.JointModelPX, "y": pin.JointModelPY, "z": pin.JointModelPZ}
JOINT_KINDS = ("revolute", "prismatic", "free", "translation2d", "translation3d", "planar")


def _se3(translation=(0.0, 0.0, 0.0), rotation=None) -> pin.SE3:
    R = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
    if R.shape == (3,):  # roll-pitch-yaw
        R = pin.rpy.rpyToMatrix(*R)
    return pin.SE3(R, np.asarray(translation, dtype=float))


def _limits(n, lower, upper):
    big = np.finfo(float).max
    lo = np.full(n, -big) if lower is None else np.broadcast_to(np.asarray(lower, float), (n,)).copy()
    hi = np.full(n, big) if upper is None else np.broadcast_to(np.asarray(upper, float), (n,)).copy()
    if np.any(lo > hi):
        raise ValueError(f"joint limits: lower {lo} exceeds upper {hi}")
    return lo, hi


class ModelBuilder:
    """Accumulates joints and bodies, then returns ``(pin.Model, pin.GeometryModel)``.

    ``gravity`` is the gravity vector (default ``(0, 0, -9.81)``: z up). Planar
    problems in the xy plane with y up pass ``gravity=(0, -9.81, 0)``.
    """

    def __init__(self, name: str = "model", *, gravity: Sequence[float] = (0.0, 0.0, -9.81)):
        self.model = pin.Model()
        self.model.name = name
        self.model.gravity = pin.Motion(np.asarray(gravity, dtype=float), np.zeros(3))
        self.geometry = pin.GeometryModel()
        self._nbodies = 0

    # -- joints ------------------------------------------------------------------
    def add_joint(
        self,
        kind: str,
        *,
        name: str,
        parent: str | int = 0,
        axis: str = "z",
        placement: Sequence[float] = (0.0, 0.0, 0.0),
        rotation=None,
        lower=None,
        upper=None,
        effort=None,
        velocity=None,
    ) -> int:
        """Add a joint; return its index.

        ``kind``: ``revolute`` or ``prismatic`` (about/along ``axis`` in x, y, z),
        ``free`` (free-flyer: nq 7, nv 6), ``translation2d`` (x and y, nq = nv = 2,
        for planar scenes), ``translation3d``, ``planar`` (x, y, yaw).
        ``parent``: joint name or index (0 = the world). ``placement``/``rotation``:
        pose of the joint frame in the parent joint frame (rotation as a 3x3 matrix
        or roll-pitch-yaw). ``lower``/``upper``: position limits (one per
        configuration coordinate); ``effort``: symmetric torque/force limit.
        """
        if kind == "revolute":
            jm = self._axis_joint(_REVOLUTE, axis)
        elif kind == "prismatic":
            jm = self._axis_joint(_PRISMATIC, axis)
        elif kind == "free":
            jm = pin.JointModelFreeFlyer()
        elif kind == "translation2d":
            jm = pin.JointModelComposite(2)
            jm.addJoint(pin.JointModelPX())
            jm.addJoint(pin.JointModelPY())
        elif kind == "translation3d":
            jm = pin.JointModelTranslation()
        elif kind == "planar":
            jm = pin.JointModelPlanar()
        else:
            raise ValueError(f"unknown joint kind {kind!r}; expected one of {', '.join(JOINT_KINDS)}")
        parent_id = self._joint_id(parent)
        if self.model.existJointName(name):
            raise ValueError(f"a joint named {name!r} already exists")
        nq, nv = jm.nq, jm.nv
        lo, hi = _limits(nq, lower, upper)
        big = np.finfo(float).max
        eff = np.full(nv, big) if effort is None else np.broadcast_to(np.asarray(effort, float), (nv,)).copy()
        vel = np.full(nv, big) if velocity is None else np.broadcast_to(np.asarray(velocity, float), (nv,)).copy()
        if kind in ("free", "planar"):
            lo, hi = _limits(nq, None, None)
        return self.model.addJoint(parent_id, jm, _se3(placement, rotation), name, eff, vel, lo, hi)

    @staticmethod
    def _axis_joint(table, axis):
        try:
            return table[axis]()
        except KeyError:
            raise ValueError(f"unknown joint axis {axis!r}; expected x, y or z") from None

    def _joint_id(self, joint: str | int) -> int:
        if isinstance(joint, str):
            if joint in ("world", "universe"):
                return 0
            if not self.model.existJointName(joint):
                raise ValueError(f"no joint named {joint!r}; joints: {list(self.model.names)[1:]}")
            return self.model.getJointId(joint)
        if not 0 <= joint < self.model.njoints:
            raise ValueError(f"joint index {joint} out of range [0, {self.model.njoints})")
        return int(joint)

    # -- bodies ------------------------------------------------------------------
    def add_body(
        self,
        joint: str | int,
        *,
        mass: float,
        box: Sequence[float] | None = None,
        sphere: float | None = None,
        capsule: tuple[float, float] | None = None,
        cylinder: tuple[float, float] | None = None,
        offset: Sequence[float] = (0.0, 0.0, 0.0),
        rotation=None,
        inertia: pin.Inertia | None = None,
        name: str | None = None,
        collision: bool = True,
    ) -> int:
        """Attach a solid primitive to ``joint`` at ``offset`` (joint frame); return its geometry index.

        Exactly one of ``box=(lx, ly, lz)``, ``sphere=r``, ``capsule=(r, length)``,
        ``cylinder=(r, length)`` (capsule and cylinder along the local z axis).
        The inertia is the primitive's with ``mass`` unless ``inertia`` is given.
        Returns -1 when ``collision=False`` (no collision geometry is added).
        """
        if not (np.isfinite(mass) and mass > 0.0):
            raise ValueError(f"body mass must be positive and finite, got {mass}")
        shapes = [s for s in (box, sphere, capsule, cylinder) if s is not None]
        if len(shapes) != 1:
            raise ValueError("give exactly one of box=, sphere=, capsule=, cylinder=")
        if box is not None:
            lx, ly, lz = (float(s) for s in box)
            shape, I = coal.Box(lx, ly, lz), pin.Inertia.FromBox(mass, lx, ly, lz)
        elif sphere is not None:
            shape, I = coal.Sphere(float(sphere)), pin.Inertia.FromSphere(mass, float(sphere))
        elif capsule is not None:
            r, length = (float(s) for s in capsule)
            shape, I = coal.Capsule(r, length), pin.Inertia.FromCapsule(mass, r, length)
        else:
            r, length = (float(s) for s in cylinder)
            shape, I = coal.Cylinder(r, length), pin.Inertia.FromCylinder(mass, r, length)
        if inertia is not None:
            I = inertia
        jid = self._joint_id(joint)
        pose = _se3(offset, rotation)
        self.model.appendBodyToJoint(jid, I, pose)
        self._nbodies += 1
        name = name or f"{self.model.names[jid]}_body{self._nbodies}"
        self.model.addBodyFrame(name, jid, pose, 0)
        if not collision:
            return -1
        return self.geometry.addGeometryObject(pin.GeometryObject(name, jid, pose, shape))

    def add_static_box(self, name: str, size: Sequence[float], center: Sequence[float], rotation=None) -> int:
        """A box fixed to the world (a floor, a wall): collision only, no inertia."""
        lx, ly, lz = (float(s) for s in size)
        obj = pin.GeometryObject(name, 0, _se3(center, rotation), coal.Box(lx, ly, lz))
        return self.geometry.addGeometryObject(obj)

    def build(self) -> tuple[pin.Model, pin.GeometryModel]:
        if self.model.nv == 0:
            raise ValueError("the model has no joints")
        return self.model, self.geometry
