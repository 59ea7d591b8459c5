"""catapult-design: one derivative sweep of the co-design OCP (design knot + 500 steps, ``Fp dp/dl`` per knot)
against the fixed design's (500 steps, no parameter columns), at lengths (0.33, 0.33) under random torques
(+-100 N m, seeded). Cold: ``rollout_derivatives`` on controls not rolled out before; after a rollout: the same
controls rolled out first (DDP's forward pass then backward pass, which reuses each step's contact solve). Best
of ``--rounds`` (default 8), each round with new controls.

    python scripts/design_sweep_cost.py [--rounds N]
"""

import argparse
import time

import numpy as np

import problems


def main(rounds: int) -> None:
    ocp = problems.load("catapult-design")
    dyn = ocp.dynamics
    design = np.array([0.33, 0.33])
    fixed = dyn.fixed_design_ocp(ocp, design)
    rng = np.random.default_rng(0)
    times = {"co-design cold": [], "co-design after rollout": [], "fixed cold": [], "fixed after rollout": []}

    def timed(label, f):
        t = time.perf_counter()
        f()
        times[label].append(time.perf_counter() - t)

    for _ in range(rounds):
        us = np.asarray(ocp.us_init, dtype=float).copy()
        us[1:] = rng.uniform(-100.0, 100.0, size=us[1:].shape)
        us[0] = dyn.control_of(design)
        timed("co-design cold", lambda: dyn.rollout_derivatives(ocp.x0, us))
        dyn.rollout(ocp.x0, us)
        timed("co-design after rollout", lambda: dyn.rollout_derivatives(ocp.x0, us))
        u2 = us[1:] + rng.uniform(-1e-3, 1e-3, size=us[1:].shape)  # not the controls just rolled out
        timed("fixed cold", lambda: fixed.dynamics.rollout_derivatives(fixed.x0, u2))
        fixed.dynamics.rollout(fixed.x0, u2)
        timed("fixed after rollout", lambda: fixed.dynamics.rollout_derivatives(fixed.x0, u2))
    best = {k: 1e3 * min(v) for k, v in times.items()}
    for k, v in best.items():
        print(f"{k:<24} {v:7.2f} ms")
    print(f"ratio cold {best['co-design cold'] / best['fixed cold']:.2f}x, after rollout "
          f"{best['co-design after rollout'] / best['fixed after rollout']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    main(parser.parse_args().rounds)
