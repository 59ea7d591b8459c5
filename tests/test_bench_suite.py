"""`trajopt bench --suite ncp-paper`: the NCP paper's timing table on our models."""

from __future__ import annotations

import json

import pytest

from app.cli import main


def test_bad_suite_options_are_refused(capsys):
    assert main(["bench", "--suite", "nope"]) == 2
    assert "unknown --suite 'nope'; available: ncp-paper" in capsys.readouterr().err
    assert main(["bench", "go1-hold", "--suite", "ncp-paper"]) == 2
    assert main(["bench", "--contact", "lcp", "--suite", "ncp-paper"]) == 2
    assert "--suite names its own scenes" in capsys.readouterr().err


def test_params_with_a_suite_is_refused_not_ignored(capsys, monkeypatch):
    """``--params`` times the problems' parameter Jacobians; with ``--suite`` the scenes were timed without them
    and the flag was silently dropped (exit 0). Refused before any scene is built (the suite is stubbed here so
    that the old behaviour shows without the full benchmark)."""
    import problems.bench_scenes as scenes

    monkeypatch.setattr(scenes, "suite", lambda name: [])
    assert main(["bench", "--suite", "ncp-paper", "--params"]) == 2
    assert "--params" in capsys.readouterr().err


@pytest.mark.slow
def test_ncp_paper_suite_times_six_robots_under_ncp(tmp_path, capsys):
    out = tmp_path / "ncp.json"
    assert main(["bench", "--suite", "ncp-paper", "--min-time", "0.05", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [r["problem"] for r in records] == ["half-cheetah", "humanoid", "ur5-box", "go1", "g1-pushup",
                                               "talos-meshes"]
    assert all(r["contact"] == "ncp" and r["contacts"] > 0 for r in records)
    assert [r["dof"] for r in records] == [9, 23, 12, 18, 35, 38]
    assert all(r["speedup_fd"] > 1 for r in records)
    smooth = {r["problem"]: r["max_err"] for r in records if r["problem"] in ("half-cheetah", "go1")}
    assert max(smooth.values()) < 1e-8  # where central differences agree with Ridders, so do we


def test_errors_at_a_mode_switch_are_marked_in_the_table():
    """A row whose central differences disagree with Ridders (the step is not smooth within the difference
    steps) carries '*' on both error columns and a footnote; a smooth row does not."""
    from trajopt.bench import format_table

    def record(name, err, fd_err):
        return {"problem": name, "contact": "lcp", "dof": 6, "contacts": 1, "step_ms": 0.01, "analytic_ms": 0.02,
                "fd_ms": 0.5, "ridders_ms": 5.0, "speedup_fd": 25.0, "speedup_ridders": 250.0,
                "max_err": err, "fd_max_err": fd_err}

    smooth = format_table([record("smooth", 1e-10, 1e-9)])
    assert "*" not in smooth
    table = format_table([record("smooth", 1e-10, 1e-9), record("switch", 0.6, 5.7)])
    rows = {line.split()[0]: line for line in table.splitlines()[2:4]}
    assert rows["switch"].rstrip().endswith("5.7e+00*") and "6.0e-01*" in rows["switch"]
    assert "*" not in rows["smooth"] and table.splitlines()[-1].startswith("*: central differences")
    assert len(rows["switch"]) == len(rows["smooth"])  # the columns stay aligned
