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
    # against its 12), from the kept ratio; its sign is timing's (with 10 ms per timing a loaded 2-core CI machine
    # measured the all-parameter call 0.06% faster than the state Jacobians alone: -0.0004), so it is not asserted
    per_column = (rec["all_kept_ratio"] - 1.0) * (sim.ndx + sim.nu) / rec["all_parameters"]
    assert np.isfinite(rec["all_kept_per_column"]) and rec["all_kept_per_column"] == per_column
    table = format_parameter_table([{"problem": "cube", **rec}])
    assert table.splitlines()[2].startswith("cube") and "1.5x" in table
    # the table names what computed Fp when told (the core's tiles, or the reference without a core)
    from dynamics import parameters as P

    expect = "the Python reference" if P._core is None else (
        "AVX2/FMA tiles" if P._core.parameter_tiles() == "avx2" else "SSE2 tiles")
    named = format_parameter_table([{"problem": "cube", **rec}], P.backend())
    assert f"Computed by: {'the compiled core, ' if P._core is not None else ''}{expect}" in named
    assert "Computed by" not in table
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


def test_bench_parameters_interleaves_rounds_and_keeps_each_best(monkeypatch):
    """Every configuration (state alone, each parameter list; fresh and kept) is timed once per round, the rounds
    one after another (so a drifting machine speed hits numerator and denominator alike), and each keeps its best:
    here the machine is twice as slow in the first round, and the ratios are the second round's."""
    import trajopt.bench as bench

    sim = cube_simulator()
    x = sim.neutral_state()
    x[2] = 0.099
    calls = []

    def fake(dyn, x, u, setting, *, min_time, **kw):
        names = kw.get("params")
        calls.append((None if names is None else len(names), setting, min_time))
        slow = 2.0 if len(calls) <= 8 else 1.0  # round 1: 4 lists x 2 settings
        return slow * (1.0 if names is None else 1.0 + 0.1 * len(names)) * (2.0 if setting == "fresh" else 1.0)

    monkeypatch.setattr(bench, "time_step_derivatives", fake)
    rec = bench_parameters(sim, x, np.zeros(0), min_time=0.4, rounds=2)
    assert len(calls) == 16 and calls[:8] == calls[8:] and {c[2] for c in calls} == {0.2}
    assert len({c[:2] for c in calls}) == 8  # state alone + friction, inertial, all; fresh and kept each
    n_inertial = sum(1 for n in sim.parameter_names() if n.split(":")[0] in ("mass", "com", "inertia"))
    assert rec["inertial_kept_ratio"] == pytest.approx(1.0 + 0.1 * n_inertial)
    assert rec["state_jacobians_kept_ms"] == pytest.approx(1e3) and rec["state_jacobians_ms"] == pytest.approx(2e3)
    with pytest.raises(ValueError, match="rounds"):
        bench_parameters(sim, x, np.zeros(0), rounds=0)


def test_bench_params_cli(capsys):
    assert main(["bench", "pendulum", "--params", "--ddp-iterations", "0", "--min-time", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "Parameter Jacobians" in out and out.count("pendulum") >= 2 and "Computed by: the " in out


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


def test_time_call_times_with_the_garbage_collector_off_and_restores_it():
    """A collection landing in some timed calls only would skew a ratio: time_call keeps the collector off while
    it times (as timeit does), and leaves it as it found it, on or off, even when fn raises."""
    import gc

    import pytest

    from trajopt.bench import time_call

    states = []
    time_call(lambda: states.append(gc.isenabled()), min_time=1e-3, repeat=2)
    assert states and not any(states) and gc.isenabled()
    gc.disable()
    try:
        time_call(lambda: None, min_time=1e-3, repeat=2)
        assert not gc.isenabled()
    finally:
        gc.enable()

    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        time_call(fails, min_time=1e-3)
    assert gc.isenabled()
