"""Manipulators from example-robot-data (no contact).

- ``ur5-reach``: UR5 (masses and inertias from its URDF) moves from a bent start
  configuration to a target configuration and stops there; torque limits from
  the URDF (150 N m shoulder/elbow, 28 N m wrist); dt 10 ms, 1 s.
"""

from __future__ import annotations

import numpy as np

from dynamics import Simulator, example_robot_urdf
from trajopt import OCP, ControlCost, StateCost

from ._registry import register

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
