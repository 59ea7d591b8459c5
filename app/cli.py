"""The ``trajopt`` command (the console script ``trajopt``, or ``python -m app``).

    trajopt list                                   registered problems
    trajopt simulate PROBLEM [--steps N] [--perturb] [--no-scene] [--out DIR]
                                                   rollout from the problem's start (or a
                                                   seeded perturbation of it) with zero
                                                   controls; writes a plot of the states and
                                                   scene.html (3-D playback, app.viewer)
    trajopt solve PROBLEM [--method M] [--smoothing auto|none|KAPPA] [--seed N]
                      [--contact lcp|ncp|penalty] [--max-iter N] [--time-limit S] [--out DIR]
                                                   optimize (by default with the problem's own
                                                   method); writes the solution, summary.json,
                                                   convergence / state / control plots,
                                                   scene.html (3-D playback in the browser) and,
                                                   for planar problems, an animation
    trajopt compare PROBLEM [--methods ddp,ipopt,cem] [--time-limit S] [--out DIR]
                                                   run several methods; cost against wall time
                                                   on one figure
    trajopt sweep PROBLEM [--seeds 0-9] [--set KEY=V1,V2 ...] [--method M] [--max-iter N]
                      [--time-limit S] [--scheduler tcp://HOST:PORT] [--workers N] [--out DIR]
                                                   one solve per combination, on Dask (a local
                                                   cluster, or an existing one); sweep.csv and
                                                   a folder per run (app.sweep)
    trajopt view DIR [--out FILE]                  rebuild DIR/scene.html from DIR/solution.npz and
                                                   the problem named in DIR/summary.json
    trajopt bench [PROBLEM ...] [--contact lcp|ncp] [--json FILE] [--ddp-iterations N] [--suite ncp-paper]
                                                   step / Jacobian timings and errors;
                                                   DDP per iteration (catapult, go1-hold; every
                                                   problem named with --ddp-iterations N)

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

from .options import OptionError, parse_value

DEFAULT_OUT = "out"
DEFAULT_BENCH = ("cartpole", "double-cartpole", "ur5-reach", "catapult", "jump-worm")


class CLIError(Exception):
    """An error in what the user asked for."""


# -- runs that never lose a result -------------------------------------------------------------
# SIGTERM and SIGHUP stop a run as Ctrl-C does: the solvers catch KeyboardInterrupt and return their
# best iterate with status INTERRUPTED, which is saved; the exit status is 128 + the signal's number
# (130 SIGINT, 143 SIGTERM, 129 SIGHUP). While results are being written a signal is only noted,
# so that a second Ctrl-C cannot leave half a result.

class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where a solver catches Ctrl-C."""


_signal = {"received": None, "deferred": False, "saved": []}  # saved: folders whose results are written, whole


def _on_signal(signum, frame):
    first = _signal["received"] is None
    if first:
        _signal["received"] = signum
        common = sys.modules.get("solvers._common")
        if common is not None:  # the solver's last line names the signal
            import signal

            common.note_stop_signal(signal.Signals(signum).name)
    if _signal["deferred"]:  # writing results: finish them first
        return
    bridge = sys.modules.get("trajopt.casadi_bridge")
    if bridge is not None and bridge.note_interrupt(signum):  # inside IPOPT: it stops at its next iteration
        return
    import signal

    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signal.Signals(signum).name)


def _install_signal_handlers() -> dict:
    """Ctrl-C, SIGTERM and SIGHUP all interrupt the solve (main thread only); returns the handlers
    they replace (:func:`main` puts them back)."""
    import signal
    import threading

    _signal["received"] = None
    _signal["saved"] = []
    common = sys.modules.get("solvers._common")
    if common is not None:
        common.note_stop_signal(None)
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, _on_signal)
            for s in (getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))}


def _note_signal(sol) -> None:
    """An interrupted solution's message names the signal that stopped it (SIGTERM, SIGHUP, SIGINT)."""
    import signal

    if sol.status.value == "interrupted" and _signal["received"] is not None:
        name = signal.Signals(_signal["received"]).name
        sol.info["signal"] = name
        sol.info["message"] = (f"interrupted by {name}{' (Ctrl-C)' if name == 'SIGINT' else ''}: the best iterate "
                               "so far is saved")


def _interrupted_exit() -> int:
    """128 + the number of the signal that stopped the run (130 when it was Ctrl-C or unknown)."""
    import signal

    return 128 + int(_signal["received"] or signal.SIGINT)


class _deferred_signals:
    """Within this block a signal is noted, not raised (results are being written)."""

    def __enter__(self):
        self.before = _signal["deferred"]
        _signal["deferred"] = True

    def __exit__(self, *exc):
        _signal["deferred"] = self.before


class held_signals(_deferred_signals):
    """Within this block a signal is noted, not raised; on leaving it, a signal that arrived inside is
    raised then (KeyboardInterrupt, or :class:`Stopped` for SIGTERM / SIGHUP). For steps that must not be
    cut in half but after which the run should stop at once (a Dask cluster being started: interrupted
    midway, it could not be closed)."""

    def __enter__(self):
        self.seen = _signal["received"]
        super().__enter__()

    def __exit__(self, exc_type, *exc):
        super().__exit__(exc_type, *exc)
        signum = _signal["received"]
        if exc_type is None and signum is not None and self.seen is None and not _signal["deferred"]:
            import signal

            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Stopped(signal.Signals(signum).name)


def _saved(folder: str) -> None:
    """Note that ``folder``'s results are written, whole: a signal raised after that (once the writing's deferral
    has ended, before the command returns) is reported as arriving after them, not before any result."""
    _signal["saved"].append(folder)


def _signal_while_writing(status: str) -> bool:
    """Whether a signal was noted although the solver's answer is not interrupted: it arrived while the results were
    being written (or computed for them: metrics, error bars), or was absorbed by a solver that kept an earlier
    answer (design-search's polish): they are complete, said here, and the command still ends interrupted (exit
    130 / 143 / 129, never 0)."""
    if _signal["received"] is None or status == "interrupted":
        return False
    # not "after the solver had its answer": design-search's polish absorbs a signal that cuts it short and keeps
    # an earlier answer, whose status is then not interrupted either
    print(f"trajopt: {signal_label()} was received, but the solver's answer is not interrupted (status {status}): "
          "it and the results written are complete", file=sys.stderr)
    return True


def signal_label() -> str:
    """What stopped the run, for messages: ``Ctrl-C`` (SIGINT, or no signal noted), ``SIGTERM``, ``SIGHUP``."""
    import signal

    signum = _signal["received"]
    return "Ctrl-C" if signum is None or signum == signal.SIGINT else signal.Signals(signum).name


class CompileNote:
    """Explains a slow first call: numba compiles the contact and DDP kernels on their first use on
    a machine (or after their code changed), then keeps them in its disk cache. While installed
    (:meth:`install`, a ``numba:compile`` event listener: it fires on cache misses only), the first
    compilation prints one line to stderr saying so, and :meth:`summary` gives the time spent."""

    def __init__(self, stream=None):
        self.stream = stream
        self.depth = 0
        self.seconds = 0.0
        self.announced = False
        self._t = 0.0

    def on_start(self, event):
        if self.depth == 0:
            self._t = time.perf_counter()
            if not self.announced:
                self.announced = True
                name = getattr((event.data or {}).get("dispatcher"), "py_func", None)
                what = f" ({name.__module__}.{name.__qualname__} first)" if name is not None else ""
                from numba.core import config

                where = config.CACHE_DIR or "__pycache__ beside each module"
                print(f"[numba] compiling kernels on their first use{what}: once per machine and code version, "
                      f"up to a minute; kept on disk ({where}; set NUMBA_CACHE_DIR to choose the place), so "
                      "later runs load them in about a second", file=self.stream or sys.stderr, flush=True)
        self.depth += 1

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.perf_counter() - self._t

    def install(self):
        from numba.core import event

        listener = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                listener.on_start(ev)

            def on_end(self, ev):
                listener.on_end(ev)

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def uninstall(self):
        from numba.core import event

        event.unregister("numba:compile", self._listener)

    def summary(self) -> str | None:
        return f"[numba] compiling took {self.seconds:.1f} s (cached on disk now)" if self.announced else None


def check_writable(folder: str, option: str = "--out") -> None:
    """``folder`` exists or can be made, and a file can be created in it: checked before any solving
    (an unwritable folder used to lose the solution after the solve). CLIError otherwise."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = __import__("tempfile").mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        why = exc.strerror or str(exc)
        up = os.path.abspath(folder)
        while up != os.path.dirname(up) and not os.path.exists(up):
            up = os.path.dirname(up)
        if os.path.exists(up) and not os.path.isdir(up):
            why = f"{up} is a file, not a folder"
        raise CLIError(f"{option} {folder}: cannot write there ({why})") from None


def atomic_write(path: str, write, mode: str = "w") -> None:
    """Write ``path`` whole or not at all: ``write(f)`` fills a temporary file in the same folder,
    which then replaces ``path`` (os.replace, atomic on POSIX). A reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, mode) as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path: str, obj) -> None:
    atomic_write(path, lambda f: json.dump(obj, f, indent=2))


def write_npz(path: str, **arrays) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays), mode="wb")


LOCK_NAME = ".trajopt.lock"


class ResultLock:
    """Two runs never write into the same result folder: each folder gets ``.trajopt.lock`` (created
    exclusively, holding the owner's pid) for the whole run. A second run into a locked folder is
    refused with a clear error before it solves (choose another --out, or wait); a lock whose owner
    is gone (killed with SIGKILL) is stale and taken over. Released on exit."""

    def __init__(self, folders):
        self.paths = [os.path.join(f, LOCK_NAME) for f in sorted(set(folders))]
        self.held: list[str] = []

    def __enter__(self):
        try:
            for path in self.paths:
                self._take(path)
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc):
        self.release()

    def release(self):
        for path in self.held:
            try:
                os.remove(path)
            except OSError:
                pass
        self.held = []

    def _take(self, path):
        folder = os.path.dirname(path)
        check_writable(folder)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = _lock_owner(path)
                if owner is None or owner == os.getpid():  # stale (its process is gone) or ours
                    try:
                        os.remove(path)
                    except FileNotFoundError:
                        pass
                    continue
                raise CLIError(f"--out {folder}: another trajopt run (pid {owner}) is writing its results there; "
                               f"wait for it to finish or choose another --out (remove {path} if that "
                               "process is not trajopt)") from None
            except OSError as exc:
                raise CLIError(f"--out {folder}: cannot write there ({exc.strerror or exc})") from None
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            self.held.append(path)
            return
        raise CLIError(f"--out {folder}: could not take {path}")


def _lock_owner(path) -> int | None:
    """The pid in a lock file when that process is alive, else None (a stale lock)."""
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def check_budget(args) -> None:
    """``--time-limit`` > 0 (not NaN), ``--max-iter`` >= 1 and ``--seed`` >= 0, before anything is loaded or
    solved."""
    limit = getattr(args, "time_limit", None)
    if limit is not None and not limit > 0:  # NaN fails `> 0` too
        raise CLIError(f"--time-limit must be a number of seconds > 0, got {limit}")
    max_iter = getattr(args, "max_iter", None)
    if max_iter is not None and max_iter < 1:
        raise CLIError(f"--max-iter must be >= 1, got {max_iter}")
    seed = getattr(args, "seed", None)
    if seed is not None and seed < 0:  # (argparse already made it an integer)
        raise CLIError(f"--seed must be an integer >= 0, got {seed}")


def _problems():
    import problems

    return problems


def _load(name, **options):
    problems = _problems()
    if name not in problems.names():
        raise CLIError(f"unknown problem {name!r}; available: {', '.join(problems.names())}")
    if options.get("contact") is None:
        options.pop("contact", None)
    try:
        return problems.load(name, **options)
    except (TypeError, ValueError) as exc:
        if "contact" in options and "unknown option 'contact'" in str(exc):
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
    check_writable(os.path.join(args.out, args.problem))
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
    write_npz(os.path.join(out, "simulate.npz"), xs=xs, us=us[: len(xs) - 1], dt=dyn.dt)
    names = dyn.state_names() if hasattr(dyn, "state_names") else None
    png = os.path.join(out, "simulate_states.png")
    from trajopt.plots import plot_states

    plot_states(xs, dt=dyn.dt, names=names, nq=getattr(dyn, "nq", None), path=png,
                title=f"{args.problem}: {len(xs) - 1} steps, zero controls"
                      + (", perturbed start" if args.perturb else ""))
    print(f"{args.problem}: {len(xs) - 1} steps of {dyn.dt:g} s in {wall:.3f} s ({status})")
    print(f"wrote {png}")
    if not args.no_scene and write_scene_file(dyn, xs, us[: len(xs) - 1], out, title=f"{args.problem}: simulate",
                                              target=ocp.info.get("target")):
        print(f"wrote {os.path.join(out, 'scene.html')}")
    return 0 if status == "ok" else 1


def cmd_bench(args) -> int:
    from dynamics.parameters import backend as parameter_backend
    from trajopt.bench import (DDP_PROBLEMS, DEFAULT_DDP_ITERATIONS, bench_ddp, bench_dynamics, bench_parameters,
                               bench_state, bench_trajectory, format_ddp_table, format_parameter_table,
                               format_table)

    from trajopt.lsq import LeastSquares

    # --ddp-iterations N given: DDP is timed on every problem named (any optimal-control problem);
    # not given: on DDP_PROBLEMS only, over DEFAULT_DDP_ITERATIONS
    given = args.ddp_iterations is not None
    if given and args.ddp_iterations < 0:
        raise CLIError(f"--ddp-iterations must be >= 0, got {args.ddp_iterations}")
    if given and args.ddp_iterations and args.suite is not None:
        raise CLIError("--ddp-iterations times DDP on problems; --suite scenes are a state and a control each, with "
                       "no cost for DDP to descend: give PROBLEM names with --ddp-iterations, or drop it")
    ddp_iterations = args.ddp_iterations if given else DEFAULT_DDP_ITERATIONS
    if not 0 <= args.min_time < float("inf"):  # NaN fails too (it timed 2**20 loops a call)
        raise CLIError(f"--min-time must be a number of seconds >= 0, got {args.min_time}")
    if args.json:  # before any timing: an unwritable place used to fail only after the benchmark
        if os.path.isdir(args.json):
            raise CLIError(f"--json {args.json}: is a folder; give a file name")
        check_writable(os.path.dirname(os.path.abspath(args.json)), "--json")
    records = []
    if args.suite is not None:
        from problems.bench_scenes import SUITES, suite

        if args.suite not in SUITES:
            raise CLIError(f"unknown --suite {args.suite!r}; available: {', '.join(sorted(SUITES))}")
        if args.problems or args.contact:
            raise CLIError("--suite names its own scenes and contact model; give no PROBLEM and no --contact with it")
        if args.params:
            raise CLIError("--params times the parameter Jacobians of problems, not of --suite scenes; give "
                           "PROBLEM names with --params, or drop it")
        for name, sim, x, u in suite(args.suite):
            records.append(bench_dynamics(sim, x, u, name=name, min_time=args.min_time, contact=sim.contact))
            print(f"  {name}: done", file=sys.stderr)
    names = [] if args.suite is not None else (args.problems or list(DEFAULT_BENCH))
    loaded = [(name, _load(name, contact=args.contact) if args.contact and _has_contact(name) else _load(name))
              for name in names]
    if given and ddp_iterations:  # before any timing
        inverse = [name for name, problem in loaded if isinstance(problem, LeastSquares)]
        if inverse:
            raise CLIError(f"--ddp-iterations times DDP on optimal-control problems; {inverse[0]!r} is an inverse "
                           "(least-squares) problem, solved by gauss-newton: drop it or --ddp-iterations")
    for name, ocp in loaded:
        x, u = bench_state(ocp)
        rec = bench_dynamics(ocp.dynamics, x, u, name=name, min_time=args.min_time,
                             contact=getattr(ocp.dynamics, "contact", None) or "none")
        if ddp_iterations and (given or name in DDP_PROBLEMS):
            from solvers.ddp import solve_ddp

            us = ocp.check_controls(ocp.us_init)
            if all(hasattr(ocp.dynamics, a) for a in ("create_data", "rollout_derivatives", "knot_derivatives")):
                rec.update(bench_trajectory(ocp.dynamics, ocp.x0, us, min_time=args.min_time))
            else:  # a plugin without the simulator's batched calls: DDP's time only
                rec["steps"] = ocp.horizon
            rec.update(bench_ddp(ocp, solve_ddp, iterations=ddp_iterations))
        if args.params:
            rec.update(bench_parameters(ocp.dynamics, x, u, min_time=args.min_time))
        records.append(rec)
        print(f"  {name}: done", file=sys.stderr)
    print(format_table(records))
    if any("ddp_iteration_ms" in r for r in records):
        print()
        print(format_ddp_table(records))
    if args.params:
        print()
        print(format_parameter_table(records, parameter_backend()))
    if args.json:
        write_json(args.json, records)
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


def _drawable(dyn, xs, us):
    """``(simulator, xs, us)`` to draw: ``dyn`` itself, or what a wrapper around a simulator says to draw
    (``dyn.drawable(xs, us)``: catapult-design's design knot, then the catapult at that design)."""
    if hasattr(dyn, "drawable"):
        return dyn.drawable(xs, us)
    return dyn, xs, us


def _undrawable(dyn) -> str | None:
    """Why ``dyn`` cannot be drawn, or None."""
    if getattr(dyn, "model", None) is None or not hasattr(dyn, "geometry"):
        return f"its dynamics ({type(dyn).__name__}) is not a simulator with a Pinocchio model; there is nothing to draw"
    return None


def write_scene_file(dyn, xs, us, out_dir: str, *, title: str, target=None) -> bool:
    """Write ``out_dir/scene.html`` (:func:`app.viewer.write_scene`) when ``dyn`` is a simulator
    with a Pinocchio model, or wraps one (:func:`_drawable`); True when written. A user's own dynamics
    has nothing to draw: one line on stderr says so."""
    dyn, xs, us = _drawable(dyn, xs, us)
    why = _undrawable(dyn)
    if why is not None:
        print(f"note: no scene.html: {why}", file=sys.stderr)
        return False
    from .viewer import write_scene

    info = write_scene(dyn, xs, os.path.join(out_dir, "scene.html"), us=us, title=title, target=target)
    if info.contact_warning:
        print(f"warning: scene.html: {info.contact_warning}", file=sys.stderr)
    return True


def _json_options(options) -> dict:
    """The problem's factory options as JSON (tuples as lists; a value JSON cannot hold as its repr)."""
    out = {}
    for key, value in (options or {}).items():
        try:
            json.dumps(value)
            out[key] = value
        except (TypeError, ValueError):
            out[key] = repr(value)
    return out


def write_solution(ocp, sol, *, problem: str, contact: str | None, out_dir: str, animate: bool = True,
                   extra: dict | None = None, scene: bool = True, options: dict | None = None) -> dict:
    """Save a solution: solution.npz, summary.json, plots, scene.html (3-D playback; ``scene``)
    and a GIF for planar problems. solution.npz, summary.json and scene.html are written atomically
    (a temporary file in ``out_dir``, then os.replace): never half a file. ``options``: the problem's
    factory options the run used, kept in summary.json (``trajopt view`` rebuilds the problem from them)."""
    from trajopt.plots import animate_planar, plot_controls, plot_convergence, plot_states

    os.makedirs(out_dir, exist_ok=True)
    dyn = ocp.dynamics
    dt = getattr(dyn, "dt", 1.0)
    write_npz(os.path.join(out_dir, "solution.npz"), xs=sol.xs, us=sol.us, dt=dt)
    finite = bool(np.all(np.isfinite(sol.xs)))
    metrics = ocp.evaluate(sol.xs, sol.us) if finite else {}
    metrics.pop("cost", None)
    summary = {
        "problem": problem, "method": sol.method, "contact": contact or getattr(dyn, "contact", "none"),
        "status": sol.status.value, "message": sol.info.get("message", ""), "cost": float(sol.cost),
        "iterations": sol.iterations, "wall_time_s": float(sol.wall_time), "horizon": ocp.horizon, "dt": dt, "versions": _versions(),
        "metrics": metrics, "options": _json_options(options),
        **(extra or {}),
    }
    write_json(os.path.join(out_dir, "summary.json"), summary)
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
        if animate and hasattr(dyn, "shapes_2d") and getattr(dyn, "planar", False):
            animate_planar(sol.xs[:, : dyn.nq], dyn.shapes_2d, dt=dt, path=os.path.join(out_dir, "animation.gif"),
                           target=ocp.info.get("target"), title=problem)
            files.append("animation.gif")
    if scene and np.isfinite(sol.xs[0]).all() and write_scene_file(
            dyn, sol.xs, sol.us, out_dir, title=f"{problem}: {sol.method}, {sol.status.value}",
            target=ocp.info.get("target")):
        files.append("scene.html")
    summary["files"] = files
    return summary


def solve_least_squares(problem, args) -> int:
    """Gauss-Newton with analytical and with finite-difference Jacobians; residual plot and summary."""
    out = os.path.join(args.out, args.problem, "gauss-newton")
    with ResultLock([out]):
        return _solve_least_squares(problem, args, out)


def _solve_least_squares(problem, args, out) -> int:
    from solvers import gauss_newton


    runs = {}
    stopped = None  # the run a signal stopped (the command then ends interrupted, whichever run it was)
    fd_error = None  # why the finite-difference comparison run raised, if it did
    # a problem with many unknowns (ur5-sysid: 250) may skip the finite-difference comparison run
    for jac in ("analytic", "fd") if problem.info.get("compare_fd", True) else ("analytic",):
        try:
            sol = gauss_newton(problem, jacobian=jac, verbose=True,
                               **({"max_iter": args.max_iter} if args.max_iter else {}),
                               **({"time_limit": args.time_limit} if args.time_limit else {}))
        except KeyboardInterrupt:  # between the runs: the analytic run's answer is kept
            if not runs:
                raise
            stopped = jac
            break
        except (RuntimeError, ValueError) as exc:  # the comparison run failed: the analytic run's answer is kept
            if not runs:
                raise
            fd_error = f"{type(exc).__name__}: {exc}"
            break
        runs[jac] = sol
        if sol.status.value == "interrupted":  # stop, and save what the interrupted run found
            stopped = jac
            break
    with _deferred_signals():
        return _write_least_squares(problem, args, out, runs, stopped, fd_error)


def _error_bar_table(bars: dict) -> str:
    """The identified entries with their Gauss-Newton error bars (``summary["error_bars"]``): estimate +- sigma,
    the true value and the error in sigmas, one line each."""
    from trajopt.plots import errors_in_sigmas

    width = max(len(n) for n in bars)
    lines = [f"  {'identified':<{width}}  {'estimate':>12} {'+- sigma':>11} {'true':>12} {'error/sigma':>11}"]
    for (name, b), z, bar in zip(bars.items(), *errors_in_sigmas(bars), strict=True):
        shown = f"{z:>11.2f}" if bar else f"{'-':>11}"  # no bar: '-', not 0.00 (a perfect fit)
        lines.append(f"  {name:<{width}}  {b['estimate']:>12.6g} {b['sigma']:>11.3g} {b['true']:>12.6g} {shown}")
    return "\n".join(lines)


def _write_least_squares(problem, args, out, runs, stopped=None, fd_error=None) -> int:
    """The summary of the analytic run (and the finite-difference one's figures); ``stopped``: the run a
    signal stopped, which makes the whole command interrupted (status, message, exit 130 / 143 / 129);
    ``fd_error``: why the finite-difference comparison run raised (the answer is the analytic run's)."""
    from trajopt.plots import plot_residuals

    png = plot_residuals({f"{k} Jacobian": v.history for k, v in runs.items()}, path=os.path.join(out, "residuals.png"),
                         title=f"{args.problem}: Gauss-Newton")
    from solvers._common import DEFAULT_MESSAGES
    from trajopt.solution import Status

    sol = runs["analytic"]
    _note_signal(sol)
    message = sol.info.get("message") or sol.info.get("reason") or (
        "" if sol.status == Status.CONVERGED else DEFAULT_MESSAGES[sol.status])
    status = sol.status.value
    if stopped == "fd":  # the answer (analytic) is complete; the comparison run was cut short
        status = "interrupted"
        import signal

        signum = _signal["received"]
        by = "Ctrl-C" if signum is None else signal.Signals(signum).name + (" (Ctrl-C)" if signum == signal.SIGINT
                                                                              else "")
        message = (f"interrupted by {by} during the finite-difference comparison run: the analytic-Jacobian "
                   f"answer ({sol.status.value}) is saved")
    metrics = problem.evaluate(sol.us[0])
    summary = {
        "problem": args.problem, "method": "gauss-newton", "contact": getattr(problem.dynamics, "contact", "none"),
        "status": status, "analytic_status": sol.status.value, "message": message, "cost": float(sol.cost),
        "iterations": sol.iterations,
        "wall_time_s": float(sol.wall_time), "versions": _versions(),
        "metrics": {"final_residual": sol.info["final_residual"],
                    **{k: v for k, v in metrics.items() if k not in ("cost", "residual")}},
    }
    start_time = problem.info.get("start_time")
    if start_time is not None:  # a start made with the problem (cube-sysid's: staged, or raw in ~0 s), its time
        summary["start"] = problem.info.get("start", "")
        summary["start_time_s"] = float(start_time)
        summary["total_time_s"] = float(start_time) + float(sol.wall_time)
    if fd_error is not None:
        summary["finite_differences"] = {"status": "failed", "error": fd_error}
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
    write_npz(os.path.join(out, "solution.npz"), z=sol.us[0], iterates=sol.xs,
              **({"z_fd": runs["fd"].us[0]} if "fd" in runs else {}))
    write_json(os.path.join(out, "summary.json"), summary)
    _saved(out)
    figures = [os.path.basename(png)]
    if "error_bars" in summary:  # after the answer is written: a figure that fails loses nothing
        from trajopt.plots import plot_error_bars

        figures.append(os.path.basename(plot_error_bars(
            summary["error_bars"], path=os.path.join(out, "error_bars.png"),
            title=f"{args.problem}: estimates against the truth, in error bars")))
    if start_time is not None:
        print(f"{args.problem}: {summary['start'] or 'its'} start, made with the problem: {start_time:.2f} s (the "
              f"Gauss-Newton runs below start from it; {summary['total_time_s']:.2f} s in all with the analytic run)")
    for jac, run in runs.items():
        shown = "".join(f", {k} {v:.4g}" for k, v in summary["metrics"].items()
                        if jac == "analytic" and k != "final_residual" and isinstance(v, (int, float)))
        print(f"{args.problem} / gauss-newton ({jac}): {run.status.value}, residual {run.info['final_residual']:.3e}, "
              f"{run.iterations} iterations, {run.wall_time:.2f} s" + (f"; {shown[2:]}" if shown else ""))
    if "error_bars" in summary:
        print(_error_bar_table(summary["error_bars"]))
    if stopped == "fd" and "fd" not in runs:
        print(f"{args.problem} / gauss-newton (fd): not run")
    if fd_error is not None:
        print(f"{args.problem} / gauss-newton (fd): failed, the comparison only ({fd_error})")
    if message:
        print(f"  {status}: {message}")
    blind = int(summary["metrics"].get("unidentified", 0))
    if blind:  # the residual fits whatever those are: a converged fit is not an identification there
        of = problem.info.get("parameters")
        print(f"  note: the data do not determine {blind} {f'of the {of} ' if of else ''}identified "
              f"unknown{'' if blind == 1 else 's'} "
              "(directions the residual's Jacobian does not see): any value there fits as well, whatever the "
              "residual and the status say; record longer or richer motion")
    print(f"wrote {out}/: solution.npz, summary.json, {', '.join(figures)}")
    if status == "interrupted" or _signal_while_writing(status):
        return _interrupted_exit()
    # as for trajectory problems: an answer within the budget is a finished run (0); stalled or failed: 1
    return 0 if sol.status.value in ("converged", "max_iterations") else 1


def cmd_solve(args) -> int:
    from solvers import resolve, solve
    from trajopt.lsq import LeastSquares
    from trajopt.protocol import check_complementarity_aware

    check_budget(args)
    check_writable(args.out)
    options = {}
    if args.horizon is not None:
        options["horizon"] = args.horizon
    if args.contact is not None:
        if not _has_contact(args.problem):
            raise CLIError(f"problem {args.problem!r} has no contact to choose a model for (--contact)")
        options["contact"] = args.contact
    for item in args.option or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise CLIError(f"--option expects KEY=VALUE, got {item!r}")
        try:
            options[key] = parse_value(value)
        except OptionError as exc:
            raise CLIError(f"--option {item!r}: {exc}") from None
        if key == "contact" and args.contact is not None and options[key] != args.contact:
            raise CLIError(f"--contact {args.contact} and --option {item} disagree: give the contact model once")
    problem = _load(args.problem, **options)
    if args.complementarity_aware:  # checked before any solving
        if isinstance(problem, LeastSquares):
            raise CLIError(f"--complementarity-aware applies to ddp, gn, cem-ddp and cem-gn; {args.problem!r} is an "
                           "inverse (least-squares) problem, solved by gauss-newton")
        contact = getattr(problem.dynamics, "contact", None)
        try:
            check_complementarity_aware(problem.dynamics)
        except ValueError as exc:
            if getattr(problem.dynamics, "check_complementarity_aware", None) is None:  # not the contact model
                raise CLIError(f"--complementarity-aware: {exc} (the dynamics of {args.problem})") from None
            given = "--contact " + args.contact if args.contact else f"{args.problem!r}'s contact model {contact!r}"
            raise CLIError(f"--complementarity-aware cannot be combined with {given}: Nimble's complementarity-aware "
                           "Jacobians are defined for LCP contact (--contact lcp), not for the Coulomb cone "
                           "(ncp); use --contact lcp, or --smoothing auto") from None
    if isinstance(problem, LeastSquares):  # an inverse problem: Gauss-Newton, analytical vs FD Jacobians
        for given, option in ((args.method, "--method"), (args.smoothing, "--smoothing")):
            if given is not None and not (option == "--method" and given == "gauss-newton"):
                raise CLIError(f"{option} {given}: {args.problem!r} is an inverse (least-squares) problem, always "
                               f"solved by gauss-newton (analytical and finite-difference Jacobians); drop {option}")
        if args.seed is not None:  # it went unsaid: the same answer as without it, and the data's seed is an option
            import inspect

            seeded = "seed" in inspect.signature(_problems().factory(args.problem)).parameters
            print(f"note: --seed {args.seed} has no effect: gauss-newton is deterministic"
                  + (f"; the recorded data's draw is the problem's --option seed={args.seed}" if seeded else ""),
                  file=sys.stderr)
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
    from solvers import check_options

    try:
        check_options(solver_options)  # a problem's advice too (e.g. a population), before the lock and the solve
    except ValueError as exc:
        raise CLIError(f"{name}: {exc}") from None
    out = os.path.join(args.out, args.problem, name)
    with ResultLock([out]):
        sol = solve(ocp, method=args.method, **solver_options)
        _note_signal(sol)
        with _deferred_signals():
            summary = write_solution(ocp, sol, problem=args.problem, contact=options.get("contact"), out_dir=out,
                                     options=options, animate=not args.no_animation, scene=not args.no_scene,
                                     extra={"complementarity_aware": True} if args.complementarity_aware else None)
            _saved(out)
    figures = ", ".join(f"{k} {v:.4g}" for k, v in summary["metrics"].items())
    print(f"{args.problem} / {name}: {summary['status']}, cost {summary['cost']:.6g}, "
          f"{summary['iterations']} iterations, {summary['wall_time_s']:.1f} s" + (f"; {figures}" if figures else ""))
    if summary["message"]:
        print(f"  {summary['status']}: {summary['message']}")
    print(f"wrote {out}/: {', '.join(summary['files'])}")
    if sol.status.value == "interrupted" or _signal_while_writing(sol.status.value):  # saved, not finished
        return _interrupted_exit()  # 130 / 143 / 129
    return 0 if sol.status.value in ("converged", "max_iterations") else 1


def cmd_compare(args) -> int:
    from solvers import METHODS

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise CLIError(f"--methods: no method given ({args.methods!r}); e.g. --methods ddp,ipopt,cem")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise CLIError(f"unknown method(s) {unknown}; available: {', '.join(sorted(METHODS))}")
    check_budget(args)
    check_writable(args.out)
    options = {} if args.contact is None else {"contact": args.contact}
    if args.horizon is not None:
        options["horizon"] = args.horizon
    folder = os.path.join(args.out, args.problem)
    with ResultLock([folder] + [os.path.join(folder, m) for m in methods]):
        return _compare(args, methods, options, folder)


def _compare(args, methods, options, folder) -> int:
    """The methods one after the other; Ctrl-C (or SIGTERM / SIGHUP) stops the whole comparison, not
    only the current method: its result and those before it are saved, the rest do not run."""
    from solvers import resolve, solve

    from trajopt.plots import plot_convergence

    histories, rows = {}, []
    interrupted = False
    for method in methods:
        try:  # a signal while the next method's problem is made: as one during its solve (compare.json written)
            ocp = _require_ocp(_load(args.problem, **options), args.problem, "compare")
            stochastic = resolve(ocp, method)[0] in _stochastic()  # a problem's advice may add a CEM search
            sol = solve(ocp, method=method, verbose=args.verbose, time_limit=args.time_limit,
                        **({"max_iter": args.max_iter} if args.max_iter else {}),
                        **({"seed": args.seed} if args.seed is not None and stochastic else {}))
        except KeyboardInterrupt:  # before the solver had an iterate (e.g. while compiling, or making the problem)
            interrupted = True
            break
        _note_signal(sol)
        with _deferred_signals():
            summary = write_solution(ocp, sol, problem=args.problem, contact=args.contact, options=options,
                                     out_dir=os.path.join(folder, method), animate=False)
            _saved(os.path.join(folder, method))
            histories[method] = sol.history
            rows.append(summary)
        try:  # a signal here (no longer deferred) stops the comparison as one during a solve: compare.json written
            figures = ", ".join(f"{k} {v:.4g}" for k, v in summary["metrics"].items())
            print(f"  {method:<9} {summary['status']:<15} cost {summary['cost']:<12.6g} {summary['iterations']:>4} "
                  f"it {summary['wall_time_s']:>7.1f} s  {figures}", flush=True)
            if sol.status.value == "interrupted" or _signal_while_writing(sol.status.value):  # the rest do not run
                interrupted = True
                break
        except KeyboardInterrupt:
            interrupted = True
            break
    if interrupted:
        skipped = [m for m in methods if m not in histories]
        print(f"trajopt: interrupted; not run: {', '.join(skipped) or 'none'}", file=sys.stderr)
    with _deferred_signals():
        if histories:
            png = plot_convergence(histories, path=os.path.join(folder, "compare.png"),
                                   title=f"{args.problem}: cost against iteration and wall time")
            print(f"wrote {png}")
        write_json(os.path.join(folder, "compare.json"), rows)
        _saved(os.path.join(folder, "compare.json"))
    return _interrupted_exit() if interrupted else 0


def _tuples(value):
    """JSON lists back to the tuples the command line gave (``target=(2.6, 2.0)``)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def read_result(folder: str):
    """``(xs, us, dt, summary)`` of the result folder a solve wrote (solution.npz, summary.json), each
    checked: a missing folder or file, a file that is not an .npz, or an .npz without a trajectory
    (a foreign file, an inverse problem's answer) is a CLIError naming it."""
    if not os.path.exists(folder):
        raise CLIError(f"{folder}: no such folder (give the folder `trajopt solve` wrote, e.g. "
                       f"{os.path.join(DEFAULT_OUT, 'catapult', 'cem-ddp')})")
    if not os.path.isdir(folder):
        raise CLIError(f"{folder}: not a folder (give the folder holding solution.npz and summary.json)")
    npz, js = os.path.join(folder, "solution.npz"), os.path.join(folder, "summary.json")
    for path in (npz, js):
        if not os.path.isfile(path):
            raise CLIError(f"{folder}: no {os.path.basename(path)} there (trajopt view reads the folder a "
                           "`trajopt solve`, `compare` or `sweep` run wrote)")
    try:
        with np.load(npz, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as exc:  # noqa: BLE001 -- zipfile, pickle or format errors: all mean "not ours"
        raise CLIError(f"{npz}: not a NumPy .npz file ({type(exc).__name__}: {exc})") from None
    if "xs" not in arrays or "us" not in arrays:
        what = ("an inverse problem's answer (z), which has no trajectory to play" if "z" in arrays else
                f"arrays {sorted(arrays) or 'none'}, not a trajectory (xs, us, dt) written by trajopt solve")
        raise CLIError(f"{npz}: {what}")
    xs, us = np.asarray(arrays["xs"]), np.asarray(arrays["us"])
    if (xs.ndim != 2 or us.ndim != 2 or len(xs) != len(us) + 1 or not np.issubdtype(xs.dtype, np.number)
            or not np.issubdtype(us.dtype, np.number)):
        raise CLIError(f"{npz}: xs {xs.shape} and us {us.shape} are not a trajectory (xs (T+1, nx), us (T, nu))")
    try:
        with open(js) as f:
            summary = json.load(f)
    except (OSError, ValueError) as exc:
        raise CLIError(f"{js}: not readable as JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("problem"), str):
        raise CLIError(f"{js}: no problem name in it (not a summary written by trajopt solve)")
    dt = float(arrays["dt"]) if "dt" in arrays and np.size(arrays["dt"]) == 1 else None
    return xs.astype(float), us.astype(float), dt, summary


def _rebuild(summary: dict, horizon: int):
    """The problem a result came from, from its summary: the recorded factory options (older summaries:
    the contact model), at the result's horizon."""
    import inspect

    name = summary["problem"]
    problems = _problems()
    if name not in problems.names():
        raise CLIError(f"the result is of problem {name!r}, which is not registered; available: "
                       f"{', '.join(problems.names())}")
    params = inspect.signature(problems.factory(name)).parameters
    options = {k: _tuples(v) for k, v in (summary.get("options") or {}).items()}
    if "options" not in summary and summary.get("contact") not in (None, "none") and "contact" in params:
        options["contact"] = summary["contact"]
    if "horizon" in params:
        options["horizon"] = horizon
    try:
        return _require_ocp(problems.load(name, **options), name, "view"), options
    except CLIError:
        raise
    except Exception as exc:  # noqa: BLE001 -- the factory refused the recorded options
        opts = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "its defaults"
        raise CLIError(f"could not rebuild {name!r} with {opts}: {type(exc).__name__}: {exc}") from None


def cmd_view(args) -> int:
    """``trajopt view DIR``: scene.html rebuilt from DIR/solution.npz and the problem in DIR/summary.json."""
    folder = args.folder
    if os.path.isfile(folder) and os.path.basename(folder) in ("solution.npz", "summary.json"):
        folder = os.path.dirname(folder) or "."
    xs, us, dt, summary = read_result(folder)
    horizon = summary.get("horizon")
    if isinstance(horizon, int) and horizon != len(us):
        raise CLIError(f"{folder}/solution.npz: a trajectory of {len(us)} steps, but summary.json says horizon "
                       f"{horizon}: not its result")
    page = args.out or os.path.join(folder, "scene.html")
    check_writable(os.path.dirname(os.path.abspath(page)), "--out" if args.out else "the folder")
    ocp, options = _rebuild(summary, len(us))
    dyn = ocp.dynamics
    given = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "its defaults"
    if xs.shape[1] != dyn.nx or us.shape[1] != dyn.nu:
        raise CLIError(f"{folder}/solution.npz: states of size {xs.shape[1]} and controls of size {us.shape[1]}, "
                       f"but {summary['problem']!r} ({given}) has nx = {dyn.nx}, nu = {dyn.nu}: not its result")
    if dt is not None and getattr(dyn, "dt", None) is not None and not np.isclose(dt, dyn.dt, rtol=1e-9):
        raise CLIError(f"{folder}/solution.npz: dt = {dt:g}, but {summary['problem']!r} ({given}) steps "
                       f"dt = {dyn.dt:g}: not its result")
    x0 = np.asarray(getattr(ocp, "x0", xs[0]), dtype=float)
    if x0.shape == xs[0].shape and not np.allclose(xs[0], x0, rtol=1e-6, atol=1e-6):
        raise CLIError(f"{folder}/solution.npz: the trajectory does not start at {summary['problem']!r}'s start "
                       f"state ({given}): not its result")
    if not np.isfinite(xs[0]).all():
        raise CLIError(f"{folder}/solution.npz: the first state is not finite; there is nothing to draw")
    from .viewer import write_scene

    dyn, xs, us = _drawable(dyn, xs, us)
    why = _undrawable(dyn)
    if why is not None:
        raise CLIError(f"{summary['problem']!r}: {why}")
    title = f"{summary['problem']}: {summary.get('method', '?')}, {summary.get('status', '?')}"
    with ResultLock([os.path.dirname(os.path.abspath(page))]):
        info = write_scene(dyn, xs, page, us=us, title=title, target=ocp.info.get("target"))
    print(f"wrote {page}: {info.frames} frames, {info.geometries} shapes, {info.contact_frames} frames with "
          f"contacts, {info.bytes / 1024:.0f} KB")
    if info.contact_warning:
        print(f"warning: {page}: {info.contact_warning}", file=sys.stderr)
    return 0


def cmd_sweep(args) -> int:
    from .sweep import SweepError, main_sweep

    try:
        return main_sweep(args)
    except SweepError as exc:
        raise CLIError(str(exc)) from None


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
    """The stochastic methods: those whose solver takes a ``seed`` (CEM, every CEM hybrid, and design-search, whose
    candidates' inner method is cem-ddp by default); imported late: ``solvers`` loads CasADi."""
    import inspect

    from solvers import METHODS
    from solvers.hybrid import HYBRIDS

    seeded = [m for m, fn in METHODS.items() if "seed" in inspect.signature(fn).parameters]
    return tuple(dict.fromkeys(["cem", *HYBRIDS, *seeded]))  # the hybrids pass it on through their options


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
    s.add_argument("--no-scene", action="store_true", help="skip scene.html (3-D playback in the browser)")
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("solve", help="optimize a problem and save the solution, its summary and plots")
    s.add_argument("--method", default=None,
                   help="solver (default: the problem's own method and options; see trajopt list)")
    s.add_argument("--smoothing", default=None, metavar="auto|none|KAPPA",
                   help="solve on relaxed contact first and end on hard contact: 'auto' (a schedule scaled to "
                        "the robot), 'none', or one kappa > 0 in J (default: the problem's)")
    _solve_options(s, time_limit=None)
    s.add_argument("--no-animation", action="store_true", help="skip the GIF of planar problems")
    s.add_argument("--no-scene", action="store_true", help="skip scene.html (3-D playback in the browser)")
    s.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="an option of the problem's factory (repeatable), e.g. --option noise=1e-3; a vector as "
                        "in sweep --set: --option target=2.6:2.0 (or 2.6,2.0)")
    s.add_argument("--complementarity-aware", action="store_true",
                   help="ddp, gn, cem-ddp, cem-gn: Nimble's complementarity-aware step Jacobians (LCP contact only: "
                        "refused with --contact ncp; "
                        "a way out of resting contacts' zero gradients); output in METHOD-aware/")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("compare", help="run several methods on a problem; plot cost against wall time")
    s.add_argument("--methods", default="ddp,ipopt,cem", help="comma-separated methods (default: ddp,ipopt,cem)")
    _solve_options(s, time_limit=60.0)
    s.add_argument("--verbose", action="store_true", help="show each solver's iteration table")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("sweep", help="solve a problem over seeds and option values on Dask; a table of the runs")
    s.add_argument("problem")
    s.add_argument("--seeds", default="0", help="seeds: N, A-B, or a comma-separated list of them (default 0); "
                                                "they reach the stochastic methods (cem, cem-*)")
    s.add_argument("--set", action="append", metavar="KEY=V1,V2",
                   help="an option of the problem's factory and its values (repeatable; every combination runs): "
                        "horizon=80,100; contact=lcp,ncp; a tuple with colons: target=2.6:2.0,2.2:2.2")
    s.add_argument("--method", default=None, help="solver (default: the problem's own method and options)")
    s.add_argument("--max-iter", type=int, default=None, help="iteration budget of each run")
    s.add_argument("--time-limit", type=float, default=None, help="stop each run after this many seconds")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="an existing Dask scheduler (tcp://host:port; start one with `dask scheduler` and its "
                        "workers with `dask worker ADDRESS`); default: a local cluster for this sweep")
    s.add_argument("--workers", type=int, default=None,
                   help="worker processes of the local cluster (default: one per core)")
    s.add_argument("--out", default=None, help="output folder (default: out/PROBLEM/sweep/)")
    s.set_defaults(func=cmd_sweep)

    s = sub.add_parser("view", help="rebuild scene.html (3-D playback) from a result folder's solution.npz")
    s.add_argument("folder", metavar="DIR",
                   help="a folder a solve wrote (solution.npz and summary.json), e.g. out/catapult/cem-ddp")
    s.add_argument("--out", default=None, metavar="FILE", help="the page to write (default: DIR/scene.html)")
    s.set_defaults(func=cmd_view)

    s = sub.add_parser("bench", help="time one step and its Jacobians; compare with finite differences")
    s.add_argument("problems", nargs="*", help=f"problems (default: {' '.join(DEFAULT_BENCH)})")
    s.add_argument("--suite", default=None, metavar="NAME",
                   help="a named set of scenes instead of problems: ncp-paper (the NCP paper's timing table on our "
                        "models, all under NCP: half-cheetah, humanoid, ur5-box, go1, g1-pushup, talos-meshes)")
    s.add_argument("--json", default=None, help="also write the records to this JSON file")
    s.add_argument("--min-time", type=float, default=0.2, help="seconds spent timing each call (default 0.2)")
    s.add_argument("--contact", choices=("lcp", "ncp"), default=None,
                   help="contact model of the problems that have contact (default: each problem's own)")
    s.add_argument("--ddp-iterations", type=int, default=None, metavar="N",
                   help="also time DDP per iteration over N iterations from the initial guess, and the trajectory's "
                        "states and Jacobians per step, on every problem named (not with --suite, nor on inverse "
                        "problems); default: catapult and go1-hold only, over 5 iterations (0: skip)")
    s.add_argument("--params", action="store_true",
                   help="also time the parameter Jacobians (step_derivatives(..., params=)) against the state "
                        "Jacobians: friction alone, inertial and all parameters, and per column (issue 14's target: <= 1.5x)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _install_signal_handlers()
    note = CompileNote().install()
    try:
        return args.func(args)
    except (CLIError, ValueError, FileNotFoundError, TypeError) as exc:
        print(f"trajopt: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        from dynamics import SimulationError

        if not isinstance(exc, SimulationError):
            raise
        if _signal["received"] is not None:  # a solver stopped by a signal whose answer's rollout then diverged
            print(f"trajopt: interrupted by {signal_label()}; the run had no finite result to save ({exc})",
                  file=sys.stderr)
            return _interrupted_exit()
        # a rollout no solver could start from (the initial guess's, or a problem's own data): nothing to save
        print(f"trajopt: error: the simulation diverged, nothing was solved: {exc} (a smaller time step dt, or "
              "milder options, may keep it finite)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP before a solver had anything to save (or just after)
        if _signal["saved"]:  # raised once a writing's deferral had ended (or an interrupted sweep's table is written)
            print(f"trajopt: interrupted by {signal_label()}; results written, whole: {', '.join(_signal['saved'])}",
                  file=sys.stderr)
        else:
            print(f"trajopt: interrupted by {signal_label()} before the run had a result to save", file=sys.stderr)
        return _interrupted_exit()
    except BrokenPipeError:  # `trajopt list | head`: the reader left; no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell tool reports
    finally:
        import signal

        note.uninstall()
        if note.summary():
            print(note.summary(), file=sys.stderr)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
