"""3-D playback of a trajectory in the browser: one self-contained ``scene.html``.

    info = write_scene(sim, xs, "out/scene.html", us=us, title="go1-jump")
    data = read_scene("out/scene.html")          # what the page embeds, decoded (tests, tools)

The page needs no server and no network: three.js (r170, MIT, vendored in
``app/_vendor/``) and the scene are inlined, each gzip-compressed and base64-encoded,
and the page inflates them with the browser's ``DecompressionStream`` (Chrome 80+,
Firefox 113+, Safari 16.4+). It plays the motion with play/pause, a time slider, a speed
choice, mouse orbit (drag) and zoom (wheel).

What it draws, from ``sim.model`` and ``sim.geometry`` (a ``pinocchio.GeometryModel`` with
coal shapes; ``visual=`` may give another one on the same model, e.g. a URDF's visual
meshes), placed per frame by Pinocchio's forward kinematics
(``pin.updateGeometryPlacements``):

- primitives: box, sphere, cylinder, capsule, cone, ellipsoid (coal's axes: z along the
  cylinder/capsule/cone axis);
- meshes (coal ``BVHModel``, ``Convex``: its hull): at most :data:`MESH_TRIANGLES` triangles
  each, and :data:`TOTAL_TRIANGLES` over the scene, reduced by vertex clustering
  (:func:`decimate`);
- the static scene of the contact model: ground half-spaces (a plane with a grid), static
  boxes (the catapult's floor);
- the kinematic skeleton: a thin rod from each joint to its parent joint (so a robot whose
  collision model is its feet alone still shows its limbs);
- with ``us`` and a contact model: the contacts of each drawn frame's step (re-simulated
  from ``xs[i], us[i]`` in a workspace of the viewer's own, ``sim.create_data()``): a dot at each
  point with a positive normal impulse and an arrow along the normal, its length proportional to
  the normal force ``lambda_n / dt``; a simulation error there ends the contacts at that step, and
  the page (and :class:`SceneInfo`'s ``contact_warning``) says so, naming it;
- a ``target`` point (2 or 3 coordinates) as a red marker.

Frames: at most ``max_frames`` (default :data:`MAX_FRAMES`) states, evenly spaced over the
trajectory by index (``numpy.linspace`` rounded; the first and the last state always
included); each keeps its true time ``i * dt``, so playback at 1x runs in real time.
A trajectory with non-finite states is drawn up to its last finite one.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
from dataclasses import dataclass
from importlib import resources

import numpy as np

#: Largest number of frames a page stores (evenly spaced states; see the module docstring).
MAX_FRAMES = 300
#: Largest number of triangles of one mesh in the page (vertex clustering above it).
MESH_TRIANGLES = 2500
#: Largest number of mesh triangles in the whole page (each mesh's cap shrinks to fit).
TOTAL_TRIANGLES = 60000

_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]


@dataclass
class SceneInfo:
    """What :func:`write_scene` wrote: the ``path``, number of ``frames``, drawn ``geometries``
    (moving and static), mesh ``triangles`` in the page, frames with contacts
    (``contact_frames``), skipped shapes (``skipped``: names of shapes it cannot draw), the
    page's size in ``bytes``, and ``contact_warning``: why the contacts stop before the last frame
    (a simulation error re-simulating a step, naming it; None when they do not)."""

    path: str
    frames: int
    geometries: int
    triangles: int
    contact_frames: int
    skipped: list
    bytes: int
    contact_warning: str | None = None


def frame_indices(n_states: int, max_frames: int = MAX_FRAMES) -> np.ndarray:
    """Indices of the states drawn: all when ``n_states <= max_frames``, else ``max_frames``
    evenly spaced ones (first and last included)."""
    if max_frames < 2:
        raise ValueError(f"max_frames must be >= 2, got {max_frames}")
    if n_states <= max_frames:
        return np.arange(n_states)
    return np.unique(np.round(np.linspace(0, n_states - 1, max_frames)).astype(int))


def decimate(vertices: np.ndarray, triangles: np.ndarray, max_triangles: int):
    """``(vertices, triangles)`` with at most ``max_triangles`` triangles, by vertex clustering:
    vertices are merged per cell of a grid over the bounding box (coarser until the count fits;
    each cluster at its members' mean); triangles that collapse are dropped. Shape-faithful
    enough for a picture, not for collision."""
    V, F = np.asarray(vertices, float), np.asarray(triangles, np.int64)
    if len(F) <= max_triangles:
        return V, F
    lo = V.min(axis=0)
    ext = max(float(np.ptp(V, axis=0).max()), 1e-12)
    cells = 128
    while True:
        key = np.minimum(np.floor((V - lo) / ext * cells), cells - 1).astype(np.int64)
        _, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        G = inv[F]
        G = G[(G[:, 0] != G[:, 1]) & (G[:, 1] != G[:, 2]) & (G[:, 0] != G[:, 2])]
        _, first = np.unique(np.sort(G, axis=1), axis=0, return_index=True)
        G = G[np.sort(first)]
        if len(G) <= max_triangles or cells <= 2:
            break
        cells = max(2, int(cells * 0.75))
    count = np.bincount(inv).astype(float)
    W = np.zeros((count.size, 3))
    np.add.at(W, inv, V)
    W /= count[:, None]
    used = np.unique(G)
    remap = np.full(count.size, -1, np.int64)
    remap[used] = np.arange(used.size)
    return W[used], remap[G]


def _b64(a, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def _gzip_b64(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


def _mesh_arrays(shape):
    """``(V, F)`` of a coal mesh (BVHModel: its triangles; Convex: the hull of its points)."""
    import coal

    if isinstance(shape, coal.ConvexBase):
        from scipy.spatial import ConvexHull

        P = np.asarray(shape.points(), float)
        return P, ConvexHull(P).simplices
    V = np.asarray(shape.vertices(), float)
    F = np.array([[shape.tri_indices(i)[k] for k in range(3)] for i in range(shape.num_tris)], np.int64)
    return V, F.reshape(-1, 3)


def _describe(shape):
    """``(kind, params)`` of a coal shape, or None for one the page cannot draw."""
    import coal

    if isinstance(shape, coal.Box):
        return "box", {"size": (2 * np.asarray(shape.halfSide)).tolist()}
    if isinstance(shape, coal.Sphere):
        return "sphere", {"radius": float(shape.radius)}
    if isinstance(shape, coal.Capsule):
        return "capsule", {"radius": float(shape.radius), "length": 2 * float(shape.halfLength)}
    if isinstance(shape, coal.Cylinder):
        return "cylinder", {"radius": float(shape.radius), "length": 2 * float(shape.halfLength)}
    if isinstance(shape, coal.Cone):
        return "cone", {"radius": float(shape.radius), "length": 2 * float(shape.halfLength)}
    if isinstance(shape, coal.Ellipsoid):
        return "ellipsoid", {"radii": np.asarray(shape.radii, float).tolist()}
    if isinstance(shape, (coal.Halfspace, coal.Plane)):
        return "plane", {"normal": np.asarray(shape.n, float).tolist(), "offset": float(shape.d)}
    if isinstance(shape, (coal.BVHModelBase, coal.ConvexBase)):
        return "mesh", {}
    return None


def _static_objects(sim, drawn_names):
    """Static objects of the contact model's scene that ``sim.geometry`` lacks (ground, floor)."""
    gm = getattr(sim, "collision_geometry", None)
    if gm is None:
        return []
    return [o for o in gm.geometryObjects if o.parentJoint == 0 and o.name not in drawn_names]


def _quaternions(R: np.ndarray) -> np.ndarray:
    import pinocchio as pin

    return pin.Quaternion(R).coeffs()  # x, y, z, w (three.js' order)


def _up(sim) -> np.ndarray:
    g = np.asarray(sim.model.gravity.linear, float)
    return -g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else np.array([0.0, 0.0, 1.0])


def _finite_prefix(xs: np.ndarray) -> int:
    bad = ~np.all(np.isfinite(xs), axis=1)
    return int(np.argmax(bad)) if bad.any() else len(xs)


def scene_data(sim, xs, *, dt: float | None = None, us=None, contacts: bool = True, title: str = "",
               target=None, max_frames: int = MAX_FRAMES, visual=None):
    """The scene as a JSON-ready dict plus :class:`SceneInfo` counts (without path and bytes).

    ``sim`` a :class:`dynamics.Simulator` (``model``, ``geometry``); ``xs`` (T+1, nx) states;
    ``us`` (T, nu) controls (only to re-simulate the contacts); ``visual`` a
    ``pinocchio.GeometryModel`` on ``sim.model`` drawn instead of ``sim.geometry``'s moving
    objects.
    """
    import pinocchio as pin

    model = sim.model
    xs = np.atleast_2d(np.asarray(xs, float))
    if xs.ndim != 2 or xs.shape[1] < model.nq:
        raise ValueError(f"xs must be (T+1, nx) with nx >= nq = {model.nq}, got shape {xs.shape}")
    dt = float(getattr(sim, "dt", 1.0) if dt is None else dt)
    n_ok = _finite_prefix(xs)
    if n_ok == 0:
        raise ValueError("xs has no finite state to draw")
    idx = frame_indices(n_ok, max_frames)
    qs = xs[idx, : model.nq]

    geom = visual if visual is not None else sim.geometry
    moving, static, skipped = [], [], []
    names = set()
    if geom is not None:
        for k, obj in enumerate(geom.geometryObjects):
            names.add(obj.name)
            if visual is not None and obj.parentJoint == 0:
                continue
            (static if obj.parentJoint == 0 else moving).append((k, obj))
    if visual is not None and sim.geometry is not None:  # the collision model's static objects stay
        static_extra = [o for o in sim.geometry.geometryObjects if o.parentJoint == 0]
    else:
        static_extra = []
    static_extra += _static_objects(sim, names | {o.name for o in static_extra})

    # per-mesh triangle cap: MESH_TRIANGLES, shrunk so that all meshes fit TOTAL_TRIANGLES
    objs = [o for _, o in moving] + [o for _, o in static] + static_extra
    kinds = [_describe(o.geometry) for o in objs]
    n_mesh = sum(1 for d in kinds if d is not None and d[0] == "mesh")
    cap = max(12, min(MESH_TRIANGLES, TOTAL_TRIANGLES // max(n_mesh, 1)))

    shapes, triangles = [], 0
    for obj, desc in zip(objs, kinds, strict=True):
        if desc is None:
            skipped.append(obj.name)
            shapes.append(None)
            continue
        kind, params = desc
        if kind == "mesh":
            V, F = _mesh_arrays(obj.geometry)
            V, F = decimate(V, F, cap)
            triangles += len(F)
            params = {"vertices": _b64(V, "<f4"), "triangles": _b64(F, "<u4")}
        color = np.asarray(obj.meshColor, float)
        # pinocchio's defaults (grey from URDF loading, black from GeometryObject): the palette instead
        default_color = bool(np.allclose(color[:3], color[0]))
        if obj.parentJoint == 0:
            hexcolor = "#9a9a9a"
        elif not default_color:
            hexcolor = "#%02x%02x%02x" % tuple(int(255 * c) for c in np.clip(color[:3], 0, 1))
        else:
            hexcolor = _PALETTE[obj.parentJoint % len(_PALETTE)]
        shapes.append({"name": obj.name, "kind": kind, "static": obj.parentJoint == 0, "color": hexcolor,
                       "opacity": float(color[3]) if not default_color else 1.0, **params})

    data = model.createData()
    n_moving = len(moving)
    placements = np.zeros((len(idx), n_moving, 7))
    joints = np.zeros((len(idx), model.njoints, 3))
    gdata = pin.GeometryData(geom) if geom is not None else None
    for f, q in enumerate(qs):
        if gdata is not None:
            pin.updateGeometryPlacements(model, data, geom, gdata, q)
        else:
            pin.forwardKinematics(model, data, q)
        for m, (k, _) in enumerate(moving):
            M = gdata.oMg[k]
            placements[f, m, :3] = M.translation
            placements[f, m, 3:] = _quaternions(M.rotation)
        for j in range(model.njoints):
            joints[f, j] = data.oMi[j].translation
    static_place = []
    if gdata is not None:
        pin.updateGeometryPlacements(model, data, geom, gdata, qs[0])
    for s, obj in enumerate([o for _, o in static] + static_extra):
        M = obj.placement
        static_place.append(np.r_[M.translation, _quaternions(M.rotation)].tolist())
    bones = [(int(model.parents[j]), j) for j in range(1, model.njoints) if model.parents[j] != 0]

    # bounds of what moves (joint origins, geometry origins) and of the static boxes
    pts = [joints[:, 1:].reshape(-1, 3), placements[:, :, :3].reshape(-1, 3)]
    pts += [np.asarray(p[:3])[None] for p, sh in zip(static_place, shapes[n_moving:], strict=True)
            if sh is not None and sh["kind"] != "plane"]
    P = np.vstack([p for p in pts if p.size]) if any(p.size for p in pts) else np.zeros((1, 3))
    lo, hi = P.min(axis=0), P.max(axis=0)
    extent = [float(np.max(s["size"])) for s in shapes[:n_moving] if s and s["kind"] == "box"]
    extent += [2 * s["radius"] for s in shapes[:n_moving] if s and "radius" in s]
    pad = max([0.05, *extent]) if extent else 0.1
    lo, hi = lo - pad, hi + pad
    if target is not None:
        tgt = np.zeros(3)
        tv = np.atleast_1d(np.asarray(target, float))
        if tv.size in (2, 3):
            tgt[: tv.size] = tv
            lo, hi = np.minimum(lo, tgt - 0.1), np.maximum(hi, tgt + 0.1)
            target = tgt.tolist()
        else:
            target = None

    planar = bool(getattr(sim, "planar", False))
    if not planar and model.gravity.linear[1] != 0 and model.gravity.linear[2] == 0:
        planar = True  # y up: a planar scene (drawn in the xy plane, seen along z)

    # contacts of each drawn frame's step, re-simulated in a workspace of the viewer's own (the
    # simulator's default one keeps what its user's last step left there)
    points, forces, counts = [], [], np.zeros(len(idx), np.int64)
    contact_frames = 0
    contact_warning = None
    if contacts and us is not None and getattr(sim, "contact_report", None) is not None and sim.contact_report() is not None:
        us = np.asarray(us, float)
        from dynamics import SimulationError

        work = sim.create_data()
        for f, i in enumerate(idx):
            if i >= len(us):
                break
            try:
                sim.step(xs[i], us[i], data=work)
            except SimulationError as exc:  # said on the page and by the CLI, not dropped silently
                contact_warning = (f"contacts are drawn up to step {i} only: re-simulating step {i} failed "
                                   f"({type(exc).__name__}: {exc})")
                break
            rep = sim.contact_report(work)
            if rep is None or len(rep) == 0:
                continue
            ln = rep.impulses[:, 0]
            on = ln > 1e-12
            if on.any():
                points.append(rep.points[on])
                forces.append(rep.normals[on] * (ln[on] / dt)[:, None])
                counts[f] = int(on.sum())
                contact_frames += 1
    points = np.vstack(points) if points else np.zeros((0, 3))
    forces = np.vstack(forces) if forces else np.zeros((0, 3))
    size = float(np.linalg.norm(hi - lo))
    fmax = float(np.linalg.norm(forces, axis=1).max()) if len(forces) else 0.0
    force_scale = 0.25 * size / fmax if fmax > 0 else 0.0  # the largest force: a quarter of the scene

    scene = {
        "version": 1, "title": title, "dt": dt, "up": _up(sim).tolist(), "planar": planar,
        "steps": int(n_ok - 1), "n_states": int(len(xs)), "frames": int(len(idx)),
        "frame_indices": idx.tolist(), "times": _b64(idx * dt, "<f4"),
        "shapes": shapes, "n_moving": n_moving, "placements": _b64(placements, "<f4"),
        "static_placements": static_place,
        "bones": bones, "n_joints": int(model.njoints), "joints": _b64(joints, "<f4"),
        "contact_counts": counts.tolist(), "contact_points": _b64(points, "<f4"),
        "contact_forces": _b64(forces, "<f4"), "force_scale": force_scale, "max_force": fmax,
        "bounds": [lo.tolist(), hi.tolist()], "target": target, "contact_warning": contact_warning,
    }
    info = SceneInfo(path="", frames=len(idx), geometries=sum(1 for s in shapes if s is not None),
                     triangles=int(triangles), contact_frames=contact_frames, skipped=skipped, bytes=0,
                     contact_warning=contact_warning)
    return scene, info


def _three_js() -> bytes:
    return resources.files("app").joinpath("_vendor", "three.module.min.js").read_bytes()


def render_html(scene: dict) -> str:
    """The self-contained page for a :func:`scene_data` dict."""
    payload = _gzip_b64(json.dumps(scene, separators=(",", ":")).encode())
    title = re.sub(r"[<>&\"]", "", scene.get("title") or "trajectory")
    return (_PAGE.replace("%TITLE%", title)
            .replace("%THREE%", _gzip_b64(_three_js()))
            .replace("%SCENE%", payload))


def write_scene(sim, xs, path, *, dt: float | None = None, us=None, contacts: bool = True, title: str = "",
                target=None, max_frames: int = MAX_FRAMES, visual=None) -> SceneInfo:
    """Write ``path`` (``scene.html``): the trajectory ``xs`` (T+1, nx) of ``sim`` as a
    self-contained 3-D page (see the module docstring); with ``us`` (T, nu) the contacts of
    each drawn step are shown. Written atomically (a temporary file, then a rename)."""
    scene, info = scene_data(sim, xs, dt=dt, us=us, contacts=contacts, title=title, target=target,
                             max_frames=max_frames, visual=visual)
    html = render_html(scene)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(html)
    os.replace(tmp, path)
    info.path, info.bytes = path, os.path.getsize(path)
    return info


def read_scene(path) -> dict:
    """The scene dict a page embeds (arrays still base64: see :func:`scene_array`)."""
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/octet-stream" id="scene-data">([A-Za-z0-9+/=\s]+)</script>', html)
    if m is None:
        raise ValueError(f"{path}: no scene data (not a page written by app.viewer)")
    return json.loads(gzip.decompress(base64.b64decode(m.group(1))))


def scene_array(scene: dict, key: str) -> np.ndarray:
    """A float array of a decoded scene: ``times`` (F,), ``placements`` (F, n_moving, 7: position,
    quaternion x y z w), ``joints`` (F, n_joints, 3), ``contact_points`` / ``contact_forces`` (N, 3)."""
    a = np.frombuffer(base64.b64decode(scene[key]), dtype="<f4")
    shapes = {"times": (-1,), "placements": (scene["frames"], scene["n_moving"], 7),
              "joints": (scene["frames"], scene["n_joints"], 3), "contact_points": (-1, 3),
              "contact_forces": (-1, 3)}
    return a.reshape(shapes[key])


_PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>%TITLE% - contactraj</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
html, body { margin: 0; height: 100%; overflow: hidden; font: 13px system-ui, sans-serif; background: #f4f5f7; }
#view { position: absolute; inset: 0 0 48px 0; }
#view canvas { display: block; width: 100%; height: 100%; }
#bar { position: absolute; left: 0; right: 0; bottom: 0; height: 48px; display: flex; gap: 10px;
       align-items: center; padding: 0 12px; background: #fff; border-top: 1px solid #ccd; box-sizing: border-box; }
#time { flex: 1; }
#play { width: 72px; height: 30px; }
#hud { position: absolute; left: 10px; top: 8px; color: #223; background: rgba(255,255,255,.8);
       padding: 4px 8px; border-radius: 4px; pointer-events: none; white-space: pre; }
#error { position: absolute; left: 10px; right: 10px; top: 40%; color: #a00; font-size: 16px; text-align: center; }
</style></head>
<body>
<div id="view"></div>
<div id="hud">loading...</div>
<div id="error"></div>
<div id="bar">
  <button id="play" title="play / pause (space)">play</button>
  <input id="time" type="range" min="0" max="0" step="1" value="0" title="frame (arrow keys)">
  <span id="clock">t = 0.000 s</span>
  <label>speed <select id="speed">
    <option value="0.05">0.05x</option><option value="0.1">0.1x</option><option value="0.25">0.25x</option>
    <option value="0.5">0.5x</option><option value="1" selected>1x</option><option value="2">2x</option>
    <option value="4">4x</option></select></label>
  <label><input id="show-contacts" type="checkbox" checked> contacts</label>
  <label><input id="show-skeleton" type="checkbox" checked> skeleton</label>
</div>
<script type="application/octet-stream" id="three-js">%THREE%</script>
<script type="application/octet-stream" id="scene-data">%SCENE%</script>
<script type="module">
async function inflate(id) {
  const text = document.getElementById(id).textContent.trim();
  const bin = Uint8Array.from(atob(text), c => c.charCodeAt(0));
  const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}
function floats(b64) {
  const bin = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  return new Float32Array(bin.buffer);
}
function uints(b64) {
  const bin = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  return new Uint32Array(bin.buffer);
}
function fail(msg) {
  document.getElementById("error").textContent = msg;
  console.error(msg);
}
try {
  if (typeof DecompressionStream === "undefined") throw new Error("this browser lacks DecompressionStream");
  const THREE = await import(URL.createObjectURL(new Blob([await inflate("three-js")], {type: "text/javascript"})));
  const S = JSON.parse(await inflate("scene-data"));
  main(THREE, S);
} catch (e) {
  fail("could not show the scene: " + e);
}

function main(THREE, S) {
  const view = document.getElementById("view");
  const renderer = new THREE.WebGLRenderer({antialias: true, preserveDrawingBuffer: true});
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  view.appendChild(renderer.domElement);
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xf4f5f7);
  const up = new THREE.Vector3(...S.up);
  const lo = new THREE.Vector3(...S.bounds[0]), hi = new THREE.Vector3(...S.bounds[1]);
  const center = lo.clone().add(hi).multiplyScalar(0.5);
  const radius = Math.max(0.25, 0.5 * hi.distanceTo(lo));
  const camera = new THREE.PerspectiveCamera(40, 1, radius / 200, radius * 200);
  camera.up.copy(up);
  scene.add(new THREE.HemisphereLight(0xffffff, 0x667788, 1.6));
  const sun = new THREE.DirectionalLight(0xffffff, 1.6);
  sun.position.copy(up.clone().multiplyScalar(3).add(new THREE.Vector3(1, 1.5, 0.5))).multiplyScalar(radius * 3);
  scene.add(sun);

  // directions across "up" for the camera and the ground grid
  const e1 = Math.abs(up.x) < 0.9 ? new THREE.Vector3(1, 0, 0) : new THREE.Vector3(0, 1, 0);
  e1.sub(up.clone().multiplyScalar(e1.dot(up))).normalize();
  const e2 = up.clone().cross(e1).normalize();
  let viewDir;
  if (S.planar) viewDir = new THREE.Vector3(0, 0, 1);
  else viewDir = e1.clone().multiplyScalar(0.55).add(e2.clone().multiplyScalar(-0.8)).add(up.clone().multiplyScalar(0.42)).normalize();
  let dist = radius / Math.sin(THREE.MathUtils.degToRad(20));
  const target = center.clone();
  function placeCamera() {
    camera.position.copy(target).add(viewDir.clone().multiplyScalar(dist));
    camera.lookAt(target);
  }

  function geometryOf(sh) {
    let g;
    const axisZ = new THREE.Matrix4().makeRotationX(Math.PI / 2);  // three's y axis -> coal's z axis
    switch (sh.kind) {
      case "box": g = new THREE.BoxGeometry(...sh.size); break;
      case "sphere": g = new THREE.SphereGeometry(sh.radius, 32, 16); break;
      case "ellipsoid": g = new THREE.SphereGeometry(1, 32, 16); g.scale(...sh.radii); break;
      case "capsule": g = new THREE.CapsuleGeometry(sh.radius, sh.length, 8, 24); g.applyMatrix4(axisZ); break;
      case "cylinder": g = new THREE.CylinderGeometry(sh.radius, sh.radius, sh.length, 32); g.applyMatrix4(axisZ); break;
      case "cone": g = new THREE.ConeGeometry(sh.radius, sh.length, 32); g.applyMatrix4(axisZ); break;
      case "mesh":
        g = new THREE.BufferGeometry();
        g.setAttribute("position", new THREE.BufferAttribute(floats(sh.vertices), 3));
        g.setIndex(new THREE.BufferAttribute(uints(sh.triangles), 1));
        g.computeVertexNormals();
        break;
      default: return null;
    }
    return g;
  }

  const moving = [];
  S.shapes.forEach((sh, i) => {
    if (sh === null) { if (i < S.n_moving) moving.push(null); return; }
    if (sh.kind === "plane") {
      const n = new THREE.Vector3(...sh.normal).normalize();
      const size = Math.max(4, radius * 6);
      const g = new THREE.PlaneGeometry(size, size);
      const m = new THREE.Mesh(g, new THREE.MeshStandardMaterial({color: 0xdadde2, side: THREE.DoubleSide}));
      const grid = new THREE.GridHelper(size, Math.round(size / Math.pow(10, Math.floor(Math.log10(size / 20)))), 0x9aa0aa, 0xbcc1c9);
      const origin = center.clone().sub(n.clone().multiplyScalar(center.dot(n) - sh.offset));
      m.quaternion.setFromUnitVectors(new THREE.Vector3(0, 0, 1), n);
      grid.quaternion.setFromUnitVectors(new THREE.Vector3(0, 1, 0), n);
      m.position.copy(origin);
      grid.position.copy(origin.clone().add(n.clone().multiplyScalar(radius * 1e-3)));
      scene.add(m); scene.add(grid);
      return;
    }
    const mat = new THREE.MeshStandardMaterial({color: sh.color, roughness: 0.6, metalness: 0.05,
                                                transparent: sh.opacity < 1, opacity: sh.opacity,
                                                flatShading: sh.kind === "mesh"});
    const mesh = new THREE.Mesh(geometryOf(sh), mat);
    mesh.add(new THREE.LineSegments(new THREE.EdgesGeometry(mesh.geometry, 30),
                                    new THREE.LineBasicMaterial({color: 0x333a44, transparent: true, opacity: 0.35})));
    if (i < S.n_moving) moving.push(mesh);
    else {
      const p = S.static_placements[i - S.n_moving];
      mesh.position.set(p[0], p[1], p[2]);
      mesh.quaternion.set(p[3], p[4], p[5], p[6]);
    }
    scene.add(mesh);
  });

  // skeleton: a rod from each joint to its parent, a ball at each joint
  const J = floats(S.joints), NJ = S.n_joints;
  const rodRadius = Math.max(0.004, radius * 0.008);
  const skeleton = new THREE.Group();
  const rodMat = new THREE.MeshStandardMaterial({color: 0x555d6b});
  const rodGeom = new THREE.CylinderGeometry(rodRadius, rodRadius, 1, 8);
  const ballGeom = new THREE.SphereGeometry(rodRadius * 1.8, 12, 8);
  const rods = S.bones.map(() => { const r = new THREE.Mesh(rodGeom, rodMat); skeleton.add(r); return r; });
  const balls = [];
  for (let j = 1; j < NJ; j++) { const b = new THREE.Mesh(ballGeom, rodMat); skeleton.add(b); balls.push(b); }
  scene.add(skeleton);

  // contacts: a dot and a force arrow each
  const CP = floats(S.contact_points), CF = floats(S.contact_forces);
  const start = [0];
  S.contact_counts.forEach(c => start.push(start[start.length - 1] + c));
  const maxContacts = Math.max(0, ...S.contact_counts);
  const contactGroup = new THREE.Group();
  const dotGeom = new THREE.SphereGeometry(rodRadius * 2.2, 12, 8);
  const dotMat = new THREE.MeshBasicMaterial({color: 0xd62728});
  const dots = [], arrows = [];
  for (let k = 0; k < maxContacts; k++) {
    const d = new THREE.Mesh(dotGeom, dotMat); contactGroup.add(d); dots.push(d);
    const a = new THREE.ArrowHelper(new THREE.Vector3(0, 0, 1), new THREE.Vector3(), 1, 0xd62728);
    contactGroup.add(a); arrows.push(a);
  }
  scene.add(contactGroup);

  if (S.target) {
    const t = new THREE.Mesh(new THREE.SphereGeometry(Math.max(0.02, radius * 0.02), 16, 12),
                             new THREE.MeshBasicMaterial({color: 0xff0000}));
    t.position.set(...S.target);
    scene.add(t);
  }

  const P = floats(S.placements), times = floats(S.times), F = S.frames;
  const slider = document.getElementById("time"), clock = document.getElementById("clock");
  const playButton = document.getElementById("play"), speed = document.getElementById("speed");
  const showContacts = document.getElementById("show-contacts"), showSkeleton = document.getElementById("show-skeleton");
  slider.max = String(F - 1);
  const hud = document.getElementById("hud");
  const fscale = S.force_scale > 0 ? ("\narrows: normal contact force, longest " + S.max_force.toPrecision(3) + " N") : "";
  hud.textContent = (S.title || "trajectory") + "\n" + F + " frames of " + (S.steps + 1) + " states, dt " + S.dt + " s" + fscale
    + (S.contact_warning ? "\nwarning: " + S.contact_warning : "");

  const yAxis = new THREE.Vector3(0, 1, 0), a = new THREE.Vector3(), b = new THREE.Vector3(), d = new THREE.Vector3();
  let frame = 0;
  function setFrame(f) {
    frame = Math.max(0, Math.min(F - 1, f));
    const base = frame * S.n_moving * 7;
    moving.forEach((m, i) => {
      if (m === null) return;
      const o = base + i * 7;
      m.position.set(P[o], P[o + 1], P[o + 2]);
      m.quaternion.set(P[o + 3], P[o + 4], P[o + 5], P[o + 6]);
    });
    const jb = frame * NJ * 3;
    S.bones.forEach(([p, c], i) => {
      a.set(J[jb + 3 * p], J[jb + 3 * p + 1], J[jb + 3 * p + 2]);
      b.set(J[jb + 3 * c], J[jb + 3 * c + 1], J[jb + 3 * c + 2]);
      d.subVectors(b, a);
      const len = d.length();
      rods[i].visible = len > 1e-9;
      if (len > 1e-9) {
        rods[i].position.copy(a).addScaledVector(d, 0.5);
        rods[i].quaternion.setFromUnitVectors(yAxis, d.divideScalar(len));
        rods[i].scale.set(1, len, 1);
      }
    });
    balls.forEach((ball, i) => ball.position.set(J[jb + 3 * (i + 1)], J[jb + 3 * (i + 1) + 1], J[jb + 3 * (i + 1) + 2]));
    for (let k = 0; k < maxContacts; k++) {
      const on = k < S.contact_counts[frame];
      dots[k].visible = arrows[k].visible = on;
      if (!on) continue;
      const o = 3 * (start[frame] + k);
      a.set(CP[o], CP[o + 1], CP[o + 2]);
      b.set(CF[o], CF[o + 1], CF[o + 2]);
      dots[k].position.copy(a);
      const len = b.length() * S.force_scale;
      arrows[k].position.copy(a);
      arrows[k].setDirection(b.normalize());
      arrows[k].setLength(Math.max(len, 1e-6), Math.min(0.3 * len, radius * 0.06), Math.min(0.15 * len, radius * 0.03));
    }
    slider.value = String(frame);
    clock.textContent = "t = " + times[frame].toFixed(3) + " s";
  }

  let playing = false, simTime = 0, last = null;
  function setPlaying(p) {
    playing = p;
    playButton.textContent = p ? "pause" : "play";
    if (p && frame >= F - 1) simTime = 0;
    else simTime = times[frame];
    last = null;
  }
  playButton.addEventListener("click", () => setPlaying(!playing));
  slider.addEventListener("input", () => { setFrame(parseInt(slider.value)); simTime = times[frame]; });
  showContacts.addEventListener("change", () => contactGroup.visible = showContacts.checked);
  showSkeleton.addEventListener("change", () => skeleton.visible = showSkeleton.checked);
  window.addEventListener("keydown", ev => {
    if (ev.target.tagName === "SELECT") return;
    if (ev.code === "Space") { setPlaying(!playing); ev.preventDefault(); }
    if (ev.code === "ArrowRight") { setPlaying(false); setFrame(frame + 1); }
    if (ev.code === "ArrowLeft") { setPlaying(false); setFrame(frame - 1); }
  });

  // orbit: drag turns around the scene's centre, the wheel zooms
  let drag = null;
  renderer.domElement.addEventListener("pointerdown", ev => { drag = [ev.clientX, ev.clientY]; });
  window.addEventListener("pointerup", () => { drag = null; });
  window.addEventListener("pointermove", ev => {
    if (!drag) return;
    const dx = ev.clientX - drag[0], dy = ev.clientY - drag[1];
    drag = [ev.clientX, ev.clientY];
    viewDir.applyAxisAngle(up, -dx * 0.008);
    const side = up.clone().cross(viewDir).normalize();
    const turned = viewDir.clone().applyAxisAngle(side, dy * 0.008);
    if (Math.abs(turned.dot(up)) < 0.98) viewDir.copy(turned);
    placeCamera();
  });
  renderer.domElement.addEventListener("wheel", ev => {
    dist *= Math.exp(ev.deltaY * 0.001);
    placeCamera();
    ev.preventDefault();
  }, {passive: false});

  function resize() {
    const w = view.clientWidth, h = view.clientHeight;
    renderer.setSize(w, h, false);
    camera.aspect = w / Math.max(h, 1);
    camera.updateProjectionMatrix();
  }
  window.addEventListener("resize", resize);
  resize();
  placeCamera();
  setFrame(0);

  function loop(now) {
    if (playing) {
      if (last !== null) {
        simTime += (now - last) / 1000 * parseFloat(speed.value);
        if (simTime > times[F - 1]) simTime = 0;
      }
      last = now;
      let f = frame;
      if (times[f] > simTime) f = 0;
      while (f + 1 < F && times[f + 1] <= simTime) f++;
      setFrame(f);
    }
    renderer.render(scene, camera);
    requestAnimationFrame(loop);
  }
  requestAnimationFrame(loop);
  window.sceneViewer = {frames: F, get frame() { return frame; }, get playing() { return playing; }, setFrame, setPlaying};
  document.body.dataset.ready = "1";
}
</script>
</body></html>
"""
