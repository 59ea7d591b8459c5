"""``trajopt sweep``: runs on a local Dask cluster and on a separately started scheduler + worker,
failed runs kept as rows, Ctrl-C keeps the finished runs, bad input refused before anything runs."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from app.cli import main
from app.sweep import Run, SweepError, parse_seeds, parse_set, plan, run_sweep

FAST = ["--method", "cem", "--max-iter", "2"]  # pendulum, CEM: a fraction of a second per run


def _table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_parse_seeds_and_sets():
    assert parse_seeds("0-3") == [0, 1, 2, 3] and parse_seeds("0-2,7,1") == [0, 1, 2, 7] and parse_seeds("4") == [4]
    for bad in ("3-1", "-1", "a", "1-", ""):
        with pytest.raises(SweepError, match="--seeds"):
            parse_seeds(bad)
    sets = parse_set(["target=2.6:2.0,2.2:2.2", "contact=lcp,ncp", "horizon=80"], "catapult")
    assert sets == {"target": [(2.6, 2.0), (2.2, 2.2)], "contact": ["lcp", "ncp"], "horizon": [80]}
    with pytest.raises(SweepError, match="has no option 'speed'; its options: horizon, dt"):
        parse_set(["speed=1"], "pendulum")
    with pytest.raises(SweepError, match="KEY=V1,V2"):
        parse_set(["horizon"], "pendulum")
    runs = plan("catapult", [0, 1], sets)
    assert len(runs) == 8 and len({r.name for r in runs}) == 8
    assert runs[0].name == "seed0_target-2.6x2.0_contact-lcp_horizon-80"


def test_local_sweep_of_four_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "pendulum", "--seeds", "0-1", "--set", "horizon=20,30", *FAST, "--workers", "2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = _table(out / "sweep.csv")
    assert [(r["seed"], r["horizon"]) for r in rows] == [("0", "20"), ("0", "30"), ("1", "20"), ("1", "30")]
    for r in rows:
        assert r["status"] == "max_iterations" and r["method"] == "cem" and r["iterations"] == "2"
        assert float(r["cost"]) > 0 and float(r["wall_time_s"]) > 0 and r["metric:final_angle_error"] and not r["error"]
        folder = out / r["folder"]
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["horizon"] == int(r["horizon"]) and summary["sweep"]["seed"] == int(r["seed"])
        assert (folder / "solution.npz").is_file() and (folder / "scene.html").is_file()
    assert rows[0]["cost"] != rows[2]["cost"]  # the seed reaches CEM
    assert text.count("/4] seed") == 4 and "final_angle_error" in text  # progress, then the table
    assert not [p for p in os.listdir(out / "runs") if p.startswith(".tmp")]
    # a re-run keeps the finished runs and solves nothing
    assert main(["sweep", "pendulum", "--seeds", "0-1", "--set", "horizon=20,30", *FAST, "--out", str(out)]) == 0
    assert "4 of 4 runs already finished" in capsys.readouterr().out
    assert _table(out / "sweep.csv") == rows


def test_a_failed_run_is_a_row_and_the_others_finish(tmp_path):
    runs = [Run(name="bad", problem="pendulum", seed=0, options={"horizon": -1}, method="cem", max_iter=1),
            Run(name="good", problem="pendulum", seed=0, options={"horizon": 10}, method="cem", max_iter=1)]
    rows = run_sweep(runs, out=str(tmp_path), workers=1, echo=lambda *a: None)
    assert [r["status"] for r in rows] == ["error", "max_iterations"]
    assert "horizon must be a positive integer" in rows[0]["error"]
    summary = json.loads((tmp_path / "runs" / "bad" / "summary.json").read_text())
    assert summary["status"] == "error" and "Traceback" in summary["traceback"]
    assert _table(tmp_path / "sweep.csv")[0]["error"].startswith("ValueError")


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys):
    cases = [(["nope"], "unknown problem 'nope'"), (["pendulum", "--set", "foo=1"], "has no option 'foo'"),
             (["pendulum", "--seeds", "5-2"], "0 <= A <= B"), (["pendulum", "--set", "horizon=-3"], "horizon=-3"),
             (["cube-throw"], "inverse (least-squares) problem"), (["pendulum", "--method", "zz"], "unknown method"),
             (["pendulum", "--workers", "0"], "--workers must be >= 1"),
             (["pendulum", "--time-limit", "0"], "--time-limit must be > 0")]
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases.append((["pendulum", "--out", str(blocker / "sub")], "cannot write there"))
    for argv, message in cases:
        t0 = time.perf_counter()
        assert main(["sweep", *argv, "--out", str(tmp_path / "o")] if "--out" not in argv else ["sweep", *argv]) == 2
        assert message in capsys.readouterr().err, argv
        assert time.perf_counter() - t0 < 10
    assert not (tmp_path / "o" / "runs").exists()


def test_an_absurd_sweep_is_refused_up_front_and_the_run_count_shown(tmp_path, capsys, monkeypatch):
    """``--seeds 0-100000000`` sat silent for minutes (a quadratic de-duplication, then a plan of 1e8 runs)."""
    import app.sweep

    with pytest.raises(SweepError, match=r"--seeds '0-100000000': 100000001 seeds, more than the 10000 runs"):
        parse_seeds("0-100000000")
    with pytest.raises(SweepError, match="more than the 10000 runs"):
        parse_seeds("0-10000")

    def not_run(*a, **k):
        raise AssertionError("an absurd sweep was planned or started")

    monkeypatch.setattr(app.sweep, "validate", not_run)
    monkeypatch.setattr(app.sweep, "run_sweep", not_run)
    horizons = ",".join(str(h) for h in range(10, 71))  # 61 values x 201 seeds = 12261 runs
    assert main(["sweep", "pendulum", "--seeds", "0-200", "--set", f"horizon={horizons}", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "12261 runs (201 seeds x 61 horizon), more than the 10000 runs a sweep may have" in err, err
    monkeypatch.setattr(app.sweep, "validate", lambda runs: None)
    monkeypatch.setattr(app.sweep, "run_sweep", lambda runs, **k: [])
    main(["sweep", "pendulum", "--seeds", "0-2", "--set", "horizon=10,20", "--out", str(tmp_path / "o")])
    assert "sweep: 6 runs (3 seeds x 2 horizon)" in capsys.readouterr().err


def test_a_run_finished_as_the_signal_arrives_keeps_its_row(tmp_path):
    """On SIGTERM the rows not yet collected were all marked cancelled, even a run whose folder was complete
    (its worker finished while the sweep was stopping): that folder's row is read instead."""
    import json

    from app.sweep import rows_when_stopped

    runs = plan("pendulum", [0, 1, 2], {})
    done = {"run": "seed1", "seed": 1, "method": "ddp", "status": "converged", "cost": 1.5, "folder": "runs/seed1"}
    (tmp_path / "runs" / "seed1").mkdir(parents=True)
    (tmp_path / "runs" / "seed1" / "row.json").write_text(json.dumps(done))
    (tmp_path / "runs" / ".tmp-seed2-1-2").mkdir()  # a run still writing: not finished
    collected = {"seed0": {"run": "seed0", "seed": 0, "status": "max_iterations", "folder": "runs/seed0"}}
    rows = rows_when_stopped(runs, collected, str(tmp_path), "SIGTERM")
    assert [r["status"] for r in rows] == ["max_iterations", "converged", "cancelled"]
    assert rows[1] == done and rows[2]["error"] == "cancelled (SIGTERM)"
    # an earlier sweep's failed run, being run again when the signal came: cancelled, not its old error
    assert rows_when_stopped(runs, collected, str(tmp_path), "SIGTERM", stale={"seed1"})[1]["status"] == "cancelled"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_cluster(tmp_path):
    """A ``dask scheduler`` and one ``dask worker`` started as separate processes; their address."""
    dask = shutil.which("dask")
    if dask is None:
        pytest.skip("the dask command is not installed (pip install 'dask[distributed]')")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ)
    logs = [open(tmp_path / name, "w") for name in ("scheduler.log", "worker.log")]
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              env=env, stdout=logs[0], stderr=subprocess.STDOUT, cwd=tmp_path)]
    try:
        procs.append(subprocess.Popen([dask, "worker", address, "--nworkers", "1", "--nthreads", "1",
                                       "--no-dashboard"], env=env, stdout=logs[1], stderr=subprocess.STDOUT,
                                      cwd=tmp_path))
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield address
    finally:
        try:  # the scheduler stops its workers (quicker than a SIGTERM to each process, which waits on the nanny)
            from distributed import Client

            with Client(address, timeout=10) as client:
                client.shutdown()
        except Exception:  # a scheduler that never came up: the signals below
            pass
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


def test_sweep_on_a_separately_started_scheduler_and_worker(dask_cluster, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "pendulum", "--seeds", "0-1", "--set", "horizon=15", *FAST, "--scheduler", dask_cluster,
                 "--out", str(out)]) == 0
    assert f"on 1 Dask worker(s) at {dask_cluster}" in capsys.readouterr().out
    rows = _table(out / "sweep.csv")
    assert [r["status"] for r in rows] == ["max_iterations"] * 2
    assert all((out / r["folder"] / "solution.npz").is_file() for r in rows)


@pytest.mark.parametrize("signum, to_group, code", [
    pytest.param(signal.SIGINT, False, 130, id="ctrl-c"),
    pytest.param(signal.SIGTERM, False, 143, id="sigterm", marks=pytest.mark.slow),  # Ctrl-C's handler, its own name
    pytest.param(signal.SIGHUP, True, 129, id="sighup-to-the-process-group")])
def test_a_signal_cancels_pending_runs_keeps_finished_ones_and_closes_the_cluster(tmp_path, signum, to_group, code):
    """Ctrl-C, SIGTERM and SIGHUP (a closed terminal hangs up the whole process group: the cluster's
    processes get it too) stop a sweep alike: finished runs kept in sweep.csv, the others cancelled, the
    local cluster's processes gone, exit 128 + the signal's number, no traceback."""
    import psutil

    out = tmp_path / "sweep"
    cmd = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())", "sweep", "pendulum",
           "--seeds", "0-7", "--set", "horizon=15", *FAST, "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                            start_new_session=True)
    lines, cluster = [], []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[1/8]"):
                cluster = psutil.Process(proc.pid).children(recursive=True)
                os.killpg(proc.pid, signum) if to_group else proc.send_signal(signum)
                break
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, "".join(lines) + rest
    rows = _table(out / "sweep.csv")
    statuses = [r["status"] for r in rows]
    assert len(rows) == 8 and statuses.count("max_iterations") >= 1 and statuses.count("cancelled") >= 1
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    assert {r["error"] for r in rows if r["status"] == "cancelled"} == {f"cancelled ({name})"}
    assert "finished runs kept" in rest and "Traceback" not in rest, rest
    # the command's last word: it said "before the run had a result to save", the table written
    assert f"; results written, whole: {tmp_path / 'sweep' / 'sweep.csv'}" in rest, rest
    assert "before the run had a result" not in rest, rest
    assert cluster  # the local cluster's worker (and its nanny) ran below the command; none outlives it
    gone, alive = psutil.wait_procs(cluster, timeout=30)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive


def test_a_signal_while_the_cluster_starts_waits_for_it_then_closes_it(tmp_path, monkeypatch):
    """A signal that arrives while the local cluster starts is held until the cluster is up (interrupted
    midway it could not be closed: Dask's exit hook failed on it with a traceback), then stops the sweep."""
    import app.cli as cli
    import app.sweep as sweep

    closed = []

    class Fake:
        def __init__(self, name):
            self.name = name

        def close(self):
            closed.append(self.name)

    def starting(scheduler, workers):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of the start
        closed.append("started")
        return Fake("client"), Fake("cluster")

    monkeypatch.setattr(sweep, "_client", starting)
    previous = cli._install_signal_handlers()
    try:
        with pytest.raises(cli.Stopped):
            run_sweep(plan("pendulum", [0, 1], {}, method="cem", max_iter=1), out=str(tmp_path), echo=lambda *a: None)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        cli._signal["received"] = None
    assert closed == ["started", "client", "cluster"]
    assert [r["error"] for r in _table(tmp_path / "sweep.csv")] == ["cancelled (SIGTERM)"] * 2


def test_a_signal_inside_the_wait_for_results_still_stops_the_sweep(tmp_path, monkeypatch):
    """The signal's exception raised inside as_completed's Condition.wait surfaced as "RuntimeError: cannot release
    un-acquired lock" (its context the signal's Stopped): the sweep exited 1 with a traceback, its table unwritten
    (seen once in CI, SIGHUP to the process group)."""
    import distributed

    import app.cli as cli
    import app.sweep as sweep

    class Fake:
        scheduler = type("S", (), {"address": "fake"})()

        def scheduler_info(self):
            return {"workers": {"w": {}}}

        def submit(self, *args, **kwargs):
            return object()

        def cancel(self, futures):
            pass

        def close(self):
            pass

    def waiting(futures):
        try:
            raise cli.Stopped("SIGHUP")  # what the handler raises, inside the wait
        except cli.Stopped:
            raise RuntimeError("cannot release un-acquired lock")  # what threading then raises
        yield  # a generator, as as_completed

    monkeypatch.setattr(sweep, "_client", lambda scheduler, workers: (Fake(), None))
    monkeypatch.setattr(distributed, "as_completed", waiting)
    monkeypatch.setitem(cli._signal, "received", signal.SIGHUP)
    with pytest.raises(cli.Stopped):
        run_sweep(plan("pendulum", [0, 1], {}, method="cem", max_iter=1), out=str(tmp_path), echo=lambda *a: None)
    assert [r["error"] for r in _table(tmp_path / "sweep.csv")] == ["cancelled (SIGHUP)"] * 2
