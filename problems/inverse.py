"""Inverse problems through contact (the second paper's section IV-B), as least squares.

- ``cube-throw``: a 1 kg cube (0.2 m side, its own box inertia) is thrown from
  5 cm above the ground (friction 0.5, Coulomb cone) with a hidden initial twist;
  it flies, lands flat and slides. Unknown: the initial twist (6, local frame);
  residual: the differences between the observed and simulated states every
  ``every = 50`` steps of 1 ms up to ``N = 250`` (flight, landing, sliding). The
  final state alone does not identify the throw: the inelastic flat landing
  erases the vertical, roll and pitch rates, so different throws end alike. The
  true throw is ``(1.2, 0.4, 0.5)`` m/s without spin (a flat box sliding *with*
  spin is statically indeterminate: its corner loads, hence its motion, depend
  on the solver's choice); the solver starts from a perturbed guess.
- ``go1-standing``: Unitree Go1 standing on its four feet (the pose of
  :mod:`problems.legged`, Coulomb cone, friction 0.8); unknown: the 12 joint
  torques; residual: the generalized velocity after one step from rest (18), so
  the answer is the torques that hold the robot still (inverse dynamics through
  contact). Starts from zero torques.

- ``go1-payload``, ``go1-handstand``, ``g1-pushup`` (the NCP paper's Appendix E; scenes and poses
  in :mod:`problems.static_holds`): the same inverse dynamics (:func:`hold_still`: residual ``v+``
  after one step from rest, unknowns all joint torques, from zero) for Go1 with a 10 kg block
  welded on its back, Go1 balanced on its front feet, and the Unitree G1 humanoid in a push-up.

Jacobians are analytical: chained step Jacobians for the throw
(:mod:`trajopt.sensitivity`), ``dv+/du`` for the standing robot.
"""

from __future__ import annotations

import numpy as np

from dynamics import ModelBuilder, Simulator
from trajopt.lsq import LeastSquares
from trajopt.sensitivity import trajectory_jacobians

from . import static_holds
from ._options import twist
from ._registry import register
from .legged import go1_standing_simulator, go1_standing_state

CUBE_TRUE_TWIST = np.array([1.2, 0.4, 0.5, 0.0, 0.0, 0.0])
CUBE_GUESS_OFFSET = np.array([0.15, -0.1, 0.08, 0.05, -0.05, 0.08])


def cube_simulator(*, dt: float = 1e-3, friction: float = 0.5, contact: str = "ncp") -> Simulator:
    b = ModelBuilder("cube")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.2, 0.2, 0.2))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=friction, contact=contact)


@register("cube-throw", "recover the initial twist of a thrown cube from its observed flight, landing and slide",
          method=None)
def cube_throw(*, steps: int = 250, every: int = 50, dt: float = 1e-3, contact: str = "ncp", true_twist=None,
               guess_offset=None) -> LeastSquares:
    sim = cube_simulator(dt=dt, contact=contact)
    pose = sim.neutral_state()[: sim.nq]
    pose[2] = 0.15  # 5 cm above the ground
    true = CUBE_TRUE_TWIST if true_twist is None else twist("true_twist", true_twist)
    offset = CUBE_GUESS_OFFSET if guess_offset is None else twist("guess_offset", guess_offset)
    us = np.zeros((steps, 0))
    times = np.arange(every, steps + 1, every)

    def states(twist):
        return sim.rollout(np.concatenate((pose, twist)), us)[times]

    observed = states(true)

    def residual(twist):
        return np.concatenate([sim.state_difference(o, x) for o, x in zip(observed, states(twist), strict=True)])

    def jacobian(twist):
        jac = trajectory_jacobians(sim, np.concatenate((pose, twist)), us)
        r, rows = [], []
        S = np.eye(sim.ndx)
        t_prev = 0
        for o, t in zip(observed, times, strict=True):
            for k in range(t_prev, t):
                S = jac.Fx[k] @ S
            t_prev = t
            x = jac.xs[t]
            r.append(sim.state_difference(o, x))
            rows.append(sim.state_difference_jacobians(o, x)[1] @ S[:, sim.nv:])  # only v_0 is unknown
        return np.concatenate(r), np.vstack(rows)

    def metrics(twist):
        return {"twist_error": float(np.linalg.norm(twist - true) / np.linalg.norm(true))}

    z0 = true + offset
    return LeastSquares("cube-throw", residual, jacobian, z0, dynamics=sim, metrics=metrics,
                        info={"true": true.copy(), "observed": observed, "steps": steps,
                              "bench_state": (np.concatenate((pose, z0)), np.zeros(0))})


@register("go1-standing", "Go1 standing: find the joint torques that hold it still on its feet (inverse dynamics)",
          method=None)
def go1_standing_inverse_dynamics(*, dt: float = 1e-3, contact: str = "ncp", friction: float = 0.8) -> LeastSquares:
    """:func:`hold_still` at Go1's standing state (:mod:`problems.legged`); ``info["x_stand"]`` is its
    ``info["x_rest"]``."""
    sim = go1_standing_simulator(dt=dt, contact=contact, friction=friction)
    x = go1_standing_state(sim)
    prob = hold_still("go1-standing", sim, x)
    prob.info["x_stand"] = x.copy()
    return prob


# ===========================================================================================
# The NCP paper's Appendix E: robots held still in contact (scenes in problems/static_holds.py)
# ===========================================================================================
def hold_still(name: str, sim, x: np.ndarray) -> LeastSquares:
    """Inverse dynamics through contact at the rest state ``x``: the torques ``u`` (nu,) with
    ``v+(x, u) = 0`` (nv residual rows, so ``q+ = q`` too), from zero torques; Jacobian ``dv+/du``.

    Metrics: ``max_torque_ratio`` (largest ``|u_j| / u_max_j``, the URDF's limits; > 1 means the
    motors could not hold it) and ``contacts`` (how many contact points the step has).
    """
    nq = sim.nq
    data = sim.create_data()

    def residual(u):
        return sim.step(x, u, data=data)[nq:]

    def jacobian(u):
        x_next, _, Fu = sim.step_derivatives(x, u, data=data)
        return x_next[nq:], Fu[sim.nv:]

    def metrics(u):
        sim.step(x, u, data=data)
        report = sim.contact_report(data)
        ratio = np.abs(u) / sim.u_upper if np.all(np.isfinite(sim.u_upper)) else np.zeros(sim.nu)
        return {"max_torque_ratio": float(ratio.max()), "contacts": 0 if report is None else len(report)}

    return LeastSquares(name, residual, jacobian, np.zeros(sim.nu), dynamics=sim, metrics=metrics,
                        info={"x_rest": x.copy(), "bench_state": (x.copy(), np.zeros(sim.nu))})


@register("go1-payload", "Go1 standing with a 10 kg payload on its back: the torques that hold it still "
          "(inverse dynamics, NCP paper App. E)", method=None)
def go1_payload(*, payload: float = static_holds.PAYLOAD_MASS, dt: float = 1e-3, contact: str = "ncp",
                friction: float = 0.8) -> LeastSquares:
    sim = static_holds.go1_payload_simulator(payload=payload, dt=dt, contact=contact, friction=friction)
    return hold_still("go1-payload", sim, static_holds.go1_payload_state(sim))


@register("go1-handstand", "Go1 balanced on its two front feet, rear legs raised: the torques that hold it "
          "still (inverse dynamics, NCP paper App. E)", method=None)
def go1_handstand(*, pitch: float = static_holds.HANDSTAND_PITCH, dt: float = 1e-3, contact: str = "ncp",
                  friction: float = 0.8) -> LeastSquares:
    sim = static_holds.go1_handstand_simulator(dt=dt, contact=contact, friction=friction)
    return hold_still("go1-handstand", sim, static_holds.go1_handstand_state(sim, pitch))


@register("g1-pushup", "Unitree G1 humanoid in a push-up pose on hands and toes: the torques that hold it "
          "still (inverse dynamics, NCP paper App. E)", method=None)
def g1_pushup(*, dt: float = 1e-3, contact: str = "ncp", friction: float = 0.8) -> LeastSquares:
    sim = static_holds.g1_simulator(dt=dt, contact=contact, friction=friction)
    return hold_still("g1-pushup", sim, static_holds.g1_pushup_state(sim))
