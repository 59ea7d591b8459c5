"""The Coulomb-cone NCP solver: residual, modes, warm start, agreement with the LCP."""

from __future__ import annotations

import numpy as np
import pytest

from contact.lcp import BoxedLCP, solve_lcp
from contact.ncp import NCPMode, NCPProblem, ncp_residual, solve_ncp


def physical_problem(rng, nc, r, mu, ndof=None):
    """G = J M^-1 J^T (often rank-deficient) and b = J v + non-negative gaps on normal rows."""
    m = nc * r
    ndof = ndof or int(rng.integers(2, m + 3))
    J = rng.standard_normal((m, ndof))
    L = rng.standard_normal((ndof, ndof))
    Minv = L @ L.T + 0.1 * np.eye(ndof)
    G = J @ Minv @ J.T
    b = J @ rng.standard_normal(ndof)
    b[::r] += np.abs(rng.standard_normal(nc)) * rng.integers(0, 2, nc)
    return G, b, np.arange(nc) * r, np.full(nc, r), np.full(nc, mu)


def check_law(G, b, start, size, mu, x, tol=1e-8):
    """Coulomb's law with the De Saxce correction, checked case by case."""
    c = G @ x + b
    scale = 1 + np.abs(b).max() + np.abs(x).max()
    for s, n, m in zip(start, size, mu, strict=True):
        ln, lt, cn, ct = x[s], x[s + 1: s + n], c[s], c[s + 1: s + n]
        assert ln >= -tol * scale and np.linalg.norm(lt) <= m * ln + tol * scale  # in the cone
        assert cn >= -tol * scale  # no penetration velocity
        assert abs(ln * cn) <= tol * scale**2  # normal complementarity
        if n > 1 and m > 0 and ln > tol * scale and np.linalg.norm(ct) > tol * scale:
            # sliding: on the boundary, opposite to the slip
            assert np.allclose(lt, -m * ln * ct / np.linalg.norm(ct), atol=tol * scale)


def test_residual_is_zero_at_every_answer_of_random_physical_problems():
    rng = np.random.default_rng(42)
    seen = set()
    for _ in range(400):
        nc, r = int(rng.integers(1, 5)), int(rng.choice([2, 3]))
        mu = float(rng.choice([0.0, 0.3, 1.0]))
        G, b, st, sz, mus = physical_problem(rng, nc, r, mu)
        sol = solve_ncp(G, b, st, sz, mus)
        assert sol.status == "solved" and np.all(np.isfinite(sol.lam))
        assert sol.residual <= 1e-9 * (1 + np.abs(sol.lam).max())
        assert ncp_residual(G, b, st, sz, mus, sol.lam) == pytest.approx(sol.residual)
        check_law(G, b, st, sz, mus, sol.lam)
        seen.update(int(m) for m in sol.modes)
    assert seen == {NCPMode.BREAKING, NCPMode.STICKING, NCPMode.SLIDING}  # every mode occurred


def test_residual_detects_wrong_answers():
    rng = np.random.default_rng(1)
    G, b, st, sz, mus = physical_problem(rng, 3, 3, 0.5, ndof=9)
    sol = solve_ncp(G, b, st, sz, mus)
    assert ncp_residual(G, b, st, sz, mus, sol.lam) < 1e-9
    bad = sol.lam.copy()
    bad[0] += 0.1
    assert ncp_residual(G, b, st, sz, mus, bad) > 1e-3
    # No impulse answers exactly when no contact approaches (b_n >= 0 on every normal row): here two do.
    assert np.any(b[::3] < 0) and ncp_residual(G, b, st, sz, mus, np.zeros_like(sol.lam)) > 1e-3
    apart = b.copy()
    apart[::3] = np.abs(apart[::3])
    assert ncp_residual(G, apart, st, sz, mus, np.zeros_like(sol.lam)) == 0.0


@pytest.mark.parametrize("case", ["breaking", "sticking", "sliding"])
def test_single_contact_modes_have_closed_forms(case):
    """One contact on a unit point mass: take-off, sticking (all velocity removed), sliding
    (friction mu lambda_n opposite to the slip)."""
    G = np.eye(3)
    mu = np.array([0.5])
    v = {"breaking": [0.2, 1.0, 0.0], "sticking": [-1.0, 0.3, 0.1], "sliding": [-1.0, 2.0, 1.0]}[case]
    b = np.array(v)
    sol = solve_ncp(G, b, [0], [3], mu)
    assert sol.modes[0] == getattr(NCPMode, case.upper())
    if case == "breaking":
        assert np.all(sol.lam == 0)
    elif case == "sticking":
        assert np.allclose(sol.lam, -b) and np.allclose(sol.c, 0)
    else:
        assert sol.lam[0] == pytest.approx(1.0)  # removes the normal velocity
        slip = b[1:] / np.linalg.norm(b[1:])
        assert np.allclose(sol.lam[1:], -0.5 * slip)
        assert np.allclose(sol.c[1:], b[1:] - 0.5 * slip)  # slides on, slowed by mu lambda_n


def test_frictionless_and_planar_problems_agree_with_the_lcp():
    """mu = 0 in 3-D, and any mu in planar groups (the 2-D cone is the LCP's box)."""
    rng = np.random.default_rng(7)
    for trial in range(150):
        nc = int(rng.integers(1, 5))
        r, mu = (3, 0.0) if trial % 2 else (2, float(rng.choice([0.0, 0.4, 1.0])))
        G, b, st, sz, mus = physical_problem(rng, nc, r, mu)
        normal_of = np.full(nc * r, -1)
        mu_rows = np.zeros(nc * r)
        for k in range(1, r):
            normal_of[st + k] = st
            mu_rows[st + k] = mu
        lsol = solve_lcp(BoxedLCP(G, b, normal_of, mu_rows))
        nsol = solve_ncp(G, b, st, sz, mus)
        assert np.allclose(G @ lsol.lam, G @ nsol.lam, atol=1e-8)  # same velocities


def test_warm_start_hits_and_repeats_the_answer():
    rng = np.random.default_rng(3)
    G, b, st, sz, mus = physical_problem(rng, 4, 3, 0.6, ndof=12)
    sol = solve_ncp(G, b, st, sz, mus)
    again = solve_ncp(G, b + 1e-6 * rng.standard_normal(len(b)), st, sz, mus, guess=(sol.modes, sol.lam))
    assert again.warm_start_hit and again.status == "solved"
    assert np.allclose(again.lam, sol.lam, atol=1e-4)
    wrong = solve_ncp(G, b, st, sz, mus, guess=(np.zeros_like(sol.modes), np.zeros_like(sol.lam)))
    assert wrong.status == "solved" and np.allclose(G @ wrong.lam, G @ sol.lam, atol=1e-8)


def test_unilateral_rows_and_degenerate_inputs():
    rng = np.random.default_rng(5)
    G, b, _, _, _ = physical_problem(rng, 2, 3, 0.5, ndof=4)
    # a joint-limit row appended as its own group
    G2 = np.zeros((7, 7))
    G2[:6, :6] = G
    G2[6, 6] = 2.0
    b2 = np.r_[b, -1.0]
    sol = solve_ncp(G2, b2, [0, 3, 6], [3, 3, 1], [0.5, 0.5, 0.0])
    assert sol.status == "solved" and sol.lam[6] == pytest.approx(0.5)
    empty = solve_ncp(np.zeros((0, 0)), np.zeros(0), [], [], [])
    assert empty.status == "solved" and empty.lam.size == 0
    with pytest.raises(ValueError, match="non-finite"):
        solve_ncp(G, np.full(6, np.nan), [0, 3], [3, 3], [0.5, 0.5])


def test_implicit_dlambda_db_matches_central_differences_of_the_resolved_problem():
    """jaxopt-style: the implicit derivative equals finite differences of re-solving, away from
    mode switches (cases where two FD steps disagree are skipped and counted)."""
    from contact import NCPAdapter, lambda_jacobian

    from .test_adapters import resolved_differences

    ncp = NCPAdapter()
    rng = np.random.default_rng(11)
    checked = {NCPMode.STICKING: 0, NCPMode.SLIDING: 0}
    skipped = 0
    for _ in range(120):
        nc, r = int(rng.integers(1, 4)), int(rng.choice([2, 3]))
        G, b, st, sz, mus = physical_problem(rng, nc, r, float(rng.choice([0.3, 1.0])), ndof=nc * r + 2)
        sol = solve_ncp(G, b, st, sz, mus)
        D = lambda_jacobian(ncp.linearize(NCPProblem.of(G, b, st, sz, mus), sol), np.eye(len(b)))  # dc/db = I

        def impulses(bb):
            return solve_ncp(G, bb, st, sz, mus).lam

        a, c = resolved_differences(impulses, b, 1e-6), resolved_differences(impulses, b, 1e-7)
        if np.abs(a - c).max() > 1e-5 * (1 + np.abs(a).max()):
            skipped += 1
            continue
        assert np.abs(D - a).max() <= 1e-5 * (1 + np.abs(a).max())
        for m in sol.modes:
            if m in checked:
                checked[m] += 1
    assert checked[NCPMode.STICKING] >= 5 and checked[NCPMode.SLIDING] >= 5, checked
    assert skipped <= 12


def test_a_flat_cube_sliding_with_spin_gets_one_answer_and_its_jacobian():
    """Four loaded corners sliding in different directions (spin) admit a family of Coulomb answers
    whose friction, hence v+, differs (the loads shift +,-,+,- on the corners); Newton's answer used to
    depend on its warm start (a cold step differed by 5e-7 from the warm one on the cube-throw slide,
    and that trajectory's Jacobian was off by 1.2e-3). The canonical vertex makes the step a function
    of the state: cold and warm agree, one corner breaks, and the Jacobian is its derivative."""
    from trajopt import max_relative_error, step_jacobians_fd

    from .test_contact import cube_sim, cube_state

    u = np.zeros(0)
    x = cube_state(z=0.1, v=(0.7, 0.2, 0.0), w=(0.0, 0.0, 0.3))
    sim = cube_sim(contact="ncp")
    xs = sim.rollout(x, np.zeros((20, 0)))
    modes = sim.contacts.modes
    assert len(modes) == 4 and np.sum(modes == NCPMode.BREAKING) == 1 and np.sum(modes == NCPMode.SLIDING) == 3
    assert abs(xs[-1, 12]) > 0.1  # still spinning
    cold = cube_sim(contact="ncp").step(xs[-2], u)
    np.testing.assert_allclose(cold, xs[-1], rtol=0, atol=1e-9)  # the solve is exact to 1e-10
    _, Fx, _ = sim.step_derivatives(xs[-2], u)
    fd = step_jacobians_fd(sim, xs[-2], u, h=1e-6)
    assert max_relative_error(Fx, fd.Fx) < 1e-6


def test_a_problem_without_a_solution_is_inexact_not_solved():
    """One dof seen by one 3-D contact (A = j j', rank 1), mu = 1, whose friction, while it slides, always drives
    the normal velocity down: no impulse obeys the law (a Painleve configuration; breaking leaves c_n = -1). The
    solver used to accept Newton's answer with a normal impulse of -1.88 as "solved" (the law's tolerance taken on
    Gauss-Seidel's drifting iterate, ~1e10): now "inexact", with that nearest answer (not the drifting iterate),
    in the Python solver and the compiled one alike."""
    j = np.array([0.446, -1.4987, -0.9479])
    A, b = np.outer(j, j), np.array([-0.9997, 0.9124, -1.3713])
    start, size, mu = np.array([0]), np.array([3]), np.array([1.0])
    sol = solve_ncp(A, b, start, size, mu)
    assert sol.status == "inexact" and sol.residual > 1.0
    assert np.abs(sol.lam).max() < 10.0  # the nearest Newton answer, not Gauss-Seidel's drift (9e9)
    from contact import core

    if core.module is not None and hasattr(core.module, "ncp_solve"):
        lam, c, modes, ok, res, hit, its, dirs = core.module.ncp_solve(A, b, start, size, mu, None, None, None)
        assert not ok and np.allclose(lam, sol.lam, rtol=1e-9) and its == sol.iterations
