"""Costs (derivatives vs finite differences), the OCP, and every registered problem."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost, LeastSquares, StateCost

from .conftest import free_body_simulator, random_state


def _fd_cost_derivatives(cost, dyn, x, u, h=1e-6):
    """Central-difference gradient of a cost in (dx, du), through state_integrate."""
    nz = dyn.ndx + (0 if u is None else dyn.nu)
    g = np.zeros(nz)
    for k in range(nz):
        dz = np.zeros(nz)
        dz[k] = h
        def at(s):
            xs = dyn.state_integrate(x, s * dz[: dyn.ndx])
            us = None if u is None else u + s * dz[dyn.ndx:]
            return cost.value(xs, us)
        g[k] = (at(1) - at(-1)) / (2 * h)
    return g


@pytest.fixture(scope="module")
def free_sim():
    return free_body_simulator()


def test_state_cost_gradient_on_a_free_flyer(free_sim):
    rng = np.random.default_rng(2)
    x_ref, x = random_state(free_sim, rng), random_state(free_sim, rng)
    W = np.diag(rng.uniform(0.5, 2.0, free_sim.ndx))
    cost = StateCost(free_sim, x_ref, W)
    d = cost.derivatives(x)
    g = _fd_cost_derivatives(cost, free_sim, x, None)
    assert np.allclose(d.Lx, g, atol=1e-6)
    assert d.L == pytest.approx(cost.value(x))
    assert np.allclose(d.Lxx, d.Lxx.T) and np.all(np.linalg.eigvalsh(d.Lxx) > 0)


def test_control_and_sum_costs():
    sim = problems.load("cartpole").dynamics
    rng = np.random.default_rng(4)
    x, u = rng.standard_normal(4), rng.standard_normal(1)
    cost = 2.0 * StateCost(sim, np.zeros(4), [1, 2, 3, 4]) + ControlCost(sim, 0.5, u_ref=[0.3])
    d = cost.derivatives(x, u)
    g = _fd_cost_derivatives(cost, sim, x, u)
    assert np.allclose(np.concatenate((d.Lx, d.Lu)), g, atol=1e-6)
    assert np.allclose(d.Lxx, 2.0 * np.diag([1, 2, 3, 4]))
    assert np.allclose(d.Luu, [[0.5]])
    assert cost.value(x) == pytest.approx(2.0 * StateCost(sim, np.zeros(4), [1, 2, 3, 4]).value(x))


def test_function_cost_finite_difference_derivatives():
    sim = problems.load("cartpole").dynamics
    fun = lambda x, u: np.sin(x[1]) * x[0] ** 2 + (0.0 if u is None else 3.0 * u[0] ** 2 * x[2])  # noqa: E731
    cost = FunctionCost(sim, fun)
    x, u = np.array([0.5, 0.3, -0.2, 0.1]), np.array([0.7])
    d = cost.derivatives(x, u)
    assert np.allclose(d.Lx, [2 * 0.5 * np.sin(0.3), 0.25 * np.cos(0.3), 3 * 0.49, 0.0], atol=1e-6)
    assert np.allclose(d.Lu, [6 * 0.7 * -0.2], atol=1e-6)
    assert d.Luu[0, 0] == pytest.approx(6 * -0.2, abs=1e-4)
    assert d.Lxu[2, 0] == pytest.approx(6 * 0.7, abs=1e-4)
    bad = FunctionCost(sim, lambda x, u: np.nan)
    with pytest.raises(ValueError, match="returned nan"):
        bad.value(x, u)


def test_cost_sizes_must_match():
    a = problems.load("cartpole").dynamics
    b = problems.load("double-cartpole").dynamics
    with pytest.raises(ValueError, match="different sizes"):
        ControlCost(a) + ControlCost(b)


def test_a_horizon_past_the_memory_is_refused_before_allocating(monkeypatch):
    """horizon=1e8 made the list of a cost per knot, then the solver's arrays, until the system killed the run."""
    import time

    import trajopt.memory

    monkeypatch.setattr(trajopt.memory, "physical_memory", lambda: 8 * 2**30)
    t = time.perf_counter()
    with pytest.raises(ValueError, match=r"^pendulum's solver arrays over a horizon of 100000000 knots would take "
                                         r"about .* GiB, more than 50% of the 8 GiB this process may use; a shorter horizon"):
        problems.load("pendulum", horizon=100_000_000)
    assert time.perf_counter() - t < 1.0
    assert problems.load("pendulum", horizon=1000).horizon == 1000


def test_a_long_horizon_for_ddp_is_kept_and_only_multiple_shooting_refuses_it(monkeypatch):
    """Every OCP counted multiple shooting's CasADi graph (40 kB a knot): the pendulum over 100000 knots was refused
    on a 7 GiB machine ("about 3.76 GiB") although DDP keeps 20 times less. The graph is now checked by the methods
    that build it, before any stage (a CEM search) runs."""
    import time

    import trajopt.memory
    from solvers import solve

    monkeypatch.setattr(trajopt.memory, "physical_memory", lambda: 7 * 2**30)
    ocp = problems.load("pendulum", horizon=100_000)
    assert ocp.horizon == 100_000
    for method in ("ipopt", "shooting", "cem-shooting"):
        t = time.perf_counter()
        with pytest.raises(ValueError, match=r"^multiple shooting's CasADi graph over a horizon of 100000 knots would "
                                             r"take about 3\.73 GiB, more than 50% of the 7 GiB this process may use; "
                                             r"a shorter horizon, or DDP"):
            solve(ocp, method, max_iter=1, verbose=False)
        assert time.perf_counter() - t < 1.0, method


@pytest.mark.parametrize("name", ["go1-hold", "go1-jump", "talos-standing", "ur5-box", "drone"])
def test_factories_refuse_a_huge_horizon_before_tiling_their_guess(name, monkeypatch):
    """These tiled their initial controls over the horizon before the OCP's size check: talos-standing at
    horizon=1e8 asked NumPy for 23.8 GiB first. The OCP now takes one control (nu,) for every knot."""
    import tracemalloc

    import trajopt.memory

    monkeypatch.setattr(trajopt.memory, "physical_memory", lambda: 2**30)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="solver arrays over a horizon of 1000000 knots would take"):
            problems.load(name, horizon=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # a tiled guess alone: 1e6 x nu x 8 bytes (nu = 12 for a Go1: 96 MB; the drone's nu = 1: 8 MB, so a bar of 50 MB
    # passed its tiling, 24 MB, and the UR5's, 48 MB); made now: at most 1.2 MB
    tiled = 1_000_000 * problems.load(name).dynamics.nu * 8
    assert peak < tiled / 4, (peak, tiled)


def test_the_memory_is_a_cgroup_limit_where_it_is_lower(tmp_path, monkeypatch):
    """The check read the machine's memory only; a container or a batch job may get far less."""
    import os

    import trajopt.memory as memory

    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(tmp_path / "proc-self-cgroup"))
    (tmp_path / "proc-self-cgroup").write_text("0::/\n")  # a container in its own cgroup namespace
    limit = tmp_path / "memory.max"
    limit.write_text("max\n")  # cgroup v2's "no limit"
    assert memory.physical_memory() == machine
    limit.write_text(f"{2**30}\n")
    assert memory.physical_memory() == min(2**30, machine)
    with pytest.raises(ValueError, match="more than 50% of the 1 GiB this process may use"):
        memory.check_memory("x", 0.6 * 2**30, "less")


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_the_memory_is_the_limit_of_the_process_own_cgroup_or_one_above_it(tmp_path, monkeypatch, version):
    """Only the mount's root was read: a Slurm job's or a systemd scope's limit (in the process's own cgroup, or one
    above it: the job's, over its step's) went unseen."""
    import os

    import trajopt.memory as memory

    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(tmp_path / "proc-self-cgroup"))
    home, name, line = (("", "memory.max", "0::/slurm/job_7/step_0") if version == "v2" else
                        ("memory", "memory.limit_in_bytes", "4:memory:/slurm/job_7/step_0"))
    (tmp_path / "proc-self-cgroup").write_text(f"1:cpu,cpuacct:/elsewhere\n{line}\n")
    unlimited = "max" if version == "v2" else "9223372036854771712"
    for folder, text in (("", unlimited), ("slurm", unlimited), ("slurm/job_7", f"{2**31}"),
                         ("slurm/job_7/step_0", unlimited)):
        (tmp_path / home / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / home / folder / name).write_text(text + "\n")
    assert memory.physical_memory() == min(2**31, machine)
    (tmp_path / home / "slurm/job_7/step_0" / name).write_text(f"{2**30}\n")  # the step's own, lower
    assert memory.physical_memory() == min(2**30, machine)
    (tmp_path / home / "elsewhere").mkdir()  # where a cpu line's path would be read, were it taken for memory's
    (tmp_path / home / "elsewhere" / name).write_text("4096\n")  # another controller's cgroup: not this process's
    assert memory.physical_memory() == min(2**30, machine)


def test_one_initial_control_is_used_at_every_knot():
    sim = problems.load("pendulum").dynamics
    ocp = OCP(dynamics=sim, x0=np.zeros(sim.nx), horizon=5, running_cost=ControlCost(sim, 1.0),
              terminal_cost=StateCost(sim, np.zeros(sim.nx)), us_init=np.array([0.3]))
    np.testing.assert_array_equal(ocp.us_init, np.full((5, 1), 0.3))
    with pytest.raises(ValueError, match=r"controls have shape \(2,\), expected \(horizon 5, nu 1\)"):
        OCP(dynamics=sim, x0=np.zeros(sim.nx), horizon=5, running_cost=ControlCost(sim, 1.0),
            terminal_cost=StateCost(sim, np.zeros(sim.nx)), us_init=np.array([0.3, 0.1]))


def test_ocp_cost_adds_running_and_terminal():
    ocp = problems.load("pendulum", horizon=20)
    us = np.full((20, 1), 0.5)
    xs = ocp.rollout(us)
    expected = sum(ocp.running(t).value(xs[t], us[t]) for t in range(20)) + ocp.terminal_cost.value(xs[-1])
    assert ocp.cost(xs, us) == pytest.approx(expected)
    assert np.allclose(ocp.u_upper, [5.0]) and np.allclose(ocp.u_lower, [-5.0])


OCP_NAMES = [n for n in problems.names() if not isinstance(problems.load(n), LeastSquares)]


@pytest.mark.parametrize("name", OCP_NAMES)
def test_every_problem_loads_and_rolls_out(name):
    ocp = problems.load(name)
    assert isinstance(ocp, OCP) and ocp.horizon > 0 and problems.describe(name)
    xs = ocp.rollout(ocp.us_init)
    assert xs.shape == (ocp.horizon + 1, ocp.nx) and np.all(np.isfinite(xs))
    figures = ocp.evaluate(xs, ocp.us_init)
    assert np.isfinite(figures["cost"]) and figures["cost"] != 0.0  # rewards (go1-jump) make costs negative
    d = ocp.running(0).derivatives(xs[0], ocp.us_init[0])
    assert isinstance(d, CostDerivatives) and d.Lxx.shape == (ocp.ndx, ocp.ndx) and d.Luu.shape == (ocp.nu, ocp.nu)


def test_swing_up_metric_measures_distance_from_upright():
    ocp = problems.load("cartpole")
    xs = np.zeros((ocp.horizon + 1, 4))
    assert ocp.evaluate(xs, ocp.us_init)["final_angle_error"] == pytest.approx(np.pi)
    xs[-1, 1] = -np.pi + 0.1  # upright, approached the other way round
    assert ocp.evaluate(xs, ocp.us_init)["final_angle_error"] == pytest.approx(0.1)


@pytest.mark.parametrize("name", ["catapult", "go1-hold", "cartpole"])
def test_running_derivatives_stack_the_per_knot_ones(name):
    """OCP.running_derivatives (one derivatives_along call for a shared cost: ControlCost and sums
    vectorized) equals the per-knot derivatives: exactly for what DDP uses, to round-off for L."""
    ocp = problems.load(name)
    us = ocp.us_init + 0.1 * np.random.default_rng(0).standard_normal(ocp.us_init.shape)
    xs = ocp.rollout(np.clip(us, ocp.u_lower, ocp.u_upper))
    stacked = ocp.running_derivatives(xs, us)
    for t in (0, ocp.horizon // 2, ocp.horizon - 1):
        d = ocp.running(t).derivatives(xs[t], us[t])
        for f in ("Lx", "Lu", "Lxx", "Lxu", "Luu"):
            assert np.array_equal(getattr(stacked, f)[t], getattr(d, f)), f
        assert stacked.L[t] == pytest.approx(d.L, rel=1e-14, abs=1e-300)
