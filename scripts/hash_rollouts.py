"""One SHA-1 over rollouts and step Jacobians of catapult, go1-hold, ur5-box and jump-worm (rollout_derivatives,
rollout, then step_derivatives every 7th step reusing the rollout's kept solves): a refactor that must not change
a single bit prints the same hash before and after. Run with and without CONTACTRAJ_NO_FUSED=1.

Recorded on wt-fwd at b886136 (before the fused whole step), core built from that tree:
    default (fused contact solve)   f6d50d82f00fccc81e37da02a69911f382b51f98
    CONTACTRAJ_NO_FUSED=1           6bd7d6dd0eecefc3254c65bc11ff85a3bac00f0c
"""
import hashlib, numpy as np, problems
h = hashlib.sha1()
for name in ("catapult", "go1-hold", "ur5-box", "jump-worm"):
    ocp = problems.load(name); rng = np.random.default_rng(0)
    us = np.clip(ocp.us_init + rng.normal(0, 0.1, ocp.us_init.shape) * np.where(np.isfinite(ocp.u_upper), ocp.u_upper, 1), ocp.u_lower, ocp.u_upper)
    xs, Fx, Fu = ocp.dynamics.rollout_derivatives(ocp.x0, us)
    for a in (xs, Fx, Fu): h.update(a.tobytes())
    xs2 = ocp.dynamics.rollout(ocp.x0, us); _ = [ocp.dynamics.step_derivatives(xs2[t], us[t]) for t in range(0, len(us), 7)]
    h.update(xs2.tobytes())
print(h.hexdigest())
