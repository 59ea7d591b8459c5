"""Runs that never lose a result, and options refused before any solving (issue 16).

The process-level behaviour (signals, exit statuses, an unwritable ``--out``, two runs into one
folder) is tested on the real command, ``python -m app`` in a subprocess, on the pendulum
with a few iterations. A long run is CEM with a huge iteration budget, stopped by a signal once
its progress table shows a few rows.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import problems
import solvers
from solvers import gauss_newton, solve
from app.cli import LOCK_NAME, main
from trajopt.solution import Status

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
#: a solve that runs until a signal stops it (CEM collapses its distribution after ~170 iterations, ~5 s)
LONG = ["solve", "pendulum", "--method", "cem", "--max-iter", "100000", "--horizon", "30", "--no-scene"]
ROW = re.compile(r"^\s+\d+\s+[-+0-9.e]+\s")


@pytest.fixture(scope="module", autouse=True)
def _the_command_imports_this_tree():
    out = subprocess.run([sys.executable, "-c", "import trajopt; print(trajopt.__file__)"], env=ENV,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().startswith(str(REPO)), out


def run_cli(*argv, timeout=120):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "app", *argv], env=ENV, capture_output=True, text=True,
                       timeout=timeout)
    return p, time.perf_counter() - t0


class Running:
    """A CLI subprocess whose stdout is read line by line in a thread."""

    def __init__(self, *argv):
        self.proc = subprocess.Popen([sys.executable, "-m", "app", *argv], env=ENV, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_rows(self, n=3, timeout=60):
        """Block until the progress table has shown ``n`` rows."""
        seen, deadline = 0, time.monotonic() + timeout
        while seen < n:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert line is not None, f"ended early: {self.proc.wait()} {self.proc.stderr.read()}"
            seen += bool(ROW.match(line))

    def stop(self, signum, timeout=60):
        self.proc.send_signal(signum)
        rc = self.proc.wait(timeout=timeout)
        return rc, self.proc.stderr.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running():
    started = []

    def start(*argv):
        r = Running(*argv)
        started.append(r)
        return r

    yield start
    for r in started:
        r.kill()


# -- --out is checked before any solving ---------------------------------------------------------

@pytest.mark.parametrize("command", [["solve", "pendulum", "--max-iter", "2"], ["compare", "pendulum", "--methods",
                                                                                "ddp", "--max-iter", "2"],
                                     ["simulate", "pendulum", "--steps", "5"]])
def test_an_unwritable_out_is_a_clear_error_before_solving(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder below a file cannot be made, even by root
    p, wall = run_cli(*command, "--out", str(blocker / "out"))
    assert p.returncode == 2, p.stderr
    assert "--out" in p.stderr and "cannot write there" in p.stderr, p.stderr
    assert "[ddp]" not in p.stdout  # nothing was solved
    assert wall < 10


# -- results are written atomically, and two runs do not mix their files --------------------------

def test_results_are_written_atomically_from_the_same_folder(tmp_path, monkeypatch):
    replaced = []
    real = os.replace

    def spy(src, dst):
        replaced.append((os.fspath(src), os.fspath(dst)))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    assert main(["solve", "pendulum", "--max-iter", "2", "--horizon", "20", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "pendulum" / "ddp"
    targets = {Path(dst).name: src for src, dst in replaced}
    for name in ("solution.npz", "summary.json", "scene.html"):
        assert name in targets, replaced
        assert Path(targets[name]).parent == folder  # the temporary file sits beside its target
    assert not [f for f in os.listdir(folder) if "tmp" in f or f == LOCK_NAME]


def test_a_write_that_fails_midway_leaves_the_previous_result_whole(tmp_path, monkeypatch):
    argv = ["solve", "pendulum", "--max-iter", "2", "--horizon", "20", "--no-scene", "--out", str(tmp_path)]
    assert main(argv) == 0
    summary = tmp_path / "pendulum" / "ddp" / "summary.json"
    before = summary.read_text()

    def broken_dump(obj, f, **kw):
        f.write('{"problem": "half a fi')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError):
        main(argv)
    assert summary.read_text() == before
    assert not [f for f in os.listdir(summary.parent) if "tmp" in f]


def test_a_second_run_into_the_same_out_is_refused_while_the_first_runs(tmp_path, running):
    first = running(*LONG, "--out", str(tmp_path))
    first.wait_rows(2)
    p, wall = run_cli(*LONG, "--out", str(tmp_path))
    assert p.returncode == 2 and wall < 10
    assert f"another trajopt run (pid {first.proc.pid})" in p.stderr and "choose another --out" in p.stderr
    rc, _ = first.stop(signal.SIGINT)
    assert rc == 130
    # the first run's result is whole and the lock is gone: a third run may write there again
    assert json.loads((tmp_path / "pendulum" / "cem" / "summary.json").read_text())["status"] == "interrupted"
    assert not (tmp_path / "pendulum" / "cem" / LOCK_NAME).exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "pendulum" / "ddp"
    folder.mkdir(parents=True)
    (folder / LOCK_NAME).write_text(f"{dead.pid}\n")
    assert main(["solve", "pendulum", "--max-iter", "1", "--horizon", "10", "--no-scene", "--out", str(tmp_path)]) == 0
    assert not (folder / LOCK_NAME).exists()


# -- signals stop a run as Ctrl-C does, and the result is saved -------------------------------------

@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_saves_the_best_iterate_as_interrupted(tmp_path, running, signum, code):
    r = running(*LONG, "--out", str(tmp_path))
    r.wait_rows(3)
    rc, err = r.stop(signum)
    assert rc == code, err  # an interrupted run never exits 0
    folder = tmp_path / "pendulum" / "cem"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["iterations"] >= 3
    assert signal.Signals(signum).name in summary["message"]
    data = np.load(folder / "solution.npz")
    assert data["xs"].shape == (31, 2) and np.isfinite(data["xs"]).all()


def test_sigterm_during_ipopt_saves_the_last_iterate_without_a_traceback(tmp_path, running):
    """IPOPT spends its time in the step and cost callbacks CasADi calls: the signal lands there. It
    used to escape into CasADi (two tracebacks, Invalid_Number_Detected, status failed, exit 1)."""
    r = running("solve", "cartpole", "--method", "ipopt", "--horizon", "400", "--max-iter", "3000", "--no-scene",
                "--out", str(tmp_path))
    r.wait_rows(4)
    rc, err = r.stop(signal.SIGTERM)
    assert rc == 143, err
    assert "Traceback" not in err and "Traceback" not in "".join(iter(r.lines.get, None)), err
    folder = tmp_path / "cartpole" / "ipopt"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "SIGTERM" in summary["message"], summary
    data = np.load(folder / "solution.npz")
    assert data["xs"].shape == (401, 4) and np.isfinite(data["xs"]).all()


def test_ctrl_c_in_compare_stops_every_method(tmp_path, running):
    r = running("compare", "pendulum", "--methods", "cem,ddp", "--max-iter", "100000", "--horizon", "30",
                "--verbose", "--out", str(tmp_path))
    r.wait_rows(3)
    rc, err = r.stop(signal.SIGINT)
    assert rc == 130, err
    assert "not run: ddp" in err
    rows = json.loads((tmp_path / "pendulum" / "compare.json").read_text())
    assert [row["method"] for row in rows] == ["cem"] and rows[0]["status"] == "interrupted"
    assert not (tmp_path / "pendulum" / "ddp" / "summary.json").exists()


def test_ctrl_c_between_cem_and_ddp_keeps_the_search_result(monkeypatch):
    from solvers import hybrid

    def ctrl_c(*args, **kwargs):  # Ctrl-C arrives as the second stage starts, before its loop
        raise KeyboardInterrupt

    monkeypatch.setitem(hybrid.LOCAL, "ddp", ctrl_c)
    ocp = problems.load("pendulum", horizon=20)
    try:
        sol = solve(ocp, method="cem-ddp", population=8, cem_iterations=2, verbose=False)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C between the stages escaped the solver: the search's result was lost")
    assert sol.status == Status.INTERRUPTED
    assert [h["stage"] for h in sol.history] == ["cem", "cem"]
    assert sol.cost == pytest.approx(sol.history[-1]["cost"]) and sol.cost < ocp.cost(ocp.rollout(ocp.us_init),
                                                                                        ocp.us_init)


# -- options refused before any solving -------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["solve", "pendulum", "--time-limit", "0"], "--time-limit must be"),
    (["solve", "pendulum", "--time-limit", "-3"], "--time-limit must be"),
    (["solve", "pendulum", "--time-limit", "nan"], "--time-limit must be"),
    (["solve", "pendulum", "--max-iter", "0"], "--max-iter must be >= 1"),
    (["solve", "pendulum", "--method", "cem-ddp", "--time-limit", "0"], "--time-limit must be"),
    (["compare", "pendulum", "--methods", "ddp", "--time-limit", "0"], "--time-limit must be"),
    (["compare", "pendulum", "--methods", "ddp", "--max-iter", "0"], "--max-iter must be >= 1"),
    (["solve", "cube-throw", "--method", "ddp"], "--method ddp: 'cube-throw' is an inverse (least-squares) problem"),
    (["solve", "cube-throw", "--max-iter", "0"], "--max-iter must be >= 1"),
    (["compare", "pendulum", "--methods", ""], "--methods: no method given"),
    (["compare", "pendulum", "--methods", " , "], "--methods: no method given"),
    (["solve", "pendulum", "--method", "cem", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["solve", "pendulum", "--method", "ddp", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["solve", "pendulum", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["compare", "pendulum", "--methods", "cem", "--seed", "-2"], "--seed must be an integer >= 0, got -2"),
])
def test_bad_options_are_refused_before_solving(tmp_path, capsys, argv, message):
    t0 = time.perf_counter()
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err, captured.err
    assert "[ddp]" not in captured.out and "[cem]" not in captured.out and "gauss-newton" not in captured.out
    assert not list((tmp_path / "o").rglob("summary.json"))
    if "cube-throw" not in argv:  # (its loading may compile the NCP kernels on a machine's first run)
        assert time.perf_counter() - t0 < 10


def test_an_inverse_problem_out_of_iterations_exits_as_a_trajectory_problem_does(tmp_path, capsys):
    """``solve go1-standing --max-iter 1`` exited 1 with no line saying why; trajectory problems exit 0 on
    max_iterations and print the reason."""
    assert main(["solve", "go1-standing", "--max-iter", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "go1-standing" / "gauss-newton" / "summary.json").read_text())
    assert summary["status"] == "max_iterations" and summary["message"]
    assert f"  max_iterations: {summary['message']}" in out, out


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bench_refuses_a_bad_min_time_before_timing(capsys, monkeypatch, value):
    """``--min-time nan`` timed each call for 2**20 loops (29 s); -1 was taken as 0."""
    import trajopt.bench

    def no_timing(*a, **k):
        raise AssertionError("benchmarked with a bad --min-time")

    monkeypatch.setattr(trajopt.bench, "bench_dynamics", no_timing)
    assert main(["bench", "pendulum", "--min-time", value]) == 2
    assert f"--min-time must be a number of seconds >= 0, got {float(value)}" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_bench_json_is_checked_before_benchmarking(tmp_path, capsys, monkeypatch, where):
    """``--json`` under a regular file gave a FileExistsError traceback, and an unwritable folder failed only
    after the whole benchmark: both are one line naming --json, before anything is timed."""
    import trajopt.bench

    def no_timing(*a, **k):
        raise AssertionError("benchmarked before checking --json")

    monkeypatch.setattr(trajopt.bench, "bench_dynamics", no_timing)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    path = blocker / "x.json" if where == "under-a-file" else Path("/proc/trajopt-bench.json")
    assert main(["bench", "pendulum", "--json", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trajopt: error: --json") and "cannot write there" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("method", [None, "ddp", "cem"])
def test_solve_on_an_inverse_problem_points_to_gauss_newton(method):
    """``solvers.solve`` on a least-squares problem was an AttributeError ('LeastSquares' object has no
    attribute 'check_controls'), or a KeyError-like failure deeper in: a ValueError saying what to use."""
    with pytest.raises(ValueError, match=r"'cube-throw' is an inverse \(least-squares\) problem.*gauss_newton"):
        solve(problems.load("cube-throw"), method=method, verbose=False)


@pytest.mark.parametrize("method, options, name", [
    ("ddp", {"time_limit": 0}, "time_limit"), ("ddp", {"time_limit": -1.0}, "time_limit"),
    ("ddp", {"time_limit": math.nan}, "time_limit"), ("cem-ddp", {"time_limit": 0}, "time_limit"),
    ("gn", {"max_iter": 0}, "max_iter"), ("cem", {"population": 1}, "population"),
    ("cem-gn", {"population": 1}, "population"), ("cem-ddp", {"cem_iterations": 0}, "cem_iterations"),
])
def test_the_python_api_refuses_bad_options_naming_them(method, options, name, monkeypatch):
    def no_solving(*a, **k):
        raise AssertionError("solved")

    monkeypatch.setitem(solvers.METHODS, method, no_solving)
    ocp = problems.load("pendulum", horizon=10)
    with pytest.raises(ValueError, match=name):
        solve(ocp, method=method, verbose=False, **options)


def test_gauss_newton_refuses_a_zero_time_limit():
    with pytest.raises(ValueError, match="time_limit"):
        gauss_newton(problems.load("cube-throw"), time_limit=0, verbose=False)


# -- a slow first call is explained ------------------------------------------------------------------

def test_a_numba_compilation_is_announced_once_and_timed():
    import io

    from numba import njit

    from app.cli import CompileNote

    @njit(cache=False)
    def inner(x):
        return x + 1.0

    @njit(cache=False)
    def fresh_kernel(x):  # never compiled before: a cache miss
        return inner(x) * 2.0

    stream = io.StringIO()
    note = CompileNote(stream=stream).install()
    try:
        assert fresh_kernel(1.0) == 4.0
        assert fresh_kernel(2.0) == 6.0  # compiled already: nothing more
    finally:
        note.uninstall()
    text = stream.getvalue()
    assert text.count("[numba] compiling") == 1 and "fresh_kernel" in text and "NUMBA_CACHE_DIR" in text
    assert note.seconds > 0 and "compiling took" in note.summary()


def test_no_compilation_no_note():
    from app.cli import CompileNote

    note = CompileNote().install()
    note.uninstall()
    assert note.summary() is None


@pytest.mark.parametrize("method", ["ddp", "cem"])
def test_the_progress_line_names_the_signal_that_stopped_the_solve(method, capsys, monkeypatch):
    """After SIGTERM the solver's last line said "interrupted (Ctrl-C)"."""
    from app import cli
    from solvers import _common

    monkeypatch.setitem(cli._signal, "received", None)
    monkeypatch.setitem(_common._STOP_SIGNAL, "name", None)

    def sigterm_at_the_second_iteration(info):
        if info["iteration"] == 1:
            cli._on_signal(signal.SIGTERM, None)  # what the CLI's handler does when SIGTERM arrives

    ocp = problems.load("pendulum", horizon=20)
    sol = solve(ocp, method=method, max_iter=50, callback=sigterm_at_the_second_iteration)
    assert sol.status == Status.INTERRUPTED
    out = capsys.readouterr().out
    assert f"[{method}] interrupted:" in out and "interrupted (SIGTERM)" in out and "Ctrl-C" not in out, out


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_finite_difference_run_ends_an_inverse_solve_interrupted(tmp_path, capsys, monkeypatch,
                                                                                     signum, code):
    """``trajopt solve`` on an inverse problem runs Gauss-Newton twice (analytic, then finite-difference
    Jacobians); a signal during the second run exited 0, judged on the first run only."""
    from app import cli
    from solvers import _common

    monkeypatch.setitem(cli._signal, "received", None)
    monkeypatch.setitem(_common._STOP_SIGNAL, "name", None)
    runs = []

    def gauss_newton_stopped_in_fd(problem, *, jacobian, **options):
        runs.append(jacobian)
        if jacobian == "fd":  # the signal arrives after the comparison run's first iteration
            options["callback"] = lambda info: cli._on_signal(signum, None)
        return gauss_newton(problem, jacobian=jacobian, **options)

    monkeypatch.setattr(solvers, "gauss_newton", gauss_newton_stopped_in_fd)
    assert main(["solve", "cube-throw", "--max-iter", "2", "--out", str(tmp_path)]) == code
    assert runs == ["analytic", "fd"]
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "cube-throw" / "gauss-newton" / "summary.json").read_text())
    assert summary["finite_differences"]["status"] == "interrupted"
    assert summary["status"] == "interrupted" and signal.Signals(signum).name in summary["message"], summary
    assert summary["analytic_status"] == "max_iterations"
    assert "  interrupted: " in out, out


def test_a_failed_comparison_run_keeps_the_analytic_answer(tmp_path, capsys, monkeypatch):
    """The finite-difference comparison run raising (a ValueError from a trial residual) ended the command with
    exit 2, "trajopt: error: ...", after the analytic run had its answer, and nothing was written."""
    runs = []

    def fd_fails(problem, *, jacobian, **options):
        runs.append(jacobian)
        if jacobian == "fd":
            raise ValueError("parameter 'friction' must be >= 0, got -1e-06")
        return gauss_newton(problem, jacobian=jacobian, **options)

    monkeypatch.setattr(solvers, "gauss_newton", fd_fails)
    assert main(["solve", "cube-throw", "--max-iter", "2", "--out", str(tmp_path)]) == 0
    assert runs == ["analytic", "fd"]
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "cube-throw" / "gauss-newton" / "summary.json").read_text())
    assert summary["status"] == "max_iterations" and summary["finite_differences"] == {
        "status": "failed", "error": "ValueError: parameter 'friction' must be >= 0, got -1e-06"}, summary
    assert "cube-throw / gauss-newton (fd): failed, the comparison only (ValueError: parameter" in out, out


@pytest.mark.parametrize("argv, folders", [
    (["solve", "pendulum", "--horizon", "20", "--max-iter", "2", "--no-scene"], ["ddp"]),
    (["solve", "cube-throw", "--max-iter", "2"], ["gauss-newton"]),
    (["compare", "pendulum", "--horizon", "20", "--methods", "ddp,cem", "--max-iter", "2"], ["ddp"])])
def test_a_signal_while_results_are_written_ends_the_command_interrupted(tmp_path, capsys, monkeypatch, argv,
                                                                        folders):
    """A signal while a finished run's results are written is noted, not raised (no half files); the command
    then exited 0 (or ran compare's next method) as if nothing had arrived."""
    from app import cli

    monkeypatch.setitem(cli._signal, "received", None)
    write_json = cli.write_json

    def ctrl_c_during_the_summary(path, obj):
        if os.path.basename(path) == "summary.json" and cli._signal["received"] is None:
            cli._on_signal(signal.SIGINT, None)  # what the handler does: deferred here
        return write_json(path, obj)

    monkeypatch.setattr(cli, "write_json", ctrl_c_during_the_summary)
    assert main(argv + ["--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert ("Ctrl-C was received, but the solver's answer is not interrupted (status " in err
            and "it and the results written are complete" in err), err
    problem = argv[1]
    for folder in folders:  # whole, with the run's own status
        summary = json.loads((tmp_path / problem / folder / "summary.json").read_text())
        assert summary["status"] != "interrupted"
    if argv[0] == "compare":  # the next method did not run
        assert not (tmp_path / problem / "cem" / "summary.json").exists()
        assert "not run: cem" in err


@pytest.mark.parametrize("argv, folder", [
    (["solve", "pendulum", "--horizon", "20", "--max-iter", "2", "--no-scene"], "ddp"),
    (["compare", "pendulum", "--horizon", "20", "--methods", "ddp,cem", "--max-iter", "2"], "ddp")])
def test_a_signal_just_after_the_results_are_written_says_they_are(tmp_path, capsys, monkeypatch, argv, folder):
    """A signal in the instant after the writing's deferral ends (before the command returns) raised there, and the
    command said "interrupted by SIGTERM before the run had a result to save" with the results written, whole."""
    from app import cli

    monkeypatch.setitem(cli._signal, "received", None)
    monkeypatch.setitem(cli._signal, "deferred", False)
    check = cli._signal_while_writing

    def sigterm_first(status):  # the signal arrives right after the write block, no longer deferred: raised here
        if cli._signal["received"] is None:
            cli._on_signal(signal.SIGTERM, None)
        return check(status)

    monkeypatch.setattr(cli, "_signal_while_writing", sigterm_first)
    assert main(argv + ["--out", str(tmp_path)]) == 143
    err = capsys.readouterr().err
    where = tmp_path / "pendulum" / folder
    assert "before the run had a result" not in err
    assert json.loads((where / "summary.json").read_text())["status"] != "interrupted"
    if argv[0] == "compare":  # it stops the comparison as a signal in a solve: its own files written too
        assert [r["method"] for r in json.loads((tmp_path / "pendulum" / "compare.json").read_text())] == ["ddp"]
        assert "trajopt: interrupted; not run: cem" in err, err
    else:
        assert f"trajopt: interrupted by SIGTERM; results written, whole: {where}" in err, err


def test_a_signal_while_compare_makes_its_next_problem_keeps_the_comparison(tmp_path, capsys, monkeypatch):
    """The next method's problem was made outside the guarded solve: a signal there skipped compare.json and
    compare.png, and the command said "before the run had a result to save" with ddp's results written."""
    from app import cli

    monkeypatch.setitem(cli._signal, "received", None)
    monkeypatch.setitem(cli._signal, "deferred", False)
    load, calls = cli._load, []

    def sigterm_on_the_second_load(name, **options):
        calls.append(name)
        if len(calls) == 2:
            cli._on_signal(signal.SIGTERM, None)  # no solver running: the handler raises Stopped here
        return load(name, **options)

    monkeypatch.setattr(cli, "_load", sigterm_on_the_second_load)
    argv = ["compare", "pendulum", "--horizon", "20", "--methods", "ddp,cem", "--max-iter", "2"]
    assert main(argv + ["--out", str(tmp_path)]) == 143
    err = capsys.readouterr().err
    assert "not run: cem" in err and "before the run had a result" not in err, err
    rows = json.loads((tmp_path / "pendulum" / "compare.json").read_text())
    assert [r["method"] for r in rows] == ["ddp"] and rows[0]["status"] != "interrupted"
    assert (tmp_path / "pendulum" / "compare.png").exists()


def test_a_signal_before_any_result_says_nothing_was_saved(tmp_path, capsys, monkeypatch):
    """Ctrl-C while cube-sysid made its start printed "trajopt: interrupted" alone: whether anything was saved,
    and which signal, went unsaid."""
    from app import cli

    monkeypatch.setitem(cli._signal, "received", None)
    monkeypatch.setitem(cli._signal, "deferred", False)

    def load_then_sigterm(name, **options):
        cli._on_signal(signal.SIGTERM, None)  # the handler raises Stopped here (no solver yet)

    monkeypatch.setattr(cli, "_load", load_then_sigterm)
    assert main(["solve", "pendulum", "--out", str(tmp_path)]) == 143
    assert capsys.readouterr().err.strip() == "trajopt: interrupted by SIGTERM before the run had a result to save"
    assert not (tmp_path / "pendulum").exists()


def test_a_signal_then_a_diverging_answer_exits_as_interrupted(tmp_path, capsys, monkeypatch):
    """CEM stopped by SIGTERM rolls out its best controls; when that rollout diverged (catapult at dt=1), the
    SimulationError handler said "nothing was solved", exit 1, instead of the signal's 143."""
    from app import cli
    from dynamics import SimulationError

    monkeypatch.setitem(cli._signal, "received", None)

    def stopped_then_diverged(ocp, **options):
        cli._signal["received"] = signal.SIGTERM  # noted by the handler; the solver caught its Stopped
        raise SimulationError("rollout step 3: the simulation diverged", xs=np.zeros((4, ocp.nx)))

    monkeypatch.setattr(solvers, "solve", stopped_then_diverged)
    assert main(["solve", "pendulum", "--horizon", "20", "--out", str(tmp_path)]) == 143
    err = capsys.readouterr().err
    assert err.startswith("trajopt: interrupted by SIGTERM; the run had no finite result to save"), err
