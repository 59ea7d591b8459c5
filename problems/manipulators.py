"""Manipulators from example-robot-data.

- ``ur5-reach`` (no contact): UR5 (masses and inertias from its URDF) moves from a bent start
  configuration to a target configuration and stops there; torque limits from
  the URDF (150 N m shoulder/elbow, 28 N m wrist); dt 10 ms, 1 s.

3-D contact scene (z up, gravity 9.81 m/s^2 along -z, ground half-space z = 0, time step 1 ms;
``info["bench_state"]`` is ``(x, u)``, a state *in contact* at rest with torques that hold it, as in
:mod:`problems.legged`; ``contact=`` default ``"lcp"``):

UR5 and box (``ur5-box``)
    The UR5 of example-robot-data (``ur_description/urdf/ur5_robot.urdf``): masses
    and inertias (16.99 kg of moving links), torque limits 150, 150, 150, 28, 28,
    28 N m, all from the URDF; its base fixed at ``UR5_BASE`` = (0, 0, 0.4) m (a
    pedestal that is not modelled). A free-flying box 0.3 x 0.3 x 0.2 m, 2 kg
    (uniform density, inertia of the solid box; built with
    :class:`dynamics.ModelBuilder`) rests on the ground centred at ``BOX_CENTER``
    = (0.55, 0, 0.1) m. Joint order: the box's free flyer (q[0:7], v[0:6]), then
    the arm (q[7:13], v[6:12], actuated).
    The arm touches the box with a *fingertip*: a collision-only (massless) sphere
    of radius 0.02 m on the ``wrist_3`` link, its centre 0.02 m ahead of the
    ``tool0`` flange along tool0's z axis. Collision pairs: fingertip-box, and the
    ground against every moving object (box and fingertip). The arm's URDF
    collision meshes are left out by default (``arm_meshes=True`` keeps them; they
    then only meet the ground, which they never reach, at ~0.8 ms per step of
    mesh-vs-half-space tests). Why a sphere: a BVH mesh against a box gives one
    witness point per pair (coal computes no polygonal patch for meshes), which
    wanders over a flat face-on-face contact; a sphere gives one well-defined
    point. Friction 0.5.
    Bench state: the fingertip on the centre of the box's top, tool pointing down
    (inverse kinematics; arm angles -0.200, -0.354, 1.282, 0.642, 1.571, 1.371 rad),
    pressing down with ``PRESS_FORCE`` = 80 N (torques: gravity compensation plus
    that push; the box's 4 corners carry 24.9 N each). The force is large on
    purpose: the arm is heavy (~5 kg effective mass at the fingertip), and a
    gentle press (20 N) lets go of the box when it is moved by one
    finite-difference step (6e-6 m), so central differences would straddle a
    mode switch (from 40 N on they do not; 80 N leaves a margin).
    Problem: from ``ur5_box_start_state`` (fingertip 1 mm from the box's -x face
    at height 0.15 m, tool along +x; arm angles -0.406, -0.276, 2.252, -1.976,
    1.165, -1.571 rad; gravity-compensation torques), push the box 0.1 m along +x
    in 300 steps of 1 ms: terminal cost 1e3 (x_box - x_target)^2, running cost
    1e-4 |u - u_grav|^2 + 1e-3 |v|^2.
    Bench torques (:func:`problems._scene.static_contact_torques`): the contact impulses closest
    (least squares) to the box's weight plus the press shared by the box's corners, the fingertip's
    impulse fixed at the press, that balance the box exactly at zero velocity.
"""

from __future__ import annotations

import coal
import numpy as np
import pinocchio as pin

from dynamics import ModelBuilder, Simulator, example_robot_urdf
from dynamics.robots import infer_package_dirs
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost, StateCost

from ._registry import register
from ._scene import static_contact_torques

UR5_START = np.array([0.0, -1.0, 1.5, -0.5, 1.57, 0.0])
UR5_GOAL = np.array([1.0, -1.6, 1.0, 0.3, 1.0, 0.5])


def ur5_simulator(*, dt: float = 0.01) -> Simulator:
    """The UR5 arm of example-robot-data, every joint actuated."""
    return Simulator.from_urdf(example_robot_urdf("ur5"), dt=dt, name="ur5")


@register("ur5-reach", "UR5 joint-space reach to a target configuration (6 dof, 1 s)")
def ur5_reach(*, horizon: int = 100, dt: float = 0.01) -> OCP:
    sim = ur5_simulator(dt=dt)
    x0 = np.concatenate((UR5_START, np.zeros(6)))
    x_goal = np.concatenate((UR5_GOAL, np.zeros(6)))
    running = 1e-2 * StateCost(sim, x_goal, 1.0) + ControlCost(sim, 1e-4)
    terminal = StateCost(sim, x_goal, 1e3)

    def metrics(xs, us):
        return {"final_configuration_error": float(np.linalg.norm(xs[-1, :6] - UR5_GOAL))}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=running, terminal_cost=terminal,
               name="ur5-reach", metrics=metrics)


# -- UR5 and box -------------------------------------------------------------------------------
UR5_BASE = np.array([0.0, 0.0, 0.4])
BOX_SIZE = (0.3, 0.3, 0.2)
BOX_MASS = 2.0
BOX_CENTER = np.array([0.55, 0.0, 0.1])
FINGERTIP_RADIUS = 0.02  # its centre is one radius ahead of the tool0 flange, along tool0's z
PRESS_FORCE = 80.0  # N, down on the box's top: the bench state
PUSH_HEIGHT = 0.15  # height of the fingertip's centre at the start of the push problem
START_GAP = 1e-3  # fingertip - box gap at the start of the push problem
PUSH_DISTANCE = 0.1  # the problem's target displacement of the box along +x
#: tool0 orientations: z axis down (pressing on the top), z axis along +x (pushing the -x face).
TOOL_DOWN = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])
TOOL_FORWARD = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
#: Start guesses of the inverse kinematics (rad), elbow up with the wrist above the tool: the
#: branches with the most clearance (every arm link >= 0.04 m from the box and the ground).
UR5_GUESS_PRESS = np.array([-0.2, -0.35, 1.28, 0.64, 1.57, 1.37])
UR5_GUESS_PUSH = np.array([-0.4, -0.28, 2.25, -1.97, 1.17, -1.57])


# ===========================================================================================
# UR5 and box
# ===========================================================================================
def ur5_box_simulator(*, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.5,
                      arm_meshes: bool = False, contact_object: str = "fingertip") -> Simulator:
    """A free box (joint ``box``, q[:7]) and the UR5 (q[7:13], actuated) with a sphere fingertip.

    Collision pairs: ``contact_object``-``box`` (default the fingertip sphere); the
    ground (z = 0) against every moving object. ``arm_meshes``: keep the URDF's
    collision meshes of the arm links (they then enter only the ground pairs, at
    ~0.8 ms per step of mesh-vs-half-space tests); by default the arm's collision
    model is the fingertip alone.
    """
    b = ModelBuilder("box")
    j = b.add_joint("free", name="box")
    b.add_body(j, mass=BOX_MASS, box=BOX_SIZE, name="box")
    box_model, box_geom = b.build()

    path = example_robot_urdf("ur5")
    ur5 = pin.buildModelFromUrdf(path)
    ur5_geom = pin.buildGeomFromUrdf(ur5, path, pin.GeometryType.COLLISION, package_dirs=infer_package_dirs(path))
    tool = ur5.frames[ur5.getFrameId("tool0")]
    tip = pin.GeometryObject("fingertip", tool.parentJoint,
                             tool.placement * pin.SE3(np.eye(3), np.array([0.0, 0.0, FINGERTIP_RADIUS])),
                             coal.Sphere(FINGERTIP_RADIUS))
    ur5_geom.addGeometryObject(tip)
    if not arm_meshes:
        kept = pin.GeometryModel()
        for obj in ur5_geom.geometryObjects:
            if obj.name in (contact_object, "fingertip"):
                kept.addGeometryObject(obj)
        ur5_geom = kept
    model, geom = pin.appendModel(box_model, ur5, box_geom, ur5_geom, 0, pin.SE3(np.eye(3), UR5_BASE))
    geom.removeAllCollisionPairs()  # appendModel pairs every object of the box with every object of the arm
    model.name = "ur5-box"
    return Simulator(model, geometry=geom, dt=dt, actuated=list(ur5.names[1:]), ground=0.0, friction=friction,
                     contact=contact, self_collision=False, collision_pairs=[(contact_object, "box")],
                     name="ur5-box")


def _ur5_tip_ik(sim: Simulator, guess: np.ndarray, target: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Box at ``BOX_CENTER``; arm angles that put the fingertip's centre at ``target`` and tool0 at ``rotation``.

    Damped Gauss-Newton on the tool0 frame (steps of at most 0.2 rad), angles wrapped to [-pi, pi).
    """
    model = sim.model
    data = model.createData()
    q = pin.neutral(model)
    q[:3] = BOX_CENTER
    q[7:13] = guess
    fid = model.getFrameId("tool0")
    want = pin.SE3(rotation, target - rotation @ np.array([0.0, 0.0, FINGERTIP_RADIUS]))
    arm = sim.actuated_dofs
    for _ in range(300):
        pin.framesForwardKinematics(model, data, q)
        err = pin.log6(data.oMf[fid].actInv(want)).vector
        if np.linalg.norm(err) < 1e-12:
            break
        Jf = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL)[:, arm]
        dq = np.zeros(model.nv)
        dq[arm] = np.linalg.solve(Jf.T @ Jf + 1e-4 * np.eye(len(arm)), Jf.T @ err)
        dq *= min(1.0, 0.2 / np.linalg.norm(dq))
        q = pin.integrate(model, q, dq)
    else:
        raise RuntimeError("UR5 inverse kinematics did not converge")
    q[7:13] = np.mod(q[7:13] + np.pi, 2.0 * np.pi) - np.pi
    return q


def ur5_box_press_state(sim: Simulator) -> np.ndarray:
    """The bench state: box at rest on the ground, fingertip on the centre of its top, tool down, at rest."""
    target = BOX_CENTER + np.array([0.0, 0.0, BOX_SIZE[2] / 2 + FINGERTIP_RADIUS])
    return np.concatenate((_ur5_tip_ik(sim, UR5_GUESS_PRESS, target, TOOL_DOWN), np.zeros(sim.nv)))


def ur5_box_start_state(sim: Simulator) -> np.ndarray:
    """The push problem's start: fingertip ``START_GAP`` from the box's -x face at ``PUSH_HEIGHT``, tool along +x."""
    target = np.array([BOX_CENTER[0] - BOX_SIZE[0] / 2 - FINGERTIP_RADIUS - START_GAP, BOX_CENTER[1], PUSH_HEIGHT])
    return np.concatenate((_ur5_tip_ik(sim, UR5_GUESS_PUSH, target, TOOL_FORWARD), np.zeros(sim.nv)))


def ur5_box_bench(sim: Simulator, x: np.ndarray, force: float = PRESS_FORCE):
    """``(u, lam)``: torques holding the arm against gravity while its fingertip presses with ``force``
    along its contact normal, and the contact impulses (box corners share the rest)."""
    q = x[: sim.nq]
    contacts, _ = sim.contact_jacobian(q)
    tip_joint = sim.geometry.geometryObjects[sim.geometry.getGeometryId("fingertip")].parentJoint
    tip = [i for i in range(len(contacts)) if tip_joint in (contacts.body_a[i], contacts.body_b[i])]
    if len(tip) != 1:
        raise RuntimeError(f"expected one fingertip contact, found {len(tip)}")
    ground = [i for i in range(len(contacts)) if i != tip[0]]
    share = np.zeros(len(contacts))
    share[ground] = (BOX_MASS * 9.81 + force) * sim.dt / len(ground)
    u, lam, _ = static_contact_torques(sim, q, normal_share=share, pinned={tip[0]: (force * sim.dt, 0.0, 0.0)})
    return u, lam


@register("ur5-box", "UR5 arm pushes a 2 kg box 0.1 m along the ground (3-D, 12 dof); 300 steps of 1 ms",
          method="ddp", options={"smoothing": "auto", "time_limit": 60.0})
def ur5_box(*, horizon: int = 300, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.5,
            distance: float = PUSH_DISTANCE, box_weight: float = 1e4, control_weight: float = 1e-4,
            velocity_weight: float = 1e-3) -> OCP:
    """Push the box ``distance`` along +x: terminal cost ``box_weight (x_box - target)^2``, running
    costs on torques (from gravity compensation) and velocities. ``box_weight`` 1e4 makes the push's
    optimum land within ~2 mm (measured: 0.05, 0.1, 0.15 m, LCP and NCP); with 1e3 the effort terms
    win 1.4 cm short. The fingertip starts 2 cm from the box: hard contact gives no gradient
    towards it, so the recipe solves with smoothing."""
    sim = ur5_box_simulator(dt=dt, contact=contact, friction=friction)
    x0 = ur5_box_start_state(sim)
    u0 = pin.computeGeneralizedGravity(sim.model, sim.model.createData(), x0[: sim.nq])[sim.actuated_dofs].copy()
    x_bench = ur5_box_press_state(sim)
    u_bench, _ = ur5_box_bench(sim, x_bench)
    target = float(x0[0] + distance)
    nv = sim.nv

    def box_x(x, u=None):
        return box_weight * (x[0] - target) ** 2

    def box_x_derivatives(x, u=None):
        # d(box x)/d(tangent) = first row of the box's rotation on the linear part (pin.integrate: p + R v).
        a = pin.Quaternion(x[6], x[3], x[4], x[5]).toRotationMatrix()[0]
        e = x[0] - target
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = box_weight * e * e
        out.Lx[:3] = 2.0 * box_weight * e * a
        out.Lxx[:3, :3] = 2.0 * box_weight * np.outer(a, a)  # Gauss-Newton
        return out

    wv = np.zeros(sim.ndx)
    wv[nv:] = velocity_weight
    running = ControlCost(sim, control_weight, u_ref=u0) + StateCost(sim, x0, wv)
    terminal = FunctionCost(sim, box_x, box_x_derivatives)

    def metrics(xs, us):
        return {"box_displacement": float(xs[-1, 0] - x0[0]), "box_x_error": float(xs[-1, 0] - target)}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=running, terminal_cost=terminal,
               name="ur5-box", us_init=u0, metrics=metrics,
               info={"bench_state": (x_bench, u_bench), "target_box_x": target})
