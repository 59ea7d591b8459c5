"""The compiled boxed LCP (cpp/src/lcp.cpp) against the Python reference (contact/lcp.py).

Same impulses and velocities (1e-12 relative), the same modes, signs, status, Lemke pivots and
warm-start hits, and the same linearization arrays: on random physical problems (the generators
of test_lcp.py: full-rank and rank-deficient Delassus matrices, friction, lone limit rows, badly
scaled and duplicated rows; cold, warm, wrong and stale guesses), on the degenerate scenes, and
on every contact step of rollouts of the registered problems that use the LCP.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from contact import core
from contact import lcp as L

from .test_lcp import G_DT, cube_scene, random_problem, scaled_duplicated_problem

pytestmark = pytest.mark.skipif(core.module is None, reason=f"the compiled core is not available: {core.reason}")

RTOL = 1e-12
EPS = np.finfo(float).eps
WORST = {"x": 0.0, "x_in_cond_eps": 0.0}  # the largest differences seen (printed by -s at the end)


def reduced_condition(lcp, modes, signs) -> float:
    """Condition number of the reduced system ``x`` is solved on (over its retained directions)."""
    cm, bm = L._masks(lcp, modes, signs)
    if not cm.any():
        return 1.0
    s = np.linalg.svd(L._reduced(lcp, cm, bm, signs)[2], compute_uv=False)
    if not s[0] > 0:
        return 1.0
    s = s[s > L._RANK_RTOL * s[0]]
    return float(s[0] / s[-1])


def assert_same(ref: L.LCPSolution, got: L.LCPSolution, what="", lcp=None):
    """The compiled solution equals the reference: impulses to RTOL relative, velocities (and the
    residual) to RTOL relative to their scale ``|A| |x| + |b|``, the rest exactly.

    Both sides solve the same reduced system with backward-stable factorizations (OpenBLAS's LAPACK
    for the reference, Eigen here) whose roundings differ, so on an ill-conditioned reduced system
    (condition ``kappa``) each is ``~kappa eps`` away from the exact answer and from the other: the
    tolerance is ``max(RTOL, 8 kappa eps)``."""
    assert got.status == ref.status, what
    assert got.warm_start_hit == ref.warm_start_hit, what
    assert got.iterations == ref.iterations, what
    np.testing.assert_array_equal(got.modes, ref.modes, err_msg=what)
    np.testing.assert_array_equal(got.signs, ref.signs, err_msg=what)
    assert got.modes.dtype == ref.modes.dtype == np.int64 and got.signs.dtype == np.int64
    if ref.lam.size:
        xs = np.abs(ref.lam).max()
        ws = lcp._anorm * xs + lcp._bnorm
        dx = np.abs(got.lam - ref.lam).max() / max(xs, 1e-300)
        kappa = reduced_condition(lcp, ref.modes, ref.signs) if dx > RTOL else 1.0
        WORST["x"] = max(WORST["x"], dx)
        if dx > RTOL:
            WORST["x_in_cond_eps"] = max(WORST["x_in_cond_eps"], dx / (kappa * EPS))
        rtol = max(RTOL, 8 * kappa * EPS)
        assert dx <= rtol, (what, dx, kappa)
        assert np.abs(got.w - ref.w).max() <= rtol * ws, what
        assert abs(got.residual - ref.residual) <= rtol * (xs + ws), what
    assert got.lam.shape == ref.lam.shape and got.w.shape == ref.w.shape


def both(lcp, guess=None, **kw):
    ref = L.solve_lcp_reference(lcp, guess=guess, **kw)
    got = L.solve_lcp(lcp, guess=guess, **kw)
    assert_same(ref, got, lcp=lcp)
    return ref


def assert_same_linearization(ref, got):
    """Linearization arrays: E to RTOL (the bounded rows' E = A_CC + A_CB E is a product), the rest exactly."""
    if ref is None or got is None:
        assert ref is None and got is None
        return
    np.testing.assert_array_equal(got.unknowns, ref.unknowns)
    np.testing.assert_array_equal(got.Fc, ref.Fc)
    assert got.Fphi is None and ref.Fphi is None and got.regular == ref.regular
    assert got.E.shape == ref.E.shape
    if ref.E.size:
        assert np.abs(got.E - ref.E).max() <= RTOL * np.abs(ref.E).max()
    if ref.P is None:
        assert got.P is None
    else:
        np.testing.assert_array_equal(got.P, ref.P)


def check_adapter(lcp, sol, rng):
    """linearize and reclassify (random loss gradients, and one that changes nothing) against the reference."""
    ad = L.LCPAdapter()
    assert_same_linearization(ad.linearize_reference(lcp, sol), ad.linearize(lcp, sol))
    for dl in (rng.standard_normal(lcp.n), np.where(np.isin(sol.modes, (L.Mode.CLAMPING, L.Mode.TIED)), 1.0, -1.0)):
        assert_same_linearization(ad.reclassify_reference(lcp, sol, dl), ad.reclassify(lcp, sol, dl))


# ------------------------------------------------------------------------------------------
# random and degenerate problems
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(300))
def test_random_problems_cold_warm_and_stale_guesses(seed):
    rng = np.random.default_rng(seed)
    lcp = random_problem(rng, ncontacts=int(rng.integers(1, 7)))
    cold = both(lcp)
    both(lcp, (cold.modes, cold.signs))  # a hit
    both(lcp, (np.zeros(lcp.n, dtype=np.int64), np.zeros(lcp.n, dtype=np.int64)))  # all separating: a miss
    both(lcp, (np.ones(lcp.n, dtype=np.int64), np.zeros(lcp.n, dtype=np.int64)))  # all clamping
    # the next step: a perturbed problem with the previous active set
    nxt = lcp.with_values(lcp.A * (1 + 1e-3 * rng.standard_normal()), lcp.b + 1e-2 * rng.standard_normal(lcp.n))
    both(nxt, (cold.modes, cold.signs))
    check_adapter(lcp, cold, rng)


@pytest.mark.parametrize("seed", range(60))
def test_scaled_duplicated_and_rank_deficient(seed):
    """Data over 12 orders of magnitude with a duplicated contact (rank-deficient reduced systems:
    the minimal-norm QR path), and a pivot limit that stops Lemke early (the inexact path)."""
    rng = np.random.default_rng(1000 + seed)
    dup = scaled_duplicated_problem(rng)
    sol = both(dup)
    both(dup, (sol.modes, sol.signs))
    both(dup, max_iter=int(rng.integers(1, 4)))
    both(dup, tol=1e-14)
    check_adapter(dup, sol, rng)


@pytest.mark.parametrize("v", [[0, 0, -G_DT, 0, 0, 0], [0.3, 0, -G_DT, 0, 0, 0], [0.3, 0.1, -0.2, 0.5, -1.0, 2.0],
                               [0.05, 0.0, -0.2, 0, 0, 0], [0.2, -0.1, 0.5, 0, 0, 0]])
@pytest.mark.parametrize("dup", [0, 2])
@pytest.mark.parametrize("nfric", [1, 2])
def test_cube_on_coplanar_corners(v, dup, nfric):
    lcp, _, _ = cube_scene(v, dup=dup, nfric=nfric)
    sol = both(lcp)
    both(lcp, (sol.modes, sol.signs))
    check_adapter(lcp, sol, np.random.default_rng(0))


def test_special_cases():
    empty = L.BoxedLCP(np.zeros((0, 0)), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0))
    both(empty)
    both(empty, (np.zeros(0, dtype=int), np.zeros(0, dtype=int)))
    # infeasible: inexact with the best finite iterate (all regularisations tried)
    inf = L.BoxedLCP(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.array([-1.0, -1.0]), np.array([-1, -1]), np.zeros(2))
    assert both(inf).status == "inexact"
    # tied rows, a guess of the wrong size (ignored), a single row with b = 0
    tied = L.BoxedLCP(np.eye(2), np.array([0.0, -1.0]), np.array([-1, -1]), np.zeros(2))
    sol = both(tied)
    assert sol.modes.tolist() == [L.Mode.TIED, L.Mode.CLAMPING]
    both(tied, (sol.modes, sol.signs))
    both(tied, (np.ones(3, dtype=int), np.zeros(3, dtype=int)))
    both(L.BoxedLCP(np.eye(1), np.zeros(1), np.array([-1]), np.zeros(1)))
    # zero friction rows and a duplicated planar point contact
    J = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    both(L.BoxedLCP(J @ J.T, J @ np.array([0.05, -1.0]), np.array([-1, 0, -1, 2]), np.array([0, 0.3, 0, 0.3])))
    both(L.BoxedLCP(J @ J.T, J @ np.array([0.05, -1.0]), np.array([-1, 0, -1, 2]), np.zeros(4)))
    # A = 0 (no diagonal to scale by)
    both(L.BoxedLCP(np.zeros((2, 2)), np.array([-1.0, 0.5]), np.array([-1, 0]), np.array([0.0, 0.5])))


def test_lemke_is_the_same_pivoting():
    """_lemke on Stewart-Trinkle matrices (and their regularisations): the same basis, pivots and point."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        lcp = random_problem(rng, ncontacts=int(rng.integers(1, 6)), full_rank=bool(rng.random() < 0.3))
        st = L._ST(lcp)
        for delta in (0.0, 1e-10, 1e-4):
            M = st.M + delta * np.eye(st.N)
            for max_iter in (50 + 20 * st.N, 3):
                z, zb, its, ok = L._lemke(M, st.q, max_iter)
                z2, zb2, its2, ok2 = core.module.lcp_lemke(M, st.q, max_iter)
                assert (its2, ok2) == (its, ok)
                np.testing.assert_array_equal(zb2, zb)
                np.testing.assert_array_equal(z2, z)  # elementwise tableau updates: the same bits


def test_dense_pieces_match_lapack():
    """The Eigen replacements of the reference's LAPACK calls: dgecon's estimate (same algorithm),
    the LU / minimal-norm solve, the column-pivoted QR minimal-norm solve on rank-deficient systems,
    the norms, classify and solve_active_set."""
    rng = np.random.default_rng(3)
    m = core.module
    for trial in range(300):
        n = int(rng.integers(1, 13))
        r_ = int(rng.integers(1, n + 1))
        J = rng.standard_normal((n, r_))
        K = J @ np.diag(rng.uniform(0.1, 2, r_)) @ J.T
        if trial % 3 == 0:  # non-symmetric (bounded friction rows)
            K = K + 0.1 * rng.standard_normal((n, n)) @ np.diag(rng.random(n) < 0.3)
        rhs = K @ rng.standard_normal(n) if trial % 2 else rng.standard_normal(n)
        lu, piv, _ = L._dgetrf(K)
        rc, _ = L._dgecon(lu, L._dlange("1", K), norm="1")
        rc2 = m.lcp_rcond(K)
        assert rc2 == pytest.approx(rc, rel=1e-6, abs=1e-15)
        for f, g in ((L._min_norm, m.lcp_min_norm), (L._solve_small, m.lcp_solve_small)):
            y, y2 = f(K, rhs), g(K, rhs)
            scale = max(np.abs(y).max(), 1e-300)
            if r_ == n or abs(np.log10(max(rc, 1e-300) / L._RCOND_LU)) > 1:
                assert np.abs(y2 - y).max() <= 1e-9 * scale  # consistent and pinv agree; see below
            if r_ < n and trial % 2:  # consistent rank-deficient: the minimal-norm solution
                assert np.abs(y2 - y).max() <= 1e-10 * scale
    for seed in range(50):
        lcp = random_problem(np.random.default_rng(seed), ncontacts=4)
        args = (lcp.A, lcp.b, lcp.normal_of, lcp.mu)
        assert m.lcp_norms(*args) == (lcp._anorm, lcp._bnorm)
        sol = L.solve_lcp_reference(lcp)
        for tol in (1e-9, 1e-8):
            got = m.lcp_classify(*args, sol.lam, sol.w, tol)
            ref = L.classify(lcp, sol.lam, sol.w, tol=tol)
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
        x = L.solve_active_set(lcp, sol.modes, sol.signs)
        x2 = m.lcp_solve_active_set(*args, sol.modes, sol.signs)
        assert np.abs(x2 - x).max() <= RTOL * max(np.abs(x).max(), 1e-300)


def test_bad_input_is_named():
    m = core.module
    A, b, no, mu = np.eye(3), np.zeros(3), np.array([-1, 0, 0]), np.array([0, 0.5, 0.5])
    cases = [
        ((np.ones((3, 2)), b, no, mu), "square"),
        ((A, np.zeros(2), no, mu), "b must have shape"),
        ((A, b, no[:2], mu), "normal_of must have shape"),
        ((A, b, no, mu[:2]), "mu must have shape"),
        ((np.full((3, 3), np.nan), b, no, mu), "A contains non-finite"),
        ((A, b, np.array([-1, 5, 0]), mu), "row index"),
        ((A, b, np.array([-1, 0, 1]), mu), "point at a normal row"),
        ((A, b, no, np.array([0, -0.5, 0.5])), ">= 0"),
        ((A, b, no, np.array([0.1, 0.5, 0.5])), "unilateral"),
    ]
    xw, ms = np.empty((2, 3)), np.empty((2, 3), dtype=np.int64)
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            m.lcp_solve(*args, None, None, 1e-9, -1, xw, ms)
    with pytest.raises(TypeError):
        m.lcp_solve("A", b, no, mu, None, None, 1e-9, -1, xw, ms)
    with pytest.raises(TypeError):  # outputs of the wrong type are not converted (they would not be written)
        m.lcp_solve(A, b, no, mu, None, None, 1e-9, -1, xw, ms.astype(np.int32))
    with pytest.raises(ValueError, match=r"shape \(2, n\)"):
        m.lcp_solve(A, b, no, mu, None, None, 1e-9, -1, np.empty((2, 4)), ms)
    z3, buf, C = np.zeros(3, dtype=np.int64), np.empty(27), np.empty(3, dtype=np.int64)
    with pytest.raises(ValueError, match="modes and signs"):
        m.lcp_linearize(A, b, no, mu, np.zeros(2, dtype=np.int64), z3, buf, C)
    with pytest.raises(ValueError, match="output buffers"):
        m.lcp_linearize(A, b, no, mu, z3, z3, buf[:20], C)
    with pytest.raises(ValueError, match="dl_dlam"):
        m.lcp_reclassify(A, b, no, mu, z3, z3, np.zeros(2), buf, C)


def test_the_adapter_uses_the_core():
    assert L._core is core.module
    lcp, _, _ = cube_scene([0.3, 0, -G_DT, 0, 0, 0])
    sol = L.LCPAdapter().solve(lcp)
    assert sol.status == "solved"


# ------------------------------------------------------------------------------------------
# every contact step of rollouts of the registered problems
# ------------------------------------------------------------------------------------------


def _lcp_problems():
    import problems

    out = []
    for name in problems.names():
        params = inspect.signature(problems.factory(name)).parameters
        if "contact" in params and name != "catapult-design":  # an augmented step over rebuilt catapults
            options = {} if params["contact"].default == "lcp" else {"contact": "lcp"}
            if "start" in params:  # the rollouts' steps, not a start identified while the problem is made
                options["start"] = "raw"  # (cube-sysid's staged start: 7.6 s of Python-path rollouts)
            out.append((name, options))
    return out


@pytest.mark.parametrize("name, options", _lcp_problems(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_contact_step_of_the_problems(name, options, monkeypatch):
    import problems

    # the adapter's solve (spied on below), not the fused step's; kept set through the rollouts, as
    # identification problems (cube-sysid) build a system per residual evaluation (with_parameters)
    monkeypatch.setenv("CONTACTRAJ_NO_FUSED", "1")
    ocp = problems.load(name, **options)
    adapter = ocp.dynamics.contact_model.adapter
    assert isinstance(adapter, L.LCPAdapter)
    calls = []
    solve = L.LCPAdapter.solve

    def spy(self, lcp, guess=None):
        sol = solve(self, lcp, guess)
        calls.append((lcp, guess))
        return sol

    monkeypatch.setattr(L.LCPAdapter, "solve", spy)
    rng = np.random.default_rng(0)
    if hasattr(ocp, "z0"):  # an inverse problem: its rollouts are inside the residual
        for trial in range(8):
            ocp.residual(ocp.z0 + 0.1 * trial * rng.standard_normal(ocp.z0.shape))
    else:
        for trial in range(2):
            us = ocp.us_init if ocp.us_init is not None else np.zeros((ocp.horizon, ocp.nu))
            scale = np.where(np.isfinite(ocp.u_upper), 0.3 * ocp.u_upper, 1.0)
            us = np.clip(us + trial * rng.uniform(-1, 1, us.shape) * scale, ocp.u_lower, ocp.u_upper)
            ocp.rollout(us)
    monkeypatch.undo()  # (the comparison below calls the adapter's solve again)
    assert len(calls) >= 8, f"{name}: only {len(calls)} contact steps"
    print(f" {len(calls)} contact steps, {sum(c[0].n for c in calls) / len(calls):.1f} rows on average", end="")
    for i, (lcp, guess) in enumerate(calls):
        ref = L.solve_lcp_reference(lcp, guess=None if guess is None else (guess.modes, guess.signs))
        got = adapter.solve(lcp, guess)
        assert_same(ref, got, f"{name} step {i}", lcp)
        check_adapter(lcp, ref, rng)


def test_report_worst_differences():
    """Runs last: the largest differences of this module's comparisons (pytest -s shows them)."""
    print(f"\nlargest relative impulse difference {WORST['x']:.2e}, in units of kappa eps {WORST['x_in_cond_eps']:.2f}")
