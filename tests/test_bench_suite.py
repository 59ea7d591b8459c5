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
