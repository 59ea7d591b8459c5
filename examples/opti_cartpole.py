"""Cartpole swing-up written directly with casadi.Opti, using the simulator as a CasADi function.

``trajopt.casadi_step(sim)`` wraps the simulator's step; CasADi calls back into
Python for its value and its exact Jacobian, so the step plugs into any
problem you write yourself. Run: ``python examples/opti_cartpole.py``.
"""

import casadi as ca
import numpy as np

from problems.cartpole import cartpole_simulator
from trajopt import casadi_step


def swing_up(T: int = 100, dt: float = 0.02, force: float = 30.0, verbose: bool = True):
    sim = cartpole_simulator(1, dt=dt, force_limit=force)
    f = casadi_step(sim)                                # x_next = f(x, u), exact Jacobian
    opti = ca.Opti()
    X = opti.variable(sim.nx, T + 1)                    # states (cart, pole angle, velocities)
    U = opti.variable(sim.nu, T)                        # cart force
    opti.subject_to(X[:, 0] == np.zeros(sim.nx))        # hanging at rest
    for t in range(T):
        opti.subject_to(X[:, t + 1] == f(X[:, t], U[:, t]))
    opti.subject_to(opti.bounded(-force, U, force))
    goal = np.array([0.0, np.pi, 0.0, 0.0])             # pole upright, cart back at 0, at rest
    opti.subject_to(X[:, T] == goal)
    opti.minimize(ca.sumsqr(U))                         # least effort
    # IPOPT's exact-Hessian mode: casadi_step declares the dynamics' curvature zero, so the
    # Hessian of the Lagrangian is Gauss-Newton (this objective's exact Hessian).
    opti.solver("ipopt", {"print_time": False}, {"print_level": 5 if verbose else 0, "max_iter": 500})
    sol = opti.solve()
    return np.asarray(sol.value(X)).T, np.atleast_2d(np.asarray(sol.value(U))).T


if __name__ == "__main__":
    xs, us = swing_up()
    print(f"final state {xs[-1].round(4)}; max |force| {np.abs(us).max():.2f} N")
