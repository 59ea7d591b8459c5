"""Nimble's drone lift-off (Werling et al. 2021, section VII-C, Fig. 8).

A "drone" -- a solid sphere of radius 0.3 m and mass 0.1 kg (inertia ``2/5 m r^2``) on a vertical
prismatic rail (z up, gravity 9.81 m/s^2 along -z) -- rests on the ground at the start. Its control is
the rail force ``f``, ``|f| <= 10`` N (its weight is 0.98 N). ``q`` is the height the drone has risen:
the joint frame sits 0.3 m above the ground plane z = 0, so ``q = 0`` is resting on it and ``q`` is
the gap under the sphere. dt 1 ms, 500 steps; goal: height ``target`` (5 m) at the last step.

Cost, as in the paper: ``(q_T - target)^2`` at t = 500, plus ``control_weight |f|^2 / 2`` per step, which
only keeps DDP's ``Quu`` invertible: at 1e-8 a 5 m lift (about 5 N for 500 steps) costs 1.2e-4, and
the optimum stops ~2e-5 m short of the target on its account. Contact: hard LCP, friction 1.

Why it is a benchmark: from rest on the floor with a force below the weight (the zero-force initial
guess, or any hover force short of the weight), the contact clamps, and the exact gradient of the cost
with respect to every control is exactly zero (a small push changes nothing: the floor absorbs it).
Nimble's plain SGD stays there; its complementarity-aware gradients lift off (4.93 m after its training
run). The default here is DDP with Nimble's complementarity-aware Jacobians (``complementarity_aware=True``:
the resting contact, whose impulse the loss wants smaller, is read as separating, so the backward pass
sees free flight); once the drone is off the floor they are the exact Jacobians. DDP by continuation on
relaxed contact (``smoothing="auto"``, :mod:`solvers.continuation`, whose relaxed floor's impulses respond
to the force) reaches the same optimum, about 3x slower (measured: 48 iterations, 8 s vs 15, 2 s).
Plain DDP on hard contact stops at once (zero gradient: STALLED).

Metric ``final_height``: ``q_T`` (m).
"""

from __future__ import annotations

import numpy as np

from dynamics import ModelBuilder, Simulator
from trajopt import OCP, ControlCost, StateCost

from ._registry import register

RADIUS = 0.3
MASS = 0.1
FORCE_LIMIT = 10.0
GRAVITY = (0.0, 0.0, -9.81)


def drone_simulator(*, dt: float = 1e-3, contact: str = "lcp", friction: float = 1.0, **options) -> Simulator:
    """The drone on its rail over the ground plane z = 0 (module docstring); other keywords go to
    :class:`dynamics.Simulator`."""
    b = ModelBuilder("drone", gravity=GRAVITY)
    j = b.add_joint("prismatic", name="rail", axis="z", placement=(0.0, 0.0, RADIUS), effort=FORCE_LIMIT)
    b.add_body(j, mass=MASS, sphere=RADIUS)
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, ground=0.0, friction=friction, contact=contact,
                     actuated=["rail"], **options)


@register("drone", "Nimble's drone lift-off: a 0.1 kg sphere on a rail rises from the floor to 5 m in 500 steps "
          "of 1 ms, |f| <= 10 N", method="ddp", options={"complementarity_aware": True, "time_limit": 60.0})
def drone(*, horizon: int = 500, dt: float = 1e-3, target: float = 5.0, control_weight: float = 1e-8,
          hover: float = 0.0, contact: str = "lcp") -> OCP:
    """``hover`` (a fraction of the weight, in [0, 1)): the initial guess's constant force (0: no force);
    any value below 1 leaves the drone on the floor, where the exact gradient is zero."""
    if not (np.isfinite(target) and target > 0):
        raise ValueError(f"target must be a height > 0 (m), got {target!r}")
    if not 0.0 <= hover < 1.0:
        raise ValueError(f"hover must be a fraction of the weight in [0, 1), got {hover!r}")
    sim = drone_simulator(dt=dt, contact=contact)
    weight = MASS * -GRAVITY[2]
    us_init = np.full(1, hover * weight)  # every knot (OCP)

    def metrics(xs, us):
        return {"final_height": float(xs[-1, 0]), "distance_to_target": float(abs(xs[-1, 0] - target)),
                "max_force": float(np.abs(us).max())}

    return OCP(dynamics=sim, x0=np.zeros(sim.nx), horizon=horizon, running_cost=ControlCost(sim, control_weight),
               terminal_cost=StateCost(sim, np.array([target, 0.0]), np.diag([2.0, 0.0])), name="drone", us_init=us_init, metrics=metrics,
               info={"target": target})
