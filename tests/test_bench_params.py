"""``trajopt bench --params`` (issue 14): the parameter Jacobians' cost next to the state Jacobians'."""

from __future__ import annotations

import numpy as np
import pytest

from problems.inverse import cube_simulator
from trajopt.bench import bench_parameters, format_parameter_table
from app.cli import main


def test_bench_parameters_times_inertial_and_all_parameters():
    sim = cube_simulator()
    x = sim.neutral_state()
    x[2] = 0.099  # resting on the ground: a contact solve in every call
    rec = bench_parameters(sim, x, np.zeros(0), min_time=0.01)
    assert rec["inertial_parameters"] == 10 and rec["all_parameters"] == sim.parameter_size(sim.parameter_names())
    assert rec["friction_parameters"] == 1
    for key in ("friction_fresh_ratio", "friction_kept_ratio", "inertial_fresh_ratio", "inertial_kept_ratio",
                "all_fresh_ratio", "all_kept_ratio"):
        assert 0.5 < rec[key] < 100.0
    # per column: the added time per parameter column over the state Jacobians' per column (a cube's 17 columns
    # against its 12: finite and positive, and not a multiple of the whole call)
    assert 0.0 < rec["all_kept_per_column"] < rec["all_kept_ratio"] * (sim.ndx + sim.nu)
    table = format_parameter_table([{"problem": "cube", **rec}])
    assert table.splitlines()[2].startswith("cube") and "1.5x" in table
    # the table names what computed Fp (the core's tiles, or the reference without a core)
    from dynamics import parameters as P

    expect = "the Python reference" if P._core is None else (
        "AVX2/FMA tiles" if P._core.parameter_tiles() == "avx2" else "SSE2 tiles")
    assert f"Computed by: {'the compiled core, ' if P._core is not None else ''}{expect}" in table
    # a record without the friction column (a system without contact) keeps the columns where the header has them
    bare = {k: v for k, v in rec.items() if not k.startswith("friction")}
    lines = format_parameter_table([{"problem": "cube", **rec}, {"problem": "bare", **bare}]).splitlines()
    assert len(lines[2]) == len(lines[3]) == len(lines[0])
    assert lines[2][43:] == lines[3][43:] and lines[3].split()[2:4] == ["-", "-"]  # 43: after friction's two
    # a problem whose dynamics has no parameters is named, not silently left out
    table = format_parameter_table([{"problem": "cube", **rec}, {"problem": "catapult-design", "rollout_ms": 1.0}])
    assert "no physical parameters, not in this table: catapult-design" in table


def test_bench_parameters_skips_dynamics_without_parameters():
    class NoParameters:
        pass
    assert bench_parameters(NoParameters(), np.zeros(2), np.zeros(1)) == {}


def test_bench_params_cli(capsys):
    assert main(["bench", "pendulum", "--params", "--ddp-iterations", "0", "--min-time", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "Parameter Jacobians" in out and out.count("pendulum") >= 2


def test_bench_params_cli_bad_option():
    with pytest.raises(SystemExit):
        main(["bench", "pendulum", "--params=yes"])


def test_time_call_times_fn_only_with_setup():
    """time_call(fn, setup=...): each call's argument is made untimed (the kept Jacobians after an untimed step)."""
    import time

    from trajopt.bench import time_call

    made = []

    def setup():
        time.sleep(2e-3)
        made.append(1)
        return len(made)

    seen = []
    t = time_call(seen.append, setup=setup, min_time=0.01, repeat=2)
    assert t < 1e-3 and seen == list(range(1, len(made) + 1))
