"""Hashes of rollouts and step Jacobians of catapult and go1-hold, to compare a change that must not
change the numbers (run before and after; ``CONTACTRAJ_NO_FUSED=1`` for the Python reference path).

Restitution (issue 15), before and after, default e = 0, this machine:
    catapult 52f57a341a285ede 9f927cb2e49e1670 71     (fused)     4c2a51c0757fcbfe c19d4aeb127ebc07 71 (reference)
    go1-hold 719c8cdc6ff512cf 0297f7792ef5d4d0 60     (fused)     53fc96d9df420fd7 7e50829e9c8fdf4e 60 (reference)
Columns: rollout, rollout_derivatives (states, Fx, Fu), contact steps.
"""
import hashlib

import numpy as np

import problems

def h(*arrs):
    m = hashlib.sha256()
    for a in arrs:
        m.update(np.ascontiguousarray(a).tobytes())
    return m.hexdigest()[:16]

out = {}
for name, kw in (("catapult", dict(horizon=300)), ("go1-hold", dict(horizon=60))):
    ocp = problems.load(name, **kw)
    sim = ocp.dynamics
    rng = np.random.default_rng(0)
    us = getattr(ocp, "us_init", None)
    if us is None or name == "catapult":
        us = rng.uniform(-1, 1, (ocp.horizon, sim.nu)) * (300.0 if name == "catapult" else 1.0)
    xs = sim.rollout(ocp.x0, us)
    xs2, Fx, Fu = sim.rollout_derivatives(ocp.x0, us, data=sim.create_data())
    out[name] = (h(xs), h(xs2, Fx, Fu), sim.warm_start_stats["contact_steps"])
    print(name, *out[name], flush=True)
