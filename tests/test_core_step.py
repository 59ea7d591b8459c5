"""The whole step in one compiled call (``cpp/src/fused_step.cpp``, ``Simulator._fused_step``): ``step`` and
``rollout`` give the Python path's states bit for bit (the same operations in the same order, the same
contact solve), leave the workspace as it does (contact state, warm-start counts, the kept solves that
``step_derivatives`` reuses), and every error is the Python path's, word for word."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from contact import core
from dynamics import SimulationError, Simulator
from dynamics.contact_step import FusedContactState
from trajopt.bench import bench_state

from .test_contact import cube_sim, cube_state, limited_pendulum
from .test_core_fused import _controls
from .test_damping import _chain

pytestmark = pytest.mark.skipif(core.module is None or not hasattr(core.module, "FusedStep"),
                                reason="the compiled core (with FusedStep) is not available")


def _reference(sim: Simulator) -> Simulator:
    """The same system with the whole-step fusion off: the Python path (whose contact solve is still FusedLCP)."""
    ref = Simulator(sim.model, geometry=sim.geometry, **sim._options)
    ref._fused_step = None
    return ref


def _same_workspace(d, e):
    """Workspaces ``d`` (fused) and ``e`` (reference) hold the same bookkeeping."""
    assert d.stats == e.stats
    assert list(d.kept) == list(e.kept)
    for (va, sa), (vb, sb) in zip(d.kept.values(), e.kept.values()):
        assert np.array_equal(va, vb)
        assert (sa is None) == (sb is None)
        if sa is not None:
            assert np.array_equal(sa.lam, sb.lam) and sa.key == sb.key
    assert (d.contact is None) == (e.contact is None)
    if d.contact is not None:
        assert type(d.contact) is FusedContactState and d.contact.key == e.contact.key


class _Spy:
    """``Simulator._fused_step`` passed through, counting FusedStep.step_derivatives' codes (-1: the Python path)."""

    def __init__(self, fs):
        self.fs, self.codes = fs, []

    def step(self, *a):
        return self.fs.step(*a)

    def rollout(self, *a):
        return self.fs.rollout(*a)

    def step_derivatives(self, *a):
        r = self.fs.step_derivatives(*a)
        self.codes.append(r[0])
        return r


#: The fused step_derivatives against the Python path's Jacobians: the same operations, except the products
#: Eigen runs where numpy's BLAS ran (a free-flyer's 6 x 6 block of dIntegrate's Jacobians, the position
#: correction's Jacobian): equal to this, relative to the largest entry (or 1); everything else is bit for bit.
#: Measured (scripts/diff_fused_derivatives.py, rollouts of go1-hold, ur5-box, talos-standing): max |dF| 2.2e-16.
JAC_RTOL = 1e-12


def _exact_jacobians(sim, state) -> bool:
    """The fused Jacobians are the Python path's bit for bit: a Euclidean model, no position correction."""
    return sim._euclidean and (state is None or state.correction is None)


def _same_step_jacobians(sim, p, r, state):
    assert np.array_equal(p[0], r[0])  # the state: bit for bit
    for a, b in zip(p[1:], r[1:]):
        if _exact_jacobians(sim, state):
            assert np.array_equal(a, b)
        else:
            assert np.abs(a - b).max(initial=0.0) <= JAC_RTOL * max(1.0, np.abs(b).max(initial=0.0))


def _compare_derivatives(sim, ref, x0, us, xs):
    """step_derivatives on fresh workspaces along xs (each solving, warm-started), rollout_derivatives and
    knot_derivatives: the fused calls (FusedStep.step_derivatives, no fallback) equal the Python path's."""
    spy = sim._fused_step = _Spy(sim._fused_step)
    try:
        d, e = sim.create_data(), ref.create_data()
        for t in range(len(us)):
            p, r = sim.step_derivatives(xs[t], us[t], data=d), ref.step_derivatives(xs[t], us[t], data=e)
            _same_step_jacobians(sim, p, r, e.contact)
            _same_workspace(d, e)
        for how in ("rollout", "knots"):
            d, e = sim.create_data(), ref.create_data()
            if how == "rollout":
                p, r = sim.rollout_derivatives(x0, us, data=d), ref.rollout_derivatives(x0, us, data=e)
            else:
                p, r = sim.knot_derivatives(xs, us, data=d), ref.knot_derivatives(xs, us, data=e)
            assert np.array_equal(p[0], r[0])
            # bit for bit where no step can have a position correction (no contact, or the velocity push-out)
            exact = sim._euclidean and (sim.contact_model is None or sim.contact_model.recovery == "velocity")
            for a, b in zip(p[1:], r[1:]):
                if exact:
                    assert np.array_equal(a, b)
                else:
                    assert np.abs(a - b).max(initial=0.0) <= JAC_RTOL * max(1.0, np.abs(b).max(initial=0.0))
            _same_workspace(d, e)
    finally:
        sim._fused_step = spy.fs
    assert spy.codes and -1 not in spy.codes, spy.codes
    return spy.codes


def _compare(sim, x0, us, *, expect_fused=True):
    """step by step, then a rollout, then the Jacobians after the rollout (reusing its kept solves): fused and
    reference equal bit for bit, with the same workspaces (the Jacobians: see _same_step_jacobians). Then the
    Jacobians without kept solves (_compare_derivatives). Returns how many steps had a contact solve."""
    ref = _reference(sim)
    assert (sim._fused_step is not None) == expect_fused and ref._fused_step is None
    d, e = sim.create_data(), ref.create_data()
    x = np.asarray(x0, dtype=float)
    for u in us:
        a, b = sim.step(x, u, data=d), ref.step(x, u, data=e)
        assert np.array_equal(a, b)
        x = b
    _same_workspace(d, e)
    d, e = sim.create_data(), ref.create_data()
    xs, xr = sim.rollout(x0, us, data=d), ref.rollout(x0, us, data=e)
    assert np.array_equal(xs, xr)
    _same_workspace(d, e)
    solved = d.stats["contact_steps"]
    # the Jacobians after a rollout reuse its contact solves (those of steps that solved one), in both
    knots = range(0, len(us), 5)
    kept = sum(xs[t].tobytes() + us[t].tobytes() in d.kept for t in knots)
    for t in knots:
        p, r = sim.step_derivatives(xs[t], us[t], data=d), ref.step_derivatives(xs[t], us[t], data=e)
        _same_step_jacobians(sim, p, r, e.contact)
    _same_workspace(d, e)
    assert d.stats["reused"] == kept
    if expect_fused:
        _compare_derivatives(sim, ref, x0, us, xs)
    return solved


def _lcp_problem(name):
    """The registered problem, with hard LCP contact where it has another contact model (the fused step's)."""
    ocp = problems.load(name)
    sim = ocp.dynamics
    if sim.contact in ("ncp", "relaxed") or sim.smoothing:
        ocp = problems.load(name, contact="lcp", **({"steps": 2, "every": 1} if name == "cube-throw" else {}))
        sim = ocp.dynamics
    return ocp, sim


def _simulator_problems():
    """The registered problems whose dynamics is a Simulator (catapult-design's is an augmented step over
    simulators rebuilt per design: its steps are the catapult's, checked in tests/test_design.py)."""
    return [n for n in problems.names() if n != "catapult-design"]


@pytest.mark.parametrize("name", _simulator_problems())
def test_registered_problems(name):
    ocp, sim = _lcp_problem(name)
    x0 = ocp.x0 if hasattr(ocp, "x0") else bench_state(ocp)[0]
    T = 250 if name == "cube-throw" else 30 if sim.nv > 20 else 60  # the cube starts 5 cm above the floor
    solved = _compare(sim, x0, _controls(sim, T, 0))
    if hasattr(ocp, "us_init"):  # the problem's own initial guess: the trajectory an optimizer starts from
        solved += _compare(sim, x0, np.asarray(ocp.us_init, dtype=float).reshape(-1, sim.nu)[:T])
    x, u = bench_state(ocp)  # the benchmarked state (trajopt bench)
    solved += _compare(sim, x, np.tile(u, (5, 1)))
    if not solved and sim.contact_model is not None and sim.contact_model.scene.npairs:
        solved += _compare(sim, x, np.tile(u, (300, 1)))  # a body in the air (cube-sysid): until it lands
    # ur5-reach, ur5-sysid: no collision pair, joint limits at +-2 pi only, never near (may_touch says so)
    assert solved > 0 or sim.contact_model is None or not sim.contact_model.scene.npairs, "no step had contact"


@pytest.mark.parametrize("name", ["go1-standing", "cube-throw"])
def test_ncp_and_relaxed_are_fused_with_a_core_that_has_them(name):
    kw = {"steps": 2, "every": 1} if name == "cube-throw" else {}
    sim = problems.load(name, **kw).dynamics
    # NCP contact: fused by a core with the NCP solve (cpp/src/ncp.cpp; tests/test_core_ncp.py), else Python
    assert sim.contact == "ncp" and (sim._fused_step is not None) == hasattr(core.module, "ncp_solve")
    relaxed = _lcp_problem("catapult")[1].with_smoothing(1e-3)
    # relaxed contact: fused by a core with the relaxed solve (cpp/src/relaxed.cpp; tests/test_core_relaxed.py)
    assert (relaxed._fused_step is not None) == hasattr(core.module, "relaxed_solve")


def test_free_flight_no_contact_model():
    model, _ = _chain()
    sim = Simulator(model, dt=0.01, joint_limits=False)
    assert sim.contact_model is None
    _compare(sim, np.r_[0.3, -0.2, 0.1, 1.0, 0.0, -2.0], np.random.default_rng(1).standard_normal((40, sim.nu)))


def test_cube_in_the_air_then_landing_and_deep():
    sim = cube_sim()
    assert _compare(sim, cube_state(z=0.5), np.zeros((50, 0))) == 0  # far above: solves with no rows, kept
    assert _compare(sim, cube_state(z=0.103, v=(0.3, 0, -0.5), w=(0, 1.0, 0)), np.zeros((60, 0))) > 0  # landing
    for recovery in ("position", "velocity"):  # 5 cm deep: the position correction (or the push-out)
        deep = Simulator(sim.model, geometry=sim.geometry, dt=sim.dt, ground=0.0, friction=0.5, recovery=recovery)
        d = deep.create_data()
        deep.step(cube_state(z=0.05), np.zeros(0), data=d)
        assert (d.contact.correction is not None) == (recovery == "position")
        assert _compare(deep, cube_state(z=0.05), np.zeros((40, 0))) > 0  # "velocity": it flies off


def test_joint_limits():
    s = limited_pendulum()
    assert s.contact_model is not None and s.contact_model.scene.npairs == 0
    for recovery in ("position", "velocity"):
        sim = Simulator(s.model, geometry=s.geometry, dt=s.dt, recovery=recovery)
        _compare(sim, np.array([0.6, 0.0]), np.full((40, 1), 1.0))  # past the bound
        _compare(sim, np.array([0.45, 2.0]), np.random.default_rng(3).standard_normal((40, 1)))  # towards it
        _compare(sim, np.array([0.0, 0.0]), np.zeros((20, 1)))  # far from it: nothing near


@pytest.mark.parametrize("damping", ["implicit", "explicit"])
def test_damping_and_springs(damping):
    model, geom = _chain()
    d = [3.0, 0.0, 20.0] if damping == "implicit" else [0.3, 0.0, 2.0]  # explicit: stable while d dt / I < 2
    sim = Simulator(model, geometry=geom, dt=0.005, ground=0.07, friction=0.6, joint_damping=d,
                    joint_stiffness=[0.0, 5.0, 2.0], spring_reference=[0.0, 0.1, -0.2], joint_limits=False,
                    damping=damping)
    _compare(sim, np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.0]), np.random.default_rng(4).standard_normal((60, sim.nu)))
    model, geom = _chain(floating=True, limits=True)
    sim = Simulator(model, geometry=geom, dt=0.005, ground=-0.93, friction=0.8, damping=damping,
                    joint_damping=[0.0] * 6 + ([2.0, 0.5, 5.0] if damping == "implicit" else [0.2, 0.05, 0.5]),
                    joint_stiffness=[0.0] * 6 + [1.0, 0.0, 3.0])
    q0 = np.zeros(model.nq)
    q0[6] = 1.0
    q0[-1] = 0.79  # near the upper limit
    _compare(sim, np.concatenate((q0, np.zeros(model.nv))), np.random.default_rng(5).standard_normal((60, sim.nu)))


def test_switches():
    """CONTACTRAJ_NO_FUSED and CONTACTRAJ_NO_FUSED_STEP turn the fused step off; so does turning the fused contact
    solve off (contact_model.fused = None), mid-rollout too, with the warm start carried across."""
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    mp = pytest.MonkeyPatch()
    for var in ("CONTACTRAJ_NO_FUSED", "CONTACTRAJ_NO_FUSED_STEP"):
        with mp.context() as m:
            m.setenv(var, "1")
            assert Simulator(sim.model, geometry=sim.geometry, **sim._options)._fused_step is None
    # turning contact_model.fused off mid-rollout (which turns this fused step off too), with the warm start
    # carried across: test_core_fused.test_switching_paths_mid_rollout_keeps_the_warm_start (same system,
    # same controls, same assertions)


def _same_error(sim, call, exc_type):
    """``call(s)`` raises the same error, same message, on ``sim`` and on its reference."""
    ref = _reference(sim)
    with pytest.raises(exc_type) as a:
        call(sim)
    with pytest.raises(exc_type) as b:
        call(ref)
    assert str(a.value) == str(b.value)
    return a.value, b.value


def test_bad_input_gives_the_python_errors():
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    x, u = ocp.x0.copy(), np.zeros(sim.nu)
    bad = x.copy()
    bad[sim.nq + 2] = np.nan
    _same_error(sim, lambda s: s.step(bad, u), ValueError)
    _same_error(sim, lambda s: s.step(x[:-1], u), ValueError)
    _same_error(sim, lambda s: s.step(x, u[:-1]), ValueError)
    _same_error(sim, lambda s: s.step(x, np.full(sim.nu, np.inf)), ValueError)
    _same_error(sim, lambda s: s.step(x[None], u), ValueError)
    tilted = x.copy()
    tilted[3:7] *= 1.01  # a quaternion off the unit sphere
    _same_error(sim, lambda s: s.step(tilted, u), ValueError)
    _same_error(sim, lambda s: s.rollout(bad, np.zeros((3, sim.nu))), ValueError)
    # accepted inputs the compiled step leaves to Python: lists, int arrays, a quaternion just within tolerance
    for xx, uu in ((list(x), list(u)), (x, np.zeros(sim.nu, dtype=int))):
        assert np.array_equal(sim.step(xx, uu), _reference(sim).step(xx, uu))
    near = x.copy()
    near[3:7] *= 1 + 0.8e-6
    assert np.array_equal(sim.step(near, u), _reference(sim).step(near, u))


def test_divergence_gives_the_python_errors():
    s = cube_sim()
    sim = Simulator(s.model, geometry=s.geometry, dt=s.dt, ground=0.0, friction=0.0)
    assert sim._fused_step is not None
    # a state already beyond MAX_VELOCITY (a frictionless cube on the ground sliding at 2e4 m/s, which was stepped
    # and then refused as the step's output) is refused as input, in the same words: the compiled call hands it to
    # Python's check; beyond MAX_POSITION after the step and non-finite (no contact model)
    _same_error(sim, lambda s: s.step(cube_state(v=(2e4, 0.0, 0.0)), np.zeros(0)), ValueError)
    model, _ = _chain()
    free = Simulator(model, dt=0.01, joint_limits=False)
    x = np.array([Simulator.MAX_POSITION, 0.0, 0.0, 1.0, 0.0, 0.0])
    _same_error(free, lambda s: s.step(x, np.zeros(3)), SimulationError)
    a, _ = _same_error(free, lambda s: s.step(np.zeros(6), np.array([1e308, -1e308, 1e308])), SimulationError)
    assert "non-finite state" in str(a)
    with pytest.warns(RuntimeWarning, match="overflow"):  # finite entries whose sum overflows: Python's check decides
        _same_error(free, lambda s: s.step(np.zeros(6), np.array([1e308, 1e308, 0.0])), ValueError)
    # in a rollout: the step named, the states so far carried
    us = np.zeros((10, 1))
    us[6] = 1e8
    unlimited = Simulator(limited_pendulum().model, dt=1e-3, joint_limits=False)
    a, b = _same_error(unlimited, lambda s: s.rollout(np.array([0.0, 0.0]), us), SimulationError)
    assert "rollout step 6" in str(a) and np.array_equal(a.xs, b.xs) and len(a.xs) == 7
    # a non-finite free velocity before the contact solve, from a state within the bounds (a cube thrown at 1e300 m/s
    # is refused as input now): a 1e-9 kg link on a hinge, with a ground to touch, under a torque of 1e299 N m
    from dynamics import ModelBuilder

    b = ModelBuilder("feather")
    j = b.add_joint("revolute", name="hinge", axis="y", effort=1e300)
    b.add_body(j, mass=1e-9, box=(0.02, 0.02, 0.1), offset=(0, 0, -0.05))
    model, geom = b.build()
    feather = Simulator(model, geometry=geom, dt=1e-3, ground=-0.2)
    assert feather._fused_step is not None and feather.contact_model is not None
    a, _ = _same_error(feather, lambda s: s.step(np.zeros(2), np.array([1e299])), SimulationError)
    assert "non-finite" in str(a), a


def test_bad_input_to_the_derivatives_gives_the_python_errors():
    """step_derivatives, rollout_derivatives and knot_derivatives: every input the compiled call refuses runs the
    Python path, which raises its own error, word for word; accepted odd inputs give the Python path's numbers."""
    ocp = problems.load("go1-hold")
    sim = ocp.dynamics
    x, u = ocp.x0.copy(), np.zeros(sim.nu)
    bad = x.copy()
    bad[sim.nq + 2] = np.nan
    tilted = x.copy()
    tilted[3:7] *= 1.01
    for xx, uu in ((bad, u), (x[:-1], u), (x, u[:-1]), (x, np.full(sim.nu, np.inf)), (x[None], u), (tilted, u)):
        _same_error(sim, lambda s: s.step_derivatives(xx, uu, data=s.create_data()), ValueError)
    us = np.zeros((3, sim.nu))
    _same_error(sim, lambda s: s.rollout_derivatives(bad, us), ValueError)
    knots = np.tile(x, (4, 1))
    knots[2] = tilted
    a, _ = _same_error(sim, lambda s: s.knot_derivatives(knots, us), ValueError)
    assert str(a).startswith("knot 2: state xs[2]")
    knots[2, 0] = np.inf
    _same_error(sim, lambda s: s.knot_derivatives(knots, us), ValueError)
    # accepted inputs the compiled call leaves to Python: lists, int controls, Fortran-ordered knots
    ref = _reference(sim)
    for xx, uu in ((list(x), list(u)), (x, np.zeros(sim.nu, dtype=int))):
        for p, r in zip(sim.step_derivatives(xx, uu, data=sim.create_data()),
                        ref.step_derivatives(xx, uu, data=ref.create_data())):
            assert np.array_equal(p, r)
    fortran = np.asfortranarray(np.tile(x, (3, 1)))
    for p, r in zip(sim.knot_derivatives(fortran, us), ref.knot_derivatives(fortran, us)):
        assert np.array_equal(p, r)
    # a state beyond MAX_VELOCITY (a frictionless cube sliding at 2e4 m/s): refused as input, in the same words;
    # divergence: the step named, the states so far carried
    s = cube_sim()
    fast = Simulator(s.model, geometry=s.geometry, dt=s.dt, ground=0.0, friction=0.0)
    _same_error(fast, lambda s: s.step_derivatives(cube_state(v=(2e4, 0.0, 0.0)), np.zeros(0)), ValueError)
    us = np.zeros((10, 1))
    us[6] = 1e8
    unlimited = Simulator(limited_pendulum().model, dt=1e-3, joint_limits=False)
    a, b = _same_error(unlimited, lambda s: s.rollout_derivatives(np.array([0.0, 0.0]), us), SimulationError)
    assert "rollout step 6" in str(a) and np.array_equal(a.xs, b.xs) and len(a.xs) == 7


def test_kept_solves_of_the_python_path_and_adjoint_run_in_python():
    """A kept solve that the Python path made (a ContactState, not the compiled StepState) and the complementarity-
    aware Jacobians (adjoint=) are the Python path's: the compiled call hands them back, the numbers agree."""
    ocp = problems.load("catapult")
    sim = ocp.dynamics
    py = _reference(sim)
    py.contact_model.fused = None  # the Python contact solve: its kept states are ContactStates
    us = _controls(sim, 40, 7)
    spy = sim._fused_step = _Spy(sim._fused_step)
    try:
        d, e = sim.create_data(), py.create_data()
        fused, sim.contact_model.fused = sim.contact_model.fused, None  # the Python step, on sim's own workspace
        try:  # (another simulator's steps would not do: a workspace it stepped on is taken with its caches dropped)
            xs = sim.rollout(ocp.x0, us, data=d)  # the Python solves kept in the fused simulator's workspace
        finally:
            sim.contact_model.fused = fused
        assert np.array_equal(py.rollout(ocp.x0, us, data=e), xs) and d.stats["contact_steps"] > 0
        for t in range(len(us)):
            p, r = sim.step_derivatives(xs[t], us[t], data=d), py.step_derivatives(xs[t], us[t], data=e)
            assert all(np.array_equal(a, b) for a, b in zip(p, r))
        assert d.stats == e.stats and d.stats["reused"] == len(us)
        python_states = sum(s is not None for _, s in d.kept.values())
        assert python_states > 0 and all(type(s) is not FusedContactState for _, s in d.kept.values())
        # those with a state are handed to Python before the compiled call; those without run compiled
        assert spy.codes == [3] * (len(us) - python_states)
        n = len(spy.codes)
        ref = _reference(sim)
        w = np.ones(sim.ndx)
        for t in range(0, len(us), 5):
            p = sim.step_derivatives(xs[t], us[t], adjoint=w)
            r = ref.step_derivatives(xs[t], us[t], adjoint=w)
            assert all(np.array_equal(a, b) for a, b in zip(p, r))
        assert len(spy.codes) == n  # adjoint: never the compiled call
    finally:
        sim._fused_step = spy.fs
