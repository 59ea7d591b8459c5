"""The compiled parameter Jacobian (cpp/src/params.cpp) against the Python reference of dynamics/parameters.py.

``step_derivatives(x, u, params=...)`` takes the compiled path for a step without contact or with a fused LCP, NCP
or relaxed state; ``parameters._core = None`` forces the reference. Both must give the same ``Fp`` and impulse Jacobians to
round-off, for every parameter kind, along rollouts (contact on and off, sticking and sliding rows)."""

import numpy as np
import pytest

from dynamics import parameters as P

_REFERENCE = P._reference_jacobian

pytestmark = pytest.mark.skipif(P._core is None, reason="the compiled core (with parameter_jacobian) is not loaded")


def _rollout_states(name, steps, seed=0, *, contact=None, smoothing=0.0, bench=False):
    """``(sim, [(x, u), ...])``: problem ``name``'s states along a rollout of seeded random controls (``contact``:
    its contact model; ``smoothing`` > 0: relaxed contact; ``bench``: the benchmark's state, in contact, first)."""
    from problems import load
    from trajopt.bench import bench_state

    ocp = load(name) if contact is None else load(name, contact=contact)
    sim = ocp.dynamics if smoothing == 0.0 else ocp.dynamics.with_smoothing(smoothing)
    rng = np.random.default_rng(seed)
    scale = np.where(np.isfinite(ocp.u_upper), 0.3 * ocp.u_upper, 1.0)
    us = np.clip(rng.uniform(-1, 1, (steps, sim.nu)) * scale, ocp.u_lower, ocp.u_upper)
    xs = sim.rollout(ocp.x0, us)
    return sim, ([bench_state(ocp)] if bench else []) + list(zip(xs[:-1], us))


def _raised_and_pushed(sim, states):
    """``(i, y, u)``: each state, and where the base is free every third one also raised 0.3 m (free flight) and
    pushed 1 cm into the ground (deep contacts: the position correction)."""
    free_base = sim.model.joints[1].nq == 7
    for i, (x, u) in enumerate(states):
        yield i, x, u
        if free_base and i % 3 == 0:
            for dz in (0.3, -0.01):
                y = np.array(x, dtype=float)
                y[2] += dz
                yield i, y, u


def _no_reference(*args, **kwargs):
    raise AssertionError("the Python reference ran where the compiled parameter Jacobian should")


def _both(sim, x, u, names, monkeypatch):
    new = sim.step_derivatives(x, u, params=names, impulses=True, data=sim.create_data())
    with monkeypatch.context() as m:
        m.setattr(P, "_core", None)
        m.setattr(P, "_reference_jacobian", _REFERENCE)
        ref = sim.step_derivatives(x, u, params=names, impulses=True, data=sim.create_data())
    return new, ref


def _rel(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max())) if b.size else 0.0


@pytest.mark.parametrize("name, steps", [("catapult", 40), ("ur5-box", 12), ("go1-hold", 8)])
def test_compiled_equals_reference_along_rollouts(name, steps, monkeypatch):
    sim, states = _rollout_states(name, steps)
    names = sim.parameter_names()
    kinds = {"fused": 0, "free": 0}
    for x, u in states:
        d = sim.create_data()
        sim.step(x, u, data=d)
        kinds["free" if d.contact is None else "fused"] += type(d.contact).__name__ in ("NoneType",
                                                                                        "FusedContactState")
        new, ref = _both(sim, x, u, names, monkeypatch)
        for k in range(3):  # x+, Fx, Fu: the fused call's either way
            assert np.array_equal(new[k], ref[k])
        assert _rel(new[3], ref[3]) < 1e-12, (name, _rel(new[3], ref[3]))
        # without impulses the compiled call skips dlambda's columns (ParameterPlan.compute(impulses=False))
        alone = sim.step_derivatives(x, u, params=names, data=sim.create_data())
        assert len(alone) == 4 and _rel(alone[3], ref[3]) < 1e-12, (name, _rel(alone[3], ref[3]))
        imp_new, imp_ref = new[4], ref[4]
        assert np.array_equal(imp_new.lam, imp_ref.lam)
        if imp_ref.dlam_dp is not None:
            assert _rel(imp_new.dlam_dp, imp_ref.dlam_dp) < 1e-12
    assert kinds["fused"] > 0  # the compiled path ran on contact states


@pytest.mark.parametrize("select", ["all", "few"])
def test_deep_tree_compiled_equals_reference(select, monkeypatch):
    """A tree whose bodies have deep supports (talos: the inertial columns' products through each body's
    6-dimensional family, params.cpp columns_product) against the reference: standing (contact) and raised (free
    flight), every parameter; and a few deep bodies' masses with friction (the direct path, which forms those
    columns itself although the plan reads deep inertial columns off the kinematics), with and without impulses."""
    from problems import load
    from trajopt.bench import bench_state

    ocp = load("talos-standing")
    sim = ocp.dynamics
    x, u = bench_state(ocp)
    up = x.copy()
    up[2] += 0.3
    names = sim.parameter_names()
    if select == "few":
        names = [n for n in names if n.startswith("mass:")][-4:] + ["friction"]
    seen = set()
    for y in (x, up):
        d = sim.create_data()
        sim.step(y, u, data=d)
        seen.add(type(d.contact).__name__)
        new, ref = _both(sim, y, u, names, monkeypatch)
        assert _rel(new[3], ref[3]) < 1e-12, _rel(new[3], ref[3])
        if ref[4].dlam_dp is not None:
            assert _rel(new[4].dlam_dp, ref[4].dlam_dp) < 1e-12
        alone = sim.step_derivatives(y, u, params=names, data=sim.create_data())
        assert len(alone) == 4 and _rel(alone[3], ref[3]) < 1e-12
    assert seen == {"NoneType", "FusedContactState"}, seen


@pytest.mark.parametrize("select", [pytest.param("not cube", id="but-the-cube"),
                                    pytest.param("", id="every", marks=pytest.mark.slow)])
def test_this_file_passes_on_the_sse2_tiles(select):
    """Every test of this file again with the core's AVX2/FMA tiles turned off (CONTACTRAJ_CORE_NO_AVX2, read once
    per process: a subprocess), where the tests above run the AVX2 tiles on a CPU that has them: both kernels of
    block_product (params.cpp) are held to the reference on every path (LCP, NCP, relaxed, impulses, deep trees).
    The subprocess first checks that the switch took effect (parameter_tiles). The default suite leaves out the
    long cube cases (their NCP and relaxed paths are run on the catapult, UR5 and Go1 too); ``-m slow`` runs all."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, CONTACTRAJ_CORE_NO_AVX2="1")
    # one process (one import): the switch's effect, printed before pytest runs this file's other tests
    script = ("import sys, pytest\nfrom dynamics import parameters as P\nprint('tiles:', P._core.parameter_tiles())\n"
              "sys.exit(pytest.main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", script, "-q", "-p", "no:cacheprovider", "-n", "0", str(Path(__file__)),
                          "-k",
                          " and ".join(filter(None, ["not sse2_tiles", select]))], env=env, capture_output=True,
                         text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.startswith("tiles: sse2\n"), (out.stdout[:200], out.stderr[-2000:])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout, out.stdout[-2000:]


def test_compiled_without_contact_and_sliding_friction(monkeypatch):
    """A free step (no contact: M^-1 from computeMinverse) and cube-throw's sliding steps (friction's bounded
    rows: the explicit term e and A e)."""
    from problems import load

    ocp = load("cube-throw")
    sim = ocp.dynamics
    names = sim.parameter_names()
    from trajopt.bench import bench_state

    us = np.zeros((60, sim.nu))
    x_free = bench_state(ocp)[0]  # in free flight; its rollout slides and tumbles on the ground
    xs = list(sim.rollout(x_free, us)[::3])
    seen = set()
    for x in xs:
        d = sim.create_data()
        sim.step(x, us[0], data=d)
        seen.add("contact" if d.contact is not None else "free")
        new, ref = _both(sim, x, us[0], names, monkeypatch)
        assert _rel(new[3], ref[3]) < 1e-12
    assert "free" in seen


def test_bad_input_is_named():
    sim, states = _rollout_states("catapult", 1)
    x, u = states[0]
    names = sim.parameter_names()
    ws = P._workspace(sim)
    blocks = P.resolve(sim, names)
    plan = ws.plan(sim, blocks)
    q, v = x[:sim.nq], x[sim.nq:]
    tau = np.zeros(sim.nv)
    Fp, dlam = plan.compute(None, q, v, tau, v, sim.dt)
    assert Fp.shape == (sim.ndx, blocks.npar) and dlam is None
    with pytest.raises(ValueError, match="q, v, tau or v_next has the wrong size"):
        plan.compute(None, q, v, tau[:-1], v, sim.dt)
    body, dpi = ws.compact_chain(sim, blocks)
    i64 = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
    place = [b for b in blocks if b.kind == "placement"]
    good = dict(step_model=sim._step_model, model=sim.model, data=ws.data, model0=ws.model0, data0=ws.data0,
                body=body, dpi=dpi, friction_col=blocks.friction, euclidean=sim._euclidean, erp=0.2,
                pjoint=i64([b.joint for b in place]), poffset=i64([b.offset for b in place]), planar=True)
    P._core.ParameterPlan(**good)
    bad = body.copy()
    bad[0] = sim.model.njoints
    with pytest.raises(ValueError, match="is not a joint id"):
        P._core.ParameterPlan(**dict(good, body=bad))
    with pytest.raises(ValueError, match="pjoint and poffset differ in size"):
        P._core.ParameterPlan(**dict(good, poffset=i64([b.offset for b in place])[:-1]))
    with pytest.raises(ValueError, match=r"pjoint\[0\] = 0 is not a joint id"):
        P._core.ParameterPlan(**dict(good, pjoint=i64([0] + [b.joint for b in place[1:]])))
    with pytest.raises(ValueError, match="leaves no 6 columns"):
        P._core.ParameterPlan(**dict(good, poffset=i64([blocks.npar - 3] + [b.offset for b in place[1:]])))
    with pytest.raises(ValueError, match="a column both inertial and a placement"):
        P._core.ParameterPlan(**dict(good, poffset=i64([0] + [b.offset for b in place[1:]])))
    with pytest.raises(TypeError, match="expected a pinocchio.Model"):
        P._core.ParameterPlan(**dict(good, model0=ws.data0))


def _kind(d):
    st = d.contact
    if st is None:
        return {"free"}
    core = st.core
    out = set()
    if core.nlim:
        out.add("limit")
    if core.nc:
        modes = np.asarray(core.solution[2])[:core.nc * core.r]
        out.add("sliding" if (modes == 3).any() else "sticking")
    if core.has_correction:
        out.add("correction")
    return out


def _mixed(names):
    """A leaf's, the root's and a middle joint's placements out of order among inertial and friction blocks."""
    pl = [n for n in names if n.startswith("placement:")]
    rest = [n for n in names if n.startswith(("mass:", "com:", "friction"))]
    return [pl[-1]] + rest[:3] + [pl[0]] + rest[3:5] + [pl[len(pl) // 2]]


def _few(names):
    """Few columns (params.cpp's direct path on contact states: the columns solved on themselves, no map of every
    dof): a leaf's placement, friction and a mass."""
    pl = [n for n in names if n.startswith("placement:")]
    return [pl[-1], "friction", next(n for n in names if n.startswith("mass:"))]


_SELECT = {"placements": lambda names: [n for n in names if n.startswith("placement:")], "mixed": _mixed,
           "few": _few, "friction": lambda names: ["friction"]}


@pytest.mark.parametrize("select", list(_SELECT))
@pytest.mark.parametrize("name, steps, expect", [
    ("catapult", 40, {"free", "limit", "sliding"}),
    ("ur5-box", 16, {"free", "sticking", "correction"}),
    ("go1-hold", 10, {"free", "sticking", "correction"}),
])
def test_placements_compiled_equal_reference(name, steps, expect, select, monkeypatch):
    """The placement columns (computed directly on the system's model: params.cpp, against the Python reference's
    augmented model: its RNEA derivatives, the contacts' kinematic and distance terms, the position correction's
    derivative) under LCP: rollout states, the same states raised off the ground (free flight where the base is
    free) and pushed into it (deep contacts: the correction). ``select``: every placement, or a leaf's, the root's
    and a middle joint's out of order among inertial and friction blocks (the columns' offsets, the subtrees of
    a joint on the world, inside the tree and at a leaf); few columns (``few``, ``friction``: the direct path)."""
    sim, states = _rollout_states(name, steps, bench=True)
    names = _SELECT[select](sim.parameter_names())
    seen, worst = set(), 0.0
    for i, y, u in _raised_and_pushed(sim, states):
        d = sim.create_data()
        sim.step(y, u, data=d)
        if d.contact is not None and type(d.contact).__name__ != "FusedContactState":
            continue
        seen |= _kind(d)
        new, ref = _both(sim, y, u, names, monkeypatch)
        err = _rel(new[3], ref[3])
        worst = max(worst, err)
        assert err < 1e-12, (name, i, err)
        if ref[4].dlam_dp is not None:
            assert _rel(new[4].dlam_dp, ref[4].dlam_dp) < 1e-12
    print(f"{name} {select}: worst relative difference {worst:.2e}")
    assert expect <= seen, (name, seen)  # free: no contact row at all


@pytest.mark.parametrize("name, steps, expect", [
    ("cube", 300, {"free", "sliding", "sticking"}),
    ("catapult", 40, {"free", "limit", "sliding"}),
    ("ur5-box", 16, {"free", "sticking", "correction"}),
    ("go1-hold", 10, {"free", "sticking", "correction"}),
])
@pytest.mark.parametrize("select", ["all", "few", "friction"])
@pytest.mark.parametrize("model", ["ncp", "relaxed"])
def test_ncp_and_relaxed_states_compiled_equal_reference(name, steps, expect, select, model, monkeypatch):
    """NCP contact (the fused step's Coulomb-cone NCP) and relaxed contact (its central path, kappa > 0): the
    compiled Fp and dlambda/dp (params.cpp model_columns: the NCP's mode equations of ncp::linearization, friction's
    explicit residual term on sliding and saturated groups; the relaxed model's E = K, the distances' term of the
    placements, friction's barrier term; both: the placements' contact terms, the position correction) against the
    Python reference, along rollouts and at the benchmark's state; the same states raised and pushed into the
    ground where the base is free."""
    from problems.inverse import cube_simulator
    from problems.sysid import CUBE_TRUE_TWIST, cube_sysid_start

    contact = "ncp" if model == "ncp" else "lcp"
    if name == "cube":  # cube-sysid's throw: flight, a corner's landing, tumbling and sliding, rest
        sim = cube_simulator(contact=contact)
        if model == "relaxed":
            sim = sim.with_smoothing(1e-4)
        us = np.zeros((steps, 0))
        states = list(zip(sim.rollout(cube_sysid_start(sim, CUBE_TRUE_TWIST), us)[:-1], us))
    else:
        sim, states = _rollout_states(name, steps, contact=contact, smoothing=1e-3 if model == "relaxed" else 0.0,
                                      bench=True)
    names = sim.parameter_names()
    names = {"all": names, "few": _few(names) if any(n.startswith("placement:") for n in names) else names[:3],
             "friction": ["friction"]}[select]
    seen, worst, n_states = set(), 0.0, 0
    for i, y, u in _raised_and_pushed(sim, states):
        d = sim.create_data()
        sim.step(y, u, data=d)
        if d.contact is not None:
            if type(d.contact).__name__ != ("FusedNCPState" if model == "ncp" else "FusedRelaxedState"):
                continue
            n_states += 1
            core = d.contact.core
            seen |= {"limit"} if core.nlim else set()
            if core.nc and model == "ncp":
                modes = np.asarray(core.ncp_solution[2])[:core.nc]
                seen.add("sliding" if (modes >= 2).any() else "sticking")
            elif core.nc:  # relaxed: no modes; a contact slides when its tangential velocity does not vanish
                c = np.asarray(d.contact.solution.c)
                r = core.r
                slip = np.array([np.linalg.norm(c[g * r + 1:(g + 1) * r]) for g in range(core.nc)])
                seen.add("sliding" if (slip > 1e-3).any() else "sticking")  # m/s: relaxed sticking creeps
            if core.has_correction:
                seen.add("correction")
        else:
            seen.add("free")
        with monkeypatch.context() as m:  # the compiled path, not the reference, answers NCP states now
            m.setattr(P, "_reference_jacobian", _no_reference)
            new, ref = _both(sim, y, u, names, monkeypatch)
        for k in range(3):
            assert np.array_equal(new[k], ref[k])
        err = _rel(new[3], ref[3])
        worst = max(worst, err)
        assert err < 1e-11, (name, i, err)
        if i % 5 == 0:  # without impulses (no dlambda columns asked)
            alone = sim.step_derivatives(y, u, params=names, data=sim.create_data())
            assert len(alone) == 4 and _rel(alone[3], ref[3]) < 1e-11, (name, i)
        if ref[4].dlam_dp is not None:
            assert _rel(new[4].dlam_dp, ref[4].dlam_dp) < 1e-11, (name, i)
    if model == "relaxed" and name in ("ur5-box", "go1-hold"):
        expect = (expect - {"sticking"}) | {"sliding"}  # their relaxed contacts creep (> 1 mm/s) at every state
    print(f"{name} {model} {select}: {n_states} states, worst relative difference {worst:.2e}")
    assert n_states > 0 and expect <= seen, (name, seen)


def test_ncp_saturated_group_compiled_equals_reference(monkeypatch):
    """A cube sliding and spinning on the ground under NCP with one group SATURATED (its friction direction held,
    the dF = -lambda_n dir branch of ncp_friction, which the rollouts above do not reach): compiled = reference."""
    from problems.inverse import cube_simulator

    sim = cube_simulator(contact="ncp")
    x = np.array([0.0, 0.0, 0.09999, 0.0, 0.0, 0.0, 1.0,
                  0.007009055938181084, 0.005068270019139218, 0.0, 0.0, 0.0, 0.017295133136119335])
    u = np.zeros(0)
    d = sim.create_data()
    sim.step(x, u, data=d)
    assert type(d.contact).__name__ == "FusedNCPState"
    assert (np.asarray(d.contact.core.ncp_solution[2])[:d.contact.core.nc] == 3).any()  # SATURATED
    for names in (["friction"], sim.parameter_names()):
        with monkeypatch.context() as m:
            m.setattr(P, "_reference_jacobian", _no_reference)
            new, ref = _both(sim, x, u, names, monkeypatch)
        assert np.abs(ref[4].dlam_dp[:, names.index("friction")]).max() > 1e-4  # friction acts through the term
        assert _rel(new[3], ref[3]) < 1e-11 and _rel(new[4].dlam_dp, ref[4].dlam_dp) < 1e-11


def test_a_core_built_before_ncp_and_relaxed_states_gets_the_lcps_only():
    """An installed core older than the Python (no ``parameter_plan_states``: its ParameterPlan refuses NCP and
    relaxed states) is handed the fused LCP's states only; the others take the reference."""
    from dynamics.contact_step import FusedContactState, FusedNCPState, FusedRelaxedState

    class OldCore:
        ParameterPlan = object

    assert P._compiled_states(OldCore()) == (FusedContactState,)
    assert P._compiled_states(None) == ()
    assert set(P._compiled_states(P._core)) == {FusedContactState, FusedNCPState, FusedRelaxedState}


@pytest.mark.parametrize("names", [["friction"], None])
def test_friction_in_flight_is_zero_without_a_call(names, monkeypatch):
    """Without contact a friction column is 0: step_derivatives returns it without the compiled or the reference
    path (a sysid's flight knots ask for it at every step), the same zeros the reference computes; with other
    columns the compiled path runs as before."""
    from problems.inverse import cube_simulator

    sim = cube_simulator()
    names = names or sim.parameter_names()
    x = sim.neutral_state()
    x[2] = 0.5
    x[sim.nq:] = [0.3, -0.2, 0.1, 1.0, -0.5, 0.2]
    d = sim.create_data()
    sim.step(x, np.zeros(0), data=d)
    assert d.contact is None
    with monkeypatch.context() as m:
        m.setattr(P, "_reference_jacobian", _no_reference)
        if len(names) == 1:  # no compiled call either
            m.setattr(P._Workspace, "plan", _no_reference)
        new, ref = _both(sim, x, np.zeros(0), names, monkeypatch)
    assert _rel(new[3], ref[3]) < 1e-12 and new[3].shape == ref[3].shape
    assert not new[3][:, names.index("friction")].any()
    assert (len(names) == 1) == (not new[3].any())


@pytest.mark.parametrize("name, model", [("catapult", "lcp"), ("catapult", "ncp"), ("catapult", "relaxed"),
                                         ("cartpole", None), ("go1-hold", "lcp")])
def test_fused_step_writes_the_plans_Fp(name, model, monkeypatch):
    """step_derivatives(x, u, params=...) without impulses: the compiled step writes Fp in the same call as Fx and
    Fu (FusedStep.step_derivatives(..., plan, Fp), reading the kinematics of the state Jacobians' RNEA or ABA
    derivatives), on a fresh workspace and on one that kept step()'s solve; the numbers are ParameterPlan.compute's
    (its own kinematics) on the same contact state to round-off, and x+, Fx, Fu those without params."""
    from dynamics.simulator import Simulator

    contact = None if model in (None, "relaxed") else model
    sim, states = _rollout_states(name, 30, contact=contact, smoothing=1e-4 if model == "relaxed" else 0.0)
    names = sim.parameter_names()
    blocks = P.resolve(sim, names)
    fused = []
    original = Simulator._fused_derivatives

    def spy(self, *args):
        result = original(self, *args)
        fused.append(result and len(args) > 7 and args[7] is not None)  # the fused call with the plan
        return result

    monkeypatch.setattr(Simulator, "_fused_derivatives", spy)
    monkeypatch.setattr(P, "_reference_jacobian", _no_reference)
    seen = set()
    for _, x, u in _raised_and_pushed(sim, states):
        for keep in (False, True):
            d = sim.create_data()
            if keep:
                sim.step(x, u, data=d)
            fused.clear()
            out, Fx, Fu, Fp = sim.step_derivatives(x, u, params=names, data=d)
            assert fused == [True]
            seen.add(type(d.contact).__name__)
            state = None if d.contact is None else d.contact.core
            nq = sim.nq
            tau = sim._tau(u, d, x[:nq], x[nq:])
            expect = P._workspace(sim).plan(sim, blocks).compute(state, x[:nq], x[nq:], tau, out[nq:], sim.dt,
                                                                 False)[0]
            assert _rel(Fp, expect) < 1e-12, _rel(Fp, expect)  # the kinematics of the state Jacobians' pass
            plain = sim.step_derivatives(x, u, data=sim.create_data())
            for a, b in zip((out, Fx, Fu), plain):
                assert np.array_equal(a, b)
    assert len(seen) == (1 if model is None else 2), seen  # flight and contact (or no contact model)
