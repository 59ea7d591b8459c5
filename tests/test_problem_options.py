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
def test_a_good_target_is_kept(name):
    ocp = problems.load(name, target=[2.6, 2.0])
    assert np.array_equal(ocp.info["target"], [2.6, 2.0])


@pytest.mark.parametrize("name", ["cube-throw", "cube-sysid"])
@pytest.mark.parametrize("option", ["true_twist", "guess_offset"])
@pytest.mark.parametrize("value", [1.0, (1.0, 2.0), (0.1, 0.2, 0.3, math.nan, 0.0, 0.0), "x"])
def test_a_twist_that_is_not_six_finite_numbers_is_refused_at_load(name, option, value):
    with pytest.raises(ValueError, match=rf"{option} must be six finite numbers"):
        problems.load(name, **{option: value})
