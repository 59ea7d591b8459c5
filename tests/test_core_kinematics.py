"""The compiled contact kinematics and implicit-derivative kernels (cpp/src/kinematics.cpp) equal the
Python reference (the numba kernels of contact._kernels and contact.adapter, numpy's lstsq) on the
contacts of rollouts of every registered problem with contact, under each contact model (LCP, NCP,
relaxed), and on scenes for the special cases (capsules, cylinders, a box flat on the ground).

The kinematics agree to 1e-12 (in practice bit for bit: the same operations in the same order). The
implicit solve agrees to 1e-12 where the reduced system is well conditioned; the least-squares branch
uses a column-pivoted QR (where it certifies full rank under the cutoff) or Eigen's SVD where numpy calls
LAPACK's gelsd (same cutoff ``s > RANK_RTOL s_max``), and two backward-stable solvers differ by up to
``cond(E) eps`` on an ill-conditioned system (talos-standing's NCP: cond ~2e8 on its kept singular values,
differences up to 7e-8), so the bound is ``max(1e-12, 100 eps cond)``.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np
import pinocchio as pin
import pytest

import problems
from contact import core
from contact.adapter import RANK_RTOL
from contact.kinematics import ContactKinematics, support_masks
from dynamics import Simulator
from dynamics.simulator import SimulationError

from .test_contact import cube_sim, cube_state
from .test_rods import rod_model, rod_state

pytestmark = pytest.mark.skipif(core.module is None, reason=f"the compiled core is not available: {core.reason}")

adapter_module = sys.modules["contact.adapter"]  # contact.adapter the name is the adapter() factory
EPS = np.finfo(float).eps
WITH_CONTACT = ("catapult", "cube-throw", "go1-hold", "go1-jump", "go1-standing", "half-cheetah", "jump-worm",
                "talos-standing", "ur5-box", "ur5-reach")


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max())) if b.size else 0.0


@contextlib.contextmanager
def _reference_adapter():
    """contact.adapter's functions on the numba reference for the duration."""
    saved = adapter_module._core
    adapter_module._core = None
    try:
        yield
    finally:
        adapter_module._core = saved


def _cond_kept(E) -> float:
    """The condition number of ``E`` on the singular values the solve keeps."""
    s = np.linalg.svd(E, compute_uv=False)
    if s.size == 0 or s[0] == 0:
        return 1.0
    return float(s[0] / s[s > RANK_RTOL * s[0]][-1])


class Comparison:
    """The largest differences compiled vs reference over many contact states, and what they covered."""

    def __init__(self):
        self.err = {}
        self.features = set()
        self.states = 0

    def add(self, key, a, b, tol=1e-12):
        e = _rel(a, b)
        self.err[key] = max(self.err.get(key, 0.0), e)
        assert e <= tol, f"{key}: compiled and reference differ by {e:.3g} (> {tol:.3g})"

    def state(self, sim: Simulator, st, q, v_next, rng):
        """Compare every function on one step's ContactState ``st`` (the step at ``q`` just taken)."""
        cm, nv = sim.contact_model, sim.nv
        self.states += 1
        ref = ContactKinematics(sim.model, planar=cm.kin.planar, compiled=False)
        assert cm.kin.core is not None and ref.core is None
        if cm.kin.planar:
            self.features.add("planar")
        if sim.model.joints[1].shortname() == "JointModelFreeFlyer":
            self.features.add("free-flyer")
        if st.layout.nlim:
            self.features.add("limit rows")
        if st.geo is not None:
            c = st.geo.contacts
            self.features.update(f for f, on in (("radius", np.any(c.radius != 0)), ("axis", np.any(c.axis != 0)),
                                                  ("moving normal", np.any(c.normal_body != 0))) if on)
            data = sim._data.pin  # data.J is the step's, at q (computeJointJacobians in the contact solve)
            g1, g0 = cm.kin.geometry(data, c), ref.geometry(data, c)
            for f in ("J", "D", "dD", "dp", "J6A", "J6B"):
                self.add(f, getattr(g1, f), getattr(g0, f))
            lam = st.lam[:st.m_contact]
            for lam_ in (lam, rng.standard_normal(lam.shape)):
                self.add("force_derivative", cm.kin.force_derivative(g0, lam_), ref.force_derivative(g0, lam_))
            for v in (v_next, rng.standard_normal(nv)):
                self.add("velocity_derivative", cm.kin.velocity_derivative(g0, v), ref.velocity_derivative(g0, v))
        # the implicit chain, with a random dv_fixed = dv+/dtheta at fixed impulses (q, v, u columns)
        dv_fixed = rng.standard_normal((nv, 2 * nv + sim.nu))
        dJv = cm.kin.velocity_derivative(st.geo, v_next) if st.m_contact else np.zeros((0, nv))
        slope = st.bias_slope / sim.dt
        self.add("fixed_impulse_velocity_derivative",
                 adapter_module.fixed_impulse_velocity_derivative(st.J, dv_fixed, st.normal_rows, slope, dJv),
                 adapter_module._reference_fixed_impulse_velocity_derivative(st.J, dv_fixed, st.normal_rows, slope,
                                                                              dJv))
        lin, dc, dphi = cm._linearized(st, dv_fixed, v_next, sim.dt)
        tol = 1e-12
        if lin.E.shape[0]:
            cond = _cond_kept(lin.E)
            tol = max(1e-12, 100 * EPS * cond)
            if not lin.regular:
                s = np.linalg.svd(lin.E, compute_uv=False)
                if lin.E.shape[0] != lin.E.shape[1] or s[-1] <= RANK_RTOL * s[0]:
                    self.features.add("rank-deficient")
        a = cm.velocity_jacobian(st, dv_fixed, v_next, sim.dt)
        la = adapter_module.lambda_jacobian(lin, dc, dphi)
        with _reference_adapter():
            b = cm.velocity_jacobian(st, dv_fixed, v_next, sim.dt)
            lb = adapter_module.lambda_jacobian(lin, dc, dphi)
        self.add("velocity_jacobian", a, b, tol)
        self.add("lambda_jacobian", la, lb, tol)
        if st.correction is not None:  # deep rows: the position correction
            self.features.add("position correction")
            c = st.correction
            phi_deep = _distances(sim, st, q)[np.searchsorted(st.normal_rows, c.rows)]
            if c.held:  # limit rows held on their limits: target 0, passed as phi = -slop
                phi_deep[-c.held:] = -cm.slop
                self.features.add("held limit")
            c0 = cm._reference_correction(st.J, st.MJt, c.rows, phi_deep)
            for f in ("dq", "lam", "W", "A"):
                self.add(f"correction.{f}", getattr(c, f), getattr(c0, f))
            j1 = cm.correction_jacobian(st, q)
            saved, cm.kin.core = cm.kin.core, None
            try:
                j0 = cm.correction_jacobian(st, q)
            finally:
                cm.kin.core = saved
            self.add("correction_jacobian", j1, j0, max(1e-12, 100 * EPS * _cond_kept(c.A)))


def _variants(sim: Simulator):
    """The problem's own simulator, the other hard model, and relaxed contact."""
    yield sim.contact, sim
    for contact in ("lcp", "ncp"):
        if sim.contact != contact:
            yield contact, Simulator(sim.model, geometry=sim.geometry, **dict(sim._options, contact=contact,
                                                                               smoothing=0.0))
    yield "relaxed", sim.with_smoothing(sim.smoothing_scale * 1e-3)


def _rollout(cmp: Comparison, sim: Simulator, x, us, rng, steps):
    """Step ``sim`` from ``x`` under the controls ``us`` (cycled), comparing at every step with contact."""
    for t in range(steps):
        q = x[:sim.nq]
        try:
            xn = sim.step(x, us[t % len(us)])
        except SimulationError:  # random controls may drive a rollout into a failure: stop there
            break
        st = sim._data.contact
        if st is not None:
            cmp.state(sim, st, q, xn[sim.nq:], rng)
        x = xn


def _distances(sim, st, q):
    """phi (nc + nlim,) of the step's normal rows (contacts, then limit rows), as the step computed them."""
    cm = sim.contact_model
    nc = 0 if st.geo is None else len(st.geo.contacts)
    phi = np.empty(len(st.normal_rows))
    if nc:
        phi[:nc] = st.geo.contacts.phi
    limits = [(iq, s, ref) for iq, _, s, ref in cm.limits if s * (q[iq] - ref) < cm.margin]
    for k, (iq, s, ref) in enumerate(limits):
        phi[nc + k] = s * (q[iq] - ref)
    return phi


#: steps per rollout (the thrown cube lands after ~200 steps)
STEPS = {"cube-throw": 250}


@functools.lru_cache(maxsize=None)
def _problem(name: str) -> dict:
    """Comparisons on rollouts of problem ``name`` under each contact model (random controls around its own)."""
    steps = STEPS.get(name, 40)
    ocp = problems.load(name)
    sim = ocp.dynamics
    lo = np.where(np.isfinite(sim.u_lower), sim.u_lower, -10.0)
    hi = np.where(np.isfinite(sim.u_upper), sim.u_upper, 10.0)
    bench = ocp.info.get("bench_state")
    if bench is not None and np.size(bench[1]) == sim.nu:
        x0, u0 = bench[0], np.broadcast_to(bench[1], (steps, sim.nu))
    else:
        x0, u0 = (bench[0] if bench is not None else ocp.x0), ocp.us_init
    out = {}
    for contact, s in _variants(sim):
        rng = np.random.default_rng(0)
        us = np.clip(u0[:steps] + 0.1 * rng.standard_normal((min(steps, len(u0)), sim.nu)) * (hi - lo), lo, hi)
        cmp = Comparison()
        _rollout(cmp, s, x0.copy(), us, rng, steps)
        out[contact] = cmp
    return out


@pytest.mark.parametrize("name", WITH_CONTACT)
def test_compiled_equals_reference_on_rollouts(name):
    results = _problem(name)
    assert sum(c.states for c in results.values()) > 0, f"{name}: no step with contact"
    for contact, c in results.items():
        if c.states:
            assert "velocity_jacobian" in c.err, contact


def test_the_problems_cover_the_special_cases():
    features = set()
    for name in WITH_CONTACT:
        for c in _problem(name).values():
            features |= c.features
    assert {"planar", "free-flyer", "limit rows", "radius", "moving normal", "rank-deficient",
            "position correction"} <= features, features


def _scene_comparison(sim, x, steps=30, u=None):
    cmp = Comparison()
    us = np.zeros((1, sim.nu)) if u is None else u
    for contact, s in [("lcp", sim), ("ncp", Simulator(sim.model, geometry=sim.geometry,
                                                       **dict(sim._options, contact="ncp"))),
                       ("relaxed", sim.with_smoothing(1e-3))]:
        _rollout(cmp, s, x.copy(), us, np.random.default_rng(1), steps)
    return cmp


@pytest.mark.parametrize("shape", ["capsule", "cylinder"])
def test_rods_tilted_and_rolled(shape):
    """Capsule ends (a radius along the normal) and cylinder rims (a radius and an axis)."""
    model, geometry = rod_model(shape)
    sim = Simulator(model, geometry=geometry, dt=1e-3, ground=0.0, friction=0.5, contact="lcp")
    cmp = _scene_comparison(sim, rod_state(model, rot=(0.3, 0.005, 0.1), v=(0.1, 0.0, -0.05)))
    assert cmp.states > 0 and "radius" in cmp.features
    if shape == "cylinder":
        assert "axis" in cmp.features


def test_box_flat_on_the_ground_is_rank_deficient():
    """Four clamping corners of rank 3: the least-squares branch, compiled and reference alike."""
    sim = cube_sim(contact="lcp")
    cmp = _scene_comparison(sim, cube_state(z=0.1 - 5e-5), steps=10)
    assert "rank-deficient" in cmp.features
    assert cmp.err["velocity_jacobian"] <= 1e-12  # well conditioned on its range: no cond(E) allowance needed


@pytest.mark.parametrize("rot", [(0.0, 0.0, 0.0), (0.02, 0.0, 0.0)], ids=["flat: 4 deep rows of rank 3", "tilted: 2"])
def test_deep_box_position_correction(rot):
    sim = cube_sim(contact="lcp")
    x = cube_state(z=0.1 - 0.03, rot=rot)
    cmp = _scene_comparison(sim, x, steps=5)
    sim.step(x, np.zeros(0))
    assert len(sim._data.contact.correction.rows) == (4 if rot[0] == 0 else 2)
    assert "position correction" in cmp.features and cmp.err["correction_jacobian"] <= 1e-12


def test_support_masks_and_lstsq():
    model = pin.buildSampleModelHumanoidRandom()
    mask, support = core.module.support_masks(model)
    m0, s0 = support_masks(model)
    assert np.array_equal(mask, m0) and np.array_equal(support, s0)
    rng = np.random.default_rng(2)
    A = rng.standard_normal((6, 4)) @ rng.standard_normal((4, 5))  # rank 4
    for B in (rng.standard_normal(6), rng.standard_normal((6, 3))):
        assert _rel(core.module.lstsq(A, B, RANK_RTOL), np.linalg.lstsq(A, B, rcond=RANK_RTOL)[0]) < 1e-12
    # a Fortran-ordered input is converted, not misread
    ref = np.linalg.lstsq(A, B, rcond=RANK_RTOL)[0]
    assert _rel(core.module.lstsq(np.asfortranarray(A), B, RANK_RTOL), ref) < 1e-12


def _symmetric_lstsq(E, B):
    """The compiled least squares of a symmetric positive semidefinite E (sym_factor's), through
    lambda_jacobian with Fc = I and every row unknown: dz = lstsq(E, -(I dc)), dc = -B."""
    k = E.shape[0]
    return core.module.lambda_jacobian(E, np.eye(k), None, -B, None, False, None, np.arange(k), True)


def test_symmetric_least_squares_is_lstsqs_minimum_norm():
    """The clamping block's least squares (Cholesky; pivoted Cholesky where rank-deficient; the eigendecomposition
    near the cutoff) gives numpy's lstsq: its rank decision (singular values <= RANK_RTOL s_max dropped) and the
    minimum-norm solution, on full-rank, rank-deficient (a flat foot's 4 corners: 12 rows of rank 6, twice) and
    near-cutoff blocks."""
    rng = np.random.default_rng(5)

    def corners(n_feet):  # rows of 4 coplanar corners of rigid feet: J = P_foot J_foot, rank 6 per foot
        rows = []
        for _ in range(n_feet):
            Jf = rng.standard_normal((6, 14))
            for c in ((0.1, 0.05), (0.1, -0.05), (-0.1, 0.05), (-0.1, -0.05)):
                p = np.array([c[0], c[1], 0.0])
                px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
                rows.append(np.hstack([np.eye(3), -px]) @ Jf)
        return np.vstack(rows)

    def psd(eigs):
        Q = np.linalg.qr(rng.standard_normal((len(eigs), len(eigs))))[0]
        return Q @ np.diag(eigs) @ Q.T

    Minv = np.linalg.inv(psd(rng.uniform(0.5, 3.0, 14)))
    cases = {"flat foot": corners(1), "two flat feet": corners(2), "full rank": rng.standard_normal((9, 14))}
    cases = {k: J @ Minv @ J.T for k, J in cases.items()}
    # eigenvalues just above / below the cutoff and far below it (round-off-sized): numpy's decision each time
    for name, small in (("kept near the cutoff", 3e-10), ("dropped near the cutoff", 5e-11), ("round-off", 1e-17)):
        cases[name] = psd(np.array([2.0, 1.0, 0.3, small, small * 0.5, 0.0]))
    for name, E in cases.items():
        E = 0.5 * (E + E.T)
        for B in (rng.standard_normal((E.shape[0], 7)), E @ rng.standard_normal((E.shape[0], 3))):
            ref = np.linalg.lstsq(E, B, rcond=RANK_RTOL)[0]
            got = _symmetric_lstsq(E, B)
            s = np.linalg.svd(E, compute_uv=False)
            kept = s[s > RANK_RTOL * s[0]]
            allowance = 1e-13 * kept[0] / kept[-1]  # the least squares' round-off: cond eps
            assert _rel(got, ref) <= max(1e-12, allowance), (name, _rel(got, ref))
            # the minimum-norm solution: nothing along E's (numerical) null space (its computed basis is
            # accurate to eps / gap: cond eps of the solution's size)
            lam, V = np.linalg.eigh(E)
            null = V[:, np.abs(lam) <= RANK_RTOL * s[0]]
            tol = max(1e-12, 1e-13 * kept[0] / kept[-1]) * max(1.0, np.abs(got).max())
            assert np.abs(null.T @ got).max(initial=0.0) <= tol, name


def test_bad_input_is_named():
    sim = cube_sim()
    sim.step(cube_state(z=0.1 - 5e-5), np.zeros(0))
    st, kin = sim._data.contact, sim.contact_model.kin
    g, c, m = st.geo, st.geo.contacts, core.module
    with pytest.raises(TypeError, match="expected a pinocchio.Data, got .*Model"):
        m.contact_geometry(sim.model, kin.support, c.body_a, c.body_b, c.normal_body, c.point_body, c.points,
                           c.normals, c.radius, c.axis, False)
    with pytest.raises(ValueError, match=r"contact_geometry: normals has shape \(3, 3\), expected \(4, 3\)"):
        m.contact_geometry(sim._data.pin, kin.support, c.body_a, c.body_b, c.normal_body, c.point_body, c.points,
                           c.normals[:3], c.radius, c.axis, False)
    with pytest.raises(ValueError, match=r"body_a\[0\] = 7 is not a joint index"):
        m.contact_geometry(sim._data.pin, kin.support, c.body_a + 6, c.body_b, c.normal_body, c.point_body,
                           c.points, c.normals, c.radius, c.axis, False)
    with pytest.raises(ValueError, match="force_derivative: lam has 11 entries, expected nc\\*r = 12"):
        m.force_derivative(g.J6A, g.J6B, g.D, g.dD, g.dp, c.points, st.lam[:11], kin.mask)
    with pytest.raises(ValueError, match=r"velocity_derivative: J6A has shape \(4, 5, 6\), expected \(\*, 6, \*\)"):
        m.velocity_derivative(g.J6A[:, :5], g.J6B, g.D, g.dD, g.dp, c.points, np.zeros(6), kin.mask)
    lin = st.adapter.linearize(st.problem, st.solution)
    G = np.zeros((6, 12))
    with pytest.raises(ValueError, match="implicit_velocity: MJt has shape"):
        m.implicit_velocity(lin.E, lin.Fc, None, np.zeros((12, 12)), None, False, lin.P, lin.unknowns, st.MJt.T, G)
    with pytest.raises(ValueError, match="fixed_impulse_velocity_derivative: rows\\[0\\] = 99 is not a row"):
        m.fixed_impulse_velocity_derivative(st.J, G, np.array([99]), np.ones(1), np.zeros((0, 6)))
