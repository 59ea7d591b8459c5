"""The compiled core (contact.core): it is built and loaded, it reaches Pinocchio's own objects,
and without it the toolkit says why and runs the reference path."""

import os
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

from contact import core


def test_core_is_built_and_loaded():
    if os.environ.get("CONTACTRAJ_NO_CORE"):
        pytest.skip("CONTACTRAJ_NO_CORE is set: the reference path is under test")
    assert core.available(), core.reason
    assert core.module.pinocchio_version == pin.__version__


@pytest.mark.skipif(core.module is None, reason="the compiled core is not available")
def test_core_calls_pinocchio_on_the_callers_objects():
    model = pin.buildSampleModelHumanoidRandom()
    data = model.createData()
    rng = np.random.default_rng(0)
    pin.seed(0)
    q = pin.randomConfiguration(model)
    v, tau = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    got = core.module.aba_derivatives_probe(model, data, q, v, tau)
    ref = pin.computeABADerivatives(model, model.createData(), q, v, tau)[0]
    assert np.abs(got - ref).max() < 1e-12
    assert np.abs(data.ddq_dq - ref).max() < 1e-12  # it wrote into the caller's Data
    with pytest.raises(TypeError, match="expected a pinocchio.Model, got .*Data"):
        core.module.aba_derivatives_probe(data, data, q, v, tau)
    with pytest.raises(ValueError, match="sizes do not match"):
        core.module.aba_derivatives_probe(model, data, q[:-1], v, tau)


def test_without_the_core_the_reason_is_given():
    code = ("import warnings; warnings.simplefilter('error');\n"
            "from contact import core\n"
            "assert core.module is None and 'CONTACTRAJ_NO_CORE' in core.reason, core.reason\n"
            "assert not core.available()\n")
    env = dict(os.environ, CONTACTRAJ_NO_CORE="1")
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    env = dict(os.environ, CONTACTRAJ_CORE_PATH="/nonexistent/contactraj_core.so")
    env.pop("CONTACTRAJ_NO_CORE", None)
    out = subprocess.run([sys.executable, "-W", "always", "-c",
                          "from contact import core; print(core.available()); print(core.reason)"],
                         check=True, env=env, capture_output=True, text=True)
    assert out.stdout.splitlines()[0] == "False"
    assert "/nonexistent/contactraj_core.so" in out.stdout
    assert "compiled step core is not used" in out.stderr


def test_a_module_built_from_other_sources_is_refused(monkeypatch):
    """The module carries the hash of the sources it was built from (cpp/source_hash.cmake); a tree edited since
    the last build would call it with arguments it does not know (a raw 'incompatible function arguments' from deep
    inside a step, found by a review): the reference path runs instead, and the reason says to reinstall."""
    if core.source_hash() is None:
        pytest.skip("no cpp/src next to the package (not a source tree)")
    monkeypatch.delenv("CONTACTRAJ_CORE_PATH", raising=False)
    monkeypatch.delenv("CONTACTRAJ_NO_CORE", raising=False)
    assert core.module is not None and core.module.source_hash == core.source_hash()  # this build: the tree's
    monkeypatch.setattr(core, "source_hash", lambda directory=core.SOURCES: "0" * 64)
    monkeypatch.setattr(core, "module", None)
    core._load()
    assert core.module is None and "built from other sources" in core.reason and "pip install -e ." in core.reason
    monkeypatch.undo()
    core._load()
    assert core.module is not None and core.reason == ""
