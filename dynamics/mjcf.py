"""MJCF loading on top of Pinocchio's parser, with its gaps in 4.1 closed.

Pinocchio 4.1's ``buildModelFromMJCF`` (checked on small files):

1. parses only the first top-level ``<body>`` of ``<worldbody>`` and silently
   drops the others: we wrap all top-level bodies in one joint-less body, which
   Pinocchio welds to the world;
2. converts *slide* joint ranges from degrees to radians when the compiler's
   angle unit is degrees (a range of 1 m becomes 0.0175 m): we restore them;
3. ignores ``<actuator>``: we read ``<motor>`` elements so that the actuated
   joints and their force limits come from the file (``gear`` times
   ``ctrlrange``, or ``forcerange``).

``qpos0`` (the body poses written in the file) is kept by Pinocchio as the
reference configuration ``"qpos0"``; :meth:`Simulator.default_state` uses it.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin


@dataclass
class MJCFInfo:
    """What the MJCF says beyond the kinematic tree."""

    actuated: list[str] = field(default_factory=list)  # joint names with a motor, in actuator order
    effort: dict[str, float] = field(default_factory=dict)  # joint -> force/torque limit


def _floats(s):
    return [float(t) for t in s.split()] if s else []


def load_mjcf(path: str, *, load_geometry: bool = True):
    """``(model, geometry or None, MJCFInfo)`` from an MJCF file (see the module docstring)."""
    try:
        tree = ET.parse(path)
    except ET.ParseError as exc:
        raise ValueError(f"could not parse MJCF {path}: {exc}") from exc
    root = tree.getroot()
    world = root.find("worldbody")
    if world is None:
        raise ValueError(f"MJCF {path} has no <worldbody>")
    top = [b for b in world if b.tag == "body"]
    if not top:
        raise ValueError(f"MJCF {path} has no <body> in its <worldbody>")
    compiler = root.find("compiler")
    degrees = compiler is None or compiler.get("angle", "degree") == "degree"

    load_path, tmp = path, None
    if len(top) > 1:
        wrapper = ET.Element("body", {"name": "__world_bodies__"})
        for b in top:
            world.remove(b)
            wrapper.append(b)
        world.append(wrapper)
        # Same folder, so relative mesh/include paths still resolve.
        fd, tmp = tempfile.mkstemp(suffix=".xml", prefix=".mjcf_", dir=os.path.dirname(os.path.abspath(path)))
        os.close(fd)
        tree.write(tmp)
        load_path = tmp
    try:
        model = pin.buildModelFromMJCF(load_path)
        geometry = pin.buildGeomFromMJCF(model, load_path, pin.GeometryType.COLLISION) if load_geometry else None
    except (ValueError, RuntimeError) as exc:
        raise ValueError(f"could not build a model from MJCF {path}: {exc}") from exc
    finally:
        if tmp is not None:
            os.unlink(tmp)

    if degrees:
        _restore_slide_ranges(model, root)
    info = _actuators(model, root, path)
    return model, geometry, info


def _restore_slide_ranges(model, root):
    for jel in root.iter("joint"):
        if jel.get("type") != "slide" or not jel.get("range"):
            continue
        name = jel.get("name")
        if not name or not model.existJointName(name) or jel.get("limited", "auto") == "false":
            continue
        lo, hi = _floats(jel.get("range"))
        j = model.joints[model.getJointId(name)]
        lower, upper = model.lowerPositionLimit.copy(), model.upperPositionLimit.copy()
        lower[j.idx_q], upper[j.idx_q] = lo, hi
        model.lowerPositionLimit, model.upperPositionLimit = lower, upper


def _actuators(model, root, path) -> MJCFInfo:
    info = MJCFInfo()
    act = root.find("actuator")
    if act is None:
        return info
    for m in act:
        if m.tag not in ("motor", "general"):
            continue
        joint = m.get("joint")
        if joint is None:
            continue
        if not model.existJointName(joint):
            raise ValueError(f"MJCF {path}: actuator on unknown joint {joint!r}")
        gear = abs(_floats(m.get("gear", "1"))[0])
        limit = np.inf
        if m.get("forcerange") and m.get("forcelimited", "true") != "false":
            limit = max(abs(v) for v in _floats(m.get("forcerange")))
        elif m.get("ctrlrange") and m.get("ctrllimited", "true") != "false":
            limit = gear * max(abs(v) for v in _floats(m.get("ctrlrange")))
        if joint not in info.actuated:
            info.actuated.append(joint)
        info.effort[joint] = limit
    return info
