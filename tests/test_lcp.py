"""Boxed contact LCP (contact/lcp.py): exactness, degenerate scenes, warm starts, minimal norm.

Every random problem is seeded. Problems are built physically: A = J Minv J^T with Minv SPD
(J with fewer columns than rows when rank deficiency is wanted) and b = J v (+ a nonnegative
offset on normal rows), the class for which a solution exists.
"""

from __future__ import annotations

import numpy as np
import pytest

from contact.lcp import (
    BoxedLCP,
    LCPSolution,
    Mode,
    classify,
    lcp_residual,
    solve_active_set,
    solve_lcp,
)

from .reference_lcp import conditions_hold, enumerate_solutions, scale_of

TOL = 1e-9


# ------------------------------------------------------------------------------------------
# problem builders
# ------------------------------------------------------------------------------------------


def random_problem(
    rng: np.random.Generator,
    *,
    ncontacts: int | None = None,
    nfric: int | None = None,
    full_rank: bool | None = None,
    mus=(0.0, 0.3, 1.0),
    lone_rows: int | None = None,
    offset: bool | None = None,
) -> BoxedLCP:
    """Contacts [n, t] or [n, t1, t2] (+ lone normal rows, like joint limits), physical A, b."""
    ncontacts = int(rng.integers(1, 5)) if ncontacts is None else ncontacts
    nfric = int(rng.integers(1, 3)) if nfric is None else nfric
    lone_rows = int(rng.integers(0, 2)) if lone_rows is None else lone_rows
    normal_of, mu = [], []
    for _ in range(ncontacts):
        k = len(normal_of)
        m = float(rng.choice(mus))
        normal_of += [-1] + [k] * nfric
        mu += [0.0] + [m] * nfric
    normal_of += [-1] * lone_rows
    mu += [0.0] * lone_rows
    n = len(normal_of)
    full_rank = bool(rng.random() < 0.5) if full_rank is None else full_rank
    m = n + int(rng.integers(0, 3)) if full_rank or n == 1 else int(rng.integers(1, n))
    J = rng.standard_normal((n, m))
    L = rng.standard_normal((m, m))
    Minv = L @ L.T + 0.1 * np.eye(m)
    A = J @ Minv @ J.T
    A = 0.5 * (A + A.T)
    b = J @ rng.standard_normal(m)
    offset = bool(rng.random() < 0.3) if offset is None else offset
    if offset:
        b = b + np.where(np.asarray(normal_of) < 0, rng.random() * np.abs(rng.standard_normal(n)), 0.0)
    return BoxedLCP(A, b, np.array(normal_of), np.array(mu))


CORNERS = ((-1, -1), (-1, 1), (1, -1), (1, 1))


def cube_scene(v, *, mu=0.5, nfric=2, side=0.2, mass=1.0, corners=CORNERS, dup=0):
    """A cube of side 0.2 m and mass 1 kg (6-dof free body, twist [v, omega] at the CoM) with
    contacts at bottom corners (normal +z, tangents +x, +y), optionally duplicated.
    Returns (lcp, J, Minv)."""
    h = side / 2
    pts = [np.array([sx * h, sy * h, -h]) for sx, sy in corners]
    pts += pts[:dup]
    dirs = [np.array([0.0, 0, 1]), np.array([1.0, 0, 0]), np.array([0.0, 1, 0])][: 1 + nfric]
    rows, normal_of, mus = [], [], []
    for p in pts:
        k = len(normal_of)
        for d in dirs:
            # velocity of the material point along d: d . (v + omega x p) = d.v + (p x d).omega
            pxd = np.array([p[1] * d[2] - p[2] * d[1], p[2] * d[0] - p[0] * d[2], p[0] * d[1] - p[1] * d[0]])
            rows.append(np.concatenate([d, pxd]))
        normal_of += [-1] + [k] * nfric
        mus += [0.0] + [mu] * nfric
    J = np.array(rows)
    inertia = mass * side**2 / 6.0  # solid cube
    Minv = np.diag([1 / mass] * 3 + [1 / inertia] * 3)
    lcp = BoxedLCP(J @ Minv @ J.T, J @ np.asarray(v, dtype=float), np.array(normal_of), np.array(mus))
    return lcp, J, Minv


G_DT = 9.81 * 0.01  # gravity over one 10 ms step


def reduced_system(lcp: BoxedLCP, modes, signs):
    """Clamping rows C, map P (x = P x_C), reduced K and right-hand side, built by hand."""
    n = lcp.n
    clamp = [i for i in range(n) if modes[i] in (Mode.CLAMPING, Mode.TIED)]
    P = np.zeros((n, len(clamp)))
    for j, i in enumerate(clamp):
        P[i, j] = 1.0
    for i in range(n):
        if modes[i] == Mode.BOUNDED:
            P[i, clamp.index(lcp.normal_of[i])] = signs[i] * lcp.mu[i]
    return clamp, P, lcp.A[clamp] @ P, -lcp.b[clamp]


def assert_solved(lcp: BoxedLCP, sol: LCPSolution) -> None:
    assert sol.status == "solved"
    assert np.isfinite(sol.lam).all() and np.isfinite(sol.w).all()
    # w = A x + b up to the rounding of the product (|A| |x| eps: the compiled solve sums in another order)
    rounding = 1e-14 * lcp._anorm * np.abs(sol.lam).max() if lcp.n else 0.0
    np.testing.assert_allclose(sol.w, lcp.A @ sol.lam + lcp.b, rtol=0, atol=1e-12 * (1 + np.abs(sol.w).max()) + rounding)
    scale = scale_of(lcp.A, lcp.b, sol.lam)
    assert lcp_residual(lcp, sol.lam) <= TOL * scale
    assert sol.residual == pytest.approx(lcp_residual(lcp, sol.lam), abs=1e-15 * (1 + scale))
    assert conditions_hold(lcp.A, lcp.b, lcp.normal_of, lcp.mu, sol.lam, TOL)
    assert sol.modes.shape == sol.signs.shape == (lcp.n,)


# ------------------------------------------------------------------------------------------
# random physical problems
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(200))
def test_random_problems_solved_exactly(seed):
    rng = np.random.default_rng(seed)
    lcp = random_problem(rng, ncontacts=int(rng.integers(1, 7)))
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    # the reported active set reproduces the answer (it is the warm start of the next step)
    x = solve_active_set(lcp, sol.modes, sol.signs)
    np.testing.assert_allclose(x, sol.lam, rtol=0, atol=1e-12 * max(1.0, np.abs(sol.lam).max()))
    # reported modes are consistent with x and w
    fric = lcp.normal_of >= 0
    assert np.all(sol.lam[~fric & (sol.modes == Mode.SEPARATING)] == 0)
    assert np.all(sol.lam[fric & (sol.modes == Mode.SEPARATING)] == 0)
    bounded = sol.modes == Mode.BOUNDED
    np.testing.assert_allclose(
        sol.lam[bounded],
        sol.signs[bounded] * lcp.mu[bounded] * sol.lam[lcp.normal_of[bounded]],
        rtol=1e-14,
        atol=0,
    )
    assert np.all(sol.signs[~bounded] == 0)


@pytest.mark.parametrize("seed", range(40))
def test_random_problems_scaled_and_duplicated(seed):
    """Badly scaled data (A and b over 12 orders of magnitude) and a duplicated contact."""
    dup = scaled_duplicated_problem(np.random.default_rng(1000 + seed))
    assert_solved(dup, solve_lcp(dup))


def scaled_duplicated_problem(rng) -> BoxedLCP:
    """A random problem with one contact duplicated (rank-deficient) and A, b scaled by 1e-6..1e6."""
    lcp = random_problem(rng, ncontacts=int(rng.integers(1, 6)), full_rank=False)
    n = lcp.n
    k = int(rng.choice(np.flatnonzero(lcp.normal_of < 0)))
    rows = [k] + list(np.flatnonzero(lcp.normal_of == k))
    idx = np.r_[np.arange(n), rows]
    normal_of = np.r_[lcp.normal_of, [-1] + [n] * (len(rows) - 1)]
    sa, sb = 10.0 ** rng.integers(-6, 7), 10.0 ** rng.integers(-6, 7)
    return BoxedLCP(sa * lcp.A[np.ix_(idx, idx)], sb * lcp.b[idx], normal_of, lcp.mu[idx])


# ------------------------------------------------------------------------------------------
# enumerating reference
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_matches_enumerating_reference(seed):
    rng = np.random.default_rng(2000 + seed)
    nfric = int(rng.integers(0, 3))
    full_rank = seed % 2 == 0
    lcp = random_problem(
        rng,
        ncontacts=int(rng.integers(1, 4)),
        nfric=nfric,
        full_rank=full_rank,
        lone_rows=int(rng.integers(0, 2)),
    )
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    found = enumerate_solutions(lcp.A, lcp.b, lcp.normal_of, lcp.mu, TOL)
    frictionless = nfric == 0 or not np.any(lcp.mu > 0)
    if full_rank or frictionless:
        # every solution has an active set whose (min-norm) solve the reference tried
        assert found, "reference found no solution"
    ws = [w for _, _, w in found]
    xs = [x for _, x, _ in found]
    wscale = max(1.0, np.abs(lcp.b).max())
    xscale = max(1.0, np.abs(sol.lam).max())
    same_w = all(np.allclose(w, ws[0], rtol=0, atol=1e-8 * wscale) for w in ws)
    same_x = all(np.allclose(x, xs[0], rtol=0, atol=1e-8 * xscale) for x in xs)
    if found and (frictionless or same_w):
        # frictionless (monotone LCP): w is unique; otherwise the reference found a single w
        for w in ws:
            np.testing.assert_allclose(sol.w, w, rtol=0, atol=1e-8 * wscale)
    if full_rank and (frictionless or same_x):
        np.testing.assert_allclose(sol.lam, xs[0], rtol=0, atol=1e-8 * xscale)


def test_reference_check_rejects_wrong_answers():
    rng = np.random.default_rng(7)
    lcp = random_problem(rng, ncontacts=3, nfric=2, full_rank=True, mus=(0.5,), lone_rows=0)
    sol = solve_lcp(lcp)
    assert conditions_hold(lcp.A, lcp.b, lcp.normal_of, lcp.mu, sol.lam)
    for i in range(lcp.n):
        bad = sol.lam.copy()
        bad[i] += 1e-3 * (1 + abs(bad[i]))
        assert not conditions_hold(lcp.A, lcp.b, lcp.normal_of, lcp.mu, bad)
        assert lcp_residual(lcp, bad) > 1e-6


# ------------------------------------------------------------------------------------------
# warm start
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_warm_start_hits_and_gives_same_answer(seed):
    rng = np.random.default_rng(3000 + seed)
    lcp = random_problem(rng, ncontacts=int(rng.integers(1, 6)))
    cold = solve_lcp(lcp)
    warm = solve_lcp(lcp, guess=(cold.modes, cold.signs))
    assert warm.warm_start_hit and warm.iterations == 0
    assert_solved(lcp, warm)
    np.testing.assert_allclose(warm.lam, cold.lam, rtol=0, atol=1e-12 * max(1.0, np.abs(cold.lam).max()))
    np.testing.assert_array_equal(warm.modes, cold.modes)
    np.testing.assert_array_equal(warm.signs, cold.signs)


def test_warm_start_on_next_step_and_wrong_guess():
    lcp, J, _ = cube_scene([0.3, 0.0, -G_DT, 0, 0, 0])
    first = solve_lcp(lcp)
    assert_solved(lcp, first)
    # next step: slightly different velocity, same contact modes -> hit
    lcp2, _, _ = cube_scene([0.29, 0.0, -G_DT, 0, 0, 0])
    nxt = solve_lcp(lcp2, guess=(first.modes, first.signs))
    assert nxt.warm_start_hit
    assert_solved(lcp2, nxt)
    # a wrong guess (everything separating while the cube pushes down) misses, still solved
    wrong = (np.zeros(lcp.n, dtype=int), np.zeros(lcp.n, dtype=int))
    assert lcp_residual(lcp, solve_active_set(lcp, *wrong)) > 1e-3
    miss = solve_lcp(lcp, guess=wrong)
    assert not miss.warm_start_hit
    assert_solved(lcp, miss)
    np.testing.assert_allclose(miss.lam, first.lam, atol=1e-12)
    # a guess of the wrong size is ignored
    assert_solved(lcp, solve_lcp(lcp, guess=(np.ones(3, dtype=int), np.zeros(3, dtype=int))))


# ------------------------------------------------------------------------------------------
# degenerate scenes
# ------------------------------------------------------------------------------------------


def test_cube_resting_on_four_coplanar_corners():
    lcp, J, Minv = cube_scene([0, 0, -G_DT, 0, 0, 0])
    assert np.linalg.matrix_rank(lcp.A) == 6 and lcp.n == 12
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    normals = sol.lam[lcp.normal_of < 0]
    # minimal-norm stabilisation: the load is shared equally by the four corners
    np.testing.assert_allclose(normals, G_DT / 4, rtol=1e-12)
    np.testing.assert_allclose(sol.lam[lcp.normal_of >= 0], 0.0, atol=1e-15)
    assert np.all(sol.modes == Mode.CLAMPING)
    # the cube is at rest after the step
    np.testing.assert_allclose(np.array([0, 0, -G_DT, 0, 0, 0]) + Minv @ J.T @ sol.lam, 0.0, atol=1e-14)


def test_cube_sliding_on_four_coplanar_corners():
    """Sliding in +x: every x-friction row sits at its lower bound -mu x_n (sign -1), the cube
    does not rotate, and its velocity drops by mu g dt."""
    mu, vx = 0.5, 0.3
    lcp, J, Minv = cube_scene([vx, 0, -G_DT, 0, 0, 0], mu=mu)
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    tx = np.flatnonzero(lcp.normal_of >= 0)[::2]
    assert np.all(sol.modes[tx] == Mode.BOUNDED) and np.all(sol.signs[tx] == -1)
    np.testing.assert_allclose(sol.lam[tx], -mu * sol.lam[lcp.normal_of[tx]], rtol=1e-14)
    np.testing.assert_allclose(sol.lam[lcp.normal_of < 0].sum(), G_DT, rtol=1e-12)
    np.testing.assert_allclose(sol.w[tx], vx - mu * G_DT, rtol=1e-12)
    v_after = np.array([vx, 0, -G_DT, 0, 0, 0]) + Minv @ J.T @ sol.lam
    np.testing.assert_allclose(v_after, [vx - mu * G_DT, 0, 0, 0, 0, 0], atol=1e-14)
    # the friction torque loads the leading edge (+x corners) more, symmetric in y
    n = sol.lam[lcp.normal_of < 0]
    np.testing.assert_allclose(n[0], n[1], rtol=1e-12)
    np.testing.assert_allclose(n[2], n[3], rtol=1e-12)
    assert n[2] > n[0] > 0


def test_duplicate_contacts_share_equally():
    lcp, _, _ = cube_scene([0.01, 0.0, -G_DT, 0, 0, 0], dup=2, nfric=2)
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    x = sol.lam.reshape(-1, 3)
    np.testing.assert_allclose(x[4], x[0], rtol=1e-12, atol=1e-15)  # duplicate of corner 0
    np.testing.assert_allclose(x[5], x[1], rtol=1e-12, atol=1e-15)  # duplicate of corner 1
    # a point mass with the same contact twice (planar: [n, t] rows)
    J = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    lcp = BoxedLCP(J @ J.T, J @ np.array([0.05, -1.0]), np.array([-1, 0, -1, 2]), np.array([0, 0.3, 0, 0.3]))
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    np.testing.assert_allclose(sol.lam, [0.5, -0.025, 0.5, -0.025], rtol=1e-12)


def test_point_mass_sliding_and_sticking_analytic():
    """One planar contact on a point mass m: A = I/m, b = (v_n, v_t)."""
    m, mu = 2.0, 0.4
    for vt, sticking in ((0.1, True), (1.0, False), (-1.0, False)):
        lcp = BoxedLCP(np.eye(2) / m, np.array([-0.5, vt]), np.array([-1, 0]), np.array([0.0, mu]))
        sol = solve_lcp(lcp)
        assert_solved(lcp, sol)
        xn = 0.5 * m
        assert sol.lam[0] == pytest.approx(xn, rel=1e-14)
        if sticking:
            assert sol.lam[1] == pytest.approx(-m * vt, rel=1e-14)
            assert sol.modes.tolist() == [Mode.CLAMPING, Mode.CLAMPING]
        else:
            assert sol.lam[1] == pytest.approx(-np.sign(vt) * mu * xn, rel=1e-14)
            assert sol.w[1] == pytest.approx(vt - np.sign(vt) * mu * xn / m, rel=1e-14)
            assert sol.modes.tolist() == [Mode.CLAMPING, Mode.BOUNDED]
            assert sol.signs.tolist() == [0, -int(np.sign(vt))]


def test_zero_friction_equals_frictionless():
    rng = np.random.default_rng(11)
    for _ in range(10):
        lcp = random_problem(rng, ncontacts=4, nfric=2, mus=(0.0,), lone_rows=1)
        sol = solve_lcp(lcp)
        assert_solved(lcp, sol)
        fric = lcp.normal_of >= 0
        assert np.all(sol.lam[fric] == 0) and np.all(sol.modes[fric] == Mode.SEPARATING)
        keep = np.flatnonzero(~fric)
        plain = BoxedLCP(
            lcp.A[np.ix_(keep, keep)], lcp.b[keep], -np.ones(keep.size, dtype=int), np.zeros(keep.size)
        )
        ref = solve_lcp(plain)
        assert_solved(plain, ref)
        np.testing.assert_allclose(sol.w[keep], ref.w, atol=1e-10 * (1 + np.abs(ref.w).max()))


def test_all_separating_and_empty():
    lcp, _, _ = cube_scene([0.2, -0.1, 0.5, 0, 0, 0])  # moving up: every corner separates
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    assert np.all(sol.lam == 0) and np.all(sol.modes == Mode.SEPARATING) and sol.iterations == 0
    np.testing.assert_array_equal(sol.w, lcp.b)

    empty = BoxedLCP(np.zeros((0, 0)), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0))
    assert empty.n == 0
    sol = solve_lcp(empty, guess=(np.zeros(0, dtype=int), np.zeros(0, dtype=int)))
    assert sol.status == "solved" and sol.lam.shape == sol.w.shape == sol.modes.shape == (0,)
    assert lcp_residual(empty, np.zeros(0)) == 0.0
    assert solve_active_set(empty, np.zeros(0, dtype=int), np.zeros(0, dtype=int)).shape == (0,)
    assert classify(empty, np.zeros(0), np.zeros(0))[0].shape == (0,)


def test_tied_contact_is_reported_and_reproduced():
    """A point mass falling along a wall: the wall contact has x = 0 and w = 0 (TIED)."""
    lcp = BoxedLCP(np.eye(2), np.array([0.0, -1.0]), np.array([-1, -1]), np.zeros(2))
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    assert sol.lam.tolist() == [0.0, 1.0]
    assert sol.modes.tolist() == [Mode.TIED, Mode.CLAMPING]
    assert classify(lcp, sol.lam, sol.w, tol=1e-9)[0].tolist() == [Mode.TIED, Mode.CLAMPING]
    warm = solve_lcp(lcp, guess=(sol.modes, sol.signs))
    assert warm.warm_start_hit and warm.lam.tolist() == [0.0, 1.0]
    # TIED read as separating is valid too
    x = solve_active_set(lcp, np.array([Mode.SEPARATING, Mode.CLAMPING]), np.zeros(2, dtype=int))
    assert x.tolist() == [0.0, 1.0]
    # a single row with b = 0
    tie = BoxedLCP(np.eye(1), np.zeros(1), np.array([-1]), np.zeros(1))
    assert classify(tie, np.zeros(1), np.zeros(1), tol=1e-9)[0].tolist() == [Mode.TIED]
    sol = solve_lcp(tie)
    assert_solved(tie, sol)
    assert sol.lam.tolist() == [0.0]


# ------------------------------------------------------------------------------------------
# minimal norm
# ------------------------------------------------------------------------------------------


def test_minimal_norm_on_rank_deficient_clamping_set():
    """All rows clamp and the reduced system is singular: x must be pinv(K) r."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        n, m = 8, 3
        J = rng.standard_normal((n, m))
        J[:, 0] = np.abs(J[:, 0]) + 2.0
        Minv = np.diag(rng.uniform(0.5, 2.0, m))
        A = J @ Minv @ J.T
        y = J @ np.array([1.0, 0.1 * rng.standard_normal(), 0.1 * rng.standard_normal()])
        assert np.all(y > 0)
        lcp = BoxedLCP(A, -A @ y, -np.ones(n, dtype=int), np.zeros(n))
        sol = solve_lcp(lcp)
        assert_solved(lcp, sol)
        assert np.all(np.isin(sol.modes, (Mode.CLAMPING, Mode.TIED)))
        np.testing.assert_allclose(sol.lam, np.linalg.pinv(A, rcond=1e-10) @ (-lcp.b), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(sol.lam, y, rtol=1e-9)  # y lies in range(A): it is the minimum


@pytest.mark.parametrize(
    "v",
    [
        [0, 0, -G_DT, 0, 0, 0],  # resting
        [0.3, 0, -G_DT, 0, 0, 0],  # sliding in +x
        [0.3, 0.1, -0.2, 0.5, -1.0, 2.0],  # sliding and spinning
        [0.05, 0.0, -0.2, 0, 0, 0],  # sticking with a tangential push
    ],
)
def test_minimal_norm_matches_pinv_on_reduced_system(v):
    """Cube on four corners (rank 6 of 12): the answer is pinv of the reduced (possibly
    non-symmetric, with bounded friction rows) system of its active set."""
    lcp, _, _ = cube_scene(v)
    sol = solve_lcp(lcp)
    assert_solved(lcp, sol)
    clamp, P, K, r = reduced_system(lcp, sol.modes, sol.signs)
    if len(clamp) > 6:
        assert np.linalg.matrix_rank(K) < len(clamp)
    xc = np.linalg.pinv(K, rcond=1e-10) @ r
    np.testing.assert_allclose(sol.lam, P @ xc, rtol=0, atol=1e-12)
    np.testing.assert_allclose(solve_active_set(lcp, sol.modes, sol.signs), P @ xc, rtol=0, atol=1e-12)


def test_solve_active_set_well_conditioned_and_rules():
    rng = np.random.default_rng(3)
    lcp = random_problem(rng, ncontacts=3, nfric=2, full_rank=True, mus=(0.5,), lone_rows=0)
    modes = np.array([Mode.CLAMPING, Mode.BOUNDED, Mode.CLAMPING] * 3)
    signs = np.array([0, -1, 0] * 3)
    clamp, P, K, r = reduced_system(lcp, modes, signs)
    np.testing.assert_allclose(solve_active_set(lcp, modes, signs), P @ np.linalg.solve(K, r), rtol=1e-10)
    # friction rows of a separating normal, mu = 0 rows and BOUNDED with sign 0 carry nothing
    modes2 = modes.copy()
    modes2[0] = Mode.SEPARATING
    x = solve_active_set(lcp, modes2, signs)
    assert x[0] == 0 and x[1] == 0 and x[2] == 0
    with pytest.raises(ValueError, match="modes and signs"):
        solve_active_set(lcp, modes[:3], signs)


# ------------------------------------------------------------------------------------------
# residual, classification, bounds
# ------------------------------------------------------------------------------------------


def test_residual_is_zero_at_solution_and_positive_elsewhere():
    lcp = BoxedLCP(np.eye(2) / 2.0, np.array([-0.5, 1.0]), np.array([-1, 0]), np.array([0.0, 0.4]))
    x = np.array([1.0, -0.4])  # sliding: x_t = -mu x_n
    assert lcp_residual(lcp, x) == 0.0
    assert lcp_residual(lcp, np.array([1.0, -0.3])) > 0.05  # inside the box while sliding
    assert lcp_residual(lcp, np.array([1.0, -0.5])) > 0.05  # outside the box
    assert lcp_residual(lcp, np.array([-1.0, 0.0])) > 0.5  # negative normal impulse
    assert lcp_residual(lcp, np.array([0.0, 0.0])) == pytest.approx(0.5)  # penetrating
    assert lcp_residual(lcp, np.array([np.nan, 0.0])) == np.inf
    with pytest.raises(ValueError, match="shape"):
        lcp_residual(lcp, np.zeros(3))
    np.testing.assert_allclose(lcp.lower(x), [0.0, -0.4])
    np.testing.assert_allclose(lcp.upper(x), [np.inf, 0.4])


def test_classify_modes_and_signs():
    # rows: normal 0 pushing, t sliding +t (x at lower bound), normal 2 separating with its
    # t row, normal 4 tied, lone row 6 pushing
    normal_of = np.array([-1, 0, -1, 2, -1, 4, -1])
    mu = np.array([0, 0.5, 0, 0.5, 0, 0.5, 0])
    lcp = BoxedLCP(np.eye(7), np.zeros(7), normal_of, mu)
    x = np.array([2.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    w = np.array([0.0, 0.3, 0.7, -0.2, 0.0, 0.0, 0.0])
    modes, signs = classify(lcp, x, w, tol=1e-9)
    assert modes.tolist() == [
        Mode.CLAMPING,
        Mode.BOUNDED,
        Mode.SEPARATING,
        Mode.SEPARATING,
        Mode.TIED,
        Mode.CLAMPING,
        Mode.CLAMPING,
    ]
    assert signs.tolist() == [0, -1, 0, 0, 0, 0, 0]
    x2 = x.copy()
    x2[1], w2 = 1.0, w.copy()
    w2[1] = -0.3
    modes, signs = classify(lcp, x2, w2, tol=1e-9)
    assert modes[1] == Mode.BOUNDED and signs[1] == 1


# ------------------------------------------------------------------------------------------
# robustness, scaling, validation
# ------------------------------------------------------------------------------------------


def test_infeasible_problem_returns_inexact_finite():
    # two opposing contacts on a 1-dof body that both want to push in: no solution
    A = np.array([[1.0, -1.0], [-1.0, 1.0]])
    lcp = BoxedLCP(A, np.array([-1.0, -1.0]), np.array([-1, -1]), np.zeros(2))
    sol = solve_lcp(lcp)
    assert sol.status == "inexact"
    assert np.isfinite(sol.lam).all() and np.isfinite(sol.w).all() and np.isfinite(sol.residual)
    assert sol.residual > 0.1


@pytest.mark.parametrize("seed", range(5))
def test_positive_homogeneity(seed):
    rng = np.random.default_rng(4000 + seed)
    lcp = random_problem(rng, ncontacts=3, nfric=2, full_rank=True, mus=(0.3,))
    base = solve_lcp(lcp)
    for sa, sb in ((1e-8, 1.0), (1e6, 1e-5), (1.0, 1e9)):
        scaled = BoxedLCP(sa * lcp.A, sb * lcp.b, lcp.normal_of, lcp.mu)
        sol = solve_lcp(scaled)
        assert_solved(scaled, sol)
        np.testing.assert_allclose(sol.lam * sa / sb, base.lam, rtol=1e-8, atol=1e-9 * np.abs(base.lam).max())


def test_validation_errors():
    A, b = np.eye(3), np.zeros(3)
    no, mu = np.array([-1, 0, 0]), np.array([0, 0.5, 0.5])
    BoxedLCP(A, b, no, mu)
    BoxedLCP(A.tolist(), b.tolist(), [-1.0, 0.0, 0.0], mu.tolist())  # lists and integral floats
    cases = [
        ((np.ones((3, 2)), b, no, mu), "square"),
        ((A, np.zeros(2), no, mu), "b must have shape"),
        ((A, b, no[:2], mu), "normal_of must have shape"),
        ((A, b, no, mu[:2]), "mu must have shape"),
        ((np.full((3, 3), np.nan), b, no, mu), "A contains non-finite"),
        ((A, np.array([0, np.inf, 0]), no, mu), "b contains non-finite"),
        ((A, b, no, np.array([0, np.nan, 0])), "mu contains non-finite"),
        ((A, b, np.array([-1, 5, 0]), mu), "row index"),
        ((A, b, np.array([-1, 0, 1]), mu), "point at a normal row"),
        ((A, b, np.array([-1, 0.5, 0]), mu), "integer"),
        ((A, b, no, np.array([0, -0.5, 0.5])), ">= 0"),
        ((A, b, no, np.array([0.1, 0.5, 0.5])), "unilateral"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            BoxedLCP(*args)
