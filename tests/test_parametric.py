"""Physical parameters as decision variables (:mod:`trajopt.parametric`, issue 14): the augmented step's
Jacobians against differences at design knots and at physical knots (a joint limit, placements), the
trajectory's structure, a co-design solved by DDP, Gauss-Newton and IPOPT to the root a bisection of plain
rollouts finds, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from problems.cartpole import pendulum_simulator
from problems.inverse import cube_simulator
from trajopt import ControlCost, CostDerivatives, FunctionCost
from trajopt.numdiff import max_relative_error, step_jacobians_fd
from trajopt.parametric import ParameterDynamics

from .test_pair_coefficients import two_bodies
from .test_parameters import arm_simulator

ARM = ["mass:j2_body2", "com:j2_body2", "placement:j2"]


def arm_design():
    sim = arm_simulator("lcp")
    p0 = sim.get_parameters(ARM)
    return ParameterDynamics(sim, ARM, p0 - 0.05, p0 + 0.05)


def test_sizes_and_design_knots():
    dyn = arm_design()
    assert (dyn.np, dyn.nu, dyn.design_knots) == (10, 2, 5)
    assert (dyn.nx, dyn.ndx) == (4 + 10 + 1, 4 + 10 + 1)
    p = dyn.nominal + np.linspace(-0.04, 0.04, 10)
    us = np.vstack((dyn.control_of(p), np.random.default_rng(0).uniform(-3, 3, (20, 2))))
    x0 = dyn.augment(np.array([0.7, 0.0, 0.4, -0.3]))
    xs = dyn.rollout(x0, us)
    np.testing.assert_allclose(xs[5:, 4:14], np.tile(p, (len(xs) - 5, 1)), atol=1e-15)  # set, then constant
    np.testing.assert_array_equal(xs[:6, -1], [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(xs[:6, :4], np.tile(x0[:4], (6, 1)))  # nothing moves at the design knots
    # the physical part is the rollout of the system at p
    ps = dyn.parameters_of(xs[5])  # p up to the control map's round-off
    np.testing.assert_array_equal(xs[5:, :4], dyn.sim.with_parameters(ARM, ps).rollout(x0[:4], us[5:]))
    # step by step gives the same states
    x = x0
    for t, u in enumerate(us):
        x = dyn.step(x, u)
        np.testing.assert_allclose(x, xs[t + 1], atol=1e-14)


@pytest.mark.parametrize("knot", [0, 3, 5])
def test_jacobians_against_differences(knot):
    """Design knots 0 and 3 (a slice of the parameters set by the controls) and a physical knot at the joint
    limit (j2 pressed into its lower limit): ``F'x = [[Fx, Fp], [0, I]]``."""
    dyn = arm_design()
    p = dyn.nominal + np.linspace(-0.03, 0.03, 10)
    x = dyn.augment(np.array([0.7, 0.0, 0.4, -0.3]), p)
    x[-1] = knot
    u = np.array([0.5, -0.2]) if knot == 5 else dyn.control_of(dyn.nominal + 0.01)[min(knot, 4)]
    _, Fx, Fu = dyn.step_derivatives(x, u)
    fd = step_jacobians_fd(dyn, x, u, method="ridders")  # the limit's impulse curves: central FD is 1e-6 off
    assert max_relative_error(Fx, fd.Fx) < 1e-7 and max_relative_error(Fu, fd.Fu) < 1e-7
    if knot == 5:
        dyn.simulator(p).step(x[:4], u)
        assert len(dyn.simulator(p).contacts.limit_impulses)  # the step goes through the limit
        assert np.abs(Fx[:4, 4:14]).max() > 1e-3  # the parameters move the state


def pendulum_problem(T=45, theta0=0.3):
    """Co-design: a pendulum (a 1 m rod, torque limited to 1 uN m: the design does the work) released at ``theta0``
    must pass the bottom at step ``T``; its mass is the design (its COM and its inertia about the COM stay). A
    rod's quarter period is ``pi/2 sqrt((I_C / (m c) + c) / g)``: at 0.45 s, m ~ 0.55 kg (the nominal 1 kg
    swings faster)."""
    sim = pendulum_simulator(dt=0.01, torque_limit=1e-6)
    name = [n for n in sim.parameter_names() if n.startswith("mass:")]
    dyn = ParameterDynamics(sim, name, 0.2, 2.0)

    w = 1e4  # (1 cm of arc)^2 ~ 1

    def value(x, u=None):
        return float(w * x[0] ** 2)

    def derivatives(x, u=None):
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L, out.Lx[0], out.Lxx[0, 0] = w * x[0] ** 2, 2 * w * x[0], 2.0 * w
        return out

    ocp = dyn.ocp(np.array([theta0, 0.0]), T, ControlCost(sim, 1e-2), FunctionCost(sim, value, derivatives))
    return sim, name, dyn, ocp


def bisection_mass(sim, name, T=45, theta0=0.3):
    """The mass at which the free swing passes the bottom at step T, by bisection on plain rollouts."""
    def theta_T(m):
        return sim.with_parameters(name, [m]).rollout(np.array([theta0, 0.0]), np.zeros((T, 1)))[-1, 0]

    lo, hi = 0.3, 1.0
    assert theta_T(lo) * theta_T(hi) < 0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if theta_T(mid) * theta_T(lo) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("method", ["ddp", "gn", "shooting"])
def test_pendulum_co_design_finds_the_depth(method):
    from solvers import solve

    sim, name, dyn, ocp = pendulum_problem()
    m = bisection_mass(sim, name)
    sol = solve(ocp, method, time_limit=60, verbose=False)
    p = dyn.parameters_of(sol.xs[-1])
    assert abs(sol.xs[-1, 0]) < 1e-6, sol.status  # passes the bottom
    assert abs(p[0] - m) < 1e-5, (p, m)
    assert sol.xs[0, 0] == 0.3 and np.abs(np.diff(sol.xs[1:, 2], axis=0)).max() == 0.0  # one mass throughout


def test_bad_input():
    sim = arm_simulator("lcp")
    p0 = sim.get_parameters(ARM)
    with pytest.raises(ValueError, match="unknown parameter"):
        ParameterDynamics(sim, ["mass:nope"], 0.0, 1.0)
    with pytest.raises(ValueError, match=r"lower bounds have shape \(3,\), expected \(10,\)"):
        ParameterDynamics(sim, ARM, np.zeros(3), p0 + 1)
    with pytest.raises(ValueError, match="lower < upper"):
        ParameterDynamics(sim, ARM, p0, p0)
    with pytest.raises(ValueError, match="finite"):
        ParameterDynamics(sim, ARM, p0 - 1, np.full(10, np.inf))
    with pytest.raises(ValueError, match="at least one parameter"):
        ParameterDynamics(sim, [], 0.0, 1.0)
    with pytest.raises(ValueError, match=r"nu >= 1"):
        ParameterDynamics(cube_simulator(), ["friction"], 0.1, 1.0)
    # a set paired the bounds with the parameters in hash order, a dict dropped its values: both were taken
    for names in ({"mass:j2_body2", "friction"}, {"mass:j2_body2": 1.0}):
        with pytest.raises(TypeError, match=f"sequence of names .* got {type(names).__name__}"):
            ParameterDynamics(sim, names, 0.1, 1.0)
    with pytest.raises(ValueError, match="listed twice"):
        ParameterDynamics(sim, ["mass:j2_body2", "mass:j2_body2"], 0.1, 1.0)
    # bounds that are no numbers are named (NumPy's "could not convert string to float"; True was 1.0)
    for lower, upper, what in (("a", 1.0, "lower"), (0.1, [True], "upper"), (0.1, None, "upper"),
                               (0.1, 1 + 2j, "upper")):
        with pytest.raises(ValueError, match=f"^{what} bounds must be numbers"):
            ParameterDynamics(sim, ["mass:j2_body2"], lower, upper)
    assert ParameterDynamics(sim, (n for n in ["mass:j2_body2"]), 0.1, 1.0).names == ["mass:j2_body2"]
    assert ParameterDynamics(sim, np.array("mass:j2_body2"), 0.1, 1.0).names == ["mass:j2_body2"]
    with pytest.raises(TypeError, match="got bytes"):  # was "unknown parameter 109" (its first byte)
        ParameterDynamics(sim, b"mass:j2_body2", 0.1, 1.0)
    dyn = ParameterDynamics(sim, ARM, p0 - 0.05, p0 + 0.05)
    with pytest.raises(ValueError, match="leave the bounds"):
        dyn.control_of(p0 + 1.0)
    with pytest.raises(ValueError, match=r"augmented state has shape \(4,\)"):
        dyn.step(np.zeros(4), np.zeros(2))


def test_complementarity_aware_jacobians_are_refused_by_name_before_solving():
    """ParameterDynamics' step_derivatives takes no adjoint=: the check said nothing ("trusted") and DDP failed
    after its first rollout with a TypeError about an unexpected keyword argument."""
    from trajopt.protocol import check_complementarity_aware

    with pytest.raises(ValueError, match="ParameterDynamics.step_derivatives takes no adjoint="):
        check_complementarity_aware(arm_design())


@pytest.mark.parametrize("name", ["com:j2_body2", "placement:j2"])
def test_bounds_that_admit_a_model_beyond_the_simulated_distance(name):
    """Bounds of +-1e5 on a centre of mass or a placement were accepted; the first design knot beyond 10 km then
    failed mid-solve with a ModelError."""
    sim = arm_simulator("lcp")
    p0 = sim.get_parameters([name])
    with pytest.raises(ValueError, match=rf"bounds of parameter '{name}' admit invalid values: at their corner .* "
                                         "the simulator refuses the model .*at most 10000 m"):
        ParameterDynamics(sim, [name], p0 - 1e5, p0 + 1e5)
    ParameterDynamics(sim, [name], p0 - 0.1, p0 + 0.1)  # a design range


def test_bounds_that_admit_invalid_physical_values():
    """A design knot may set any value within the bounds, so bounds admitting a mass <= 0, a negative friction
    or a restitution outside [0, 1] are refused at construction, naming the parameter (they were accepted, and
    the solve failed at the first design knot that reached such a value: the step's with_parameters raised)."""
    sim = arm_simulator("lcp")
    p0 = sim.get_parameters(ARM)
    lo, hi = p0 - 0.05, p0 + 0.05
    for bad in (0.0, -1.0):
        low = lo.copy()
        low[0] = bad
        with pytest.raises(ValueError, match=r"parameter 'mass:j2_body2' admit invalid values: a mass must be > 0"):
            ParameterDynamics(sim, ARM, low, hi)
    pend = pendulum_simulator()
    ParameterDynamics(pend, ["com:hinge_body1"], -1.0, 1.0)  # a COM may be negative
    assert ParameterDynamics(sim, ARM, lo, hi).np == 10
    assert "friction" in sim.parameter_names()
    with pytest.raises(ValueError, match=r"'friction' admit invalid values: a friction must be in \[0, 1e\+06\]"):
        ParameterDynamics(sim, ["friction"], -0.1, 1.0)
    with pytest.raises(ValueError, match=r"bounds \[0\.1, 1e\+07\] of parameter 'friction' admit invalid values"):
        ParameterDynamics(sim, ["friction"], 0.1, 1e7)  # past MAX_FRICTION: the step at such a knot raised mid-solve
    ParameterDynamics(sim, ["friction"], 0.0, 1.0)  # 0 is a valid friction


def test_a_restitution_bound_at_zero_is_refused_and_the_vanished_name_explained():
    """At e = 0 every pair is inelastic and the simulator has no restitution parameter: a design knot at a lower
    bound of 0 built such a simulator, and the next step raised "unknown parameter 'restitution'" mid-solve."""
    sim, _ = two_bodies(shape="ball", joint="prismatic", restitution=0.5, friction=0.3)
    assert "restitution" in sim.parameter_names()
    with pytest.raises(ValueError, match=r"'restitution' admit invalid values: a restitution must be in \(0, 1\]"):
        ParameterDynamics(sim, ["restitution"], 0.0, 1.0)
    assert ParameterDynamics(sim, ["restitution"], 1e-3, 1.0).np == 1
    with pytest.raises(ValueError, match="unknown parameter 'restitution:nope'") as err:  # a typo, e > 0: no hint
        sim.get_parameters("restitution:nope")
    assert "inelastic" not in str(err.value)
    inelastic = sim.with_parameters("restitution", [0.0])
    with pytest.raises(ValueError, match=r"unknown parameter 'restitution' for .*only while some collision pair has "
                                         r"e > 0"):
        inelastic.get_parameters("restitution")


def test_unbounded_controls_raise_no_warning():
    """A system without control bounds (two bodies on a prismatic joint): the controls' centre was computed as
    0.5 (-inf + inf), a RuntimeWarning (an error under -W error) although the value was then discarded."""
    import warnings

    sim, _ = two_bodies(shape="ball", joint="prismatic", restitution=0.5, friction=0.3)
    assert not np.isfinite(sim.u_lower).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dyn = ParameterDynamics(sim, ["friction"], 0.1, 1.0)
    assert np.isfinite(dyn._uc).all() and np.isfinite(dyn._uh).all()


def test_bad_controls_and_states_at_design_knots():
    """A design knot's control sets the parameters: NaN or a wrong size is named there (NaN used to become the
    parameters silently, and the next step raised on them), as is a non-finite parameter or knot counter in the
    augmented state (was: 'cannot convert float NaN to integer')."""
    dyn = arm_design()
    x0 = dyn.augment(np.array([0.7, 0.0, 0.4, -0.3]))
    with pytest.raises(ValueError, match="design knot 0: control u must be 2 finite numbers"):
        dyn.step(x0, np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="design knot 0: control u must be 2 finite numbers"):
        dyn.step_derivatives(x0, np.zeros(3))
    x = x0.copy()
    x[-1] = np.nan
    with pytest.raises(ValueError, match=r"non-finite parameters or knot counter at indices \[14\]"):
        dyn.step(x, np.zeros(2))
    with pytest.raises(ValueError, match=r"parameters p have shape \(3,\), expected \(10,\)"):
        dyn.augment(x0[:4], np.zeros(3))
