"""3-D contact scenes "for scale": a quadruped and a humanoid (the arm pushing a box: problems/manipulators.py).

z up, gravity 9.81 m/s^2 along -z, ground half-space z = 0, time step 1 ms. Each
scene has a simulator factory (usable directly) and a registered problem whose
``info["bench_state"]`` is ``(x, u)``: a state *in contact*, at rest, with
torques that hold it (the contact benchmark's operating point). Every factory
takes ``contact=`` (default ``"lcp"``: the boxed LCP, two friction directions
per contact, a 4-sided pyramid) and passes it to the :class:`~dynamics.Simulator`.

Go1 (``go1-hold``; the inverse-dynamics ``go1-standing`` is in problems/inverse.py)
    Unitree Go1 of example-robot-data (``go1_description/urdf/go1.urdf``): masses,
    inertias, joint limits and torque limits (23.7 N m hip and thigh, 35.55 N m calf)
    from the URDF, 13.10 kg in all. Free-flyer base: nq 19, nv 18, 12 actuated.
    Collision model: the URDF's (boxes and cylinders on the links, spheres of
    radius 0.02 m as feet); only the ground collides with it (the default for
    URDFs: no self-collision). Friction 0.8.
    Standing pose: the joint angles of the SRDF's ``standing`` state (hip 0,
    thigh 0.8, calf -1.853 rad), base orientation identity, base height 0.27383 m
    computed (forward kinematics + foot geometry placements) so that the four foot
    spheres touch the ground (signed distance 0).

Go1 jump (``go1-jump``)
    The Go1 scene above, from the standing state (the static-contact torques as the
    initial guess), 300 steps of 1 ms: jump as high as possible. Reward: the
    *ballistic apex* of the base, ``h(x) = z + max(v_z, 0)^2 / (2 g)`` (``v_z`` the
    base's vertical velocity in the world frame): the height the base would reach if
    it flew from ``x`` now. It rewards upward speed before the feet leave the ground,
    so the gradient of a stance state already points to a push-off (a reward on ``z``
    alone is maximised by standing tall on stretched legs, 0.40 m at most), and it is
    constant in flight. Running cost, per second (times dt per knot):
    ``-apex_weight h(x) + 0.5 |x (-) x_stand|^2_W + 0.5 control_weight |u - u_hold|^2
    + joint-speed penalty``; terminal cost ``-terminal_weight h(x_T)`` plus the posture
    term times dt. W: ``orientation_weight`` on the base's roll, pitch, yaw,
    ``position_weight`` on its x, y, ``joint_weight`` on the joint angles,
    ``velocity_weight`` on the base's angular and the joints' velocities; nothing on
    the base's height or linear velocity. Physically honest: torques within the URDF's
    motor limits (the OCP's bounds), and joint speeds within the URDF's velocity limits
    (30.1 rad/s hip and thigh, 20.06 rad/s calf) by a penalty
    ``0.5 speed_limit_weight max(|v_j| - v_max_j, 0)^2`` (the simulator has no motor
    speed limit: without it the optimum spins the calves at 40 rad/s and throws the
    base 2 m high). The apex reward's Hessian is concave; its curvature is dropped
    (``Lxx`` of that term 0) so DDP's Q-function stays convex in u.
    Metrics: ``max_base_height`` (m, over the trajectory), ``final_base_height`` (m),
    ``flight_time`` (s: dt times the number of states after a step whose four foot
    spheres are all at least ``GO1_FLIGHT_CLEARANCE`` = 1 cm above the ground),
    ``max_joint_speed_ratio`` (largest |v_j| / v_max_j).
    Recipe: DDP on hard contact from the holding torques, its regularization kept at
    1e-4 or more (``reg_init = reg_min = 1e-4``; the control cost gives ``Luu`` = 1e-6
    per knot only). Measured (300 steps, 120 s): with the floor at 1e-4 or 3e-4 the first
    iteration already jumps (also at 250 and 350 steps and with ``contact="ncp"``); at
    1e-5 the target comes after 33 s (300 steps) or not at all (350 steps); at 1e-6 not
    within 120 s; with DDP's own floor (1e-9) after 70 s. The gradient of the apex reward in
    stance is informative (the feet push through clamping contacts), so no smoothing.
    The automatic schedule (kappa 0.30, 0.099, 0.030, 0.0099, 0.0030 J, then 0) does not
    suit this scene: its friction barrier lets the feet slide (0.3 s under the holding
    torques: 39 cm at kappa 0.30 and 0.099, 3 cm at 0.030, 1.4 mm at 0.0099, 0.1 mm at
    0.0030), so its first stages optimise a robot whose feet slide, and the hard stage
    starts from controls made for that robot.

Talos (``talos-standing``)
    Talos of example-robot-data, ``talos_data/robots/talos_reduced_box.urdf`` (the
    reduced model whose feet collision geometry are boxes; its masses equal
    ``talos_reduced.urdf``'s): masses, inertias and torque limits from that URDF,
    90.27 kg in all. Free-flyer base: nq 39, nv 38, 32 actuated. Collision model:
    only the URDF's two sole boxes (0.21 x 0.13 x 0.02 m, 0.1 m below the
    ankle-roll joint), so only the soles touch the ground, 4 corners each; the
    link meshes are left out (they would only add mesh-vs-ground tests).
    Friction 0.8.
    Standing pose: the SRDF's ``half_sitting`` configuration with two changes:
    ankle roll 0 (the SRDF's -0.0017 rad tilts the soles by 0.2 mm across their
    width) and grippers half open at -0.5 rad (the SRDF's 0 is the closed stop,
    where a joint-limit row with zero impulse is a kink of the step). Base height
    1.02227 m computed so that both soles rest flat on the ground.

Bench torques (:func:`problems._scene.static_contact_torques`): the contact impulses closest (least
squares) to an even share of the weight (Go1, Talos) that balance
the unactuated coordinates (free-flyer base, or box) exactly at zero velocity;
the actuated torques are then ``u = (g(q) dt - J^T lambda)_actuated / dt``, so a
step keeps the state at rest (contacts stick, ``v+ = 0`` to ~1e-11). These
torques are open loop: a perturbed standing robot does not recover.

Standing problems (for now): hold the standing state for 200 steps of 1 ms,
running cost ``0.5 |x (-) x_ref|^2_W + 0.5 w_u |u - u_bench|^2`` with W = 1 on
configuration and 0.1 on velocity, terminal state cost 10 W; ``w_u`` 1e-3 (Go1),
1e-4 (Talos).
"""

from __future__ import annotations

import os

import numpy as np
import pinocchio as pin

from dynamics import Simulator, example_robot_urdf
from dynamics.robots import infer_package_dirs
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost, StateCost

from ._registry import register
from ._scene import lowest_point, static_contact_torques

# -- Go1 ---------------------------------------------------------------------------------------
GO1_LEGS = ("FL", "FR", "RL", "RR")
#: The SRDF's "standing" joint angles (rad), per leg: hip, thigh, calf.
GO1_STANDING = {"hip": 0.0, "thigh": 0.8, "calf": -1.853}
GO1_FOOT_RADIUS = 0.02  # from the URDF (collision spheres of the *_foot links)
GO1_FEET = tuple(f"{leg}_foot_0" for leg in GO1_LEGS)  # the foot spheres' collision objects
GO1_FLIGHT_CLEARANCE = 0.01  # m: a state is in flight when every foot is at least this high

# -- Talos -------------------------------------------------------------------------------------
TALOS_URDF = "talos_reduced_box.urdf"
TALOS_SOLES = ("leg_left_6_link_0", "leg_right_6_link_0")
#: Gripper angle (rad) of the standing state: half open, off its stops at [-1.047, 0] (the SRDF's 0 is
#: the closed stop, where a joint-limit row with zero impulse is a kink of the step).
TALOS_GRIPPER = -0.5


# ===========================================================================================
# Shared helpers
# ===========================================================================================
def _set_joint(model: pin.Model, q: np.ndarray, name: str, value: float) -> None:
    q[model.joints[model.getJointId(name)].idx_q] = value


# ===========================================================================================
# Go1
# ===========================================================================================
def go1_standing_simulator(*, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.8) -> Simulator:
    """Unitree Go1 (floating base, 18 dof, 12 actuated) on the ground z = 0, URDF collision model."""
    return Simulator.from_urdf(example_robot_urdf("go1"), floating_base=True, dt=dt, ground=0.0,
                               friction=friction, contact=contact, name="go1")


def go1_standing_state(sim: Simulator) -> np.ndarray:
    """The standing state: SRDF joint angles, base height with the four feet touching the ground, at rest."""
    model = sim.model
    q = pin.neutral(model)
    for leg in GO1_LEGS:
        for part, angle in GO1_STANDING.items():
            _set_joint(model, q, f"{leg}_{part}_joint", angle)
    q[2] -= lowest_point(sim, q, axis=2, names=GO1_FEET)
    return np.concatenate((q, np.zeros(model.nv)))


def _standing_ocp(sim, x_stand, *, name, horizon, state_weight, control_weight):
    """Hold ``x_stand`` with the static-contact torques as the reference and initial guess."""
    u_hold, _, _ = static_contact_torques(sim, x_stand[: sim.nq])
    h0 = float(x_stand[2])

    def metrics(xs, us):
        return {"base_height_change": float(xs[-1, 2] - h0), "max_base_drop": float(h0 - xs[:, 2].min())}

    nv = sim.nv
    w = np.concatenate((np.full(nv, state_weight), np.full(nv, 0.1 * state_weight)))
    running = StateCost(sim, x_stand, w) + ControlCost(sim, control_weight, u_ref=u_hold)
    terminal = StateCost(sim, x_stand, 10.0 * w)
    return OCP(dynamics=sim, x0=x_stand, horizon=horizon, running_cost=running, terminal_cost=terminal,
               name=name, us_init=u_hold, metrics=metrics,
               info={"bench_state": (x_stand.copy(), u_hold.copy()), "x_ref": x_stand.copy()})


@register("go1-hold", "Unitree Go1 (18 dof, 3-D) holds its standing pose on 4 feet; 200 steps of 1 ms")
def go1_hold_ocp(*, horizon: int = 200, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.8,
                 state_weight: float = 1.0, control_weight: float = 1e-3) -> OCP:
    sim = go1_standing_simulator(dt=dt, contact=contact, friction=friction)
    return _standing_ocp(sim, go1_standing_state(sim), name="go1-hold", horizon=horizon,
                         state_weight=state_weight, control_weight=control_weight)


def _base_rise(sim: Simulator, x: np.ndarray):
    """``(R, v, vz)``: the free-flyer base's rotation, local linear velocity and upward world
    velocity ``max(R[2] . v, 0)``."""
    R = pin.Quaternion(x[6], x[3], x[4], x[5]).toRotationMatrix()
    v = x[sim.nq:sim.nq + 3]
    return R, v, max(float(R[2] @ v), 0.0)


def base_apex_height(sim: Simulator, x: np.ndarray) -> float:
    """Ballistic apex of a free-flyer base: ``z + max(v_z, 0)^2 / (2 g)``, ``v_z`` its world vertical velocity."""
    g = float(np.linalg.norm(sim.model.gravity.linear))
    return float(x[2]) + _base_rise(sim, x)[2] ** 2 / (2.0 * g)


def base_apex_reward(sim: Simulator, weight: float) -> FunctionCost:
    """``-weight * base_apex_height(x)`` with its exact gradient; the concave curvature is dropped (Lxx = 0).

    Tangent space (pin.integrate on the free flyer: ``p + R dp``, ``R exp(dtheta)``): z moves
    with ``R[2] . dp``, the world velocity ``R v`` with ``R dv - R [v]x dtheta``.
    """
    g = float(np.linalg.norm(sim.model.gravity.linear))
    nv = sim.nv

    def value(x, u=None):
        return -weight * base_apex_height(sim, x)

    def derivatives(x, u=None):
        R, v, vz = _base_rise(sim, x)
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = value(x)
        out.Lx[:3] = -weight * R[2]
        out.Lx[3:6] = weight * vz / g * (R @ pin.skew(v))[2]
        out.Lx[nv:nv + 3] = -weight * vz / g * R[2]
        return out

    return FunctionCost(sim, value, derivatives)


def joint_speed_limits(sim: Simulator):
    """``(dofs, vmax)``: the actuated velocity indices and the model's (URDF's) speed limits there."""
    dofs = np.asarray(sim.actuated_dofs)
    return dofs, np.asarray(sim.model.velocityLimit)[dofs]


def joint_speed_penalty(sim: Simulator, weight: float) -> FunctionCost:
    """``0.5 weight sum_j max(|v_j| - v_max_j, 0)^2`` over the actuated joints, ``v_max`` the model's
    velocity limits (the URDF's); exact derivatives (the Hessian is piecewise constant)."""
    dofs, vmax = joint_speed_limits(sim)
    nq, nv = sim.nq, sim.nv

    def excess(x):
        v = x[nq:][dofs]
        return np.maximum(np.abs(v) - vmax, 0.0), np.sign(v)

    def value(x, u=None):
        e, _ = excess(x)
        return 0.5 * weight * float(e @ e)

    def derivatives(x, u=None):
        e, sgn = excess(x)
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = 0.5 * weight * float(e @ e)
        out.Lx[nv + dofs] = weight * e * sgn
        out.Lxx[nv + dofs, nv + dofs] = weight * (e > 0)
        return out

    return FunctionCost(sim, value, derivatives)


def go1_flight_mask(sim: Simulator, xs: np.ndarray) -> np.ndarray:
    """(len(xs),) bool: all four feet at least ``GO1_FLIGHT_CLEARANCE`` above the ground."""
    return np.array([lowest_point(sim, x[: sim.nq], axis=2, names=GO1_FEET) >= GO1_FLIGHT_CLEARANCE for x in xs])


@register("go1-jump", "Unitree Go1 (18 dof, 3-D) jumps from standing as high as it can; 300 steps of 1 ms",
          method="ddp", options={"time_limit": 120.0, "max_iter": 1000, "reg_init": 1e-4, "reg_min": 1e-4})
def go1_jump(*, horizon: int = 300, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.8,
             apex_weight: float = 300.0, terminal_weight: float = 0.0, orientation_weight: float = 100.0,
             position_weight: float = 100.0, joint_weight: float = 0.1, velocity_weight: float = 0.1,
             control_weight: float = 1e-3, speed_limit_weight: float = 1e4) -> OCP:
    sim = go1_standing_simulator(dt=dt, contact=contact, friction=friction)
    x0 = go1_standing_state(sim)
    u_hold, _, _ = static_contact_torques(sim, x0[: sim.nq])
    nv = sim.nv
    w = np.zeros(sim.ndx)
    w[0:2] = position_weight
    w[3:6] = orientation_weight
    w[6:nv] = joint_weight
    w[nv + 3:nv + 6] = velocity_weight
    w[nv + 6:] = velocity_weight
    posture = StateCost(sim, x0, w)
    reward = base_apex_reward(sim, 1.0)
    dofs, vmax = joint_speed_limits(sim)
    running = dt * (apex_weight * reward + posture + ControlCost(sim, control_weight, u_ref=u_hold)
                    + joint_speed_penalty(sim, speed_limit_weight))
    terminal = terminal_weight * reward + dt * posture

    def metrics(xs, us):
        return {"max_base_height": float(xs[:, 2].max()), "final_base_height": float(xs[-1, 2]),
                "flight_time": float(dt * go1_flight_mask(sim, xs[1:]).sum()),
                "max_joint_speed_ratio": float(np.max(np.abs(xs[:, sim.nq:][:, dofs]) / vmax))}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=running, terminal_cost=terminal,
               name="go1-jump", us_init=u_hold, metrics=metrics,
               info={"bench_state": (x0.copy(), u_hold.copy()), "x_ref": x0.copy()})


# ===========================================================================================
# Talos
# ===========================================================================================
def _talos_paths():
    urdf = os.path.join(os.path.dirname(example_robot_urdf("talos")), TALOS_URDF)
    srdf = os.path.join(os.path.dirname(os.path.dirname(urdf)), "srdf", "talos.srdf")
    return urdf, srdf


def talos_standing_simulator(*, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.8) -> Simulator:
    """Talos (floating base, 38 dof, 32 actuated); collision model: the two sole boxes only."""
    urdf, srdf = _talos_paths()
    model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    full = pin.buildGeomFromUrdf(model, urdf, pin.GeometryType.COLLISION, package_dirs=infer_package_dirs(urdf))
    geom = pin.GeometryModel()
    for name in TALOS_SOLES:
        geom.addGeometryObject(full.geometryObjects[full.getGeometryId(name)])
    pin.loadReferenceConfigurations(model, srdf, False)
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=friction, contact=contact,
                     self_collision=False, name="talos")


def talos_standing_state(sim: Simulator) -> np.ndarray:
    """Half-sitting (SRDF) with flat soles, base height with the soles on the ground, at rest."""
    model = sim.model
    q = np.array(model.referenceConfigurations["half_sitting"], dtype=float)
    for side in ("left", "right"):
        _set_joint(model, q, f"leg_{side}_6_joint", 0.0)
        _set_joint(model, q, f"gripper_{side}_joint", TALOS_GRIPPER)
    q[2] -= lowest_point(sim, q, axis=2, names=TALOS_SOLES)
    return np.concatenate((q, np.zeros(model.nv)))


@register("talos-standing", "Talos humanoid (38 dof, 3-D) holds half-sitting on both feet; 200 steps of 1 ms")
def talos_standing(*, horizon: int = 200, dt: float = 1e-3, contact: str = "lcp", friction: float = 0.8,
                   state_weight: float = 1.0, control_weight: float = 1e-4) -> OCP:
    sim = talos_standing_simulator(dt=dt, contact=contact, friction=friction)
    return _standing_ocp(sim, talos_standing_state(sim), name="talos-standing", horizon=horizon,
                         state_weight=state_weight, control_weight=control_weight)
