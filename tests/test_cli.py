"""The ``trajopt`` command and the README example."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import problems
from app.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("cartpole", "double-cartpole", "pendulum", "ur5-reach"):
        assert name in out


def test_simulate_writes_plot_and_states(tmp_path, capsys):
    assert main(["simulate", "double-cartpole", "--steps", "30", "--perturb", "--out", str(tmp_path)]) == 0
    png = tmp_path / "double-cartpole" / "simulate_states.png"
    assert png.is_file() and png.stat().st_size > 10_000
    data = np.load(tmp_path / "double-cartpole" / "simulate.npz")
    assert data["xs"].shape == (31, 6) and np.all(np.isfinite(data["xs"]))
    assert np.ptp(data["xs"][:, 1]) > 0  # the perturbed poles move
    assert "wrote" in capsys.readouterr().out


def test_simulate_rejects_bad_steps(capsys):
    assert main(["simulate", "cartpole", "--steps", "0"]) == 2
    assert "--steps must be positive" in capsys.readouterr().err


def test_bench_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "pendulum", "--min-time", "0.01", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert len(records) == 1
    r = records[0]
    for key in ("problem", "contact", "dof", "contacts", "step_ms", "analytic_ms", "fd_ms", "ridders_ms", "max_err"):
        assert key in r
    assert r["problem"] == "pendulum" and r["max_err"] < 1e-6 and r["analytic_ms"] > 0
    assert "pendulum" in capsys.readouterr().out


def test_readme_example_runs():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102
    assert len(blocks[0].strip().splitlines()) <= 12


def test_solve_writes_solution_summary_and_plots(tmp_path, capsys):
    assert main(["solve", "pendulum", "--max-iter", "5", "--horizon", "60", "--out", str(tmp_path)]) == 0
    out = tmp_path / "pendulum" / "ddp"
    summary = json.loads((out / "summary.json").read_text())
    for key in ("problem", "method", "contact", "status", "message", "cost", "iterations", "wall_time_s", "versions",
                "metrics"):
        assert key in summary
    assert summary["problem"] == "pendulum" and summary["method"] == "ddp" and summary["iterations"] == 5
    assert summary["message"].startswith("first-order optimal") == (summary["status"] == "converged")
    assert "final_angle_error" in summary["metrics"] and summary["versions"]["pin"]
    data = np.load(out / "solution.npz")
    assert data["xs"].shape == (61, 2) and data["us"].shape == (60, 1)
    for name in ("convergence.png", "states.png", "controls.png"):
        assert (out / name).stat().st_size > 10_000
    assert "[ddp]" in capsys.readouterr().out  # the progress table


def test_solve_planar_contact_problem_writes_an_animation(tmp_path):
    assert main(["solve", "jump-worm", "--method", "ddp", "--max-iter", "1", "--horizon", "40", "--contact", "ncp",
                 "--out", str(tmp_path)]) == 0
    out = tmp_path / "jump-worm" / "ddp"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["contact"] == "ncp"
    assert (out / "animation.gif").stat().st_size > 10_000


def test_solve_rejects_unknown_method_and_contact_on_smooth_problems(capsys):
    assert main(["solve", "cartpole", "--method", "newton"]) == 2
    assert "unknown method 'newton'" in capsys.readouterr().err
    assert main(["solve", "cartpole", "--contact", "ncp"]) == 2
    assert "has no contact" in capsys.readouterr().err


def test_seed_reaches_the_stochastic_methods_only(tmp_path, capsys):
    runs = []
    for seed in (3, 3, 4):
        assert main(["solve", "pendulum", "--method", "cem", "--seed", str(seed), "--max-iter", "2", "--horizon", "40",
                     "--out", str(tmp_path / str(len(runs)))]) == 0
        runs.append(np.load(tmp_path / str(len(runs)) / "pendulum" / "cem" / "solution.npz")["us"])
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
    assert main(["solve", "pendulum", "--method", "ddp", "--seed", "1"]) == 2
    assert "--seed applies to the stochastic methods" in capsys.readouterr().err


def test_seed_reaches_design_search(capsys):
    """catapult-design's default method, design-search, takes a seed (its candidates' cem-ddp): --seed reaches it
    (it was dropped with a note that the method is deterministic, so --seed 0..9 all ran seed 0)."""
    import argparse

    from app.cli import _seed_option, _stochastic

    assert {"cem", "cem-ddp", "design-search"} <= set(_stochastic())
    args = argparse.Namespace(seed=5, problem="catapult-design")
    assert _seed_option("design-search", args, explicit=False) == {"seed": 5}
    assert "no effect" not in capsys.readouterr().err


def test_solve_with_complementarity_aware_gradients(tmp_path, capsys):
    assert main(["solve", "jump-worm", "--method", "ddp", "--complementarity-aware", "--max-iter", "1", "--horizon", "60",
                 "--no-animation", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "jump-worm" / "ddp-aware" / "summary.json").read_text())
    assert summary["complementarity_aware"] is True and summary["method"] == "ddp"
    assert main(["solve", "cartpole", "--method", "cem", "--complementarity-aware"]) == 2
    assert "applies to ddp, gn, cem-ddp and cem-gn" in capsys.readouterr().err


def test_list_shows_each_problems_default_method(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "cem-ddp" in rows["catapult"] and "smoothing=auto" in rows["ur5-box"]
    assert "gauss-newton" in rows["cube-throw"]


def test_solve_without_method_uses_the_problems_recipe(tmp_path):
    import problems

    ocp = problems.load("ur5-box", horizon=20)
    assert ocp.default_method == "ddp" and ocp.default_options["smoothing"] == "auto"
    assert main(["solve", "ur5-box", "--horizon", "20", "--max-iter", "1", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "ur5-box" / "ddp" / "summary.json").read_text())
    assert summary["method"] == "ddp+continuation"


@pytest.mark.parametrize("value, message", [("-1", "kappa >= 0"), ("nan", "kappa >= 0"), ("soft", "choose 'auto'")])
def test_bad_smoothing_is_refused_before_solving(value, message, capsys):
    assert main(["solve", "ur5-box", "--smoothing", value]) == 2
    err = capsys.readouterr().err
    assert message in err and "--smoothing" in err


def test_smoothing_with_a_gradient_free_method_is_refused(capsys):
    assert main(["solve", "catapult", "--method", "cem", "--smoothing", "auto"]) == 2
    assert "cannot use smoothing" in capsys.readouterr().err


def test_seed_on_a_deterministic_default_method_is_a_note(tmp_path, capsys):
    assert main(["solve", "pendulum", "--seed", "3", "--max-iter", "1", "--out", str(tmp_path)]) == 0
    assert "no effect" in capsys.readouterr().err


def test_a_named_method_runs_as_asked_without_the_recipe():
    import problems
    from solvers import solve

    ocp = problems.load("ur5-box", horizon=10)
    assert solve(ocp, "ddp", max_iter=1, verbose=False).method == "ddp"  # no smoothing
    assert solve(ocp, max_iter=1, verbose=False).method == "ddp+continuation"


def test_solve_says_why_a_zero_gradient_stop_is_not_converged(tmp_path, capsys):
    """The worm lying on the floor: hard contact gives no gradient; the CLI says so and what to try."""
    assert main(["solve", "jump-worm", "--method", "ddp", "--contact", "ncp", "--smoothing", "none", "--max-iter", "2",
                 "--no-animation", "--out", str(tmp_path)]) == 1
    summary = json.loads((tmp_path / "jump-worm" / "ddp" / "summary.json").read_text())
    assert summary["status"] == "stalled" and summary["message"].startswith("zero gradient")
    out = capsys.readouterr().out
    assert "stalled: zero gradient" in out and "--smoothing auto" in out


def test_list_shows_a_problems_advice_for_named_methods(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("catapult"))
    assert "--method shooting: search=cem, shot_length=None, hessian=lbfgs" in lines[at + 1]


def test_a_named_method_takes_the_problems_advice_and_the_caller_wins():
    import problems
    from solvers import resolve

    ocp = problems.load("catapult", horizon=20)
    method, options, advice = resolve(ocp, "shooting")
    assert method == "cem-shooting" and options["shot_length"] is None and options["hessian"] == "lbfgs"
    assert advice["search"] == "cem"
    method, options, _ = resolve(ocp, "shooting", {"hessian": "gauss-newton", "search": None})
    assert method == "shooting" and options["hessian"] == "gauss-newton"
    assert resolve(ocp, "ddp") == ("ddp", {}, {})  # no advice for ddp
    assert resolve(ocp, "gn", {"search": "cem"})[0] == "cem-gn"
    with pytest.raises(ValueError, match="unknown search 'grid'; available: 'cem'"):
        resolve(ocp, "ddp", {"search": "grid"})
    with pytest.raises(ValueError, match="search='cem' applies to ddp, gn, shooting, not 'cem-ddp'"):
        resolve(ocp, "cem-ddp", {"search": "cem"})


def test_solve_says_which_advice_it_took_and_the_seed_reaches_its_search(tmp_path, capsys):
    runs = []
    for seed in (1, 2):
        assert main(["solve", "catapult", "--method", "shooting", "--horizon", "30", "--max-iter", "1", "--seed",
                     str(seed), "--no-animation", "--out", str(tmp_path / str(seed))]) == 0
        summary = json.loads((tmp_path / str(seed) / "catapult" / "shooting" / "summary.json").read_text())
        assert summary["method"] == "cem-shooting"
        runs.append(np.load(tmp_path / str(seed) / "catapult" / "shooting" / "solution.npz")["us"])
    assert "catapult's advice for shooting: search=cem" in capsys.readouterr().err
    assert not np.array_equal(runs[0], runs[1])


def test_bench_ddp_iteration_and_trajectory_fields(capsys):
    from solvers.ddp import solve_ddp
    from trajopt.bench import bench_ddp, bench_trajectory, format_ddp_table

    ocp = problems.load("catapult", horizon=30)
    us = ocp.check_controls(ocp.us_init)
    rec = {"problem": "catapult"}
    rec.update(bench_trajectory(ocp.dynamics, ocp.x0, us, min_time=0.001))
    rec.update(bench_ddp(ocp, solve_ddp, iterations=2, repeat=1))
    assert rec["steps"] == 30 and 1 <= rec["ddp_iterations"] <= 2 and rec["ddp_iteration_ms"] > 0
    keys = ("rollout_ms", "loop_jacobians_ms", "rollout_derivatives_ms", "rollout_then_jacobians_ms",
            "rollout_then_kept_jacobians_ms")
    assert all(rec[k] > 0 for k in keys)
    assert rec["ddp_cost"] == solve_ddp(ocp, max_iter=2, verbose=False).cost  # the solve it timed
    table = format_ddp_table([rec, {"problem": "pendulum"}])
    assert "catapult" in table and "pendulum" not in table
    assert main(["bench", "pendulum", "--ddp-iterations", "-1"]) == 2
    assert "--ddp-iterations must be >= 0" in capsys.readouterr().err


def test_a_closed_pipe_is_not_a_traceback():
    """`trajopt list | head -1`: the reader leaves; the command stops quietly with 141 (was a BrokenPipeError
    traceback)."""
    import os
    import subprocess
    import sys

    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "app", "list"], stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv, says", [
    (["--suite", "ncp-paper", "--ddp-iterations", "3"], "--ddp-iterations times DDP on problems"),
    (["cube-throw", "--ddp-iterations", "3"], "'cube-throw' is an inverse (least-squares) problem"),
])
def test_bench_refuses_ddp_iterations_where_it_cannot_time_ddp(capsys, monkeypatch, argv, says):
    """``--ddp-iterations N`` was silently ignored with --suite and for problems other than catapult and
    go1-hold; where no DDP can run it is refused before anything is timed."""
    import trajopt.bench

    def no_timing(*a, **k):
        raise AssertionError("benchmarked before refusing --ddp-iterations")

    monkeypatch.setattr(trajopt.bench, "bench_dynamics", no_timing)
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err, err


def test_bench_ddp_iterations_given_times_ddp_on_any_trajectory_problem(tmp_path, capsys):
    """``bench pendulum --ddp-iterations 2`` printed no DDP row: the option only reached catapult and go1-hold.
    Without the option those two keep their default (5 iterations) and other problems are not solved."""
    path = tmp_path / "bench.json"
    assert main(["bench", "pendulum", "--ddp-iterations", "2", "--min-time", "0.001", "--json", str(path)]) == 0
    (rec,) = json.loads(path.read_text())
    assert rec["problem"] == "pendulum" and 1 <= rec["ddp_iterations"] <= 2 and rec["ddp_iteration_ms"] > 0
    assert rec["steps"] == problems.load("pendulum").horizon and rec["rollout_ms"] > 0
    assert "DDP iter" in capsys.readouterr().out
    assert main(["bench", "pendulum", "--min-time", "0.001", "--json", str(path)]) == 0
    (rec,) = json.loads(path.read_text())
    assert "ddp_iterations" not in rec


def test_a_tall_motion_makes_a_gif_of_bounded_height(tmp_path):
    """The GIF's figure took the scene's aspect as it was: a body that flew 1e6 m up (jump-worm at dt=1) made a
    figure ~1e5 inches tall and ran the writer out of 24 GB."""
    from PIL import Image

    from trajopt.plots import animate_planar

    qs = np.array([[0.0], [10.0], [20.0]])  # a ball rising 20 m, 0.6 m wide: aspect 34
    path = animate_planar(qs, lambda q: [("circle", np.array([0.0, q[0], 0.1]))], dt=0.1,
                          path=str(tmp_path / "tall.gif"), frames=3)
    width, height = Image.open(path).size
    assert height <= 4 * width + 2, (width, height)


def test_a_diverging_start_is_an_error_line_not_a_traceback(tmp_path, capsys):
    """cube-sysid at dt=1 diverges while making its data; the SimulationError reached the user as a traceback."""
    assert main(["solve", "cube-sysid", "--option", "dt=1", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trajopt: error: the simulation diverged, nothing was solved: rollout step"), err
    assert "Traceback" not in err


def test_contact_given_twice_must_agree(tmp_path, capsys):
    """--option contact=ncp won over --contact lcp, and the summary recorded lcp."""
    assert main(["solve", "catapult-design", "--option", "contact=ncp", "--contact", "lcp",
                 "--out", str(tmp_path)]) == 2
    assert "--contact lcp and --option contact=ncp disagree" in capsys.readouterr().err


def test_complementarity_aware_on_a_design_problem_is_refused_by_name(tmp_path, capsys):
    assert main(["solve", "catapult-design", "--method", "ddp", "--complementarity-aware",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "DesignDynamics.step_derivatives takes no adjoint=" in err and "the dynamics of catapult-design" in err


def test_seed_on_an_inverse_problem_says_it_changes_nothing(tmp_path, capsys):
    """ur5-sysid --seed 3 gave seed 0's data and answer without a word (--option seed=3 draws other data)."""
    assert main(["solve", "ur5-sysid", "--seed", "3", "--max-iter", "1", "--out", str(tmp_path)]) in (0, 1)
    err = capsys.readouterr().err
    assert ("note: --seed 3 has no effect: gauss-newton is deterministic; the recorded data's draw is the "
            "problem's --option seed=3") in err, err
    assert main(["solve", "cube-throw", "--seed", "3", "--max-iter", "1", "--out", str(tmp_path)]) in (0, 1)
    err = capsys.readouterr().err
    assert "note: --seed 3 has no effect: gauss-newton is deterministic\n" in err, err  # no seed option there
