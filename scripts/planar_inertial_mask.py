"""An experiment, kept to repeat it: would the compiled parameter plan gain by skipping a planar system's inertial
columns that are zero by structure (``com`` z; ``inertia`` but ``zz``)? They are made "other" columns of the plan
(body 0, no dynamic-parameter entries: zero columns, as friction's fixed-impulse term), by patching the plan's
chain in this process only, and the kept call is timed with and without (``step_derivatives`` right after
``step`` on one workspace, best of 9 rounds of 2000 calls): the state Jacobians alone, the inertial parameters,
all parameters. Also checks the masked Fp equals the unmasked one. Measured 2026-11-27 20:10: no gain (catapult
inertial 8.78 -> 8.87 us, all 12.31 -> 12.38 us; jump-worm alike).

    python scripts/planar_inertial_mask.py [catapult|jump-worm|half-cheetah ...]
"""

import sys
import timeit

import numpy as np

import dynamics.parameters as P
import problems
from trajopt.bench import bench_state


def structural_zeros(blocks):
    """The columns of a planar system's inertial blocks that no motion in the plane reads."""
    for b in blocks:
        if b.kind == "com":
            yield b.offset + 2
        elif b.kind == "inertia":
            yield from range(b.offset, b.offset + 5)


def main(name: str) -> None:
    ocp = problems.load(name)
    sim = ocp.dynamics
    if not sim.planar:
        raise SystemExit(f"{name} is not a planar (planar=True) system")
    x, u = bench_state(ocp)
    every = sim.parameter_names()
    inertial = [n for n in every if n.split(":")[0] in ("mass", "com", "inertia")]
    data = sim.create_data()
    sim.step(x, u, data=data)

    def best(names):
        return min(timeit.repeat(lambda: sim.step_derivatives(x, u, data=data, params=names), number=2000,
                                 repeat=9)) / 2000 * 1e6

    def run(label):
        t = [best(names) for names in (None, inertial, every)]
        print(f"{name} {label}: state {t[0]:.2f} us, inertial {t[1]:.2f} us ({t[1] / t[0]:.2f}x), all {t[2]:.2f} us "
              f"({t[2] / t[0]:.2f}x)")
        return [sim.step_derivatives(x, u, data=data, params=names)[3] for names in (inertial, every)]

    before = run("as built")
    chains = P._Workspace._chains

    def masked(self, sim_, blocks):
        C, (body, dpi) = chains(self, sim_, blocks)
        body, dpi = body.copy(), dpi.copy()
        zero = list(structural_zeros(blocks))
        body[zero] = 0
        dpi[:, zero] = 0.0
        return C, (body, dpi)

    P._Workspace._chains = masked
    try:
        ws = P._workspace(sim)
        ws.plans.clear()
        ws.chains.clear()
        after = run("masked")
    finally:
        P._Workspace._chains = chains
    for a, b in zip(before, after, strict=True):
        print(f"  max |Fp masked - Fp| = {np.abs(a - b).max():.2g}")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["catapult"]:
        main(arg)
