"""The ``trajopt`` command.

    trajopt list                                   registered problems
    trajopt simulate PROBLEM [--steps N] [--perturb] [--out DIR]
                                                   rollout from the problem's start (or a
                                                   seeded perturbation of it) with zero
                                                   controls; writes a plot of the states
    trajopt solve PROBLEM [--method M] [--smoothing auto|none|KAPPA] [--seed N]
                      [--contact lcp|ncp|penalty] [--max-iter N] [--time-limit S] [--out DIR]
                                                   optimize (by default with the problem's own
                                                   method); writes the solution, summary.json,
                                                   convergence / state / control plots and, for
                                                   planar problems, an animation
    trajopt compare PROBLEM [--methods ddp,ipopt,cem] [--time-limit S] [--out DIR]
                                                   run several methods; cost against wall time
                                                   on one figure
    trajopt bench [PROBLEM ...] [--contact lcp|ncp] [--json FILE] [--ddp-iterations N]
                                                   step / Jacobian timings and errors;
                                                   DDP per iteration (catapult, go1-hold)

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
    rows = [(n, problems.recipe(n)) for n in problems.names()]
    mwidth = max(len(r) for _, r in rows)
    print(f"{'problem':<{width}}  {'default method':<{mwidth}}  summary")
    for n, r in rows:
        print(f"{n:<{width}}  {r:<{mwidth}}  {problems.describe(n)}")
        for m, line in problems.advice(n).items():
            print(f"{'':<{width}}    --method {m}: {line}")
    return 0


def _require_ocp(problem, name, command):
    from trajopt.lsq import LeastSquares

    if isinstance(problem, LeastSquares):
        raise CLIError(f"{name!r} is an inverse (least-squares) problem; `trajopt {command}` needs an optimal-"
                       f"control problem. Use `trajopt solve {name}`.")
    return problem


def cmd_simulate(args) -> int:
    ocp = _require_ocp(_load(args.problem), args.problem, "simulate")
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
    from .bench import (DDP_PROBLEMS, bench_ddp, bench_dynamics, bench_state, bench_trajectory, format_ddp_table,
                        format_table)

    if args.ddp_iterations < 0:
        raise CLIError(f"--ddp-iterations must be >= 0, got {args.ddp_iterations}")
    names = args.problems or list(DEFAULT_BENCH)
    records = []
    for name in names:
        ocp = _load(name, contact=args.contact) if args.contact and _has_contact(name) else _load(name)
        x, u = bench_state(ocp)
        rec = bench_dynamics(ocp.dynamics, x, u, name=name, min_time=args.min_time,
                             contact=getattr(ocp.dynamics, "contact", None) or "none")
        if args.ddp_iterations and name in DDP_PROBLEMS:
            from solvers.ddp import solve_ddp

            us = ocp.check_controls(ocp.us_init)
            rec.update(bench_trajectory(ocp.dynamics, ocp.x0, us, min_time=args.min_time))
            rec.update(bench_ddp(ocp, solve_ddp, iterations=args.ddp_iterations))
        records.append(rec)
        print(f"  {name}: done", file=sys.stderr)
    print(format_table(records))
    if any("ddp_iteration_ms" in r for r in records):
        print()
        print(format_ddp_table(records))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(records, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def _versions() -> dict:
    import importlib.metadata as md
    import platform

    out = {"python": platform.python_version()}
    for dist in ("contactraj", "pin", "coal", "casadi", "numpy", "scipy", "numba"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def write_solution(ocp, sol, *, problem: str, contact: str | None, out_dir: str, animate: bool = True,
                   extra: dict | None = None) -> dict:
    """Save a solution: solution.npz, summary.json, plots (and a GIF for planar problems)."""
    from .plots import animate_planar, plot_controls, plot_convergence, plot_states

    os.makedirs(out_dir, exist_ok=True)
    dyn = ocp.dynamics
    dt = getattr(dyn, "dt", 1.0)
    np.savez(os.path.join(out_dir, "solution.npz"), xs=sol.xs, us=sol.us, dt=dt)
    finite = bool(np.all(np.isfinite(sol.xs)))
    metrics = ocp.evaluate(sol.xs, sol.us) if finite else {}
    metrics.pop("cost", None)
    summary = {
        "problem": problem, "method": sol.method, "contact": contact or getattr(dyn, "contact", "none"),
        "status": sol.status.value, "message": sol.info.get("message", ""), "cost": float(sol.cost),
        "iterations": sol.iterations, "wall_time_s": float(sol.wall_time), "horizon": ocp.horizon, "dt": dt, "versions": _versions(),
        "metrics": metrics,
        **(extra or {}),
    }
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    files = ["solution.npz", "summary.json"]
    if sol.history:
        plot_convergence({sol.method: sol.history}, path=os.path.join(out_dir, "convergence.png"),
                         title=f"{problem}: {sol.method}")
        files.append("convergence.png")
    if finite:
        names = dyn.state_names() if hasattr(dyn, "state_names") else None
        plot_states(sol.xs, dt=dt, names=names, nq=getattr(dyn, "nq", None), path=os.path.join(out_dir, "states.png"),
                    title=f"{problem}: {sol.method}, {sol.status.value}")
        plot_controls(sol.us, dt=dt, lower=ocp.u_lower, upper=ocp.u_upper, path=os.path.join(out_dir, "controls.png"))
        files += ["states.png", "controls.png"]
        planar = getattr(getattr(dyn, "contact_model", None), "kin", None)
        if animate and hasattr(dyn, "shapes_2d") and (planar is not None and planar.planar):
            animate_planar(sol.xs[:, : dyn.nq], dyn.shapes_2d, dt=dt, path=os.path.join(out_dir, "animation.gif"),
                           target=ocp.info.get("target"), title=problem)
            files.append("animation.gif")
    summary["files"] = files
    return summary


def solve_least_squares(problem, args) -> int:
    """Gauss-Newton with analytical and with finite-difference Jacobians; residual plot and summary."""
    from solvers import gauss_newton

    from .plots import plot_residuals

    out = os.path.join(args.out, args.problem, "gauss-newton")
    os.makedirs(out, exist_ok=True)
    runs = {}
    # a problem with many unknowns (ur5-sysid: 250) may skip the finite-difference comparison run
    for jac in ("analytic", "fd") if problem.info.get("compare_fd", True) else ("analytic",):
        sol = gauss_newton(problem, jacobian=jac, verbose=True,
                           **({"max_iter": args.max_iter} if args.max_iter else {}),
                           **({"time_limit": args.time_limit} if args.time_limit else {}))
        runs[jac] = sol
    png = plot_residuals({f"{k} Jacobian": v.history for k, v in runs.items()}, path=os.path.join(out, "residuals.png"),
                         title=f"{args.problem}: Gauss-Newton")
    sol = runs["analytic"]
    metrics = problem.evaluate(sol.us[0])
    summary = {
        "problem": args.problem, "method": "gauss-newton", "contact": getattr(problem.dynamics, "contact", "none"),
        "status": sol.status.value, "cost": float(sol.cost), "iterations": sol.iterations,
        "wall_time_s": float(sol.wall_time), "versions": _versions(),
        "metrics": {"final_residual": sol.info["final_residual"],
                    **{k: v for k, v in metrics.items() if k not in ("cost", "residual")}},
    }
    if "fd" in runs:
        summary["finite_differences"] = {"status": runs["fd"].status.value, "iterations": runs["fd"].iterations,
                                         "wall_time_s": float(runs["fd"].wall_time),
                                         "final_residual": runs["fd"].info["final_residual"]}
    if problem.info.get("error_bars") is not None:  # with measurement noise: Gauss-Newton covariance
        bars = problem.info["error_bars"](sol.us[0])
        values = problem.info["values"](sol.us[0][:len(bars)]) if "values" in problem.info else sol.us[0][:len(bars)]
        summary["error_bars"] = {name: {"estimate": float(v), "sigma": float(b), "true": float(t)}
                                 for name, v, b, t in zip(problem.info["identified"], values, bars,
                                                          problem.info["true"], strict=True)}
    np.savez(os.path.join(out, "solution.npz"), z=sol.us[0], iterates=sol.xs,
             **({"z_fd": runs["fd"].us[0]} if "fd" in runs else {}))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    for jac, run in runs.items():
        print(f"{args.problem} / gauss-newton ({jac}): {run.status.value}, residual {run.info['final_residual']:.3e}, "
              f"{run.iterations} iterations, {run.wall_time:.2f} s")
    print(f"wrote {out}/: solution.npz, summary.json, {os.path.basename(png)}")
    return 0 if sol.status.value == "converged" else 1


def cmd_solve(args) -> int:
    from solvers import resolve, solve
    from trajopt.lsq import LeastSquares

    options = {}
    if args.horizon is not None:
        options["horizon"] = args.horizon
    if args.contact is not None:
        if not _has_contact(args.problem):
            raise CLIError(f"problem {args.problem!r} has no contact to choose a model for (--contact)")
        options["contact"] = args.contact
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise CLIError(f"--option expects KEY=VALUE, got {item!r}")
        import ast

        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    problem = _load(args.problem, **options)
    if isinstance(problem, LeastSquares):  # an inverse problem: Gauss-Newton, analytical vs FD Jacobians
        return solve_least_squares(problem, args)
    ocp = problem
    # without --method, solve() follows the problem's recipe; a named method takes the problem's
    # advice for it; the command line wins over both
    try:
        method, _, advice = resolve(ocp, args.method)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if args.method is not None and advice:
        print(f"note: {args.problem}'s advice for {args.method}: {_problems().options_line(None, advice)} "
              "(options given here win)", file=sys.stderr)
    solver_options = {"verbose": True, **_smoothing_option(args.smoothing, method, ocp)}
    if args.max_iter is not None:
        solver_options["max_iter"] = args.max_iter
    if args.time_limit is not None:
        solver_options["time_limit"] = args.time_limit
    name = args.method or method
    if args.complementarity_aware:
        if method not in ("ddp", "gn", "cem-ddp", "cem-gn"):
            raise CLIError(f"--complementarity-aware applies to ddp, gn, cem-ddp and cem-gn, not {method!r}")
        solver_options["complementarity_aware"] = True
        name = f"{method}-aware"
    solver_options.update(_seed_option(method, args, explicit=args.method is not None))
    sol = solve(ocp, method=args.method, **solver_options)
    out = os.path.join(args.out, args.problem, name)
    summary = write_solution(ocp, sol, problem=args.problem, contact=args.contact, out_dir=out,
                             animate=not args.no_animation,
                             extra={"complementarity_aware": True} if args.complementarity_aware else None)
    figures = ", ".join(f"{k} {v:.4g}" for k, v in summary["metrics"].items())
    print(f"{args.problem} / {name}: {summary['status']}, cost {summary['cost']:.6g}, "
          f"{summary['iterations']} iterations, {summary['wall_time_s']:.1f} s" + (f"; {figures}" if figures else ""))
    if summary["message"]:
        print(f"  {summary['status']}: {summary['message']}")
    print(f"wrote {out}/: {', '.join(summary['files'])}")
    return 0 if sol.status.value in ("converged", "max_iterations", "interrupted") else 1


def cmd_compare(args) -> int:
    from solvers import METHODS, resolve, solve

    from .plots import plot_convergence

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise CLIError(f"unknown method(s) {unknown}; available: {', '.join(sorted(METHODS))}")
    options = {} if args.contact is None else {"contact": args.contact}
    if args.horizon is not None:
        options["horizon"] = args.horizon
    histories, rows = {}, []
    for method in methods:
        ocp = _require_ocp(_load(args.problem, **options), args.problem, "compare")
        stochastic = resolve(ocp, method)[0] in _stochastic()  # a problem's advice may add a CEM search
        sol = solve(ocp, method=method, verbose=args.verbose, time_limit=args.time_limit,
                    **({"max_iter": args.max_iter} if args.max_iter else {}),
                    **({"seed": args.seed} if args.seed is not None and stochastic else {}))
        out = os.path.join(args.out, args.problem, method)
        summary = write_solution(ocp, sol, problem=args.problem, contact=args.contact, out_dir=out, animate=False)
        histories[method] = sol.history
        rows.append(summary)
        figures = ", ".join(f"{k} {v:.4g}" for k, v in summary["metrics"].items())
        print(f"  {method:<9} {summary['status']:<15} cost {summary['cost']:<12.6g} {summary['iterations']:>4} it "
              f"{summary['wall_time_s']:>7.1f} s  {figures}", flush=True)
    png = plot_convergence(histories, path=os.path.join(args.out, args.problem, "compare.png"),
                           title=f"{args.problem}: cost against iteration and wall time")
    with open(os.path.join(args.out, args.problem, "compare.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"wrote {png}")
    return 0


def _has_contact(name) -> bool:
    """Whether the problem's factory takes a ``contact`` keyword."""
    import inspect

    problems = _problems()
    factory = problems.factory(name)
    return "contact" in inspect.signature(factory).parameters


def _solve_options(s, *, time_limit):
    """The options ``solve`` and ``compare`` share."""
    s.add_argument("problem")
    s.add_argument("--contact", choices=("lcp", "ncp", "penalty"), default=None,
                   help="contact model (default: the problem's; penalty: compliant, contact.penalty's defaults)")
    s.add_argument("--max-iter", type=int, default=None, help="iteration budget (per method)")
    s.add_argument("--time-limit", type=float, default=time_limit,
                   help="stop each solve after this many seconds" + (f" (default {time_limit:g})" if time_limit else ""))
    s.add_argument("--horizon", type=int, default=None, help="number of steps (default: the problem's)")
    s.add_argument("--seed", type=int, default=None,
                   help="random seed of the stochastic methods (cem and the cem-* hybrids; default 0, so every run "
                        "is deterministic)")
    s.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT}/)")


def _stochastic() -> tuple[str, ...]:
    """The stochastic methods: CEM and every CEM hybrid (imported late: ``solvers`` loads CasADi)."""
    from solvers.hybrid import HYBRIDS

    return ("cem", *HYBRIDS)


def _seed_option(method, args, *, explicit: bool = True) -> dict:
    """``{"seed": N}`` for a stochastic method when ``--seed`` was given. A deterministic method
    named on the command line refuses it; a problem's deterministic default method notes that
    the seed changes nothing (so ``--seed N`` works on every problem)."""
    if args.seed is None:
        return {}
    stochastic = _stochastic()
    if method not in stochastic:
        if explicit:
            raise CLIError(f"--seed applies to the stochastic methods ({', '.join(stochastic)}), not {method!r}")
        print(f"note: --seed {args.seed} has no effect: {args.problem}'s default method {method} is deterministic",
              file=sys.stderr)
        return {}
    return {"seed": args.seed}


def _smoothing_option(value, method, ocp) -> dict:
    """``{"smoothing": value}`` for ``--smoothing`` (``auto``, ``none`` or a number kappa), checked
    before any solving: a bad value or a method that cannot use it is a CLIError."""
    from solvers.continuation import check_smoothing, resolve_schedule

    if value is None:
        return {}
    try:
        check_smoothing(method, value)
        resolve_schedule(ocp.dynamics, value)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"--smoothing {value}: {exc}") from None
    return {"smoothing": value}


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

    s = sub.add_parser("solve", help="optimize a problem and save the solution, its summary and plots")
    s.add_argument("--method", default=None,
                   help="solver (default: the problem's own method and options; see trajopt list)")
    s.add_argument("--smoothing", default=None, metavar="auto|none|KAPPA",
                   help="solve on relaxed contact first and end on hard contact: 'auto' (a schedule scaled to "
                        "the robot), 'none', or one kappa > 0 in J (default: the problem's)")
    _solve_options(s, time_limit=None)
    s.add_argument("--no-animation", action="store_true", help="skip the GIF of planar problems")
    s.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="an option of the problem's factory (repeatable), e.g. --option noise=1e-3")
    s.add_argument("--complementarity-aware", action="store_true",
                   help="ddp, gn, cem-ddp, cem-gn: Nimble's complementarity-aware step Jacobians (LCP contact; "
                        "a way out of resting contacts' zero gradients); output in METHOD-aware/")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("compare", help="run several methods on a problem; plot cost against wall time")
    s.add_argument("--methods", default="ddp,ipopt,cem", help="comma-separated methods (default: ddp,ipopt,cem)")
    _solve_options(s, time_limit=60.0)
    s.add_argument("--verbose", action="store_true", help="show each solver's iteration table")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("bench", help="time one step and its Jacobians; compare with finite differences")
    s.add_argument("problems", nargs="*", help=f"problems (default: {' '.join(DEFAULT_BENCH)})")
    s.add_argument("--json", default=None, help="also write the records to this JSON file")
    s.add_argument("--min-time", type=float, default=0.2, help="seconds spent timing each call (default 0.2)")
    s.add_argument("--contact", choices=("lcp", "ncp"), default=None,
                   help="contact model of the problems that have contact (default: each problem's own)")
    s.add_argument("--ddp-iterations", type=int, default=5,
                   help="for catapult and go1-hold: also time DDP per iteration over this many iterations from the "
                        "initial guess, and the trajectory's states and Jacobians per step (0: skip; default 5)")
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
