"""Planar contact problems of the Nimble paper: catapult and jump-worm.

Planar: motion in the xy plane, **y up**, gravity 9.81 m/s^2 along -y, revolute
joints turn about z. Every body is a uniform box with its own inertia:

- projectile / worm root: 0.1 m cube, 1 kg, on a 2-D translational joint (x, y), unactuated;
- arm / tail links: boxes 0.05 x 0.25 x 0.05 m (long along the link's local y), 1 kg,
  hinged at one end; the next link is hinged at the other end. A link's angle is
  measured from +y (straight up) and turns towards -x; limits [0, pi];
- floors: static boxes (collision only).

Each articulated system has no self-collision, as in DART (Nimble's engine), whose skeletons
do not collide with themselves by default: the third link folds back over the second at its
limit of pi and would otherwise rest inside the first, an overlap the contact solver can only
answer inexactly (an infeasible LCP) at every such step. The catapult's box and arm, separate
systems, collide; so does everything with the floor.

Contacts use friction 1.0 and one friction direction (planar); ``contact="lcp"``
(default) or ``"ncp"`` -- in the plane the Coulomb cone is the LCP's box, so both
give the same motion.
"""

from __future__ import annotations

import numpy as np

from dynamics import ModelBuilder, Simulator
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost

from ._options import target_point
from ._registry import register
from ._scene import first_contact_state, lowest_point

LINK_SIZE = (0.05, 0.25, 0.05)
LINK_MASS = 1.0
BOX_SIDE = 0.1
BOX_MASS = 1.0
GRAVITY = (0.0, -9.81, 0.0)


def _chain(b: ModelBuilder, base, prefix, n, *, torque, placement, lengths=None):
    """``n`` revolute links ``prefix1..n`` hinged end to end from ``placement`` in ``base``; link ``i`` of
    length ``lengths[i]`` (default ``LINK_SIZE[1]``) is a uniform box of the links' density (mass
    ``LINK_MASS`` at ``LINK_SIZE[1]``), and the next joint sits at its far end."""
    lengths = (LINK_SIZE[1],) * n if lengths is None else tuple(lengths)
    parent, at = base, placement
    for i in range(n):
        ell = lengths[i]
        j = b.add_joint("revolute", name=f"{prefix}{i + 1}", parent=parent, axis="z", placement=at,
                        lower=0.0, upper=np.pi, effort=torque)
        mass = LINK_MASS if ell == LINK_SIZE[1] else LINK_MASS * ell / LINK_SIZE[1]
        b.add_body(j, mass=mass, box=(LINK_SIZE[0], ell, LINK_SIZE[2]), offset=(0, ell / 2, 0))
        parent, at = j, (0.0, ell, 0.0)
    return [f"{prefix}{i + 1}" for i in range(n)]


def catapult_simulator(*, dt: float = 1e-3, friction: float = 1.0, contact: str = "lcp", torque: float = 1000.0,
                       lengths=None, name: str = "catapult", joint_damping=None) -> Simulator:
    """Projectile at (0, 0.1); 3-link arm welded at (0.5, -0.45), torques +-``torque`` (1000 N m);
    floor 3.5 x 0.25 x 0.5 m centred at (1.2, -0.7). ``lengths``: the three links' lengths (m; default
    0.25 each), each link rebuilt at the links' density (:func:`_chain`; ``catapult-design``).
    ``joint_damping``: the Simulator's (per dof; ``catapult-design``'s motor line)."""
    b = ModelBuilder(name, gravity=GRAVITY)
    p = b.add_joint("translation2d", name="projectile")
    b.add_body(p, mass=BOX_MASS, box=(BOX_SIDE,) * 3)
    arm = _chain(b, 0, "arm", 3, torque=torque, placement=(0.5, -0.45, 0.0), lengths=lengths)
    b.add_static_box("floor", (3.5, 0.25, 0.5), (1.2, -0.7, 0.0))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, actuated=arm, friction=friction, planar=True, contact=contact,
                     exclude_pairs=[("arm1_body2", "arm3_body4")], joint_damping=joint_damping)


def jump_worm_simulator(*, dt: float = 1e-3, friction: float = 1.0, contact: str = "lcp") -> Simulator:
    """Root cube on a 2-D translational joint with 3 tail links (torques +-100 N m);
    floor 2.5 x 0.25 x 0.5 m centred at (0, -0.7)."""
    b = ModelBuilder("jump-worm", gravity=GRAVITY)
    r = b.add_joint("translation2d", name="root")
    b.add_body(r, mass=BOX_MASS, box=(BOX_SIDE,) * 3)
    tail = _chain(b, r, "tail", 3, torque=100.0, placement=(0.0, 0.0, 0.0))
    b.add_static_box("floor", (2.5, 0.25, 0.5), (0.0, -0.7, 0.0))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, actuated=tail, friction=friction, planar=True, contact=contact,
                     exclude_pairs=[("tail1_body2", "tail3_body4"), ("root_body1", "tail2_body3"),
                                    ("root_body1", "tail3_body4")])


def _point_cost(sim, idx, fun_grad_hess):
    """A terminal cost of the configuration entries ``idx`` with exact derivatives."""

    def value(x, u=None):
        return fun_grad_hess(x[idx])[0]

    def derivatives(x, u=None):
        L, g, H = fun_grad_hess(x[idx])
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = L
        out.Lx[idx] = g  # these coordinates are Euclidean: tangent = configuration
        out.Lxx[np.ix_(idx, idx)] = H
        return out

    return FunctionCost(sim, value, derivatives)


@register("catapult", "planar 3-link arm bats a box onto the target (2.2, 2.2); 500 steps of 1 ms",
          method="cem-ddp", options={"time_limit": 40.0},
          # IPOPT: one shot over the whole horizon (every iterate a true rollout: with knot states,
          # its trial knots sit in the floor or the arm and the shots never join), L-BFGS (an
          # exact Gauss-Newton Hessian through 500 chained steps is too slow to build), from a
          # CEM search (no gradient reaches the resting box from zero torques)
          methods={"shooting": {"search": "cem", "shot_length": None, "hessian": "lbfgs", "time_limit": 300.0}})
def catapult(*, horizon: int = 500, dt: float = 1e-3, target=(2.2, 2.2), control_weight: float = 1e-14,
             contact: str = "lcp") -> OCP:
    """The loss is the squared distance of the box to the target at the last step; a tiny control
    regularization (``control_weight`` |u|^2 per step) only keeps DDP's Quu invertible. It must stay
    negligible next to the task's tolerance: a bat uses some 300 N m on 3 joints for 500 steps,
    1.4e8 (N m)^2, so 1e-14 weighs like (1.2 mm)^2 of miss. (With 1e-11, like (3.7 cm)^2, DDP's
    optimum stopped 1.1-1.2 cm short of the target on seeds 0 and 9.)"""
    target = target_point(target)
    sim = catapult_simulator(dt=dt, contact=contact)
    x0 = np.zeros(sim.nx)
    x0[:2] = (0.0, 0.1)
    x0[2:5] = np.deg2rad([45.0, 0.0, 45.0])
    idx = np.array([0, 1])

    def sq_dist(p):
        e = p - target
        return float(e @ e), 2.0 * e, 2.0 * np.eye(2)

    def metrics(xs, us):
        return {"distance_to_target": float(np.linalg.norm(xs[-1, :2] - target)),
                "final_x": float(xs[-1, 0]), "final_y": float(xs[-1, 1])}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=ControlCost(sim, control_weight),
               terminal_cost=_point_cost(sim, idx, sq_dist), name="catapult", metrics=metrics,
               info={"target": target, "bench_state": first_contact_state(sim, x0, horizon)})


@register("jump-worm", "planar worm (root cube + 3 tail links) jumps as high as it can; 400 steps of 1 ms",
          method="cem-ddp", options={"time_limit": 60.0})
def jump_worm(*, horizon: int = 400, dt: float = 1e-3, control_weight: float = 1e-9, contact: str = "lcp") -> OCP:
    sim = jump_worm_simulator(dt=dt, contact=contact)
    x0 = np.zeros(sim.nx)
    x0[2:5] = np.deg2rad([90.0, 90.0, 45.0])
    # Drop the worm so that its lowest corner is 1 mm above the floor top (y = -0.575).
    x0[1] = 0.0
    x0[1] += -0.575 + 1e-3 - lowest_point(sim, x0[: sim.nq], axis=1)
    idx = np.array([1])

    def neg_height(p):
        return float(-p[0]), np.array([-1.0]), np.zeros((1, 1))

    def metrics(xs, us):
        return {"final_root_height": float(xs[-1, 1]), "max_root_height": float(xs[:, 1].max())}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=ControlCost(sim, control_weight),
               terminal_cost=_point_cost(sim, idx, neg_height), name="jump-worm", metrics=metrics,
               info={"bench_state": first_contact_state(sim, x0, horizon)})
