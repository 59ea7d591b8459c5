"""Faithful MJCF (issue 12): includes, defaults, multi-joint bodies, geom masses, springs,
actuators, the ignored-feature warning, the floor plane.

Default tests write small MJCF strings into ``tmp_path``; MuJoCo/dm_control comparisons
are slow and skipped when those packages are missing.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pinocchio as pin
import pytest

from dynamics import Simulator
from dynamics.mjcf import MJCFError
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd


def _write(tmp_path, text, name="model.xml"):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Simulator.from_mjcf(path, **kw)


def _check_jacobians(sim, x, u, h=None):
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u, h=h)
    scale = max(1.0, np.abs(Fx).max())
    assert max_relative_error(Fx, fd.Fx) < 10 * fd_tolerance() * scale, max_relative_error(Fx, fd.Fx)
    assert max_relative_error(Fu, fd.Fu) < 10 * fd_tolerance() * scale


# -- 1. includes, compiler, default classes ---------------------------------------------
MAIN = """<mujoco model="inc">
  <include file="parts/defaults.xml"/>
  <compiler angle="degree"/>
  <worldbody>
    <body name="arm" pos="0 0 1" childclass="limb">
      <joint name="shoulder"/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <body name="fore" pos="0 0 -0.5">
        <joint name="elbow" class="stiff"/>
        <geom type="sphere" size="0.1" class="heavy"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder" gear="7"/><motor joint="elbow" ctrlrange="-2 1"/></actuator>
</mujoco>
"""
DEFAULTS = """<mujoco>
  <include file="more/classes.xml"/>
</mujoco>
"""
CLASSES = """<mujoco>
  <default>
    <motor ctrlrange="-3 3"/>
    <default class="limb">
      <joint type="hinge" axis="0 1 0" range="-45 90" damping="0.5"/>
      <geom density="500"/>
      <default class="stiff"><joint stiffness="20" springref="30"/></default>
    </default>
    <default class="heavy"><geom mass="4"/></default>
  </default>
</mujoco>
"""


def test_includes_and_default_classes(tmp_path):
    path = _write(tmp_path, MAIN)
    _write(tmp_path, DEFAULTS, "parts/defaults.xml")
    _write(tmp_path, CLASSES, "parts/more/classes.xml")  # relative to the including file
    sim = _load(path)
    m = sim.model
    assert [m.names[j] for j in range(1, m.njoints)] == ["shoulder", "elbow"]
    # default density 500 through childclass: 0.2 x 0.4 x 0.6 m box
    assert m.inertias[1].mass == pytest.approx(500 * 0.2 * 0.4 * 0.6)
    assert m.inertias[2].mass == pytest.approx(4.0)  # class="heavy" mass, not the limb density
    # the limb's joint range in degrees, for both joints (class stiff inherits from limb)
    assert np.allclose(m.lowerPositionLimit, np.radians([-45, -45]))
    assert np.allclose(m.upperPositionLimit, np.radians([90, 90]))
    assert np.allclose(sim.joint_damping, [0.5, 0.5])
    assert np.allclose(sim.joint_stiffness, [0.0, 20.0])
    assert np.allclose(sim.spring_reference[1], math.radians(30))
    # motor ranges: the default's ctrlrange times gear, and the actuator's own one
    assert np.allclose(sim.u_lower, [-21.0, -2.0]) and np.allclose(sim.u_upper, [21.0, 1.0])


def test_missing_include_and_unknown_class_are_named(tmp_path):
    path = _write(tmp_path, MAIN)
    with pytest.raises(FileNotFoundError, match="parts/defaults.xml"):
        _load(path)
    bad = _write(tmp_path, MAIN.replace('<include file="parts/defaults.xml"/>', "").replace("limb", "limbo"), "b.xml")
    with pytest.raises(MJCFError, match="unknown class 'limbo'"):
        _load(bad)
    crossed = _write(tmp_path, """<mujoco><worldbody><body name="b"><joint name="j" range="10 -10"/>
        <geom size="0.1"/></body></worldbody></mujoco>""", "c.xml")
    with pytest.raises(MJCFError, match="name='j'.*lower > upper"):
        _load(crossed)


# -- 2. bodies with several joints --------------------------------------------------------
PLANAR = """<mujoco model="dumbbell">
  <compiler angle="radian"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" pos="0 0 {floor}"/>
    <body name="bar" pos="0.1 0 0.3" euler="0 0.2 0">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <joint name="pitch" type="hinge" axis="0 1 0" pos="0.05 0 0.02" stiffness="{k}" damping="{d}"/>
      <geom type="sphere" size="0.05" pos="-0.2 0 0" mass="1"/>
      <geom type="sphere" size="0.05" pos="0.2 0 0.1" mass="2"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_multi_joint_body_is_a_chain_with_mujoco_kinematics(tmp_path):
    sim = _load(_write(tmp_path, PLANAR.format(floor=0, k=0, d=0)))
    m = sim.model
    assert [m.joints[j].shortname() for j in range(1, m.njoints)] == ["JointModelPX", "JointModelPZ",
                                                                     "JointModelRY"]
    assert (sim.nq, sim.nv) == (3, 3)
    assert m.inertias[1].mass == 0 and m.inertias[2].mass == 0 and m.inertias[3].mass == pytest.approx(3.0)
    # MuJoCo: body frame = parent * (pos, quat); slides translate along their axis (body frame),
    # the hinge rotates about the axis through its anchor, the anchor fixed in space.
    q = np.array([0.3, -0.1, 0.7])
    d = m.createData()
    pin.forwardKinematics(m, d, q)
    R0, p0 = pin.rpy.rpyToMatrix(0, 0.2, 0), np.array([0.1, 0, 0.3])
    p = p0 + R0 @ np.array([q[0], 0, q[1]])
    anchor = p + R0 @ np.array([0.05, 0, 0.02])
    R = R0 @ pin.rpy.rpyToMatrix(0, q[2], 0)
    sphere = np.array([0.2, 0, 0.1])  # in the body frame
    expected = anchor + R @ (sphere - np.array([0.05, 0, 0.02]))
    oMb = d.oMi[3] * m.frames[m.getFrameId("bar")].placement
    assert np.allclose(oMb.act(sphere), expected, atol=1e-12)


@pytest.mark.parametrize("contact", ["lcp", "ncp"])
def test_multi_joint_body_contact_jacobians(tmp_path, contact):
    sim = _load(_write(tmp_path, PLANAR.format(floor=0, k=3, d=0.2)), friction=0.5, contact=contact)
    xs = sim.rollout(sim.default_state(), np.zeros((400, 0)))
    assert len(sim.contacts) == 2  # both spheres on the floor
    rng = np.random.default_rng(3)
    for t in (250, 399):
        x = xs[t].copy()
        x[3:] += [0.3, 0.0, 0.2] * rng.uniform(0.5, 1.0, 3)  # sliding and rocking
        _check_jacobians(sim, x, np.zeros(0))


# -- 3. masses and inertias ---------------------------------------------------------------
SHAPES = """<mujoco>
  <compiler {compiler}/>
  <worldbody>
    <body name="b" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 0 1"/>
      <geom type="{type}" size="{size}" {extra}/>
    </body>
  </worldbody>
</mujoco>
"""


def _hemisphere_capsule(m, r, h):
    """Capsule inertia from a cylinder and two hemispheres (parallel axis), uniform density."""
    vc, vs = math.pi * r * r * h, 4 / 3 * math.pi * r ** 3
    mc, ms = m * vc / (vc + vs), m * vs / (vc + vs)
    d = h / 2 + 3 * r / 8  # hemisphere centroid from the capsule centre
    ixx = mc * (3 * r * r + h * h) / 12 + ms * (83 / 320 * r * r) + ms * d * d
    return (vc + vs), np.array([ixx, ixx, mc * r * r / 2 + 0.4 * ms * r * r])


@pytest.mark.parametrize("gtype,size,volume_inertia", [
    ("box", (0.1, 0.2, 0.3), lambda m: (0.2 * 0.4 * 0.6, m / 12 * np.array([0.4**2 + 0.6**2, 0.2**2 + 0.6**2,
                                                                             0.2**2 + 0.4**2]))),
    ("sphere", (0.1,), lambda m: (4 / 3 * math.pi * 1e-3, np.full(3, 0.4 * m * 0.01))),
    ("cylinder", (0.1, 0.3), lambda m: (math.pi * 0.01 * 0.6, np.array([m * (0.03 + 0.36) / 12] * 2 + [m * 0.005]))),
    ("ellipsoid", (0.1, 0.2, 0.3), lambda m: (4 / 3 * math.pi * 0.006, m / 5 * np.array([0.13, 0.10, 0.05]))),
    ("capsule", (0.1, 0.3), lambda m: _hemisphere_capsule(m, 0.1, 0.6)),
])
def test_geom_mass_and_inertia_closed_forms(tmp_path, gtype, size, volume_inertia):
    sz = " ".join(map(str, size))
    # default density 1000 kg/m^3
    sim = _load(_write(tmp_path, SHAPES.format(compiler="", type=gtype, size=sz, extra="")))
    vol, _ = volume_inertia(1.0)
    I = sim.model.inertias[1]
    assert I.mass == pytest.approx(1000 * vol, rel=1e-12)
    assert np.allclose(np.diag(I.inertia), volume_inertia(I.mass)[1], rtol=1e-12, atol=0)
    # explicit density, explicit mass, and settotalmass scale it all
    sim = _load(_write(tmp_path, SHAPES.format(compiler="", type=gtype, size=sz, extra='density="300"')))
    assert sim.model.inertias[1].mass == pytest.approx(300 * vol, rel=1e-12)
    sim = _load(_write(tmp_path, SHAPES.format(compiler='settotalmass="7"', type=gtype, size=sz, extra='mass="2"')))
    assert sim.model.inertias[1].mass == pytest.approx(7.0)
    assert np.allclose(np.diag(sim.model.inertias[1].inertia), volume_inertia(7.0)[1], rtol=1e-12, atol=0)


def test_inertia_from_geoms_combines_offsets_and_rotations(tmp_path):
    text = """<mujoco><compiler angle="radian" inertiafromgeom="{ifg}"/><worldbody>
      <body name="b"><joint name="j" type="hinge"/>
        <inertial pos="0 0 0" mass="9" diaginertia="1 1 1"/>
        <geom type="box" size="0.1 0.2 0.3" pos="0.5 0 0" axisangle="0 0 1 1.5707963267948966" mass="1"/>
        <geom type="sphere" size="0.1" pos="-0.5 0 0" mass="1"/>
      </body></worldbody></mujoco>"""
    I = _load(_write(tmp_path, text.format(ifg="true"))).model.inertias[1]
    assert I.mass == pytest.approx(2.0) and np.allclose(I.lever, 0, atol=1e-15)
    box = np.diag([(0.4**2 + 0.6**2) / 12, (0.2**2 + 0.6**2) / 12, (0.2**2 + 0.4**2) / 12])[[1, 0, 2]][:, [1, 0, 2]]
    expected = box + np.diag(np.full(3, 0.4 * 0.01)) + 2 * 0.25 * np.diag([0, 1, 1])
    assert np.allclose(I.inertia, expected, atol=1e-14)
    # "auto" (default) keeps the explicit <inertial>
    assert _load(_write(tmp_path, text.format(ifg="auto"))).model.inertias[1].mass == pytest.approx(9.0)


# -- 4. joint springs and damping -------------------------------------------------------
SLIDER = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
  <body name="cart"><joint name="s" type="slide" axis="1 0 0" stiffness="{k}" springref="{r}" damping="{d}"/>
    <geom type="box" size="0.1 0.1 0.1" mass="{m}"/></body></worldbody></mujoco>"""


def test_damped_spring_matches_the_closed_form(tmp_path):
    m, k, d, r = 2.0, 50.0, 1.0, 0.3
    sim = _load(_write(tmp_path, SLIDER.format(k=k, r=r, d=d, m=m)), dt=1e-4)
    x0 = np.array([r + 0.1, 0.0])
    T = 30000  # 3 s, about 2.4 periods
    xs = sim.rollout(x0, np.zeros((T, sim.nu)))
    w0, zeta = math.sqrt(k / m), d / (2 * math.sqrt(k * m))
    wd = w0 * math.sqrt(1 - zeta ** 2)
    t = np.arange(T + 1) * sim.dt
    exact = r + 0.1 * np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta / math.sqrt(1 - zeta ** 2) * np.sin(wd * t))
    assert np.abs(xs[:, 0] - exact).max() < 2e-4  # semi-implicit Euler, O(dt)
    assert np.abs(xs[:, 0] - r).max() > 0.09  # it did oscillate


def test_spring_and_damping_jacobians_match_finite_differences(tmp_path):
    # a pendulum (gravity, spring about a reference, damping), no contact
    text = """<mujoco><compiler angle="radian"/><worldbody><body name="p" pos="0 0 1">
      <joint name="h" type="hinge" axis="0 1 0" stiffness="4" springref="0.4" damping="0.7"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 -0.4" size="0.03"/>
      <body name="q" pos="0.3 0 -0.4"><joint name="h2" type="hinge" axis="1 0 0" damping="0.3" stiffness="1"/>
        <geom type="sphere" size="0.05"/></body></body></worldbody>
      <actuator><motor joint="h2"/></actuator></mujoco>"""
    sim = _load(_write(tmp_path, text), dt=0.01)
    assert np.allclose(sim.joint_stiffness, [4, 1]) and np.allclose(sim.joint_damping, [0.7, 0.3])
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.uniform(-1.5, 1.5, sim.nx)
        _check_jacobians(sim, x, rng.standard_normal(sim.nu))
    # the passive torque is really there: without it the Jacobians differ
    bare = Simulator(sim.model, dt=0.01, actuated=["h2"])
    assert not np.allclose(bare.step_derivatives(x, np.ones(1))[1], sim.step_derivatives(x, np.ones(1))[1])


def test_passive_parameters_are_validated(tmp_path):
    sim = _load(_write(tmp_path, SLIDER.format(k=1, r=0, d=0, m=1)))
    with pytest.raises(ValueError, match=r"joint_stiffness\[0\] = -1.0 \(joint 's'\) must be finite and >= 0"):
        Simulator(sim.model, joint_stiffness=-1.0)
    with pytest.raises(ValueError, match=r"joint_damping has shape \(2,\), expected a scalar or \(1,\)"):
        Simulator(sim.model, joint_damping=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"spring_reference\[0\] = nan"):
        Simulator(sim.model, joint_stiffness=1.0, spring_reference=float("nan"))
    free = _load(_write(tmp_path, """<mujoco><worldbody><body name="b"><freejoint name="root"/>
        <geom size="0.1"/></body></worldbody></mujoco>""", "free.xml"))
    with pytest.raises(ValueError, match="joint 'root'.*springs need a revolute or prismatic joint"):
        Simulator(free.model, joint_stiffness=[1, 0, 0, 0, 0, 0])


# -- 5. actuators -------------------------------------------------------------------------
def test_position_servo_is_exact(tmp_path):
    text = """<mujoco><compiler angle="radian"/><option gravity="0 0 0"/><worldbody><body name="b">
      <joint name="h" type="hinge" axis="0 0 1" stiffness="2" springref="0.1"/>
      <geom type="box" size="0.5 0.1 0.1" mass="3"/></body></worldbody>
      <actuator><position joint="h" kp="40" kv="2" gear="1.5" ctrlrange="0 1"/></actuator></mujoco>"""
    sim = _load(_write(tmp_path, text), dt=1e-3)
    kp, kv, g = 40.0, 2.0, 1.5
    assert sim.mjcf.control_scale["h"] == pytest.approx(g * kp)
    assert np.allclose([sim.u_lower[0], sim.u_upper[0]], [0.0, g * kp])  # ctrl in [0, 1]
    Izz = 3 * (1.0 ** 2 + 0.2 ** 2) / 12
    q, v, ctrl = 0.3, -0.5, 0.8
    # MuJoCo: length g q, force kp (ctrl - g q) - kv g v, joint torque g * force; spring 2 (q - 0.1)
    tau = g * (kp * (ctrl - g * q) - kv * g * v) - 2 * (q - 0.1)
    # the servo's damping g^2 kv is implicit: (Izz + dt g^2 kv)(v+ - v) = dt tau
    x1 = sim.step(np.array([q, v]), np.array([g * kp * ctrl]))
    assert x1[1] == pytest.approx(v + sim.dt * tau / (Izz + sim.dt * g * g * kv), rel=1e-12)
    _check_jacobians(sim, np.array([q, v]), np.array([g * kp * ctrl]))
    explicit = _load(_write(tmp_path, text), dt=1e-3, damping="explicit")
    x1 = explicit.step(np.array([q, v]), np.array([g * kp * ctrl]))
    assert x1[1] == pytest.approx(v + sim.dt * tau / Izz, rel=1e-12)


# -- 6. the warning and the ground --------------------------------------------------------
def test_one_warning_lists_every_ignored_feature(tmp_path):
    text = """<mujoco><option viscosity="0.1"/><worldbody>
      <body name="a"><joint name="j1" frictionloss="0.3"/><geom size="0.1"/>
        <body name="b" pos="0 0 -0.3"><joint name="j2" frictionloss="0.2"/><geom size="0.1" friction="0.5"/></body>
      </body></worldbody>
      <equality><weld body1="b"/></equality>
      <tendon><fixed name="t"><joint joint="j1" coef="1"/><joint joint="j2" coef="-1"/></fixed></tendon>
      <actuator><motor tendon="t"/></actuator></mujoco>"""
    with pytest.warns(UserWarning) as rec:
        Simulator.from_mjcf(_write(tmp_path, text))
    msgs = [str(w.message) for w in rec if "MJCF" in str(w.message)]
    assert len(msgs) == 1
    for item in ("equality/weld x1", "tendon/fixed x1", "joint@frictionloss x2", "geom@friction x1",
                 "option@viscosity x1", "actuator/motor@tendon x1"):
        assert item in msgs[0], (item, msgs[0])


def test_floor_plane_becomes_the_ground(tmp_path):
    text = """<mujoco><worldbody><geom type="plane" size="1 1 0.1" pos="0 0 -0.5"/>
      <body name="ball" pos="0 0 0"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
      </worldbody></mujoco>"""
    path = _write(tmp_path, text)
    sim = _load(path)
    assert sim.mjcf.ground == pytest.approx(-0.5)
    xs = sim.rollout(sim.default_state(), np.zeros((800, 0)))
    assert xs[-1][2] == pytest.approx(-0.4, abs=1e-3)  # resting on the plane
    sim = _load(path, ground=-1.0)  # ground= wins
    xs = sim.rollout(sim.default_state(), np.zeros((800, 0)))
    assert xs[-1][2] < -0.5


# -- 7. against MuJoCo (slow, needs mujoco and dm_control / gymnasium) ---------------------
def _suite_files():
    files = []
    try:
        import dm_control
        d = os.path.join(os.path.dirname(dm_control.__file__), "suite")
        files += [os.path.join(d, f) for f in ("cheetah.xml", "hopper.xml", "walker.xml")]
    except ImportError:
        pass
    try:
        import gymnasium
        d = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
        files += [os.path.join(d, f) for f in ("half_cheetah.xml", "hopper.xml", "walker2d.xml", "ant.xml",
                                               "humanoid.xml")]
    except ImportError:
        pass
    return files


def _to_ours(sim, mj, qpos):
    q = qpos.copy()
    if sim.model.joints[1].shortname() == "JointModelFreeFlyer":
        q[3:7] = qpos[[4, 5, 6, 3]]
    for name, r in sim.mjcf.ref.items():
        q[sim.model.joints[sim.model.getJointId(name)].idx_q] -= r
    return q


@pytest.mark.slow
def test_mass_matrices_and_gravity_match_mujoco():
    mujoco = pytest.importorskip("mujoco")
    files = _suite_files()
    if not files:
        pytest.skip("neither dm_control nor gymnasium is installed")
    rng = np.random.default_rng(0)
    for path in files:
        mj = mujoco.MjModel.from_xml_path(path)
        md = mujoco.MjData(mj)
        sim = _load(path)
        assert [sim.model.names[j] for j in range(1, sim.model.njoints)] == [mj.joint(i).name for i in range(mj.njnt)]
        s = 6 if sim.model.joints[1].shortname() == "JointModelFreeFlyer" else 0
        d = sim.model.createData()
        for _ in range(3):
            md.qpos[:] = mj.qpos0
            md.qpos[s + (1 if s else 0):] += 0.3 * rng.standard_normal(mj.nq - s - (1 if s else 0))
            mujoco.mj_forward(mj, md)
            M = np.zeros((mj.nv, mj.nv))
            mujoco.mj_fullM(mj, md, M)
            q = _to_ours(sim, mj, md.qpos)
            assert np.abs(pin.crba(sim.model, d, q)[s:, s:] - M[s:, s:]).max() < 1e-10, path
            g = pin.computeGeneralizedGravity(sim.model, d, q)
            assert np.abs(g[s:] - md.qfrc_bias[s:]).max() < 1e-10, path


@pytest.mark.slow
def test_cheetah_contact_jacobians_match_finite_differences():
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "cheetah.xml")
    sim = _load(path)
    rng = np.random.default_rng(0)
    x0 = sim.default_state()
    x0[sim.nq:] = 0.5 * rng.standard_normal(sim.nv)
    us = 0.3 * rng.standard_normal((1200, sim.nu)) * sim.u_upper
    xs = sim.rollout(x0, us)
    checked = 0
    for t in range(150, 1200, 150):
        sim.step(xs[t], us[t])
        if sim.contacts is None or not len(sim.contacts):
            continue
        # h = 1e-7: resting feet hover ~1e-7 m above the floor after a clamping step; the
        # default step (6e-6) would cross into contact.
        _, Fx, Fu = sim.step_derivatives(xs[t], us[t])
        fd = step_jacobians_fd(sim, xs[t], us[t], h=1e-7)
        assert max_relative_error(Fx, fd.Fx) < 1e-7 and max_relative_error(Fu, fd.Fu) < 1e-7, t
        checked += 1
    assert checked >= 5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cheetah", "hopper", "walker"])
def test_dm_control_rest_heights_match_mujoco(name):
    """Zero controls for 1.5 s: the torso height within 2 cm of MuJoCo's.

    Both start from the file's pose with the joints clamped into their limits (hopper's knee
    starts 5 degrees outside) and the root pitched by 0.1 rad: the walker's upright pose is an
    equilibrium that hard contact keeps and MuJoCo's soft contact leaves.
    """
    mujoco = pytest.importorskip("mujoco")
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")
    mj = mujoco.MjModel.from_xml_path(path)
    md = mujoco.MjData(mj)
    lim = mj.jnt_limited.astype(bool)
    lo = np.where(lim, mj.jnt_range[:, 0], -np.inf)
    hi = np.where(lim, mj.jnt_range[:, 1], np.inf)
    q0 = np.clip(mj.qpos0, lo, hi)  # planar models: one qpos per joint
    q0[mj.joint("rooty").qposadr[0]] += 0.1
    md.qpos[:] = q0
    while md.time < 1.5 - 1e-9:
        mujoco.mj_step(mj, md)
    z_mujoco = md.xpos[mj.body("torso").id][2]
    sim = _load(path, dt=1e-3)
    x0 = np.concatenate((q0, np.zeros(sim.nv)))
    xs = sim.rollout(x0, np.zeros((1500, sim.nu)))
    d = sim.model.createData()
    pin.framesForwardKinematics(sim.model, d, xs[-1][:sim.nq])
    z = d.oMf[sim.model.getFrameId("torso")].translation[2]
    assert abs(z - z_mujoco) < 0.02, (z, z_mujoco)


def test_unnamed_joints_are_named_after_their_bodys_generated_name(tmp_path):
    """Unnamed joints of unnamed bodies take the body's MuJoCo name (body<id>): they were all 'body_joint0' (and a
    free joint 'None_free'), and the model failed to load on their shared name (a review, 2026-11-28)."""
    path = _write(tmp_path, """
<mujoco><worldbody>
  <body pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/>
    <body pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.5"/>
      <body pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.5"/></body>
    </body>
  </body>
</worldbody></mujoco>""")
    sim = Simulator.from_mjcf(path)
    assert list(sim.model.names) == ["universe", "body1_free", "body2_joint0", "body3_joint0"]
    assert [n for n in sim.parameter_names() if n.startswith("mass:")] == ["mass:body1", "mass:body2", "mass:body3"]
