"""One SHA-1 over rollouts and step Jacobians of catapult, go1-hold, ur5-box and jump-worm (rollout_derivatives,
rollout, then step_derivatives every 7th step reusing the rollout's kept solves): a refactor that must not change
a single bit prints the same hash before and after. Run with and without CONTACTRAJ_NO_FUSED=1.

Recorded on wt-fwd at b886136 (before the fused whole step), core built from that tree:
    default (fused contact solve)   f6d50d82f00fccc81e37da02a69911f382b51f98
    CONTACTRAJ_NO_FUSED=1           6bd7d6dd0eecefc3254c65bc11ff85a3bac00f0c
and the same with the fused whole step (43d4814). After merging main (a1b89c2: its faster fused Jacobian changes
the Jacobians' round-off), fused whole step on, and off with CONTACTRAJ_NO_FUSED_STEP=1:
    default                         f400acc2e0e057c68b3f5c347dd13eb1ad5be19b   (on and off alike)
    CONTACTRAJ_NO_FUSED=1           bbf8851e1ed9d07f1be9ffc0b29e0e70cada2dd1
The contact Jacobian from RNEA's derivatives and the solve's M^-1 (step.cpp, 2026-11-24) changes the
Jacobians' round-off again: default da883e11454d4362e4f545d6fd66c742e6a40ce4 (the states' bits unchanged).
(main's own scripts/hash_rollouts.py: rollouts catapult 52f57a341a285ede, go1-hold 719c8cdc6ff512cf, on and off.)
"""

import hashlib
import numpy as np
import problems

h = hashlib.sha1()
for name in ("catapult", "go1-hold", "ur5-box", "jump-worm"):
    ocp = problems.load(name)
    rng = np.random.default_rng(0)
    us = np.clip(
        ocp.us_init + rng.normal(0, 0.1, ocp.us_init.shape) * np.where(np.isfinite(ocp.u_upper), ocp.u_upper, 1),
        ocp.u_lower,
        ocp.u_upper,
    )
    xs, Fx, Fu = ocp.dynamics.rollout_derivatives(ocp.x0, us)
    for a in (xs, Fx, Fu):
        h.update(a.tobytes())
    xs2 = ocp.dynamics.rollout(ocp.x0, us)
    _ = [ocp.dynamics.step_derivatives(xs2[t], us[t]) for t in range(0, len(us), 7)]
    h.update(xs2.tobytes())
print(h.hexdigest())
