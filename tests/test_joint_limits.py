"""Joint limits are never crossed: the outer active-set check and the held rows of the correction.

A limit's row used to enter the contact problem only within the 5 mm margin of its limit, so a fast
joint, or one pushed by the impulses of other rows through ``M^-1``'s coupling, went through limits
whose rows were not in the problem (the catapult's arm: 9.5 cm past its limit in one step); and the
position correction of a deep contact moved a joint resting on its limit 1 cm past it."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from trajopt import max_relative_error, step_jacobians_fd

from .test_contact import limited_pendulum


def _fd_check(sim, x, u, tol=1e-6):
    _, Fx, Fu = sim.step_derivatives(x, u)
    ref = step_jacobians_fd(sim, x, u, method="central")
    err = max(max_relative_error(Fx, ref.Fx), max_relative_error(Fu, ref.Fu))
    assert err < tol, err


@pytest.mark.parametrize("speed", [20.0, -35.0, 400.0])
def test_a_fast_joint_lands_on_its_limit_instead_of_crossing_it(speed):
    """From 1 cm inside the +-0.5 rad limits (twice the 5 mm margin), a speed that would carry the
    pendulum past a limit in one step stops it exactly on the limit: v+ = (limit - q) / dt."""
    sim = limited_pendulum()
    q0, limit = 0.49 * np.sign(speed), 0.5 * np.sign(speed)
    assert abs(speed) * sim.dt > abs(limit - q0) + 0.005  # crosses the limit and its margin
    x = np.array([q0, speed])
    xn = sim.step(x, np.zeros(1))
    assert xn[0] == pytest.approx(limit, abs=1e-12)
    assert xn[1] == pytest.approx((limit - q0) / sim.dt, rel=1e-9)
    assert sim.contacts.limit_impulses.size == 1 and sim.contacts.limit_impulses[0] > 0
    xs = sim.rollout(x, np.zeros((300, 1)))
    assert np.abs(xs[:, 0]).max() <= 0.5 + 1e-12
    _fd_check(sim, x, np.zeros(1))


def test_a_slow_joint_far_from_its_limits_has_no_limit_rows():
    sim = limited_pendulum()
    x = np.array([0.2, 1.0])  # 1 mm per step, 0.3 rad from the limit
    xn = sim.step(x, np.zeros(1))
    assert xn[0] == pytest.approx(0.2 + sim.dt * xn[1], abs=1e-15)
    assert sim.contacts is None or sim.contacts.limit_impulses.size == 0


def _throw(T=300):
    """The catapult throw of tests/test_gn.py: its arm strikes the box and folds onto its limits."""
    knots = np.array([[-167, -351, -401], [156, 253, 1], [96, 34, 42], [-457, -137, 33], [-235, -143, -245],
                      [-100, 256, -119]], dtype=float)
    at = np.array([0, 71, 143, 214, 285, 357])
    return np.stack([np.interp(np.arange(T), at, knots[:, j]) for j in range(3)], axis=1)


@pytest.fixture(scope="module")
def catapult_throw():
    ocp = problems.load("catapult", horizon=300)
    us = _throw()
    return ocp.dynamics, ocp.rollout(us), us


def test_the_catapult_arm_stays_within_its_limits(catapult_throw):
    """Before: 9.5 cm past a limit (coupled impulses), then 1 cm (the correction of a deep contact)."""
    sim, xs, _ = catapult_throw
    lo, hi = sim.model.lowerPositionLimit[2:5], sim.model.upperPositionLimit[2:5]
    past = np.maximum(lo - xs[:, 2:5], xs[:, 2:5] - hi).max()
    assert past <= 1e-12, past


def _steps_where(sim, xs, us, what):
    found = []
    for t in range(len(us)):
        sim.step(xs[t], us[t])
        st = sim._data.contact
        if st is not None and what(sim, st, xs[t]):
            found.append(t)
    return found


def test_jacobians_where_a_crossed_limit_joins_the_problem(catapult_throw):
    sim, xs, us = catapult_throw
    cm = sim.contact_model

    def crossed(sim, st, x):  # a limit row in the problem that the margin alone would not have put there
        near = cm._near_limits(x[:sim.nq])
        return st.layout.nlim > len(near)
    steps = _steps_where(sim, xs, us, crossed)
    assert steps, "the throw no longer crosses a limit: pick another trajectory"
    for t in steps[:3]:
        _fd_check(sim, xs[t], us[t], tol=1e-5)


def test_jacobians_where_the_correction_holds_a_limit(catapult_throw):
    sim, xs, us = catapult_throw
    steps = _steps_where(sim, xs, us, lambda sim, st, x: st.correction is not None and st.correction.held > 0)
    assert steps, "no held limit on the throw: pick another trajectory"
    for t in steps[:3]:
        sim.step(xs[t], us[t])
        st = sim._data.contact
        c = st.correction
        assert np.abs(st.J[c.rows[-c.held:]] @ c.dq).max() < 1e-12  # a held joint is not moved
        _fd_check(sim, xs[t], us[t], tol=1e-5)


def test_the_compiled_step_agrees_with_the_reference_on_the_throw(catapult_throw):
    sim, xs, us = catapult_throw
    if sim.contact_model.fused is None:
        pytest.skip("no compiled core")
    fused, sim.contact_model.fused = sim.contact_model.fused, None
    try:
        ref = sim.rollout(xs[0], us)
    finally:
        sim.contact_model.fused = fused
    assert np.abs(ref - xs).max() < 1e-9

