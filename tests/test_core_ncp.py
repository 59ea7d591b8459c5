"""The fused NCP step of the compiled core (``cpp/src/ncp.cpp`` through ``cpp/src/step.cpp``: ``contact="ncp"``
with ``ContactModel.fused``): the Coulomb-cone solve (warm start, pyramid-LCP cold start, repairs, Gauss-Seidel,
Newton with its polish, the canonical vertex) and the implicit velocity Jacobian give the Python reference's
(``contact/ncp.py``) states, Jacobians, impulses, modes and warm starts, to 1e-12, along rollouts of every
registered problem that takes ``contact=`` and on a cube at rest, sliding, sticking, separating and spinning."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from contact import core
from contact.ncp import solve_ncp
from dynamics import Simulator
from dynamics.contact_step import ContactState, FusedNCPState
from trajopt.bench import bench_state

from .test_contact import cube_sim, cube_state
from .test_core_fused import _both, _reference, _rel

pytestmark = pytest.mark.skipif(core.module is None or not hasattr(core.module, "ncp_solve"),
                                reason="the compiled core (with ncp_solve) is not available")

TOL = 1e-12


def _compare(sim, ref, x0, us, *, need_contact=True):
    """Step and step_derivatives along the reference's rollout, each simulator with its own workspaces (warm
    starts carry along); returns (worst relative difference, steps in contact, modes seen)."""
    assert sim.contact == "ncp" and sim.contact_model.fused is not None and sim._active_fused_step() is not None
    assert ref.contact_model.fused is None
    d, dr = sim.create_data(), ref.create_data()
    e, er = sim.create_data(), ref.create_data()  # step() alone, its own warm starts
    worst, fused, modes = 0.0, 0, set()
    iters, worst_A, split, conditioned = [0], [0.0], [0.0], [0.0]
    x = np.asarray(x0, dtype=float)
    for u in us:
        a, b, ds = _both(sim, ref, x, u, d, dr, e, er)
        worst = max(worst, _rel(a[0], b[0]), ds)
        jac = max(_rel(a[1], b[1]), _rel(a[2], b[2]))
        if dr.contact is not None and jac > TOL:
            # The implicit Jacobian solves E dz = rhs: where E is ill-conditioned (a contact sliding slowly: its
            # Fc ~ mu lambda_n / |c_T|) its round-off is cond(E) eps, and the reference's own two least squares
            # (numba's LAPACK gelsd, the core's) differ by that much (talos-standing: 5.6e-11 at cond 7.5e5,
            # where the compiled step differs by 1.8e-11). The Jacobians are held to max(1e-12, cond(E) 1e-16).
            E = dr.contact.adapter.linearize(dr.contact.problem, dr.contact.solution).E
            sv = np.linalg.svd(E, compute_uv=False)
            cond = sv[0] / sv[-1] if len(sv) and sv[-1] > 0 else np.inf
            assert jac <= max(TOL, 1e-16 * cond), (jac, cond)
            conditioned[0] = max(conditioned[0], jac)
        else:
            worst = max(worst, jac)
        assert (d.contact is None) == (dr.contact is None)
        if d.contact is not None:
            assert type(d.contact) is FusedNCPState and type(dr.contact) is ContactState
            fused += 1
            s, t = d.contact, dr.contact
            assert s.key == t.key and s.guessed == t.guessed and s.warm_hit == t.warm_hit
            np.testing.assert_array_equal(s.solution.modes, t.solution.modes)
            assert s.solution.status == t.solution.status
            # iterations: equal but where round-off takes another route: the products' (A = J M^-1 J^T: Eigen's vs
            # numpy's) moving a Gauss-Seidel sweep count across its tolerance (cube-throw: 81 against 82 once), or
            # the least squares' (Eigen's SVD vs LAPACK gelsd) in a Newton run that stalls on modes without a
            # solution, where the steps have cond ~1e10 (talos-standing: the stalled iterate's friction
            # direction, which the next repair reads, differs by 1%; 55 against 42 iterations, same answer)
            iters[0] += s.solution.iterations != t.solution.iterations
            worst_A[0] = max(worst_A[0], _rel(s.problem.A, t.problem.A), _rel(s.problem.b, t.problem.b))
            modes.update(int(m) for m in t.solution.modes)
            for name in ("J", "MJt", "bias_slope"):
                worst = max(worst, _rel(getattr(s, name), getattr(t, name)))
            # the impulses: to 1e-12, or (a flat patch's statically indeterminate split of its load, reached by
            # another route) differing only where the motion does not see it: M^-1 J^T lambda to 1e-12
            if _rel(s.lam, t.lam) > TOL:
                split[0] = max(split[0], _rel(s.lam, t.lam))
                worst = max(worst, _rel(t.MJt @ s.lam, t.MJt @ t.lam))
            else:
                worst = max(worst, _rel(s.lam, t.lam))
            # friction directions of the saturated groups (the others' are left-overs of repairs, read by nothing)
            sat = np.asarray(t.solution.modes) == 3
            worst = max(worst, _rel(s.solution.dirs[sat], t.solution.dirs[sat]), _rel(s.solution.c, t.solution.c))
            np.testing.assert_array_equal(s.problem.start, t.problem.start)
            np.testing.assert_array_equal(s.problem.size, t.problem.size)
            np.testing.assert_array_equal(s.problem.mu, t.problem.mu)
        x = b[0]
    assert d.stats == dr.stats and e.stats == er.stats
    assert fused > 0 or not need_contact, "no step had contact: the test does not test the fused NCP path"
    assert worst <= TOL, worst
    print(f"worst {worst:.1e} (A, b: {worst_A[0]:.1e}) over {fused} steps in contact, iteration counts differing: "
          f"{iters[0]}, impulses differing in a null space by up to {split[0]:.1e}, Jacobians within cond(E) eps: "
          f"{conditioned[0]:.1e}")
    return worst, fused, modes


def _controls(sim, T, seed, scale=0.3):
    rng = np.random.default_rng(seed)
    lo = np.nan_to_num(sim.u_lower, neginf=-10.0, posinf=10.0)
    hi = np.nan_to_num(sim.u_upper, neginf=-10.0, posinf=10.0)
    return rng.uniform(lo, hi, (T, sim.nu)) * scale


def _contact_problems():
    """The registered problems that take a contact model."""
    import inspect

    return [n for n in problems.names() if "contact" in inspect.signature(problems.factory(n)).parameters]


FAST = ["catapult", "cube-throw", "half-cheetah", "go1-hold", "jump-worm", "ur5-box"]


def _problem_rollouts(name, T):
    ocp = problems.load(name, contact="ncp")
    sim = ocp.dynamics
    if not isinstance(sim, Simulator):  # catapult-design: the catapult (tested) under design parameters
        pytest.skip(f"{name}'s dynamics is a {type(sim).__name__}, not a Simulator")
    if name.startswith("cube"):  # the cube starts above the floor
        T = max(T, 250)
    ref = _reference(sim)
    x0 = ocp.x0 if hasattr(ocp, "x0") else bench_state(ocp)[0]
    # from its start (half-cheetah's starts in the air) under random controls and its own initial guess, and
    # from its bench state (in contact) under controls around its own
    _compare(sim, ref, x0, _controls(sim, T, 0), need_contact=False)
    if getattr(ocp, "us_init", None) is not None:
        us = np.asarray(ocp.us_init, dtype=float).reshape(-1, sim.nu)[:T]
        _compare(sim, ref, x0, us, need_contact=False)
    x, u = bench_state(ocp)
    us = u + _controls(sim, T, 1, scale=0.05)
    _compare(sim, ref, x, us)


@pytest.mark.parametrize("name", FAST)
def test_registered_problems_along_rollouts(name):
    _problem_rollouts(name, 60)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(_contact_problems()) - set(FAST)))
def test_other_registered_problems_along_rollouts(name):
    _problem_rollouts(name, 30)


def test_every_contact_problem_is_covered():
    assert set(FAST) <= set(_contact_problems())


@pytest.mark.parametrize("case", ["rest", "sliding", "sticking", "separating", "spinning", "tilted", "landing"])
def test_cube_states(case):
    """A cube at rest, sliding, sticking (a slow push below the friction limit), separating, sliding with spin
    (the flat patch's indeterminate answer: the canonical vertex), tilted on an edge, landing."""
    sim = cube_sim(contact="ncp", mu=0.5)
    x0 = {
        "rest": cube_state(z=0.1),
        "sliding": cube_state(z=0.1, v=(1.0, 0.3, 0.0)),
        "sticking": cube_state(z=0.1, v=(0.002, 0.0, 0.0)),
        "separating": cube_state(z=0.1, v=(0.2, 0.0, 1.0)),
        "spinning": cube_state(z=0.1, v=(1.0, 0.0, 0.0), w=(0.0, 0.0, 4.0)),
        "tilted": cube_state(z=0.13, rot=(0.3, 0.0, 0.0), v=(0.5, 0.0, 0.0)),
        "landing": cube_state(z=0.12, v=(0.8, -0.4, -0.5), w=(1.0, 2.0, 3.0)),
    }[case]
    _, fused, modes = _compare(sim, _reference(sim), x0, np.zeros((120, 0)))
    if case == "sliding":
        assert 2 in modes
    if case in ("rest", "sticking"):
        assert 1 in modes


def test_solver_on_random_problems():
    """ncp_solve (cold and warm) equals solve_ncp on random Delassus problems, full rank and rank-deficient, planar
    and 3-D groups with limit rows: modes, status and iterations exactly, impulses to 1e-12 where solved."""
    rng = np.random.default_rng(0)
    solved = 0
    for _ in range(150):
        nc, r, nl = int(rng.integers(1, 6)), int(rng.choice([2, 3])), int(rng.integers(0, 3))
        m = nc * r + nl
        nv = int(rng.integers(max(1, m - 4), m + 4))
        J = rng.normal(size=(m, nv))
        if rng.random() < 0.3:
            J[:, : nv // 2] = 0.0
        A, b = J @ J.T, rng.normal(size=m)
        start = np.concatenate((np.arange(nc) * r, nc * r + np.arange(nl))).astype(np.int64)
        size = np.concatenate((np.full(nc, r), np.ones(nl))).astype(np.int64)
        mu = np.concatenate((np.full(nc, rng.choice([0.0, 0.3, 1.0])), np.zeros(nl)))
        cold = solve_ncp(A, b, start, size, mu)
        for guess in (None, (cold.modes, cold.lam, cold.dirs)):  # cold, then warm from the cold answer
            bb = b if guess is None else 1.01 * b
            ref = cold if guess is None else solve_ncp(A, bb, start, size, mu, guess=guess)
            got = core.module.ncp_solve(A, bb, start, size, mu, *(guess if guess is not None else (None, None, None)))
            if ref.status != "solved":  # 2000 Gauss-Seidel sweeps without convergence: chaotic, not compared
                continue
            solved += 1
            lam, c, modes, ok, res, hit, its, dirs = got
            assert ok and hit == ref.warm_start_hit and its == ref.iterations
            np.testing.assert_array_equal(modes, ref.modes)
            sat = np.asarray(ref.modes) == 3
            assert _rel(lam, ref.lam) <= TOL and _rel(dirs[sat], ref.dirs[sat]) <= TOL
    assert solved > 250


def test_bad_input_is_named():
    A, b = np.eye(3), np.array([-1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="A has shape"):
        core.module.ncp_solve(np.eye(2), b, np.array([0]), np.array([3]), np.array([0.5]), None, None, None)
    with pytest.raises(ValueError, match="group 0"):
        core.module.ncp_solve(A, b, np.array([1]), np.array([3]), np.array([0.5]), None, None, None)
    with pytest.raises(ValueError, match="non-finite"):
        core.module.ncp_solve(A, np.array([np.nan, 0, 0]), np.array([0]), np.array([3]), np.array([0.5]), None, None,
                              None)


def test_python_previous_state_warm_starts_the_fused_step():
    """A step on the Python path (the fused solve switched off for one step) hands its NCP solution to the next
    fused step as its warm start, as the reference's next step takes it."""
    sim = cube_sim(contact="ncp")
    ref = _reference(sim)
    x = cube_state(z=0.1, v=(0.5, 0.0, 0.0))
    d, dr = sim.create_data(), ref.create_data()
    u = np.zeros(0)
    fused = sim.contact_model.fused
    for k in range(20):
        if k % 5 == 2:
            sim.contact_model.fused = None  # this step on the Python path
        a = sim.step(x, u, data=d)
        sim.contact_model.fused = fused
        b = ref.step(x, u, data=dr)
        assert _rel(a, b) <= TOL
        assert d.contact.guessed == dr.contact.guessed and d.contact.warm_hit == dr.contact.warm_hit
        x = b
    assert type(d.contact) is FusedNCPState


def test_parameter_jacobians_of_a_fused_ncp_state_equal_the_python_paths():
    """A fused NCP state's parameter Jacobians (compiled: params.cpp model_columns) equal those of the Python path's
    step (the fused step off: its own NCP solve, the Python reference's Fp)."""
    sim = cube_sim(contact="ncp")
    ref = _reference(sim)
    x, u = cube_state(z=0.1, v=(0.5, 0.0, 0.0)), np.zeros(0)
    a = sim.step_derivatives(x, u, params=["friction"])
    b = ref.step_derivatives(x, u, params=["friction"])
    for p, r in zip(a, b):
        assert _rel(p, r) <= TOL
    assert np.abs(b[3]).max() > 0
