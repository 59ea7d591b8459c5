"""``cube-sysid`` (issue 14): friction and initial twist of a tumbling, sliding cube (:func:`problems.sysid.cube_sysid`).

The staged start (flight, then friction by a homotopy over the horizon) is what makes Gauss-Newton reach the
answer; the raw guess alone does not (strict xfail). Variants the method was not tuned on: other true
frictions, throws, guesses, heights and the LCP contact model; long ones are ``slow``."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest

import problems
from solvers import gauss_newton
from trajopt.numdiff import jacobian_fd


def identify(**options):
    """Load and solve; returns (problem, metrics, wall time of both)."""
    t = time.perf_counter()
    prob = problems.load("cube-sysid", **options)
    sol = gauss_newton(prob, verbose=False, max_iter=50)
    return prob, prob.evaluate(sol.z), time.perf_counter() - t


@pytest.fixture(scope="module")
def raw():
    return problems.load("cube-sysid", start="raw")


def test_cube_sysid_jacobian_matches_finite_differences(raw):
    r, J = raw.jacobian(raw.z0)
    _, J_fd = jacobian_fd(raw.residual, raw.z0, 1e-6)
    assert np.abs(J - J_fd).max() <= 1e-5 * np.abs(J_fd).max()
    assert raw.dynamics.warm_start_stats["contact_steps"] > 100  # through landing, tumbling and sliding


def test_cube_sysid_recovers_friction_and_twist():
    prob, m, wall = identify()
    assert m["parameter_error"] <= 1e-3 and wall < 60.0
    assert prob.evaluate(prob.info["guess"])["parameter_error"] >= 0.4  # the stated guess: friction 0.3 for 0.5


def test_cube_sysid_from_a_guess_above_the_truth():
    """Friction guessed 1.2 for 0.5: every contact sticks at first (zero friction derivative), so the homotopy
    moves below the largest friction ratio the rollout uses."""
    _, m, _ = identify(guess_friction=1.2)
    assert m["parameter_error"] <= 1e-3


def test_a_zero_residual_fit_at_its_round_off_floor_converges():
    """Under LCP contact the staged start lands at |r| = 1.6e-12 (parameter error 3e-14): the step vanishes and the
    cosine of two round-off vectors is 0.25. The undamped Gauss-Newton step is below the iterate's round-off
    (MINPACK's xtol test): CONVERGED, not STALLED."""
    from trajopt.solution import Status

    prob = problems.load("cube-sysid", contact="lcp")
    sol = gauss_newton(prob, verbose=False, max_iter=50)
    assert prob.evaluate(sol.z)["parameter_error"] <= 1e-10
    assert sol.status == Status.CONVERGED, sol.info.get("reason")


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    dict(true_friction=0.3), dict(true_friction=0.8), dict(true_twist=(0.5, -0.4, 0.3, -1.0, 0.7, 1.5)),
    dict(true_twist=(1.5, 0.0, 0.0, 0.0, 2.0, 0.0)), dict(true_twist=(-0.8, 0.6, 0.2, 1.0, 0.5, -1.5)),
    dict(true_friction=0.3, true_twist=(1.2, -0.5, 0.0, 0.3, 0.3, 3.0)), dict(height=0.1),
    dict(guess_friction=0.1, true_friction=0.8), dict(guess_offset=(-0.3, 0.2, 0.2, -0.3, 0.3, -0.4)),
    dict(true_friction=1.0, true_twist=(0.3, 1.0, -0.5, 2.0, 0.0, -1.0)), dict(contact="lcp")])
def test_cube_sysid_more_variants(options):
    _, m, _ = identify(**options)
    assert m["parameter_error"] <= 1e-3


def test_cube_sysid_with_noise_reports_error_bars_that_hold():
    prob, m, _ = identify(noise=1e-4, seed=3)
    assert prob.info["error_bars"](prob.z0).shape == (7,)
    assert m["parameter_error"] <= 1e-3 and m["max_sigma_error"] <= 4.0


def test_cube_sysid_converges_from_the_raw_guess_only_near_the_answer(raw):
    z_true = raw.info["true"]
    sol = gauss_newton(raw, z0=z_true + 0.01 * (raw.z0 - z_true), verbose=False, max_iter=50)
    assert raw.evaluate(sol.z)["parameter_error"] <= 1e-3


@pytest.mark.slow  # 7 s for a known limitation (strict: a fix shows as XPASS under -m slow)
@pytest.mark.xfail(strict=True, reason="known: from the raw guess (friction 0.3 for 0.5, twist offset up to 0.15) "
                                       "Gauss-Newton stops in a kink of the tumbling cube's residual; the staged "
                                       "start is what reaches the answer")
def test_cube_sysid_from_the_raw_guess(raw):
    sol = gauss_newton(raw, verbose=False, max_iter=50)
    assert raw.evaluate(sol.z)["parameter_error"] <= 1e-3


def test_cube_sysid_bad_input():
    with pytest.raises(ValueError, match="true_twist must be six finite numbers"):
        problems.load("cube-sysid", true_twist=(1.0, 2.0))
    with pytest.raises(ValueError, match="start must be"):
        problems.load("cube-sysid", start="stages")
    with pytest.raises(ValueError, match="guess_friction must be a friction coefficient > 0"):
        problems.load("cube-sysid", guess_friction=0.0)
    with pytest.raises(ValueError, match="no flight to estimate the twist from"):
        problems.load("cube-sysid", every=100)
    # with noise the message named only every and height, not the noise that put the observed cube in the ground
    with pytest.raises(ValueError, match=r"drop it from higher \(height\); or lower the noise: noise=1 moves"):
        problems.load("cube-sysid", noise=1.0)


@pytest.mark.parametrize("options, message", [
    ({"every": 0}, "every must be an integer >= 1, got 0"),  # said "window"
    ({"every": 1000}, "every (1000) must not exceed steps (300)"),
    ({"every": 2.5}, "every must be an integer >= 1, got 2.5"),
    ({"height": -0.5, "start": "raw"}, "height must be a finite height > 0 m"),  # was accepted: the cube in the ground
    ({"height": 0.0, "start": "raw"}, "height must be a finite height > 0 m"),
    ({"height": float("nan"), "start": "raw"}, "height must be a finite height > 0 m"),  # "initial state x0 contains ..."
    ({"height": True, "start": "raw"}, "height must be a finite height > 0 m"),
    ({"guess_friction": True}, "guess_friction must be a friction coefficient > 0, got True"),  # was friction 1.0
    ({"true_friction": float("inf")}, "true_friction must be a friction coefficient > 0, got inf"),
    ({"noise": True}, "noise must be a standard deviation >= 0, got True"),
    ({"seed": -1, "noise": 0.01}, "seed must be an integer >= 0, got -1"),
    ({"seed": 0.5}, "seed must be an integer >= 0, got 0.5"),  # accepted (unused without noise)
    ({"contact": "penalty", "start": "raw"}, "contact must be 'lcp' or 'ncp'"),  # NotImplementedError in the solve
    ({"contact": "relaxed", "start": "raw"}, "contact must be 'lcp' or 'ncp'"),
    ({"contact": "foo", "start": "raw"}, "contact must be 'lcp' or 'ncp'"),
])
def test_cube_sysid_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        problems.load("cube-sysid", **options)


def test_cube_sysid_refuses_a_recording_where_friction_does_not_act():
    """With the defaults the cube lands near step 85: a recording that stops before (steps=50) has a residual
    that does not depend on friction. It loaded, Gauss-Newton then said 'converged' at the guess (parameter_error
    0.4), and with noise the error bars raised numpy's bare 'Singular matrix' after the solve. Now the factory
    names it before any work."""
    for options in ({"steps": 50}, {"steps": 50, "noise": 0.01}, {"steps": 50, "start": "raw"}):
        with pytest.raises(ValueError, match="never comes within 0.01 m of the ground.*friction does not act"):
            problems.load("cube-sysid", **options)
    problems.load("cube-sysid", steps=90, start="raw")  # one knot after the landing: friction acts


@pytest.mark.parametrize("contact", ["ncp", "lcp"])
def test_cube_sysid_refuses_a_recording_where_every_contact_sticks(contact):
    """A recording that ends while the cube still sticks (steps=120, true friction 1) fits any friction above the
    largest ratio |lambda_T| / lambda_n it used (0.857): Gauss-Newton said 'converged' with parameter_error 0.14,
    the same for a true friction of 2 or 1e6 (a bad-input battery, 2026-11-28). The factory names it before any
    work; the same recording with friction 0.5 slides and is identified."""
    for friction in (1.0, 2.0, 1e6):
        with pytest.raises(ValueError, match=r"friction never reaches its limit .* every contact sticks \(the largest "
                                             r"\|lambda_T\| / lambda_n is 0\.8\d+, below the true friction"):
            problems.load("cube-sysid", steps=120, true_friction=friction, contact=contact)
    lsq = problems.load("cube-sysid", steps=120, true_friction=0.5, contact=contact)
    assert lsq.metrics(lsq.z0)["parameter_error"] < 1e-9
    # the whole default recording with a huge friction: a friction column of 5e-18 at 1e9 (not 0: one contact slides
    # at a normal impulse of 6e-11, mu times it 0.06) passed the exact-zero check, and Gauss-Newton stalled at
    # parameter_error 1 after 8 s (a bad-input battery, 2026-11-28); 1e9 is now past MAX_FRICTION, 1e6 the same case
    with pytest.raises(ValueError, match=r"does not determine friction: the residual's Jacobian is blind along it at "
                                         r"the true values"):
        problems.load("cube-sysid", true_friction=1e6, contact=contact)
    with pytest.raises(ValueError, match=r"friction must be a coefficient in \[0, 1e\+06\]"):
        problems.load("cube-sysid", true_friction=1e9, contact=contact)


def test_cube_sysid_cli_reports_the_start_it_solves_from(tmp_path, capsys):
    """The staged start identifies while the problem is made, so Gauss-Newton may take 0 iterations from it: the
    summary and the printout carry the start's time (and the total), not 0.01 s as the time of the whole fit."""
    import json

    from app.cli import main

    assert main(["solve", "cube-sysid", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "cube-sysid" / "gauss-newton" / "summary.json").read_text())
    assert summary["start"] == "staged" and summary["start_time_s"] > 0.0
    assert summary["total_time_s"] == pytest.approx(summary["start_time_s"] + summary["wall_time_s"])
    assert summary["total_time_s"] < 60.0 and summary["metrics"]["parameter_error"] <= 1e-3
    assert "staged start, made with the problem" in capsys.readouterr().out


def test_a_friction_near_zero_is_identified_and_its_comparison_run_steps_one_sided(tmp_path, capsys):
    """true_friction=1e-9: the finite-difference comparison run stepped friction to 1e-9 - 1e-6 < 0, whose
    ValueError ended the command with exit 2 ("refused") after the analytic run had converged, nothing written.
    The comparison's column at the bound is now the one-sided difference."""
    from app.cli import main

    assert main(["solve", "cube-sysid", "--option", "true_friction=1e-9", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "cube-sysid" / "gauss-newton" / "summary.json").read_text())
    assert summary["status"] == "converged" and summary["metrics"]["parameter_error"] < 1e-3, summary
    assert summary["finite_differences"]["status"] in ("converged", "max_iterations", "stalled"), summary


def test_one_sided_differences_at_a_bound():
    """jacobian_fd(one_sided_at_bounds=True): the side a function refuses is replaced by the other one-sided
    difference; both refused: the error itself; without it: the error, as before."""
    def fun(z):
        if z[0] < 0 or z[1] > 1:
            raise ValueError(f"out of bounds: {z}")
        return np.array([z[0] ** 2 + 3 * z[1], np.sin(z[1])])

    z = np.array([1e-9, 1.0])  # z[0] - h < 0, z[1] + h > 1
    _, J = jacobian_fd(fun, z, 1e-6, one_sided_at_bounds=True)
    np.testing.assert_allclose(J, [[2e-9, 3.0], [0.0, np.cos(1.0)]], atol=2e-6)
    with pytest.raises(ValueError, match="out of bounds"):
        jacobian_fd(fun, z, 1e-6)
    with pytest.raises(ValueError, match="out of bounds"):
        jacobian_fd(lambda z: fun(z) if z[0] == 1e-9 else fun(-np.ones(2)), z, 1e-6, one_sided_at_bounds=True)
