"""The ``trajopt`` command.

    trajopt list                                   registered problems
    trajopt simulate PROBLEM [--steps N] [--perturb] [--out DIR]
                                                   rollout from the problem's start (or a
                                                   seeded perturbation of it) with zero
                                                   controls; writes a plot of the states
    trajopt bench [PROBLEM ...] [--contact lcp|ncp] [--json FILE]
                                                   step / Jacobian timings and errors

Errors in the input (an unknown problem, a bad option) print one line naming
what is wrong and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

DEFAULT_OUT = "out"
DEFAULT_BENCH = ("cartpole", "double-cartpole", "ur5-reach", "catapult", "jump-worm")


class CLIError(Exception):
    """An error in what the user asked for."""


def _problems():
    import problems  # the CLI is the one place where trajopt reaches up to the problems

    return problems


def _load(name, **options):
    problems = _problems()
    if name not in problems.names():
        raise CLIError(f"unknown problem {name!r}; available: {', '.join(problems.names())}")
    if options.get("contact") is None:
        options.pop("contact", None)
    try:
        return problems.load(name, **options)
    except TypeError as exc:
        if "contact" in options and "contact" in str(exc):
            raise CLIError(f"problem {name!r} has no contact to choose a model for (--contact)") from None
        raise


def cmd_list(args) -> int:
    problems = _problems()
    width = max(len(n) for n in problems.names())
    for n in problems.names():
        print(f"{n:<{width}}  {problems.describe(n)}")
    return 0


def cmd_simulate(args) -> int:
    ocp = _load(args.problem)
    steps = ocp.horizon if args.steps is None else args.steps
    if steps <= 0:
        raise CLIError(f"--steps must be positive, got {steps}")
    dyn = ocp.dynamics
    us = np.clip(np.zeros((steps, dyn.nu)), ocp.u_lower, ocp.u_upper)
    x0 = ocp.x0
    if args.perturb:
        # 0.3 (rad or m) on every configuration coordinate, seeded: shows the free motion.
        dx = np.zeros(dyn.ndx)
        dx[: dyn.ndx // 2] = np.random.default_rng(0).uniform(-0.3, 0.3, dyn.ndx // 2)
        x0 = dyn.state_integrate(x0, dx)
    from dynamics import SimulationError

    t0 = time.perf_counter()
    try:
        xs = dyn.rollout(x0, us)
        status = "ok"
    except SimulationError as exc:
        xs, status = exc.xs, f"diverged: {exc}"
    wall = time.perf_counter() - t0
    out = os.path.join(args.out, args.problem)
    os.makedirs(out, exist_ok=True)
    np.savez(os.path.join(out, "simulate.npz"), xs=xs, us=us[: len(xs) - 1], dt=dyn.dt)
    names = dyn.state_names() if hasattr(dyn, "state_names") else None
    png = os.path.join(out, "simulate_states.png")
    from .plots import plot_states

    plot_states(xs, dt=dyn.dt, names=names, nq=getattr(dyn, "nq", None), path=png,
                title=f"{args.problem}: {len(xs) - 1} steps, zero controls"
                      + (", perturbed start" if args.perturb else ""))
    print(f"{args.problem}: {len(xs) - 1} steps of {dyn.dt:g} s in {wall:.3f} s ({status})")
    print(f"wrote {png}")
    return 0 if status == "ok" else 1


def cmd_bench(args) -> int:
    from .bench import bench_dynamics, bench_state, format_table

    names = args.problems or list(DEFAULT_BENCH)
    records = []
    for name in names:
        ocp = _load(name, contact=args.contact) if args.contact and _has_contact(name) else _load(name)
        x, u = bench_state(ocp)
        rec = bench_dynamics(ocp.dynamics, x, u, name=name, min_time=args.min_time,
                             contact=getattr(ocp.dynamics, "contact", None) or "none")
        records.append(rec)
        print(f"  {name}: done", file=sys.stderr)
    print(format_table(records))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(records, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def _has_contact(name) -> bool:
    """Whether the problem's factory takes a ``contact`` keyword."""
    import inspect

    problems = _problems()
    factory = problems._registry._lookup(name)[0]
    return "contact" in inspect.signature(factory).parameters


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trajopt", description="Trajectory optimization through contact.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("list", help="list the registered problems")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("simulate", help="roll a problem out from its start with zero controls and plot it")
    s.add_argument("problem")
    s.add_argument("--steps", type=int, default=None, help="number of steps (default: the problem's horizon)")
    s.add_argument("--perturb", action="store_true",
                   help="start from a seeded random perturbation (+-0.3) of the start configuration")
    s.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT}/)")
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("bench", help="time one step and its Jacobians; compare with finite differences")
    s.add_argument("problems", nargs="*", help=f"problems (default: {' '.join(DEFAULT_BENCH)})")
    s.add_argument("--json", default=None, help="also write the records to this JSON file")
    s.add_argument("--min-time", type=float, default=0.2, help="seconds spent timing each call (default 0.2)")
    s.add_argument("--contact", choices=("lcp", "ncp"), default=None,
                   help="contact model of the problems that have contact (default: each problem's own)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, ValueError, FileNotFoundError, TypeError) as exc:
        print(f"trajopt: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trajopt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
