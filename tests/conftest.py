"""Shared fixtures: simulators built once per module by small factories."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import ModelBuilder, Simulator, example_robot_urdf
from problems.cartpole import cartpole_simulator, pendulum_simulator


def free_body_simulator(dt: float = 1e-3) -> Simulator:
    """A 1 kg box (0.3 x 0.2 x 0.1 m) on a free-flyer joint, no gravity effects on rotation."""
    b = ModelBuilder("free-box")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.3, 0.2, 0.1), offset=(0.05, -0.02, 0.01))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt)


SIMULATORS = {
    "pendulum": lambda: pendulum_simulator(dt=0.01),
    "cartpole": lambda: cartpole_simulator(1, dt=0.02),
    "double-cartpole": lambda: cartpole_simulator(2, dt=0.02),
    "ur5": lambda: Simulator.from_urdf(example_robot_urdf("ur5"), dt=0.01),
    "free-body": lambda: free_body_simulator(dt=0.01),
    "go1-floating": lambda: Simulator.from_urdf(example_robot_urdf("go1"), floating_base=True, dt=0.005),
}


@pytest.fixture(scope="module", params=sorted(SIMULATORS))
def any_sim(request):
    return request.param, SIMULATORS[request.param]()


def random_state(sim: Simulator, rng: np.random.Generator, v_scale: float = 1.0) -> np.ndarray:
    """A random state: a random configuration on the manifold (random quaternions too) and velocity."""
    import pinocchio as pin

    m = sim.model
    lo = np.where(np.abs(m.lowerPositionLimit) < 10, m.lowerPositionLimit, -np.pi)
    hi = np.where(np.abs(m.upperPositionLimit) < 10, m.upperPositionLimit, np.pi)
    q = pin.neutral(m)
    # Move every coordinate in the tangent space so quaternions stay unit and non-trivial.
    q = pin.integrate(m, q, rng.uniform(-1.0, 1.0, m.nv))
    for j in m.joints[1:]:
        if j.nq == j.nv == 1:
            q[j.idx_q] = rng.uniform(lo[j.idx_q], hi[j.idx_q])
    return np.concatenate((q, v_scale * rng.standard_normal(m.nv)))


def random_control(sim: Simulator, rng: np.random.Generator) -> np.ndarray:
    scale = np.where(np.isfinite(sim.u_upper), 0.3 * sim.u_upper, 1.0)
    return rng.uniform(-1.0, 1.0, sim.nu) * scale
