"""ur5-sysid on data and robot draws not used in tuning: Gauss-Newton's status, iterations, parameter_error
and wall time per (seed, truth_seed). Usage: python scripts/sysid_variants.py"""

import time

import problems
from solvers import gauss_newton

VARIANTS = [(0, 11), (1, 12), (2, 13), (3, 14), (5, 15), (6, 16), (7, 17), (8, 18), (9, 19), (10, 20), (4, 4)]

if __name__ == "__main__":
    for seed, truth in VARIANTS:
        p = problems.load("ur5-sysid", seed=seed, truth_seed=truth)
        t = time.perf_counter()
        s = gauss_newton(p, verbose=False, max_iter=50)
        print(seed, truth, s.status.name, len(s.history), f"{p.evaluate(s.z)['parameter_error']:.2e}",
              f"{time.perf_counter() - t:.1f}s", s.info.get("reason", ""), flush=True)
