"""Problems' vector options (targets, twists, offsets) are checked at load, naming the option (issue 16)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import problems


@pytest.mark.parametrize("name", ["catapult", "catapult-design"])
@pytest.mark.parametrize("target", [1, 2.5, (1.0,), (1.0, 2.0, 3.0), (math.nan, 1.0), (1.0, math.inf), "a:b",
                                    ((1.0, 2.0),), None])
def test_a_target_that_is_not_a_finite_point_is_refused_at_load(name, target):
    with pytest.raises(ValueError, match=r"target must be two finite numbers \(x, y\)"):
        problems.load(name, target=target)


@pytest.mark.parametrize("name", ["catapult", "catapult-design"])
def test_a_target_kilometres_away_is_refused_at_load(name):
    """A target 1e9 m away loaded, and catapult-design reported it CONVERGED with the box 1.5 m from its start (the
    squared distance, 1e18, swamped DDP's relative stopping test); 100 m away stays a problem (the solvers stall
    honestly there), past 1 km it is refused, naming the option."""
    assert np.array_equal(problems.load(name, target=(100.0, 0.0)).info["target"], [100.0, 0.0])
    for far in ((1e9, 0.0), (800.0, -800.0)):
        with pytest.raises(ValueError, match=r"target must be within 1000 m of the origin, got \[.*swamps"):
            problems.load(name, target=far)


@pytest.mark.parametrize("name", ["catapult", "catapult-design"])
def test_a_good_target_is_kept(name):
    ocp = problems.load(name, target=[2.6, 2.0])
    assert np.array_equal(ocp.info["target"], [2.6, 2.0])


@pytest.mark.parametrize("name", ["cube-throw", "cube-sysid"])
@pytest.mark.parametrize("option", ["true_twist", "guess_offset"])
@pytest.mark.parametrize("value", [1.0, (1.0, 2.0), (0.1, 0.2, 0.3, math.nan, 0.0, 0.0), "x"])
def test_a_twist_that_is_not_six_finite_numbers_is_refused_at_load(name, option, value):
    with pytest.raises(ValueError, match=rf"{option} must be six finite numbers"):
        problems.load(name, **{option: value})


# -- the command line spells a vector the same way in solve --option and sweep --set ---------------

@pytest.mark.parametrize("text, value", [("2.6:2.0", (2.6, 2.0)), ("2.6,2.0", (2.6, 2.0)), ("(2.6, 2.0)", (2.6, 2.0)),
                                         ("1e-3", 1e-3), ("True", True), ("lcp", "lcp"), ("3", 3)])
def test_option_values_parse_alike(text, value):
    from app.options import parse_value

    assert parse_value(text) == value


def test_nan_and_words_in_a_vector_reach_the_problem_check():
    from app.options import parse_value

    v = parse_value("nan,1")
    assert math.isnan(v[0]) and v[1] == 1
    assert parse_value("a:b") == ("a", "b")


class _Solved(Exception):
    pass


@pytest.mark.parametrize("text", ["2.0:1.8", "2.0,1.8", "(2.0, 1.8)"])
def test_solve_option_takes_a_target_as_sweep_set_does(text, monkeypatch, tmp_path):
    import solvers

    from app.cli import main

    def caught(ocp, *a, **k):
        raise _Solved(tuple(ocp.info["target"]))

    monkeypatch.setattr(solvers, "solve", caught)
    with pytest.raises(_Solved) as got:
        main(["solve", "catapult", "--method", "ddp", "--option", f"target={text}", "--out", str(tmp_path)])
    assert got.value.args[0] == (2.0, 1.8)


@pytest.mark.parametrize("text, shown", [("a:b", "('a', 'b')"), ("2.0:1.8:3", "(2.0, 1.8, 3)"),
                                         ("nan,1", "(nan, 1)")])
def test_a_bad_target_on_the_command_line_names_the_option(text, shown, capsys, tmp_path):
    from app.cli import main

    assert main(["solve", "catapult", "--option", f"target={text}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"target must be two finite numbers (x, y), got {shown}" in err, err


@pytest.mark.parametrize("name", ["catapult", "ur5-sysid", "catapult-design"])
def test_an_unknown_option_is_named_with_the_problems_options(name):
    with pytest.raises(ValueError, match=rf"unknown option 'bogus' for problem '{name}'; its options: .*(horizon|steps)"):
        problems.load(name, bogus=1)


def test_contact_on_a_problem_without_contact_is_named_by_the_cli(capsys):
    from app.cli import main

    assert main(["solve", "cartpole", "--contact", "ncp", "--no-animation", "--no-scene"]) == 2
    assert "has no contact to choose a model for (--contact)" in capsys.readouterr().err
