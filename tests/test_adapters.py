"""Every contact adapter (contact.adapter): its residual vanishes at its solution, and the implicit
impulse Jacobian from its linearized residual matches central differences of the re-solved
problem (jaxopt-style) and the slow references in tests/."""

from __future__ import annotations

import numpy as np
import pytest

from contact import LCPAdapter, NCPAdapter, RelaxedAdapter, RowLayout, adapter, lambda_jacobian
from contact.lcp import Mode
from contact.ncp import NCPMode

from .reference_lcp import conditions_hold, enumerate_solutions, solve_assignment

ADAPTERS = {
    "lcp": LCPAdapter(),
    "ncp": NCPAdapter(),
    "relaxed-cone": RelaxedAdapter(1e-2, 0.05, cone=True),
    "relaxed-pyramid": RelaxedAdapter(1e-2, 0.05, cone=False),
}


def physical(rng, nc, r, nlim=0, mu=0.5, ndof=None):
    """``(A, b, layout, phi)``: A = J M^-1 J^T (rank-deficient when ndof < m), b = J v plus a
    non-negative gap velocity on some normal rows, phi small gaps of the normal rows."""
    layout = RowLayout(nc, r, nlim, mu)
    m = layout.m
    ndof = ndof or int(rng.integers(2, m + 3))
    J = rng.standard_normal((m, ndof))
    L = rng.standard_normal((ndof, ndof))
    A = J @ (L @ L.T + 0.1 * np.eye(ndof)) @ J.T
    b = J @ rng.standard_normal(ndof)
    rows = layout.normal_rows
    b[rows] += np.abs(rng.standard_normal(len(rows))) * rng.integers(0, 2, len(rows))
    phi = rng.uniform(0.0, 0.03, len(rows))
    return A, b, layout, phi


def cases(seed, count, *, full_rank=False):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        nc, r = int(rng.integers(1, 4)), int(rng.choice([2, 3]))
        nlim = int(rng.integers(0, 2))
        m = nc * r + nlim
        yield physical(rng, nc, r, nlim, float(rng.choice([0.3, 1.0])), ndof=m + 2 if full_rank else None)


def resolve(model, A, b, layout, phi):
    return model.solve(model.problem(A, b, layout, phi)).lam


def resolved_differences(impulses, b, h):
    """Central differences (m, m) of ``impulses(b)`` (the re-solved problem) in each entry of ``b``."""
    out = np.empty((len(b), len(b)))
    for k in range(len(b)):
        e = np.zeros(len(b))
        e[k] = h
        out[:, k] = (impulses(b + e) - impulses(b - e)) / (2 * h)
    return out


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_residual_vanishes_at_the_solution_and_only_there(name):
    model = ADAPTERS[name]
    rng = np.random.default_rng(5)
    for A, b, layout, phi in cases(3, 60):
        p = model.problem(A, b, layout, phi)
        lam = model.solve(p).lam
        scale = 1.0 + np.abs(b).max() + np.abs(lam).max()
        assert np.abs(model.residual(p, lam)).max() <= 1e-9 * scale
        wrong = lam + 1e-3 * scale * rng.standard_normal(len(lam))
        if name.startswith("relaxed"):  # its residual is defined inside the cone only
            wrong = lam * (1.0 + 1e-2 * rng.uniform(0.5, 1.0, len(lam)))
            wrong[layout.normal_rows] = lam[layout.normal_rows] * 1.5
        assert np.abs(model.residual(p, wrong)).max() > 1e-7 * scale


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_lambda_jacobian_matches_central_differences_of_the_resolved_problem(name):
    """dlambda/db from the linearized residual against re-solving at b +- h e_k, away from mode
    switches (where two step sizes disagree the case is skipped and counted)."""
    model = ADAPTERS[name]
    checked = skipped = 0
    for A, b, layout, phi in cases(11, 40, full_rank=True):
        p = model.problem(A, b, layout, phi)
        sol = model.solve(p)
        D = lambda_jacobian(model.linearize(p, sol), np.eye(len(b)), np.zeros((len(b), len(b))))

        def impulses(bb):
            return resolve(model, A, bb, layout, phi)

        a, c = resolved_differences(impulses, b, 1e-6), resolved_differences(impulses, b, 1e-7)
        if np.abs(a - c).max() > 1e-5 * (1 + np.abs(a).max()):
            skipped += 1
            continue
        assert np.abs(D - a).max() <= 1e-5 * (1 + np.abs(a).max())
        checked += np.abs(a).max() > 0  # the impulses do move with b
    assert checked >= 15 and skipped <= 12, (checked, skipped)


@pytest.mark.parametrize("cone", [True, False])
def test_relaxed_distance_jacobian_matches_central_differences(cone):
    """The relaxed residual depends on the distances (its fade w(phi)): dlambda/dphi too."""
    model = RelaxedAdapter(1e-2, 0.05, cone=cone)
    for A, b, layout, phi in cases(17, 20, full_rank=True):
        p = model.problem(A, b, layout, phi)
        rows = layout.normal_rows
        dphi = np.zeros((layout.m, len(rows)))
        dphi[rows, np.arange(len(rows))] = 1.0
        D = lambda_jacobian(model.linearize(p, model.solve(p)), np.zeros_like(dphi), dphi)
        h = 1e-7
        fd = np.empty_like(D)
        for j in range(len(rows)):
            e = np.zeros(len(rows))
            e[j] = h
            fd[:, j] = (resolve(model, A, b, layout, phi + e) - resolve(model, A, b, layout, phi - e)) / (2 * h)
        assert np.abs(D - fd).max() <= 1e-5 * (1 + np.abs(fd).max())


def test_relaxed_linearization_is_the_derivative_of_its_residual():
    """E and F_c of the relaxed adapter are central differences of its residual in lambda and in b."""
    model = ADAPTERS["relaxed-cone"]
    for A, b, layout, phi in cases(23, 10, full_rank=True):
        p = model.problem(A, b, layout, phi)
        sol = model.solve(p)
        lin = model.linearize(p, sol)
        keep = lin.unknowns
        h = 1e-7
        dR_dlam = np.empty((len(keep), len(keep)))
        dR_db = np.empty((len(keep), len(b)))
        for j, i in enumerate(keep):
            e = np.zeros(len(b))
            e[i] = h
            dR_dlam[:, j] = (model.residual(p, sol.lam + e) - model.residual(p, sol.lam - e))[keep] / (2 * h)
        for i in range(len(b)):
            e = np.zeros(len(b))
            e[i] = h
            plus, minus = model.problem(A, b + e, layout, phi), model.problem(A, b - e, layout, phi)
            dR_db[:, i] = (model.residual(plus, sol.lam) - model.residual(minus, sol.lam))[keep] / (2 * h)
        scale = 1 + np.abs(lin.E).max()
        assert np.abs(dR_dlam - lin.E).max() <= 1e-5 * scale
        assert np.abs(dR_db - lin.Fc).max() <= 1e-6


def test_lcp_jacobian_equals_the_enumerating_reference_on_its_active_set():
    """Where the reference finds one solution, strictly complementary, its active-set solve is linear in
    b: its derivative is the LCP adapter's implicit Jacobian."""
    model = ADAPTERS["lcp"]
    checked = 0
    for A, b, layout, phi in cases(29, 40, full_rank=True):
        lcp = model.problem(A, b, layout, phi)
        found = enumerate_solutions(lcp.A, lcp.b, lcp.normal_of, lcp.mu)
        if len(found) != 1:
            continue
        assign, x, w = found[0]
        sol = model.solve(lcp)
        assert conditions_hold(lcp.A, lcp.b, lcp.normal_of, lcp.mu, sol.lam)
        assert np.abs(model.residual(lcp, x)).max() <= 1e-9 * (1 + np.abs(b).max())  # the reference's answer
        if (sol.modes == Mode.TIED).any():
            continue
        ref = np.empty((len(b), len(b)))
        for k in range(len(b)):
            e = np.zeros(len(b))
            e[k] = 1.0
            ref[:, k] = (solve_assignment(lcp.A, lcp.b + e, lcp.normal_of, lcp.mu, assign)
                         - solve_assignment(lcp.A, lcp.b - e, lcp.normal_of, lcp.mu, assign)) / 2.0
        D = lambda_jacobian(model.linearize(lcp, sol), np.eye(len(b)))
        np.testing.assert_allclose(D, ref, rtol=0, atol=1e-8 * (1 + np.abs(ref).max()))
        checked += 1
    assert checked >= 10, checked


def test_lcp_and_ncp_jacobians_agree_without_friction():
    """Two independent paths: without friction the pyramid and the cone are the same problem."""
    lcp, ncp = adapter("lcp"), adapter("ncp")
    for A, b, layout, phi in cases(31, 20):
        layout = RowLayout(layout.nc, layout.r, layout.nlim, 0.0)
        p, q = lcp.problem(A, b, layout, phi), ncp.problem(A, b, layout, phi)
        s, t = lcp.solve(p), ncp.solve(q)
        np.testing.assert_allclose(s.lam, t.lam, atol=1e-8 * (1 + np.abs(s.lam).max()))
        if (s.modes == Mode.TIED).any():
            continue  # both sides valid, each model may pick another
        Dl = lambda_jacobian(lcp.linearize(p, s), np.eye(len(b)))
        Dn = lambda_jacobian(ncp.linearize(q, t), np.eye(len(b)))
        # the impulses agree; the velocities they give agree (rank-deficient A: impulses up to null(A))
        np.testing.assert_allclose(A @ Dl, A @ Dn, atol=1e-7 * (1 + np.abs(A @ Dl).max()))


def test_contact_modes_and_the_adapter_factory():
    A, b, layout, phi = physical(np.random.default_rng(2), 2, 3, 1)
    for name, model in ADAPTERS.items():
        modes = model.contact_modes(model.solve(model.problem(A, b, layout, phi)), layout)
        assert modes.shape == (2,)
        if name == "ncp":
            assert set(modes.tolist()) <= {int(m) for m in NCPMode}
    assert isinstance(adapter("ncp", smoothing=1e-3), RelaxedAdapter) and adapter("ncp", smoothing=1e-3).cone
    assert not adapter("lcp", smoothing=1e-3).cone
    with pytest.raises(ValueError, match="available"):
        adapter("penalty-ish")
    with pytest.raises(ValueError, match="smoothing > 0"):
        adapter("relaxed")
