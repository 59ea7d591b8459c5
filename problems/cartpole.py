"""Pendulum, cartpole and double-cartpole swing-up (no contact), built in code.

Frame: x horizontal, z up, gravity 9.81 m/s^2 along -z; every revolute joint
turns about y. Angle 0 is hanging straight down, +-pi is upright.

Bodies (uniform solids; inertia is the solid's own):

- cart: box 0.3 x 0.2 x 0.1 m, 1.0 kg, on a prismatic joint along x (the only
  actuated joint of the cartpoles, force limit stated per problem);
- pole links: box 0.04 x 0.04 x L m, 0.1 kg, L = 1.0 m (cartpole) or 0.5 m each
  (double cartpole), hinged at their top, centre of mass at L/2;
- pendulum: one 1.0 kg, 1.0 m box link hinged at the world origin, torque +-5 N m.

The links pass through each other and the cart (no self-collision), as in the
classic benchmark.
"""

from __future__ import annotations

import numpy as np

from dynamics import ModelBuilder, Simulator
from trajopt import OCP, ControlCost, StateCost

from ._registry import register

CART_MASS = 1.0
CART_SIZE = (0.3, 0.2, 0.1)
POLE_MASS = 0.1
POLE_WIDTH = 0.04


def pendulum_simulator(*, dt: float = 0.01, length: float = 1.0, mass: float = 1.0,
                       torque_limit: float = 5.0) -> Simulator:
    """A single rigid link hinged at the world origin, actuated at the hinge."""
    b = ModelBuilder("pendulum")
    j = b.add_joint("revolute", name="hinge", axis="y", effort=torque_limit)
    b.add_body(j, mass=mass, box=(POLE_WIDTH, POLE_WIDTH, length), offset=(0, 0, -length / 2))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt)


def cartpole_simulator(n_poles: int = 1, *, dt: float = 0.02, pole_length: float | None = None,
                       force_limit: float = 30.0) -> Simulator:
    """A cart on a rail (actuated) carrying a chain of ``n_poles`` unactuated poles."""
    if n_poles < 1:
        raise ValueError(f"a cartpole needs at least one pole, got {n_poles}")
    L = pole_length if pole_length is not None else (1.0 if n_poles == 1 else 0.5)
    b = ModelBuilder("cartpole" if n_poles == 1 else f"cartpole{n_poles}")
    cart = b.add_joint("prismatic", name="cart", axis="x", effort=force_limit)
    b.add_body(cart, mass=CART_MASS, box=CART_SIZE)
    parent, at = cart, (0.0, 0.0, 0.0)
    for i in range(n_poles):
        j = b.add_joint("revolute", name=f"pole{i + 1}", parent=parent, axis="y", placement=at)
        b.add_body(j, mass=POLE_MASS, box=(POLE_WIDTH, POLE_WIDTH, L), offset=(0, 0, -L / 2))
        parent, at = j, (0.0, 0.0, -L)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, actuated=["cart"], self_collision=False)


def _angle_error(theta):
    """Distance of each angle from upright (+-pi), in [0, pi]."""
    return np.abs(np.angle(np.exp(1j * (np.asarray(theta) - np.pi))))


def _swing_up(sim: Simulator, angle_idx, *, horizon, name, w_goal, w_u, w_x):
    x0 = sim.neutral_state()
    x_goal = x0.copy()
    x_goal[angle_idx] = np.pi
    running = w_x * StateCost(sim, x_goal, 1.0) + ControlCost(sim, w_u)
    terminal = StateCost(sim, x_goal, w_goal)

    def metrics(xs, us):
        return {"final_angle_error": float(np.max(_angle_error(xs[-1, angle_idx])))}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=running, terminal_cost=terminal,
               name=name, metrics=metrics)


@register("pendulum", "torque-limited pendulum swing-up (1 dof, 2 s)")
def pendulum(*, horizon: int = 200, dt: float = 0.01) -> OCP:
    sim = pendulum_simulator(dt=dt)
    return _swing_up(sim, [0], horizon=horizon, name="pendulum", w_goal=100.0, w_u=1e-2, w_x=1e-3)


@register("cartpole", "cartpole swing-up: cart force +-30 N, 1 m pole, 2 s")
def cartpole(*, horizon: int = 100, dt: float = 0.02) -> OCP:
    sim = cartpole_simulator(1, dt=dt)
    return _swing_up(sim, [1], horizon=horizon, name="cartpole", w_goal=1000.0, w_u=1e-2, w_x=1e-2)


@register("double-cartpole", "double cartpole swing-up: cart force +-60 N, two 0.5 m poles, 3 s")
def double_cartpole(*, horizon: int = 150, dt: float = 0.02) -> OCP:
    sim = cartpole_simulator(2, dt=dt, force_limit=60.0)
    return _swing_up(sim, [1, 2], horizon=horizon, name="double-cartpole", w_goal=1000.0, w_u=1e-3, w_x=1e-2)
