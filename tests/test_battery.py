"""The robot battery (issue 12): every public model file a new user would try.

Every example-robot-data URDF, and, when the packages are importable, dm_control's
suite and gymnasium's MuJoCo MJCF files. Each model either loads or fails at load with
a clear error (ModelError / MJCFError / FileNotFoundError / ValueError whose message
names an element, link, file or value). Every loaded one is dropped from 1 mm above
the ground (a floating base; the ground 1 mm below its lowest collision point at its
default state) or held by gravity-compensating torques (a fixed base; the ground 1 cm
below it), for 1 s at dt = 2 ms, and must rest without NaN, without SimulationError,
and with its lowest collision point no more than 5 mm below the ground.

A case that fails for a known reason is an ``xfail(strict=True)`` carrying the
measured number and the cause (``KNOWN``), so the suite documents it honestly.
Run with ``python -m pytest -m slow tests/test_battery.py`` (pieces with ``-k``).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import time
import warnings

import coal
import numpy as np
import pinocchio as pin
import pytest

from dynamics import ModelError, SimulationError, Simulator
from dynamics.mjcf import MJCFError

pytestmark = pytest.mark.slow

DT = 2e-3
DURATION = 1.0
MAX_SINK = 5e-3  # m
DROP = 1e-3  # m: floating bases start this far above the ground
FIXED_CLEARANCE = 1e-2  # m: the ground below a fixed-base model

#: URDF folders whose robots stand, walk, roll or fly: loaded with a free-flyer base.
FLOATING = ("a1_", "alex_", "alexander_", "anymal", "b1_", "bolt_", "borinot_", "centauro_", "g1_", "go1_",
            "go2_", "hector_", "hextilt_", "human_", "hyq_", "icub_", "iris_", "laikago_", "pr2_",
            "quadruped_", "romeo_", "simple_humanoid_", "solo_", "talos_data", "tiago")
FIXED_FILES = ("talos_left_arm.urdf",)  # an arm of Talos, mounted


def _urdf_cases():
    try:
        from dynamics.robots import example_robot_data_share

        root = os.path.join(example_robot_data_share(), "example-robot-data", "robots")
    except FileNotFoundError:
        return []
    out = []
    for path in sorted(glob.glob(os.path.join(root, "*", "**", "*.urdf"), recursive=True)):
        rel = os.path.relpath(path, root)
        floating = rel.startswith(FLOATING) and os.path.basename(path) not in FIXED_FILES
        out.append(pytest.param(("urdf", path, floating), id="erd/" + os.path.basename(path)[:-5]))
    return out


def _mjcf_cases():
    out = []
    for pkg, pattern, tag in (("dm_control", "suite/*.xml", "dmc"),
                              ("gymnasium", "envs/mujoco/assets/*.xml", "gym")):
        try:
            mod = __import__(pkg)
        except Exception:  # noqa: BLE001 - absent or broken: those cases are not generated
            continue
        for path in sorted(glob.glob(os.path.join(os.path.dirname(mod.__file__), pattern))):
            out.append(pytest.param(("mjcf", path, None), id=f"{tag}/{os.path.basename(path)[:-4]}"))
    return out


CASES = _urdf_cases() + _mjcf_cases()

#: Known outcomes: case id -> ("load-error", what the message must mention) or ("xfail", reason).
KNOWN: dict[str, tuple[str, str]] = {
    # Files that are wrong or use what is not supported: a clear error at load.
    "erd/ur3": ("load-error", "does not contain a valid URDF model"),  # pinocchio's URDF parser refuses it
    "erd/romeo": ("load-error", "has mass 0.0 and carries no body with mass"),  # LFinger21Link
    "erd/romeo_laas_small": ("load-error", "not positive semi-definite"),  # base_link moment -0.021 kg m^2
    "erd/romeo_small": ("load-error", "triangle inequality"),  # RShoulderYawLink 0.0066 > 0.00066 + 0.00068
    "erd/icub": ("load-error", "mass matrix is singular"),  # neck_yaw moves no inertia about its axis
    "erd/centauro": ("load-error", "could not build its convex hull"),  # coal: "Too many neighbors."
    "dmc/dog": ("load-error", "<skin>"),
    "dmc/lqr": ("load-error", "has no <body>"),  # a template: dm_control adds the bodies in code
    # No collision geometry at all: loads, and ground= is refused.
    "erd/alexander_v1.lowerBodyOnly": ("no-collision", ""),
    "erd/TwoDofs": ("no-collision", ""),
    "erd/human": ("no-collision", ""),
    "erd/simple_humanoid_classical": ("no-collision", ""),
    "gym/swimmer": ("no-collision", ""),  # every geom has contype=conaffinity=0
    # Measured 2026-11-27 (failing already at 84c107e, the slow suite's only failure): the unactuated upper body
    # topples and at t = 0.992 s its left gripper strikes the ground at ~17 m/s, crossing the 5 mm detection
    # margin in one 2 ms step (-28.6 mm); the position correction takes it out over the next steps (-9.9 mm at
    # 1 s, the test's end; < 0.1 mm from 1.5 s on). Speculative contact covers margin / dt = 2.5 m/s only.
    # With Simulator(speculative=True) it stays out (0.009 mm at 1 s): tests/test_speculative.py; the battery runs
    # every robot with the defaults, as a user's first load does.
    "erd/alex_nub_hands": ("xfail", "a gripper strikes at ~17 m/s just before the 1 s mark and is 9.9 mm deep "
                                    "then (the 5 mm margin covers 2.5 m/s per 2 ms step; speculative=True covers "
                                    "it); out by 1.5 s"),
}

CLEAR_ERRORS = (ModelError, MJCFError, FileNotFoundError, ValueError)
RESULTS = os.environ.get("BATTERY_RESULTS")  # a JSON-lines file to append each case's measurements to


def _lowest_point(sim: Simulator, q: np.ndarray, up: np.ndarray) -> float:
    """The lowest collision point of the model at ``q`` along ``up`` (support functions, meshes by their
    vertices: the points of a rigid body that can touch a plane are its convex hull's)."""
    model, gm = sim.model, sim.geometry
    data = model.createData()
    gd = pin.GeometryData(gm)
    pin.updateGeometryPlacements(model, data, gm, gd, q)
    low = math.inf
    for k, obj in enumerate(gm.geometryObjects):
        if obj.parentJoint == 0:
            continue
        M = gd.oMg[k]
        R, t = np.asarray(M.rotation), np.asarray(M.translation)
        d = R.T @ up  # up in the shape's frame
        g = obj.geometry
        if isinstance(g, coal.Sphere):
            h = -g.radius
        elif isinstance(g, coal.Box):
            h = -np.abs(d) @ g.halfSide
        elif isinstance(g, coal.Capsule):
            h = -g.halfLength * abs(d[2]) - g.radius
        elif isinstance(g, coal.Cylinder):
            h = -g.halfLength * abs(d[2]) - g.radius * math.hypot(d[0], d[1])
        elif isinstance(g, coal.Ellipsoid):
            h = -math.sqrt(float((g.radii * d) @ (g.radii * d)))
        elif isinstance(g, coal.BVHModelBase):
            V = np.asarray(g.vertices(), dtype=float).reshape(-1, 3)
            h = float((V @ d).min())
        elif isinstance(g, coal.ConvexBase):
            h = float((np.asarray(g.points(), dtype=float) @ d).min())
        else:
            continue
        low = min(low, float(up @ t) + h)
    return low


def _load(kind, path, floating, **kw):
    if kind == "urdf":
        return Simulator.from_urdf(path, floating_base=floating, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loader's one warning lists what is ignored
        return Simulator.from_mjcf(path, **kw)


def _is_floating(sim: Simulator) -> bool:
    """A free-flyer root, or (planar MJCF models) a root chain with a slide joint along the up axis."""
    m = sim.model
    j1 = m.joints[1]
    if j1.shortname() == "JointModelFreeFlyer":
        return True
    return any(m.parents[j] == 0 or m.parents[m.parents[j]] == 0
               for j in range(1, m.njoints) if m.joints[j].shortname().startswith("JointModelP"))


def _record(case_id, **values):
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps({"id": case_id, **values}) + "\n")


@pytest.mark.parametrize("case", CASES)
def test_model_loads_and_rests(case, request):
    kind, path, floating = case
    case_id = request.node.callspec.id
    known = KNOWN.get(case_id)
    if known is not None and known[0] == "xfail":
        request.applymarker(pytest.mark.xfail(strict=True, reason=known[1]))
    try:
        probe = _load(kind, path, floating, dt=DT)
    except CLEAR_ERRORS as exc:
        msg = str(exc)
        _record(case_id, loads=False, error=f"{type(exc).__name__}: {msg[:300]}")
        # A clear message names something: a quoted name, an element, a file or a value.
        assert re.search(r"'[^']+'|<\w+|/\w+\.\w+|\d", msg) and len(msg) >= 30, msg
        assert known is not None and known[0] == "load-error", f"unexpected load error {type(exc).__name__}: {msg}"
        assert known[1] in msg, msg
        return
    assert known is None or known[0] != "load-error", "loads, but a load error was expected"
    g = np.asarray(probe.model.gravity.linear, dtype=float)
    up = -g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else np.array([0.0, 0.0, 1.0])  # gym pusher: no gravity
    x0 = probe.default_state()
    if probe.geometry is None or len(probe.geometry.geometryObjects) == 0:
        # Nothing can touch the ground: ground= must be refused with a clear error, not ignored.
        with pytest.raises(ModelError, match="collision geometry") as err:
            _load(kind, path, floating, dt=DT, ground=0.0)
        _record(case_id, loads=False, error=f"no collision geometry: ModelError: {err.value}"[:300])
        assert known is not None and known[0] == "no-collision", "has no collision geometry"
        return
    assert known is None or known[0] != "no-collision"
    low = _lowest_point(probe, x0[:probe.nq], up)
    floating = _is_floating(probe)
    ground = low - (DROP if floating else FIXED_CLEARANCE)
    sim = _load(kind, path, floating if kind == "urdf" else None, dt=DT, ground=ground)
    data = sim.model.createData()
    if floating:
        u = np.zeros(sim.nu)
    else:  # gravity compensation on the actuated joints
        g = pin.rnea(sim.model, data, x0[:sim.nq], np.zeros(sim.nv), np.zeros(sim.nv)).copy()
        u = g[sim.actuated_dofs]
    n = round(DURATION / DT)
    x = x0.copy()
    t0 = time.perf_counter()
    worst = 0.0
    try:
        for _ in range(n):
            x = sim.step(x, u)
            c = sim.contacts
            if c is not None and len(c):
                worst = min(worst, float(c.phi.min()))
    except SimulationError as exc:
        _record(case_id, loads=True, error=f"SimulationError: {exc}"[:300])
        raise
    per_step = (time.perf_counter() - t0) / n
    assert np.all(np.isfinite(x)), "NaN or inf in the state"
    sink = max(0.0, ground - _lowest_point(sim, x[:sim.nq], up))
    speed = float(np.abs(x[sim.nq:]).max())
    _record(case_id, loads=True, floating=floating, nq=sim.nq, sink_mm=1e3 * sink, deepest_phi_mm=1e3 * worst,
            ms_per_step=1e3 * per_step, final_speed=speed, ncontacts=len(sim.contacts or []))
    assert sink <= MAX_SINK, f"sinks {1e3 * sink:.1f} mm (deepest contact {1e3 * worst:.1f} mm)"
