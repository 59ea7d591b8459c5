"""Parameter and seed sweeps on Dask: ``trajopt sweep PROBLEM [--seeds 0-9] [--set KEY=V1,V2 ...]``.

One solve per combination of the seeds and every ``--set`` option's values (a cartesian
product), each a Dask task: on a ``distributed.LocalCluster`` started for the sweep (worker
processes, one thread each; ``workers`` of them, default one per core) or on an existing cluster
(``scheduler="tcp://host:port"``, started with ``dask scheduler`` / ``dask worker``).

Syntax of the values (:func:`parse_set`): ``KEY=V1,V2,...``; each value is a Python literal
(``80``, ``1e-3``, ``True``) or else a plain string (``contact=lcp,ncp``); a tuple is written
with colons, ``target=2.6:2.0,2.2:2.2`` (two targets, (2.6, 2.0) and (2.2, 2.2)). Keys are the
keyword options of the problem's factory (``trajopt list`` names the problems; their options
are those of ``problems.factory(name)``). Seeds (:func:`parse_seeds`): ``0-9``, ``3``,
``0,2,5`` or ``0-3,7``; the seed goes to the stochastic methods (cem and the cem-* hybrids) and
is recorded, not used, for deterministic ones.

Each run writes ``OUT/runs/<run>/`` (the solution, summary.json, plots, scene.html) into a
temporary folder first and renames it when complete, so a folder present is a finished run; a
run that raises still gets its folder, with a summary.json holding the error. The sweep writes
``OUT/sweep.csv`` (one row per run: its parameters, status, cost, iterations, wall time, the
problem's metrics, the error if any) and prints the same table. A run whose folder already
holds a summary.json (a re-run of the same sweep into the same ``OUT``) is not solved again:
its row is read back. Ctrl-C, SIGTERM and SIGHUP (through ``trajopt sweep``, :mod:`app.cli`'s
handlers) cancel the runs not yet finished (their rows say ``cancelled`` and by what), still write
the table of the finished ones and close the cluster; the command exits 130, 143 or 129. A signal
while the local cluster starts is held until it has started, so that it can be closed.
"""

from __future__ import annotations

import csv
import inspect
import itertools
import json
import logging
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass, field

from .options import OptionError, parse_value

STATUS_ERROR = "error"
STATUS_CANCELLED = "cancelled"


class SweepError(ValueError):
    """What the user asked for cannot be swept (raised before anything runs)."""


@dataclass(frozen=True)
class Run:
    """One solve of a sweep: the ``problem`` with factory ``options``, ``method`` (None: the
    problem's recipe), ``seed``, and the solver limits."""

    name: str
    problem: str
    seed: int
    options: dict = field(default_factory=dict)
    method: str | None = None
    max_iter: int | None = None
    time_limit: float | None = None


#: the most runs one sweep may have (a typo such as ``--seeds 0-100000000`` is refused, not planned)
MAX_RUNS = 10000


def parse_seeds(text: str) -> list[int]:
    """``"0-9"`` -> 0..9; ``"0,2,5"``; ``"0-3,7"``; seeds are integers >= 0, each once, at most
    :data:`MAX_RUNS` of them."""
    seeds: list[int] = []
    seen: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise SweepError(f"--seeds {text!r}: expected N, A-B or a comma-separated list of them (e.g. 0-9)") \
                from None
        if a < 0 or b < a:
            raise SweepError(f"--seeds {text!r}: a range A-B needs 0 <= A <= B, got {part!r}")
        if len(seeds) + (b - a + 1) > MAX_RUNS:
            total = len(seeds) + b - a + 1
            raise SweepError(f"--seeds {text!r}: {total} seeds, more than the {MAX_RUNS} runs a sweep may have; "
                             "split it into smaller sweeps")
        new = [s for s in range(a, b + 1) if s not in seen]
        seen.update(new)
        seeds += new
    return seeds


def run_count(seeds: list[int], sets: dict[str, list]) -> tuple[int, str]:
    """How many runs the sweep has, and the product that makes it (``6``, ``"3 seeds x 2 horizon"``);
    SweepError above :data:`MAX_RUNS`."""
    n = len(seeds)
    for values in sets.values():
        n *= len(values)
    parts = " x ".join([f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"]
                       + [f"{len(v)} {k}" for k, v in sets.items()])
    if n > MAX_RUNS:
        raise SweepError(f"{n} runs ({parts}), more than the {MAX_RUNS} runs a sweep may have; split it into "
                         "smaller sweeps")
    return n, parts


def _value(text: str):
    try:
        return parse_value(text)
    except OptionError as exc:
        raise SweepError(str(exc)) from None


def parse_set(items, problem: str) -> dict[str, list]:
    """``["horizon=80,100", "target=2.6:2.0,2.2:2.2"]`` -> ``{"horizon": [80, 100], "target":
    [(2.6, 2.0), (2.2, 2.2)]}``, each key checked against the options of ``problem``'s factory."""
    import problems

    params = inspect.signature(problems.factory(problem)).parameters
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    known = [k for k, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    out: dict[str, list] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise SweepError(f"--set expects KEY=V1,V2,..., got {item!r}")
        if key not in known and not open_kwargs:
            raise SweepError(f"--set {key}: {problem!r} has no option {key!r}; its options: {', '.join(known)}")
        if key in out:
            raise SweepError(f"--set {key} is given twice")
        try:
            out[key] = [_value(v) for v in values.split(",")]
        except SweepError as exc:
            raise SweepError(f"--set {item!r}: {exc}") from None
    return out


def _label(value) -> str:
    if isinstance(value, tuple):
        return ":".join(_label(v) for v in value)
    return str(value)


def plan(problem: str, seeds: list[int], sets: dict[str, list], *, method: str | None = None,
         max_iter: int | None = None, time_limit: float | None = None) -> list[Run]:
    """Every combination of the seeds and the ``sets`` values, one :class:`Run` each, named
    ``seed<S>[_<key>-<value>...]`` (file-name safe)."""
    keys = list(sets)
    runs = []
    for seed in seeds:
        for combo in itertools.product(*(sets[k] for k in keys)):
            options = dict(zip(keys, combo, strict=True))
            name = "_".join([f"seed{seed}"] + [f"{k}-{_label(v)}" for k, v in options.items()])
            name = "".join(c if c.isalnum() or c in "-_.:" else "~" for c in name).replace(":", "x")
            runs.append(Run(name=name, problem=problem, seed=seed, options=options, method=method,
                            max_iter=max_iter, time_limit=time_limit))
    return runs


def check_out(out: str) -> None:
    """``out`` exists or can be made, and a file can be written in it (else SweepError)."""
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f".write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as exc:
        raise SweepError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


def validate(runs: list[Run]) -> None:
    """Build each run's problem once (no solving) and check the method: bad values fail here,
    before any run starts."""
    import problems
    from solvers import resolve
    from trajopt.lsq import LeastSquares

    seen = set()
    for run in runs:
        key = repr(sorted(run.options.items()))
        if key in seen:
            continue
        seen.add(key)
        try:
            ocp = problems.load(run.problem, **run.options)
        except Exception as exc:  # noqa: BLE001 -- any refusal of the factory is the user's input
            opts = ", ".join(f"{k}={_label(v)}" for k, v in run.options.items())
            raise SweepError(f"{run.problem} with {opts or 'its defaults'}: {type(exc).__name__}: {exc}") from None
        if isinstance(ocp, LeastSquares):
            raise SweepError(f"{run.problem!r} is an inverse (least-squares) problem; trajopt sweep runs optimal-"
                             "control problems (solve it with trajopt solve)")
        try:
            resolve(ocp, run.method)
        except ValueError as exc:
            raise SweepError(str(exc)) from None


def _stochastic(method: str) -> bool:
    from solvers.hybrid import HYBRIDS

    return method in ("cem", *HYBRIDS)


def run_one(run: Run, out: str) -> dict:
    """Solve one run and write ``out/runs/<run.name>/`` atomically; returns its table row. Runs in a
    Dask worker. An exception becomes a row (and a summary.json) with status ``error``."""
    folder = os.path.join(out, "runs", run.name)
    tmp = os.path.join(out, "runs", f".tmp-{run.name}-{os.getpid()}-{time.monotonic_ns()}")
    row = {"run": run.name, "seed": run.seed, **{k: _label(v) for k, v in run.options.items()}}
    t0 = time.perf_counter()
    try:
        import problems
        from solvers import resolve, solve

        from .cli import write_solution

        ocp = problems.load(run.problem, **run.options)
        method = resolve(ocp, run.method)[0]
        options = {"verbose": False}
        if run.max_iter is not None:
            options["max_iter"] = run.max_iter
        if run.time_limit is not None:
            options["time_limit"] = run.time_limit
        if _stochastic(method):
            options["seed"] = run.seed
        sol = solve(ocp, method=run.method, **options)
        summary = write_solution(ocp, sol, problem=run.problem, contact=run.options.get("contact"), out_dir=tmp,
                                 options=run.options,
                                 animate=False, extra={"sweep": {"run": run.name, "seed": run.seed,
                                                                 "options": {k: _label(v) for k, v in
                                                                             run.options.items()}}})
        row.update(method=summary["method"], status=summary["status"], cost=summary["cost"],
                   iterations=summary["iterations"], wall_time_s=round(time.perf_counter() - t0, 3),
                   solve_time_s=round(summary["wall_time_s"], 3), error="",
                   **{f"metric:{k}": v for k, v in summary["metrics"].items()})
    except Exception as exc:  # noqa: BLE001 -- a failed run is a row with its error, not a lost sweep
        row.update(method=run.method or "", status=STATUS_ERROR, cost="", iterations="",
                   wall_time_s=round(time.perf_counter() - t0, 3), solve_time_s="",
                   error=f"{type(exc).__name__}: {exc}")
        os.makedirs(tmp, exist_ok=True)
        with open(os.path.join(tmp, "summary.json"), "w") as f:
            json.dump({"problem": run.problem, "status": STATUS_ERROR, "error": row["error"],
                       "traceback": traceback.format_exc(), "sweep": {"run": run.name, "seed": run.seed}}, f, indent=2)
    row["folder"] = os.path.join("runs", run.name)
    with open(os.path.join(tmp, "row.json"), "w") as f:
        json.dump(row, f, indent=2)
    if os.path.isdir(folder):  # a stale folder of an earlier sweep (an error): replaced whole
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return row


def _folder_row(out: str, run: Run) -> dict | None:
    """The row in the run's complete folder ``out/runs/<name>/row.json`` (a folder is renamed into place
    only when complete), or None."""
    path = os.path.join(out, "runs", run.name, "row.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _finished_row(out: str, run: Run) -> dict | None:
    """The row of a run already finished in ``out`` (not an error), or None."""
    row = _folder_row(out, run)
    return row if row is not None and row.get("status") != STATUS_ERROR else None


def rows_when_stopped(runs: list[Run], rows: dict[str, dict], out: str, why: str, stale=()) -> list[dict]:
    """The table of a sweep stopped by ``why`` (Ctrl-C, SIGTERM, ...): the rows collected so far, then
    for each other run the row of its folder if it is complete (its worker finished while the sweep was
    stopping; not one of ``stale``, the failed runs of an earlier sweep being run again), else a
    ``cancelled`` row."""
    ordered = []
    for run in runs:
        row = rows.get(run.name) or (None if run.name in stale else _folder_row(out, run))
        if row is None:
            row = {"run": run.name, "seed": run.seed, **{k: _label(v) for k, v in run.options.items()},
                   "status": STATUS_CANCELLED, "error": f"cancelled ({why})", "folder": ""}
        ordered.append(row)
    return ordered


def _start_resource_tracker() -> None:
    """multiprocessing's resource tracker (the local cluster's worker processes use it) ignores SIGINT and
    SIGTERM but dies of a SIGHUP sent to the process group (a closed terminal), and the workers then print
    its tracebacks. Started with SIGHUP blocked (a blocked signal stays blocked across exec), it outlives the
    hangup and ends with the sweep, as it does on Ctrl-C."""
    import signal
    from multiprocessing import resource_tracker

    if not (hasattr(signal, "SIGHUP") and hasattr(signal, "pthread_sigmask")):
        resource_tracker.ensure_running()
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _client(scheduler: str | None, workers: int | None):
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            return Client(scheduler, timeout=10), None
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"--scheduler {scheduler}: no Dask scheduler answered ({exc})") from None
    n = workers or os.cpu_count() or 1
    _start_resource_tracker()
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR)
    return Client(cluster), cluster


def _echo(*args) -> None:
    """Progress to stdout, flushed: it reaches a pipe or a log as each run finishes, not at exit."""
    print(*args, flush=True)


def run_sweep(runs: list[Run], *, out: str, scheduler: str | None = None, workers: int | None = None,
              echo=None) -> list[dict]:
    """Run ``runs`` on Dask; writes ``out/sweep.csv``; returns the rows in the order of ``runs``.
    ``echo`` prints progress (one line per finished run)."""
    from distributed import as_completed

    echo = echo or _echo

    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    rows: dict[str, dict] = {}
    todo, stale = [], set()
    for run in runs:
        row = _finished_row(out, run)
        if row is not None:
            rows[run.name] = row
        else:
            todo.append(run)
            if _folder_row(out, run) is not None:  # an earlier sweep's failed run: run again
                stale.add(run.name)
    if rows:
        echo(f"{len(rows)} of {len(runs)} runs already finished in {out}: kept, not run again")
    from .cli import _deferred_signals, _saved, held_signals, signal_label

    t0 = time.perf_counter()
    client = cluster = None
    futures = {}
    try:
        if todo:
            started = []
            try:
                with held_signals():  # a cluster interrupted while it starts could not be closed
                    started.append(_client(scheduler, workers))
            finally:
                if started:
                    client, cluster = started[0]
            nw = len(client.scheduler_info()["workers"])
            echo(f"sweep: {len(todo)} runs on {nw} Dask worker(s) at {client.scheduler.address}")
            futures = {client.submit(run_one, run, os.path.abspath(out), key=f"sweep-{run.name}-{time.time_ns()}",
                                     pure=False): run for run in todo}
            done = 0
            for fut in as_completed(futures):
                run = futures[fut]
                try:
                    row = fut.result()
                except Exception as exc:  # noqa: BLE001 -- the worker died (KilledWorker) or the task was lost
                    row = {"run": run.name, "seed": run.seed, **{k: _label(v) for k, v in run.options.items()},
                           "method": run.method or "", "status": STATUS_ERROR, "error": f"{type(exc).__name__}: {exc}",
                           "folder": ""}
                rows[run.name] = row
                done += 1
                cost = row.get("cost")
                echo(f"[{done}/{len(todo)}] {run.name}: {row['status']}"
                     + (f", cost {cost:.6g}" if isinstance(cost, float) else "")
                     + (f", {row['wall_time_s']:.1f} s" if isinstance(row.get("wall_time_s"), float) else "")
                     + (f" ({row['error']})" if row.get("error") else ""))
    except (KeyboardInterrupt, RuntimeError) as exc:  # Ctrl-C, SIGTERM or SIGHUP (app.cli): a second one cannot
        # cut this short. The handler's exception raised inside threading's Condition.wait (as_completed's) leaves
        # its lock released: the signal then surfaces as "RuntimeError: cannot release un-acquired lock", with the
        # signal's exception as its context (seen once in CI: exit 1 and a traceback, the finished rows unwritten)
        stop = exc if isinstance(exc, KeyboardInterrupt) else exc.__context__
        if not isinstance(stop, KeyboardInterrupt):
            raise
        with _deferred_signals():
            why = signal_label()
            pending = [f for f, r in futures.items() if r.name not in rows]
            if client is not None and pending:
                client.cancel(pending)
            ordered = rows_when_stopped(runs, rows, out, why, stale)
            write_table(ordered, os.path.join(out, "sweep.csv"))
            _saved(os.path.join(out, "sweep.csv"))
            echo(format_table(ordered))
            echo(f"interrupted ({why}): {sum(r['status'] != STATUS_CANCELLED for r in ordered)} finished runs kept "
                 f"in {os.path.join(out, 'sweep.csv')}")
        raise stop from None
    finally:
        with _deferred_signals():  # the cluster is closed whatever arrives meanwhile
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
    ordered = [rows[r.name] for r in runs]
    with held_signals():  # every run finished: the table is written whole, then a signal stops the command
        write_table(ordered, os.path.join(out, "sweep.csv"))
        _saved(os.path.join(out, "sweep.csv"))
    echo(f"sweep: {len(runs)} runs in {time.perf_counter() - t0:.1f} s")
    return ordered


def columns(rows: list[dict]) -> list[str]:
    """The table's columns: run, seed, the swept options, then the results and metrics."""
    first = ["run", "seed"]
    results = ["method", "status", "cost", "iterations", "wall_time_s", "solve_time_s"]
    options, metrics = [], []
    for row in rows:
        for k in row:
            if k.startswith("metric:"):
                metrics.append(k) if k not in metrics else None
            elif k not in first + results + ["error", "folder"] and k not in options:
                options.append(k)
    return first + options + results + metrics + ["error", "folder"]


def write_table(rows: list[dict], path: str) -> str:
    """``rows`` as CSV at ``path`` (written to a temporary file, then renamed)."""
    cols = columns(rows)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in cols})
    os.replace(tmp, path)
    return path


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table (numbers to 4-6 significant digits; errors cut at 60 chars)."""
    cols = [c for c in columns(rows) if c != "folder"]

    def cell(v):
        if isinstance(v, float):
            return f"{v:.6g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.3e}"
        s = str(v)
        return s if len(s) <= 60 else s[:57] + "..."

    table = [[c.removeprefix("metric:") for c in cols]] + [[cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in table)


def main_sweep(args, echo=None) -> int:
    echo = echo or _echo
    """``trajopt sweep``: validate everything, run, print the table; exit status 0 when every run
    finished without an error, 1 otherwise."""
    import problems

    if args.problem not in problems.names():
        raise SweepError(f"unknown problem {args.problem!r}; available: {', '.join(problems.names())}")
    seeds = parse_seeds(args.seeds)
    sets = parse_set(args.set, args.problem)
    if args.workers is not None and args.workers < 1:
        raise SweepError(f"--workers must be >= 1, got {args.workers}")
    if args.workers is not None and args.scheduler is not None:
        raise SweepError("--workers sizes the local cluster; with --scheduler the cluster's own workers run")
    if args.max_iter is not None and args.max_iter < 1:
        raise SweepError(f"--max-iter must be >= 1, got {args.max_iter}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise SweepError(f"--time-limit must be > 0, got {args.time_limit}")
    if args.method is not None:
        from solvers import METHODS

        if args.method not in METHODS:
            raise SweepError(f"unknown method {args.method!r}; available: {', '.join(sorted(METHODS))}")
    n, parts = run_count(seeds, sets)
    out = args.out if args.out is not None else os.path.join("out", args.problem, "sweep")
    check_out(out)
    print(f"sweep: {n} run{'s' if n != 1 else ''} ({parts})", file=sys.stderr, flush=True)
    runs = plan(args.problem, seeds, sets, method=args.method, max_iter=args.max_iter, time_limit=args.time_limit)
    validate(runs)
    if len(seeds) > 1:
        import problems as _p

        method = args.method or _p.load(args.problem, **runs[0].options).default_method
        if not _stochastic(method):
            print(f"note: {method} is deterministic: runs that differ only in their seed give the same solution",
                  file=sys.stderr)
    rows = run_sweep(runs, out=out, scheduler=args.scheduler, workers=args.workers, echo=echo)
    echo(format_table(rows))
    echo(f"wrote {os.path.join(out, 'sweep.csv')} and {len(rows)} run folders in {os.path.join(out, 'runs')}/")
    return 0 if all(r["status"] != STATUS_ERROR for r in rows) else 1
