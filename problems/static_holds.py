"""The NCP paper's Appendix E scenes: robots held still in contact by their joint torques.

z up, gravity 9.81 m/s^2 along -z, ground half-space z = 0, dt 1 ms, Coulomb cone (``contact="ncp"``)
by default. Each scene is a simulator factory and a pose *at rest in contact*; the inverse-dynamics
problems built on them (``go1-payload``, ``go1-handstand``, ``g1-pushup``) are in
:mod:`problems.inverse`, like ``go1-standing``.

Go1 with a payload (``go1-payload``)
    The Go1 of :mod:`problems.legged` (13.10 kg, URDF masses and collision model, friction 0.8) with a
    ``payload`` kg block (default 10 kg) *welded to the trunk* as a body of its own: a box
    ``PAYLOAD_SIZE`` = 0.2 x 0.1 x 0.05 m with the inertia of the uniform solid box, appended to the
    free-flyer joint (``pin.Model.appendBodyToJoint``: Pinocchio adds its spatial inertia to the
    trunk's; a body frame ``payload`` marks it), and the same box as a collision object (it only
    meets the ground, far below). Its centre sits on the trunk's back: ``PAYLOAD_CENTER`` =
    (0, 0, 0.082) m in the trunk frame (the trunk's collision box is 0.114 m tall, so the block lies
    on its top face, centred over the base origin, which the robot's own centre of mass is within
    1 mm of). Standing pose: the SRDF's ``standing`` joint angles, the four foot spheres on the
    ground (as ``go1-standing``).

Go1 handstand (``go1-handstand``)
    The same Go1 (no payload) balanced on its two front feet, rear legs folded up in the air. The
    base is pitched nose down by ``pitch`` (default ``HANDSTAND_PITCH`` = 0.7 rad, 40 deg) about
    its y axis; the front legs have hip 0, calf ``HANDSTAND_CALF`` = -1.6 rad, and a thigh angle
    found so that the robot's centre of mass lies exactly above the line through the two front
    feet's contact points (Newton on that one scalar, the horizontal distance of the centre of mass
    from the line, to 1e-15 m: about 0.64 rad at 0.7 rad of pitch); rear legs hip 0, thigh 2.0,
    calf -2.6 rad. Base height: the front foot spheres touch the ground. Why this pose: with two
    point feet the support polygon is the segment between them, so static balance needs the centre
    of mass above that segment *exactly* -- the rotation about the foot line moves no joint, so no
    torque can hold it, and an offset of d metres gives a velocity of about ``dt g d / l`` along it
    after one step (``l`` ~ 0.4 m, the height of the centre of mass), 1e-8 m/s for d ~ 4e-7 m. The
    centre of mass projects 2 mm from the middle of the segment (the URDF is not quite symmetric);
    the contact forces are near vertical (inside any cone of friction >= 0.1 here). The nearest
    other geometry (the front calves) is 1.8 cm above the ground. It is a balance on a knife edge:
    open loop, any error grows as ``exp(t sqrt(g / l))`` (x 17 in 0.5 s).

Unitree G1 push-up (``g1-pushup``)
    The G1 of example-robot-data (``g1_description/urdf/g1_29dof_rev_1_0.urdf``): 33.34 kg, nq 36,
    nv 35, 29 actuated joints, masses, inertias and torque limits from the URDF. Collision model:
    the URDF's: 4 spheres (radius 5 mm) under each foot, cylinders on the shoulders, and meshes on
    the other links, which collide as their convex hulls with a ground contact patch (see
    :mod:`contact.detection`); only the ground collides with it. Friction 0.8. Push-up pose:
    every joint 0 (legs and trunk straight, feet at right angles to the legs) except the elbows
    (``PUSHUP_ELBOW`` = 1.3 rad: almost straight; 1.57 is straight) and the shoulder pitches; the
    base is pitched face down by an angle ``alpha`` about y. ``alpha`` and the shoulder pitch are
    solved (least squares to 1e-15) so that the hands' lowest hull vertex is at the toe spheres'
    height and each wrist is straight below its shoulder: alpha = 1.291 rad (16 deg from
    horizontal), shoulder pitch -1.170 rad. Base height: the toe spheres (the 2 front spheres of
    each foot) touch the ground. The support polygon (toes 0.72 m behind the base, hands 0.28 m in
    front) contains the centre of mass by a wide margin; the nearest other geometry (the wrist
    pitch links) is 1.5 cm above the ground.
"""

from __future__ import annotations

import os

import coal
import numpy as np
import pinocchio as pin

from dynamics import Simulator, example_robot_urdf
from dynamics.robots import example_robot_data_share, load_urdf_geometry
from trajopt.numdiff import jacobian_fd

from ._scene import lowest_point
from .legged import _set_joint, go1_standing_state

# -- Go1 with a payload -------------------------------------------------------------------------
PAYLOAD_MASS = 10.0  # kg
PAYLOAD_SIZE = (0.2, 0.1, 0.05)  # m
PAYLOAD_CENTER = np.array([0.0, 0.0, 0.057 + PAYLOAD_SIZE[2] / 2])  # trunk frame: on the trunk box's top face

# -- Go1 handstand ------------------------------------------------------------------------------
HANDSTAND_PITCH = 0.7  # rad, nose down
HANDSTAND_CALF = -1.6  # rad, front calves
HANDSTAND_REAR = {"hip": 0.0, "thigh": 2.0, "calf": -2.6}  # rad, folded up
GO1_FRONT_FEET = ("FL_foot_0", "FR_foot_0")

# -- G1 push-up ---------------------------------------------------------------------------------
G1_URDF = "g1_description/urdf/g1_29dof_rev_1_0.urdf"
PUSHUP_ELBOW = 1.3  # rad
G1_TOES = tuple(f"{side}_ankle_roll_link_{i}" for side in ("left", "right") for i in (2, 3))
G1_HANDS = ("left_wrist_yaw_link_0", "right_wrist_yaw_link_0")


def _go1_urdf_model():
    path = example_robot_urdf("go1")
    model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    return model, load_urdf_geometry(model, path)


# ===========================================================================================
# Go1 with a payload
# ===========================================================================================
def go1_payload_simulator(*, payload: float = PAYLOAD_MASS, dt: float = 1e-3, contact: str = "ncp",
                          friction: float = 0.8) -> Simulator:
    """Go1 with a ``payload`` kg box welded on its back (see the module docstring); named ``go1-payload``, or
    ``go1`` without one (``payload=0``)."""
    if not (isinstance(payload, (int, float)) and np.isfinite(payload) and payload >= 0):
        raise ValueError(f"payload must be a finite mass >= 0 (kg), got {payload!r}")
    model, geom = _go1_urdf_model()
    if payload > 0:
        placement = pin.SE3(np.eye(3), PAYLOAD_CENTER)
        box = pin.Inertia.FromBox(float(payload), *PAYLOAD_SIZE)
        model.appendBodyToJoint(1, box, placement)
        model.addBodyFrame("payload", 1, placement, model.getFrameId("trunk"))
        geom.addGeometryObject(pin.GeometryObject("payload_0", 1, placement, coal.Box(*PAYLOAD_SIZE)))
    model.name = "go1-payload" if payload > 0 else "go1"
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=friction, contact=contact,
                     self_collision=False, name=model.name)


def go1_payload_state(sim: Simulator) -> np.ndarray:
    """SRDF standing joint angles, the four foot spheres on the ground, at rest (Go1's standing state:
    the payload sits above the feet and does not move them)."""
    return go1_standing_state(sim)


# ===========================================================================================
# Go1 handstand
# ===========================================================================================
def go1_handstand_simulator(*, dt: float = 1e-3, contact: str = "ncp", friction: float = 0.8) -> Simulator:
    """The Go1 of :mod:`problems.legged` (no payload)."""
    return go1_payload_simulator(payload=0.0, dt=dt, contact=contact, friction=friction)


def _handstand_q(sim, pitch, thigh):
    model = sim.model
    q = pin.neutral(model)
    q[3:7] = pin.Quaternion(pin.utils.rpyToMatrix(0.0, pitch, 0.0)).coeffs()
    for leg in ("FL", "FR"):
        for part, angle in (("hip", 0.0), ("thigh", thigh), ("calf", HANDSTAND_CALF)):
            _set_joint(model, q, f"{leg}_{part}_joint", angle)
    for leg in ("RL", "RR"):
        for part, angle in HANDSTAND_REAR.items():
            _set_joint(model, q, f"{leg}_{part}_joint", angle)
    q[2] -= lowest_point(sim, q, axis=2, names=GO1_FRONT_FEET)
    return q


def support_line_offset(sim: Simulator, q: np.ndarray, feet=GO1_FRONT_FEET) -> float:
    """Signed horizontal distance (m) of the centre of mass from the line through the contact points
    of the two foot spheres ``feet`` (their centres' ground projections)."""
    model, geom = sim.model, sim.geometry
    data = model.createData()
    gdata = pin.GeometryData(geom)
    com = pin.centerOfMass(model, data, q)
    pin.updateGeometryPlacements(model, data, geom, gdata, q)
    a, b = (gdata.oMg[geom.getGeometryId(n)].translation[:2] for n in feet)
    u = (b - a) / np.linalg.norm(b - a)
    w = com[:2] - a
    return float(w[0] * u[1] - w[1] * u[0])


def go1_handstand_state(sim: Simulator, pitch: float = HANDSTAND_PITCH) -> np.ndarray:
    """The handstand pose (module docstring): the front thigh angle by Newton on
    :func:`support_line_offset`, from 0.9 rad; at rest."""
    if not (isinstance(pitch, (int, float)) and 0.2 <= pitch <= 1.0):
        raise ValueError(f"pitch must be a base pitch in [0.2, 1.0] rad (nose down), got {pitch!r}")
    thigh, h = 0.9, 1e-7
    def offset(z):
        return np.array([support_line_offset(sim, _handstand_q(sim, pitch, z[0]))])

    for _ in range(50):
        (f,), ((slope,),) = jacobian_fd(offset, [thigh], h, method="forward")
        if abs(f) < 1e-15:
            break
        thigh -= f / slope
    iq = sim.model.joints[sim.model.getJointId("FL_thigh_joint")].idx_q
    lo, hi = sim.model.lowerPositionLimit[iq], sim.model.upperPositionLimit[iq]
    if abs(f) > 1e-12 or not lo < thigh < hi:
        raise ValueError(f"no handstand pose with the centre of mass above the front feet at pitch {pitch} rad")
    q = _handstand_q(sim, pitch, thigh)
    return np.concatenate((q, np.zeros(sim.model.nv)))


# ===========================================================================================
# G1 push-up
# ===========================================================================================
def g1_simulator(*, dt: float = 1e-3, contact: str = "ncp", friction: float = 0.8) -> Simulator:
    """Unitree G1 (29 dof, floating base) with the URDF's collision model (module docstring)."""
    path = os.path.join(example_robot_data_share(), "example-robot-data", "robots", G1_URDF)
    return Simulator.from_urdf(path, floating_base=True, dt=dt, ground=0.0, friction=friction, contact=contact,
                               name="g1")


def _pushup_q(sim, alpha, left_shoulder, right_shoulder):
    model = sim.model
    q = pin.neutral(model)
    q[3:7] = pin.Quaternion(pin.utils.rpyToMatrix(0.0, alpha, 0.0)).coeffs()
    for side, shoulder in (("left", left_shoulder), ("right", right_shoulder)):
        _set_joint(model, q, f"{side}_shoulder_pitch_joint", shoulder)
        _set_joint(model, q, f"{side}_elbow_joint", PUSHUP_ELBOW)
    q[2] -= lowest_point(sim, q, axis=2, names=G1_TOES)
    return q


def _pushup_conditions(sim, z):
    """(left hand's lowest point, right hand's, wrist x - shoulder x of the left arm), the toes at 0."""
    model = sim.model
    q = _pushup_q(sim, *z)
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    shoulder = data.oMf[model.getFrameId("left_shoulder_pitch_link")].translation
    wrist = data.oMf[model.getFrameId("left_wrist_yaw_link")].translation
    return np.array([lowest_point(sim, q, axis=2, names=G1_HANDS[:1]), lowest_point(sim, q, axis=2, names=G1_HANDS[1:]),
                     wrist[0] - shoulder[0]])


def g1_pushup_state(sim: Simulator) -> np.ndarray:
    """The push-up pose (module docstring): base pitch and the two shoulder pitches by damped Newton
    (finite-difference Jacobian) from (1.2, -1.3, -1.3) rad, so that both hands touch the ground
    exactly (the two hand meshes differ: one shoulder angle for both left a 1.3e-7 m gap, which a
    speculative contact closes in one step at 1.3e-4 m/s, far above the 1e-8 target); at rest."""
    z, h = np.array([1.2, -1.3, -1.3]), 1e-7
    for _ in range(50):
        f, J = jacobian_fd(lambda z: _pushup_conditions(sim, z), z, h, method="forward")
        if np.abs(f).max() < 1e-15:
            break
        dz = np.linalg.solve(J, -f)
        z = z + dz * min(1.0, 0.2 / np.abs(dz).max())
    if np.abs(f).max() > 1e-12:
        raise RuntimeError(f"the G1 push-up pose did not converge (conditions {f})")
    return np.concatenate((_pushup_q(sim, *z), np.zeros(sim.model.nv)))
