"""MJCF loading: one pre-processing pass to a flat, explicit MJCF, then Pinocchio's parser.

What MuJoCo means by a file is the reference (``mujoco.MjModel.from_xml_path``).
Pinocchio 4.1's ``buildModelFromMJCF`` alone reads files loosely (checked on small
files): it keeps only the first top-level body, has no ``<include>``, merges the
joints of one body into a composite joint placed at the wrong anchor, converts
slide ranges by the angle unit, ignores ``<option gravity>``, ``settotalmass``
and actuators. So :func:`flatten_mjcf` first rewrites the file into a tree that
leaves Pinocchio nothing to interpret:

- ``<include file=...>`` expanded recursively (relative to the including file, then
  to the main file); ``meshdir``/``assetdir`` folded into absolute mesh paths;
- default classes (``<default class>`` nesting, ``childclass``, ``class=``) written
  into every element, then removed;
- every orientation (``euler`` with ``eulerseq``, ``axisangle``, ``xyaxes``,
  ``zaxis``, ``fromto``) turned into ``quat``; angles in radians (hinge ``range``,
  ``springref``); ``limited`` made explicit (``autolimits``);
- every body gets an explicit ``<inertial>`` (the file's, or MuJoCo's geom-based one:
  geom ``mass`` or ``density`` (default 1000 kg/m^3) times the primitive's volume,
  inertia of the uniform primitive, see :func:`geom_inertia`; ``inertiafromgeom``;
  then ``settotalmass`` scales every mass and inertia);
- a body with several joints becomes a chain of bodies with one 1-dof joint each:
  massless intermediate bodies ``<body>__<joint>`` at the body's frame, the last one
  keeping the body's name, geoms, inertia and children (MuJoCo applies the joints of
  a body in order, each axis in the frame moved by the previous ones: that chain);
- top-level bodies wrapped in one joint-less body (Pinocchio welds it to the world);
- a horizontal ``<geom type="plane">`` on the worldbody removed: it becomes the
  ground (:attr:`MJCFInfo.ground`, its height).

What the flat tree cannot say goes to :class:`MJCFInfo`: actuators, joint springs
and damping, gravity; the Simulator applies them (:meth:`Simulator.from_mjcf`).
Everything else that could change the motion and is not represented is counted in
:attr:`MJCFInfo.ignored` and reported in one warning per load.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from .simulator import ModelError

#: MuJoCo's default geom density (kg/m^3), used when a geom gives neither mass nor density.
DEFAULT_DENSITY = 1000.0

_ACTUATOR_TAGS = ("motor", "position", "velocity", "general", "intvelocity", "damper", "cylinder",
                  "muscle", "adhesion", "plugin")
_ORIENT = ("quat", "euler", "axisangle", "xyaxes", "zaxis")
#: Elements with no effect on the motion: dropped without a word.
_SILENT = {"visual", "statistic", "size", "custom", "sensor", "camera", "light", "site"}
#: Attributes with no effect on the motion (names, looks, bookkeeping).
_COSMETIC = {"name", "class", "childclass", "rgba", "material", "group", "user"}
_HANDLED = {
    "body": {"pos", *_ORIENT},
    "joint": {"type", "axis", "pos", "range", "limited", "stiffness", "springref", "damping", "armature"},
    "freejoint": set(),
    "geom": {"type", "size", "pos", "fromto", "mass", "density", "mesh", "contype", "conaffinity", *_ORIENT},
    "inertial": {"pos", "mass", "diaginertia", "fullinertia", *_ORIENT},
    "motor": {"joint", "gear", "ctrlrange", "ctrllimited", "forcerange", "forcelimited"},
    "position": {"joint", "gear", "ctrlrange", "ctrllimited", "kp", "kv"},
    "compiler": {"angle", "meshdir", "assetdir", "texturedir", "settotalmass", "inertiafromgeom", "autolimits",
                 "eulerseq", "coordinate", "discardvisual", "fusestatic", "strippath"},
    "option": {"gravity", "timestep"},
    "mesh": {"file", "scale"},
}


class MJCFError(ModelError):
    """An MJCF file that cannot be read faithfully; the message names the element and the value."""


@dataclass
class MJCFInfo:
    """What the MJCF says beyond the kinematic tree (all per joint name)."""

    actuated: list[str] = field(default_factory=list)  # joints with an actuator, in actuator order
    effort: dict[str, float] = field(default_factory=dict)  # joint -> max |u| (symmetric bound)
    u_range: dict[str, tuple[float, float]] = field(default_factory=dict)  # joint -> (lower, upper) of u
    #: joint -> factor from MuJoCo's ``ctrl`` to the simulator's ``u`` (u = scale * ctrl): ``gear``
    #: for a motor, ``gear * kp`` for a position servo.
    control_scale: dict[str, float] = field(default_factory=dict)
    stiffness: dict[str, float] = field(default_factory=dict)  # joint spring k (N m/rad or N/m)
    springref: dict[str, float] = field(default_factory=dict)  # its rest position (rad or m)
    damping: dict[str, float] = field(default_factory=dict)  # joint viscous damping d
    #: joint -> (kp, kv) of a position servo, already folded into stiffness/damping:
    #: tau = u - gear^2 kp q - gear^2 kv v with u = gear kp ctrl.
    servo: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: joint -> MuJoCo's ``ref`` (rad or m): the file's pose is q = ref in MuJoCo and q = 0 here,
    #: so ``q_mujoco = q + ref`` (limits, spring and servo references are shifted accordingly).
    ref: dict[str, float] = field(default_factory=dict)
    ground: float | None = None  # height of the worldbody's horizontal plane, if any
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    timestep: float = 0.002  # MuJoCo's <option timestep> (not used: the simulator's dt is its own)
    ignored: Counter = field(default_factory=Counter)  # "element@attribute" -> count

    def ignored_message(self, path: str = "") -> str:
        """One line listing every ignored element/attribute with its count ('' when none)."""
        if not self.ignored:
            return ""
        items = ", ".join(f"{k} x{n}" for k, n in sorted(self.ignored.items()))
        where = f" {path}" if path else ""
        return f"MJCF{where}: ignored (not represented in the simulation): {items}"


def _floats(s):
    return [float(t) for t in s.split()] if s else []


def _fmt(vals) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(vals))


# -- orientations -----------------------------------------------------------------------
def _axis_rotation(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, float)
    n = np.linalg.norm(axis)
    if n == 0:
        raise MJCFError("zero rotation axis")
    return pin.AngleAxis(float(angle), axis / n).toRotationMatrix()


def _zaxis_rotation(z) -> np.ndarray:
    """The smallest rotation taking (0, 0, 1) to ``z`` (MuJoCo's ``zaxis``)."""
    z = np.asarray(z, float)
    n = np.linalg.norm(z)
    if n < 1e-12:
        raise MJCFError(f"zero zaxis/fromto direction {z}")
    z = z / n
    return pin.Quaternion.FromTwoVectors(np.array([0.0, 0.0, 1.0]), z).toRotationMatrix()


def orientation(el: ET.Element, degrees: bool, eulerseq: str = "xyz") -> np.ndarray:
    """Rotation matrix of an element's ``quat``/``euler``/``axisangle``/``xyaxes``/``zaxis`` (MuJoCo rules)."""
    unit = math.pi / 180.0 if degrees else 1.0
    given = [k for k in _ORIENT if el.get(k) is not None]
    if len(given) > 1:
        raise MJCFError(f"<{el.tag} name={el.get('name')!r}> gives several orientations: {given}")
    if not given:
        return np.eye(3)
    k = given[0]
    v = _floats(el.get(k))
    if k == "quat":
        if len(v) != 4 or np.linalg.norm(v) == 0:
            raise MJCFError(f"<{el.tag} name={el.get('name')!r}> quat={el.get(k)!r}: expected 4 numbers, not all 0")
        w, x, y, z = np.asarray(v) / np.linalg.norm(v)
        return pin.Quaternion(w, x, y, z).toRotationMatrix()
    if k == "axisangle":
        return _axis_rotation(v[:3], v[3] * unit)
    if k == "euler":
        R = np.eye(3)
        if len(eulerseq) != 3 or any(c not in "xyzXYZ" for c in eulerseq):
            raise MJCFError(f"compiler eulerseq={eulerseq!r}: expected 3 letters of xyzXYZ")
        for ang, c in zip(v, eulerseq):
            Ri = _axis_rotation(np.eye(3)["xyz".index(c.lower())], ang * unit)
            R = R @ Ri if c.islower() else Ri @ R  # lower case: axes move with the frame
        return R
    if k == "xyaxes":
        x, y = np.asarray(v[:3]), np.asarray(v[3:6])
        x = x / np.linalg.norm(x)
        y = y - x * (x @ y)
        y = y / np.linalg.norm(y)
        return np.column_stack((x, y, np.cross(x, y)))
    return _zaxis_rotation(v)


def _quat_str(R) -> str:
    c = pin.Quaternion(np.asarray(R)).coeffs()  # x y z w
    return _fmt([c[3], c[0], c[1], c[2]])


# -- geom volumes and inertias (MuJoCo's formulas, mjCGeom::GetVolume / SetInertia) --------
def geom_volume(gtype: str, size) -> float:
    """Volume (m^3) of a MuJoCo primitive of ``size`` (half-sizes / radius, half-length)."""
    s = list(size) + [0.0, 0.0, 0.0]
    if gtype == "sphere":
        return 4.0 / 3.0 * math.pi * s[0] ** 3
    if gtype == "capsule":
        return math.pi * s[0] ** 2 * 2.0 * s[1] + 4.0 / 3.0 * math.pi * s[0] ** 3
    if gtype == "cylinder":
        return math.pi * s[0] ** 2 * 2.0 * s[1]
    if gtype == "ellipsoid":
        return 4.0 / 3.0 * math.pi * s[0] * s[1] * s[2]
    if gtype == "box":
        return 8.0 * s[0] * s[1] * s[2]
    raise MJCFError(f"no volume for geom type {gtype!r}")


def geom_inertia(gtype: str, size, mass: float) -> np.ndarray:
    """Principal inertia (3,) about the geom's centre in its own frame, uniform density: MuJoCo's
    formulas, which are Pinocchio's ``Inertia.From*`` (MuJoCo's sizes are half-lengths; a capsule is
    a cylinder of length ``2 size[1]`` plus two hemispheres, the mass split by volume)."""
    r = size[0]
    if gtype == "sphere":
        inertia = pin.Inertia.FromSphere(mass, r)
    elif gtype == "capsule":
        inertia = pin.Inertia.FromCapsule(mass, r, 2.0 * size[1])
    elif gtype == "cylinder":
        inertia = pin.Inertia.FromCylinder(mass, r, 2.0 * size[1])
    elif gtype == "ellipsoid":
        inertia = pin.Inertia.FromEllipsoid(mass, *size[:3])
    elif gtype == "box":
        inertia = pin.Inertia.FromBox(mass, *(2.0 * np.asarray(size[:3], dtype=float)))
    else:
        raise MJCFError(f"no inertia for geom type {gtype!r}")
    return np.diag(inertia.inertia).copy()


# -- pass 1: includes --------------------------------------------------------------------
def _expand_includes(el: ET.Element, here: str, main_dir: str, stack: tuple[str, ...]):
    for i, child in enumerate(list(el)):
        if child.tag != "include":
            _expand_includes(child, here, main_dir, stack)
            continue
        name = child.get("file")
        if not name:
            raise MJCFError(f"<include> without file= in {stack[-1]}")
        cands = [name] if os.path.isabs(name) else [os.path.join(here, name), os.path.join(main_dir, name)]
        found = next((c for c in cands if os.path.isfile(c)), None)
        if found is None:
            raise FileNotFoundError(f"MJCF {stack[-1]}: <include file={name!r}> not found (looked at {cands})")
        found = os.path.abspath(found)
        if found in stack:
            raise MJCFError(f"MJCF include cycle: {' -> '.join(stack + (found,))}")
        try:
            sub = ET.parse(found).getroot()
        except ET.ParseError as exc:
            raise MJCFError(f"could not parse included MJCF {found}: {exc}") from exc
        _expand_includes(sub, os.path.dirname(found), main_dir, stack + (found,))
        pos = list(el).index(child)
        el.remove(child)
        for k, sc in enumerate(list(sub)):
            el.insert(pos + k, sc)


# -- pass 2: default classes -------------------------------------------------------------
def _default_key(tag: str) -> str:
    return "actuator" if tag in _ACTUATOR_TAGS else tag


def _collect_defaults(root) -> dict[str, dict[str, dict[str, str]]]:
    classes: dict[str, dict[str, dict[str, str]]] = {"main": {}}

    def visit(d, name, inherited):
        own = copy.deepcopy(inherited)
        for c in d:
            if c.tag != "default":
                own.setdefault(_default_key(c.tag), {}).update(c.attrib)
        classes[name] = own
        for c in d:
            if c.tag == "default":
                cname = c.get("class")
                if cname is None:
                    raise MJCFError(f"nested <default> without class= under class {name!r}")
                visit(c, cname, own)

    tops = [d for d in root if d.tag == "default"]
    merged = ET.Element("default")
    for d in tops:
        if d.get("class") not in (None, "main"):
            raise MJCFError(f"top-level <default class={d.get('class')!r}>: only 'main' may be top-level")
        merged.extend(list(d))
        root.remove(d)
    visit(merged, "main", {})
    return classes


def _apply_defaults(el, classes, cls: str, path: str):
    """Write the class attributes into ``el`` and its descendants (``childclass`` on bodies)."""
    for c in el:
        if c.tag == "default":
            continue
        child_cls = c.get("childclass", cls) if c.tag == "body" else cls
        own = c.get("class", cls)
        if own not in classes:
            raise MJCFError(f"MJCF {path}: <{c.tag} name={c.get('name')!r}> uses unknown class {own!r}; "
                            f"classes: {sorted(classes)}")
        if c.tag != "freejoint":
            for k, v in classes[own].get(_default_key(c.tag), {}).items():
                if k != "class" and c.get(k) is None:
                    c.set(k, v)
        c.attrib.pop("class", None)
        c.attrib.pop("childclass", None)
        _apply_defaults(c, classes, child_cls, path)


# -- pass 3: bodies ---------------------------------------------------------------------
class _Flattener:
    def __init__(self, path, compiler, info: MJCFInfo):
        self.path = path
        self.info = info
        self.degrees = compiler.get("angle", "degree") == "degree"
        self.eulerseq = compiler.get("eulerseq", "xyz")
        self.autolimits = compiler.get("autolimits", "true") == "true"
        self.fromgeom = compiler.get("inertiafromgeom", "auto")
        if compiler.get("coordinate", "local") != "local":
            raise MJCFError(f"MJCF {path}: compiler coordinate={compiler.get('coordinate')!r}; only 'local' exists "
                            "in MuJoCo >= 2.3")
        self.masses: list[ET.Element] = []  # the <inertial> elements written (for settotalmass)
        self.nbody = 0

    def _unknown(self, el, extra=()):
        handled = _HANDLED.get(el.tag, set()) | _COSMETIC | set(extra)
        for k in el.attrib:
            if k not in handled:
                self.info.ignored[f"{el.tag}@{k}"] += 1

    def where(self, el):
        return f"MJCF {self.path}: <{el.tag} name={el.get('name')!r}>"

    def set_pose(self, el):
        R = orientation(el, self.degrees, self.eulerseq)
        for k in _ORIENT:
            el.attrib.pop(k, None)
        if not np.allclose(R, np.eye(3), atol=0, rtol=0):
            el.set("quat", _quat_str(R))
        return np.asarray(_floats(el.get("pos", "0 0 0")), float), R

    def geom(self, g, body_name):
        """Normalise a geom in place; return ``(gtype, mass, pin.Inertia in the body frame)`` or None."""
        self._unknown(g)
        g.attrib.pop("material", None)  # materials only colour (and are dropped with the assets)
        gtype = g.get("type", "sphere")
        size = _floats(g.get("size", "0 0 0"))
        if g.get("fromto") is not None:
            a = np.asarray(_floats(g.get("fromto")), float)
            if a.size != 6 or gtype not in ("capsule", "cylinder", "box", "ellipsoid"):
                raise MJCFError(f"{self.where(g)}: fromto={g.get('fromto')!r} on type {gtype!r}")
            p0, p1 = a[:3], a[3:]
            half = 0.5 * np.linalg.norm(p1 - p0)
            R = _zaxis_rotation(p1 - p0)
            for k in _ORIENT + ("fromto",):
                g.attrib.pop(k, None)
            pos = 0.5 * (p0 + p1)
            g.set("pos", _fmt(pos))
            if not np.allclose(R, np.eye(3), atol=0, rtol=0):
                g.set("quat", _quat_str(R))
            size = ([size[0], half] if gtype in ("capsule", "cylinder") else [size[0], size[1] if len(size) > 1 else size[0], half])
            g.set("size", _fmt(size))
        else:
            pos, R = self.set_pose(g)
        if gtype in ("plane", "hfield", "sdf"):
            return gtype, 0.0, None
        if gtype == "mesh":
            return gtype, None, None
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "ellipsoid": 3, "box": 3}.get(gtype)
        if need is None:
            raise MJCFError(f"{self.where(g)}: unknown geom type {gtype!r}")
        if len(size) < need or any(not (s > 0 and math.isfinite(s)) for s in size[:need]):
            raise MJCFError(f"{self.where(g)} in body {body_name!r}: type {gtype} needs {need} positive "
                            f"size values, got size={g.get('size')!r}")
        if g.get("mass") is not None:
            mass = float(g.get("mass"))
        else:
            mass = float(g.get("density", DEFAULT_DENSITY)) * geom_volume(gtype, size)
        if not (mass >= 0 and math.isfinite(mass)):
            raise MJCFError(f"{self.where(g)} in body {body_name!r}: mass {mass!r} must be finite and >= 0")
        I = R @ np.diag(geom_inertia(gtype, size, mass)) @ R.T
        return gtype, mass, pin.Inertia(mass, pos, I)

    def joint_chain(self, body, joints, body_name):
        """Read the joints of ``body`` (named ``body_name``: its own, or MuJoCo's ``body<id>`` when unnamed); return
        their flattened XML elements (one per joint; an unnamed one named after the body)."""
        out = []
        for k, j in enumerate(joints):
            if j.tag == "freejoint" or j.get("type") == "free":
                if len(joints) > 1:
                    raise MJCFError(f"{self.where(body)}: a free joint must be the body's only joint")
                self._unknown(j)
                fj = ET.Element("freejoint", {"name": j.get("name") or f"{body_name}_free"})
                out.append(fj)
                continue
            self._unknown(j, ("ref",))
            jtype = j.get("type", "hinge")
            name = j.get("name") or f"{body_name}_joint{k}"
            attrs = {"name": name, "type": jtype, "pos": j.get("pos", "0 0 0")}
            if jtype in ("hinge", "slide"):
                axis = np.asarray(_floats(j.get("axis", "0 0 1")), float)
                if axis.size != 3 or np.linalg.norm(axis) == 0:
                    raise MJCFError(f"{self.where(j)}: axis={j.get('axis')!r} must be 3 numbers, not all 0")
                attrs["axis"] = _fmt(axis / np.linalg.norm(axis))
            elif jtype != "ball":
                raise MJCFError(f"{self.where(j)}: unknown joint type {jtype!r}")
            unit = math.pi / 180.0 if (self.degrees and jtype == "hinge") else 1.0
            # MuJoCo's q = ref at the pose written in the file; ours is 0 there: q_ours = q_mujoco - ref
            ref = float(j.get("ref", "0")) * unit if jtype in ("hinge", "slide") else 0.0
            if ref:
                self.info.ref[name] = ref
            rng = j.get("range")
            limited = j.get("limited", "auto")
            limited = (rng is not None and self.autolimits) if limited == "auto" else limited == "true"
            if limited and jtype in ("hinge", "slide"):
                lo, hi = (v * unit for v in _floats(rng or "0 0"))
                if not lo <= hi:
                    raise MJCFError(f"{self.where(j)}: range {rng!r} has lower > upper")
                attrs.update(limited="true", range=_fmt([lo - ref, hi - ref]))
            elif limited:
                self.info.ignored["joint@range (ball)"] += 1
            for key in ("stiffness", "damping", "armature"):
                val = float(j.get(key, "0"))
                if not (val >= 0 and math.isfinite(val)):
                    raise MJCFError(f"{self.where(j)}: {key}={j.get(key)!r} must be finite and >= 0")
                if key == "armature":
                    if val:
                        attrs["armature"] = repr(val)
                elif val:
                    if jtype == "ball":
                        self.info.ignored[f"joint@{key} (ball)"] += 1
                    else:
                        getattr(self.info, key)[name] = val
            if name in self.info.stiffness:
                self.info.springref[name] = float(j.get("springref", "0")) * unit - ref
            out.append(ET.Element("joint", attrs))
        return out

    def body(self, body, parent):
        """Rewrite ``body`` (already detached) into ``parent``: pose, inertia, joint chain."""
        self.nbody += 1  # MuJoCo's body id (pre-order, the world is 0): names unnamed bodies
        name = body.get("name") or f"body{self.nbody}"
        self._unknown(body)
        pos, R = self.set_pose(body)
        joints = [c for c in body if c.tag in ("joint", "freejoint")]
        inertials = [c for c in body if c.tag == "inertial"]
        geoms = [c for c in body if c.tag == "geom"]
        children = [c for c in body if c.tag == "body"]
        for c in list(body):
            body.remove(c)
        total, mesh_geoms = None, []
        for g in geoms:
            gtype, mass, I = self.geom(g, name)
            if gtype in ("hfield", "sdf"):
                raise MJCFError(f"{self.where(g)} in body {name!r}: geom type {gtype!r} is not supported "
                                "(no collision shape for it: only a static one in the worldbody is ignored)")
            if gtype == "mesh":
                mesh_geoms.append(g)
            elif I is not None:
                total = I if total is None else total + I
        use_geoms = self.fromgeom == "true" or (self.fromgeom == "auto" and not inertials)
        if use_geoms and mesh_geoms:
            raise MJCFError(f"{self.where(body)}: its inertia would come from mesh geoms "
                            f"({[g.get('mesh') for g in mesh_geoms]}), which this loader does not integrate; "
                            "give the body an <inertial>")
        inertial = ET.Element("inertial")
        if use_geoms:
            total = total if total is not None else pin.Inertia.Zero()
            self._write_inertia(inertial, total.mass, total.lever, total.inertia)
        elif inertials:
            el = inertials[0]
            self._unknown(el)
            ipos, iR = self.set_pose(el)
            m = float(el.get("mass", "nan"))
            if el.get("fullinertia") is not None:
                a = _floats(el.get("fullinertia"))
                Iloc = np.array([[a[0], a[3], a[4]], [a[3], a[1], a[5]], [a[4], a[5], a[2]]])
            else:
                Iloc = np.diag(_floats(el.get("diaginertia", "nan nan nan")))
            if not (m >= 0 and math.isfinite(m)) or not np.all(np.isfinite(Iloc)):
                raise MJCFError(f"{self.where(body)}: <inertial> mass={el.get('mass')!r} "
                                f"inertia={el.get('diaginertia') or el.get('fullinertia')!r} must be finite, mass >= 0")
            self._write_inertia(inertial, m, ipos, iR @ Iloc @ iR.T)
        else:  # inertiafromgeom false and no <inertial>: massless
            self._write_inertia(inertial, 0.0, np.zeros(3), np.zeros((3, 3)))
        self.masses.append(inertial)

        chain = self.joint_chain(body, joints, name)
        # body frame carries the first joint; the others sit on massless bodies at the same frame
        outer = body
        if len(chain) > 1:
            outer = ET.SubElement(parent, "body", {"name": f"{name}__{chain[0].get('name')}"})
            outer.set("pos", body.get("pos", "0 0 0"))
            if body.get("quat"):
                outer.set("quat", body.get("quat"))
            cur = outer
            for k, jel in enumerate(chain):
                cur.append(jel)
                if k + 1 < len(chain):
                    ET.SubElement(cur, "inertial", {"pos": "0 0 0", "mass": "0", "diaginertia": "0 0 0"})
                    nxt_name = name if k + 2 == len(chain) else f"{name}__{chain[k + 1].get('name')}"
                    nxt = ET.SubElement(cur, "body", {"name": nxt_name})
                    cur = nxt
            leaf = cur
        else:
            parent.append(body)
            body.set("name", name)
            leaf = body
            leaf.extend(chain)
        leaf.append(inertial)
        for g in geoms:
            leaf.append(g)
        for c in children:
            self.body(c, leaf)

    def _write_inertia(self, el, mass, com, I):
        I = 0.5 * (np.asarray(I) + np.asarray(I).T)
        w, V = np.linalg.eigh(I)
        if np.linalg.det(V) < 0:
            V[:, 0] = -V[:, 0]
        el.attrib.clear()
        el.set("pos", _fmt(com))
        el.set("mass", repr(float(mass)))
        el.set("diaginertia", _fmt(np.maximum(w, 0.0)))
        if not np.allclose(V, np.eye(3)):
            el.set("quat", _quat_str(V))


def flatten_mjcf(path: str) -> tuple[ET.ElementTree, MJCFInfo]:
    """The flat, explicit MJCF tree of ``path`` and what it says beyond the tree (module docstring).

    Actuators, gravity, ground, springs and damping are read into :class:`MJCFInfo`;
    nothing is built yet. Raises :class:`MJCFError` naming the element on input it
    cannot read faithfully.
    """
    path = os.path.abspath(path)
    main_dir = os.path.dirname(path)
    try:
        tree = ET.parse(path)
    except ET.ParseError as exc:
        raise MJCFError(f"could not parse MJCF {path}: {exc}") from exc
    root = tree.getroot()
    if root.tag != "mujoco":
        raise MJCFError(f"MJCF {path}: the root element is <{root.tag}>, expected <mujoco>")
    _expand_includes(root, main_dir, main_dir, (path,))
    info = MJCFInfo()

    compiler = {}
    for c in root.findall("compiler"):
        compiler.update(c.attrib)
        root.remove(c)
    for k in compiler:
        if k not in _HANDLED["compiler"] | _COSMETIC:
            info.ignored[f"compiler@{k}"] += 1
    for tag in ("frame", "replicate", "attach", "composite", "flexcomp", "flex", "skin"):
        found = root.find(f".//{tag}")
        if found is not None:
            raise MJCFError(f"MJCF {path}: <{tag}> is not supported by this loader (found under the model)")

    classes = _collect_defaults(root)
    _apply_defaults(root, classes, "main", path)

    for opt in root.findall("option"):
        if opt.get("gravity"):
            info.gravity = tuple(_floats(opt.get("gravity")))
        if opt.get("timestep"):
            info.timestep = float(opt.get("timestep"))
        for k in opt.attrib:
            if k not in _HANDLED["option"]:
                info.ignored[f"option@{k}"] += 1
        for c in opt:
            info.ignored[f"option/{c.tag}"] += 1
        root.remove(opt)

    # assets: keep meshes with absolute file paths; textures and materials only colour things
    meshdir = compiler.get("meshdir", compiler.get("assetdir", ""))
    for asset in root.findall("asset"):
        for a in list(asset):
            if a.tag == "mesh":
                f = a.get("file")
                if f and not os.path.isabs(f):
                    a.set("file", os.path.normpath(os.path.join(main_dir, meshdir, f)))
                for k in a.attrib:
                    if k not in _HANDLED["mesh"] | _COSMETIC:
                        info.ignored[f"mesh@{k}"] += 1
            elif a.tag in ("texture", "material", "skin"):
                asset.remove(a)
            else:
                info.ignored[f"asset/{a.tag}"] += 1
                asset.remove(a)

    fl = _Flattener(path, compiler, info)
    world = root.find("worldbody")
    if world is None:
        raise MJCFError(f"MJCF {path} has no <worldbody>")
    bodies = [b for b in world if b.tag == "body"]
    if not bodies:
        raise MJCFError(f"MJCF {path} has no <body> in its <worldbody>")
    _strip_silent(root)  # visual-only and sensing elements, at every level, once
    for c in list(world):
        if c.tag == "geom":
            gtype, _, _ = fl.geom(c, "world")
            collides = c.get("contype", "1") != "0" or c.get("conaffinity", "1") != "0"
            if gtype in ("hfield", "sdf"):  # terrain Pinocchio cannot build: the ground (if any) replaces it
                info.ignored[f"worldbody/geom type={gtype}"] += 1
                world.remove(c)
            elif gtype == "plane" and collides:
                pos = np.asarray(_floats(c.get("pos", "0 0 0")))
                R = orientation(c, False)
                up = -np.asarray(info.gravity) / (np.linalg.norm(info.gravity) or 1.0)
                if np.linalg.norm(info.gravity) and np.allclose(R[:, 2], up, atol=1e-9):
                    h = float(pos @ up)
                    info.ground = h if info.ground is None else max(info.ground, h)
                    world.remove(c)
                else:
                    info.ignored["worldbody/geom type=plane (not horizontal)"] += 1
                    world.remove(c)
        elif c.tag not in ("body",):
            info.ignored[f"worldbody/{c.tag}"] += 1
            world.remove(c)
    # the bodies, rewritten under one joint-less wrapper (Pinocchio reads one top-level body)
    for b in bodies:
        world.remove(b)
    wrapper = ET.SubElement(world, "body", {"name": "__world_bodies__"})
    ET.SubElement(wrapper, "inertial", {"pos": "0 0 0", "mass": "0", "diaginertia": "0 0 0"})
    for b in bodies:
        fl.body(b, wrapper)

    settotal = compiler.get("settotalmass")
    if settotal is not None and float(settotal) > 0:
        total = sum(float(e.get("mass")) for e in fl.masses)
        if total > 0:
            scale = float(settotal) / total
            for e in fl.masses:
                e.set("mass", repr(float(e.get("mass")) * scale))
                e.set("diaginertia", _fmt(np.asarray(_floats(e.get("diaginertia"))) * scale))

    _read_actuators(root, info, path)
    for section in ("equality", "tendon", "contact", "keyframe", "extension"):
        for s in root.findall(section):
            for c in s:
                info.ignored[f"{section}/{c.tag}"] += 1
            root.remove(s)
    root.insert(0, ET.Element("compiler", {"angle": "radian", "inertiafromgeom": "false", "autolimits": "true"}))
    return tree, info


def _strip_silent(el):
    for c in list(el):
        if c.tag in _SILENT:
            el.remove(c)
        else:
            _strip_silent(c)


def _read_actuators(root, info: MJCFInfo, path):
    joints = {j.get("name") for j in root.iter("joint")} | {j.get("name") for j in root.iter("freejoint")}
    for act in root.findall("actuator"):
        for m in act:
            tag = m.tag
            if tag not in ("motor", "position", "general"):
                info.ignored[f"actuator/{tag}"] += 1
                continue
            joint = m.get("joint")
            if joint is None:
                tr = next((k for k in ("tendon", "site", "body", "jointinparent", "cranksite") if m.get(k)), "?")
                info.ignored[f"actuator/{tag}@{tr}"] += 1
                continue
            if joint not in joints:
                raise MJCFError(f"MJCF {path}: <{tag} name={m.get('name')!r}> acts on unknown joint {joint!r}")
            if joint in info.actuated:
                info.ignored[f"actuator/{tag} (second actuator on joint)"] += 1
                continue
            if tag == "general":
                if any(m.get(k) for k in ("gainprm", "biasprm", "biastype", "gaintype", "dyntype", "dynprm")):
                    info.ignored["actuator/general (non-motor gains)"] += 1
                    continue
                tag = "motor"
            extra = ("gainprm", "biasprm", "biastype", "gaintype", "dyntype", "dynprm") if m.tag == "general" else ()
            for k in m.attrib:
                if k not in _HANDLED[tag] | _COSMETIC | set(extra):
                    info.ignored[f"{tag}@{k}"] += 1
            gear = _floats(m.get("gear", "1"))[0]
            if not (math.isfinite(gear) and gear != 0):
                raise MJCFError(f"MJCF {path}: <{tag} joint={joint!r}> gear={m.get('gear')!r} must be finite and nonzero")
            ctrl_lim = m.get("ctrllimited", "auto")
            ctrl_lim = m.get("ctrlrange") is not None if ctrl_lim == "auto" else ctrl_lim == "true"
            lo, hi = (_floats(m.get("ctrlrange")) if ctrl_lim and m.get("ctrlrange") else [-np.inf, np.inf])
            if not lo <= hi:
                raise MJCFError(f"MJCF {path}: <{tag} joint={joint!r}> ctrlrange={m.get('ctrlrange')!r} has lower > upper")
            if tag == "motor":
                scale = gear
                f_lim = m.get("forcelimited", "auto")
                f_lim = m.get("forcerange") is not None if f_lim == "auto" else f_lim == "true"
                if f_lim and m.get("forcerange"):
                    flo, fhi = _floats(m.get("forcerange"))
                    lo, hi = max(lo, flo), min(hi, fhi)  # force = ctrl for a motor
            else:
                kp, kv = float(m.get("kp", "1")), float(m.get("kv", "0"))
                if not (kp > 0 and math.isfinite(kp) and kv >= 0 and math.isfinite(kv)):
                    raise MJCFError(f"MJCF {path}: <position joint={joint!r}> kp={kp}, kv={kv}: need kp > 0, kv >= 0")
                scale = gear * kp
                info.servo[joint] = (kp, kv)
                k0 = info.stiffness.get(joint, 0.0)
                ks = k0 + gear * gear * kp
                # spring -k0 (q - r) plus servo -g^2 kp (q + ref) = -ks (q - (k0 r - g^2 kp ref) / ks)
                r_servo = -info.ref.get(joint, 0.0)
                info.springref[joint] = (k0 * info.springref.get(joint, 0.0) + gear * gear * kp * r_servo) / ks
                info.stiffness[joint] = ks
                if kv:
                    info.damping[joint] = info.damping.get(joint, 0.0) + gear * gear * kv
            ulo, uhi = sorted((scale * lo, scale * hi))
            info.actuated.append(joint)
            info.control_scale[joint] = scale
            info.u_range[joint] = (ulo, uhi)
            info.effort[joint] = max(abs(ulo), abs(uhi))
        root.remove(act)


def load_mjcf(path: str, *, load_geometry: bool = True, warn: bool = True):
    """``(model, geometry or None, MJCFInfo)`` from an MJCF file (see the module docstring).

    The model's gravity is the file's ``<option gravity>``, its armature the joints'
    ``armature``. One ``UserWarning`` lists whatever was ignored (``warn=False``: none).
    """
    tree, info = flatten_mjcf(path)
    # Same folder, so any path Pinocchio still resolves relative to the file resolves.
    fd, tmp = tempfile.mkstemp(suffix=".xml", prefix=".mjcf_", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        tree.write(tmp)
        model = pin.buildModelFromMJCF(tmp)
        geometry = pin.buildGeomFromMJCF(model, tmp, pin.GeometryType.COLLISION) if load_geometry else None
    except (ValueError, RuntimeError) as exc:
        raise MJCFError(f"could not build a model from MJCF {path}: {exc}") from exc
    finally:
        os.unlink(tmp)
    model.gravity = pin.Motion(np.asarray(info.gravity, float), np.zeros(3))
    if warn and info.ignored:
        warnings.warn(info.ignored_message(path), UserWarning, stacklevel=3)
    return model, geometry, info
