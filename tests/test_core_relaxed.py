"""The fused relaxed-contact step of the compiled core (``cpp/src/relaxed.cpp`` through ``cpp/src/step.cpp``:
``smoothing`` kappa > 0 with ``ContactModel.fused``): the central-path solve (barrier Newton along the path, the
coupled Newton at kappa, the warm start) and the implicit velocity Jacobian (with the fade's distance term) give
the Python reference's (``contact/relaxed.py``) states, impulses and Jacobians to 1e-12, friction by the cone and
by the pyramid, along rollouts of registered problems and of a cube sliding with spin."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from contact import RowLayout, core
from contact.relaxed import RelaxedAdapter, solve_relaxed
from dynamics.contact_step import ContactState, FusedRelaxedState
from trajopt.bench import bench_state

from .test_contact import cube_sim, cube_state
from .test_core_fused import _both, _reference, _rel
from .test_core_ncp import _controls

pytestmark = pytest.mark.skipif(core.module is None or not hasattr(core.module, "relaxed_solve"),
                                reason="the compiled core (with relaxed_solve) is not available")

TOL = 1e-12


def _compare(sim, x0, us):
    """Step and step_derivatives along the reference's rollout (own workspaces, warm starts carried); the
    iteration counts are not compared: the barrier Newton stops where round-off stops its progress."""
    ref = _reference(sim)
    assert sim.contact_model.fused is not None and sim._active_fused_step() is not None
    d, dr = sim.create_data(), ref.create_data()
    e, er = sim.create_data(), ref.create_data()
    worst, n = 0.0, 0
    x = np.asarray(x0, dtype=float)
    for u in us:
        a, b, ds = _both(sim, ref, x, u, d, dr, e, er)
        worst = max(worst, ds, *(_rel(p, r) for p, r in zip(a, b)))
        assert (d.contact is None) == (dr.contact is None)
        if d.contact is not None:
            assert type(d.contact) is FusedRelaxedState and type(dr.contact) is ContactState
            n += 1
            s, t = d.contact, dr.contact
            assert s.key == t.key and s.guessed == t.guessed and s.warm_hit == t.warm_hit
            np.testing.assert_array_equal(s.solution.keep, t.solution.keep)
            worst = max(worst, _rel(s.lam, t.lam), _rel(s.solution.K, t.solution.K),
                        _rel(s.problem.weight, t.problem.weight), _rel(s.problem.dweight, t.problem.dweight))
        x = b[0]
    assert d.stats == dr.stats and e.stats == er.stats
    assert sim.contact_model.relaxed_fallbacks == ref.contact_model.relaxed_fallbacks
    assert n > 0, "no step had contact: the test does not test the fused relaxed path"
    assert worst <= TOL, worst
    return worst


@pytest.mark.parametrize("contact", ["ncp", "lcp"])
@pytest.mark.parametrize("kappa", [1e-3, 1e-2])
def test_cube_sliding_with_spin(contact, kappa):
    sim = cube_sim(contact=contact).with_smoothing(kappa)
    _compare(sim, cube_state(z=0.1, v=(1.0, 0.3, 0.0), w=(0.0, 0.0, 3.0)), np.zeros((80, 0)))
    _compare(sim, cube_state(z=0.13, v=(0.2, 0.0, -0.3)), np.zeros((60, 0)))  # landing from the fade's reach


@pytest.mark.parametrize("name", ["catapult", "go1-hold", "half-cheetah", "jump-worm", "ur5-box"])
def test_registered_problems(name):
    ocp = problems.load(name)
    sim = ocp.dynamics.with_smoothing(1e-2)
    x, u = bench_state(ocp)
    _compare(sim, x, u + _controls(sim, 40, 1, scale=0.05))


def test_solver_on_random_problems():
    """relaxed_solve (cold and warm) equals solve_relaxed on random problems, cone and pyramid, with limit rows
    and rows beyond the fade: impulses and the Newton matrix to 1e-12 where it converges."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(120):
        nc, r, nl = int(rng.integers(1, 5)), int(rng.choice([2, 3])), int(rng.integers(0, 3))
        m = nc * r + nl
        J = rng.normal(size=(m, int(rng.integers(max(1, m - 3), m + 4))))
        A, b = J @ J.T, rng.normal(size=m)
        phi = rng.uniform(-0.01, 0.06, nc + nl)
        kappa, cone, mu = float(10 ** rng.uniform(-4, -1)), bool(rng.random() < 0.5), float(rng.choice([0.0, 0.5]))
        ad = RelaxedAdapter(kappa, 0.05, cone)
        ref = solve_relaxed(ad.problem(A, b, RowLayout(nc, r, nl, mu), phi))
        got = core.module.relaxed_solve(A, b, nc, r, nl, mu, cone, phi, kappa, 0.05, None)
        assert got[4] == ref.converged
        if not ref.converged:
            continue
        warm = solve_relaxed(ad.problem(A, 1.01 * b, RowLayout(nc, r, nl, mu), phi), guess=ref.lam)
        got_warm = core.module.relaxed_solve(A, 1.01 * b, nc, r, nl, mu, cone, phi, kappa, 0.05, ref.lam)
        for x, y in ((got, ref), (got_warm, warm)):
            np.testing.assert_array_equal(x[7], y.keep)
            assert x[6] == y.warm_start_hit
            # K holds kappa w / lambda_n^2: a small impulse (1e-4 next to 2) turns the impulses' 1e-15 into 1e-12
            assert _rel(x[0], y.lam) <= TOL and _rel(x[5], y.K) <= 1e3 * TOL
        checked += 1
    assert checked > 100


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="kappa > 0"):
        core.module.relaxed_solve(np.eye(3), np.zeros(3), 1, 3, 0, 0.5, True, np.zeros(1), 0.0, 0.05, None)
    with pytest.raises(ValueError, match="must match the rows"):
        core.module.relaxed_solve(np.eye(2), np.zeros(2), 1, 3, 0, 0.5, True, np.zeros(1), 1e-3, 0.05, None)
