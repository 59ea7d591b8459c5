"""Collision detection with coal through Pinocchio: contact points, normals, signed distances.

A :class:`CollisionScene` owns the collision pairs of a model: every pair of
collision objects on different bodies, except two moving bodies joined by a
joint (adjacent links overlap at their joint by construction), two static
objects, and pairs named in ``exclude``; plus each moving object against a
ground half-space when ``ground=h`` is given.

:meth:`CollisionScene.detect` runs coal's narrow phase at ``q`` with a security
margin, so pairs closer than ``margin`` are reported with a *positive* signed
distance (speculative contacts: the contact solver may let them close the gap,
not cross it). Where a single point is not enough (a box flat on a face), the
contact patch is used: a box on the ground gives its 4 corners.

Meshes (coal ``BVHModel*``, as loaded from URDF/MJCF files) are replaced once, at
construction, by their convex hulls (coal's ``buildConvexHull``, qhull): coal's
mesh-vs-half-space test reports a zero distance for every pair within the
margin (a body sinks) and its mesh-vs-primitive contacts are per-triangle and
slow. Against the ground the hull is exact for any mesh, convex or not: the
points of a rigid body that can touch a plane are the vertices of its convex
hull. Against other bodies the hull is exact only for a convex mesh: a mesh
whose hull is more than :data:`CONVEXITY_TOLERANCE` larger in volume (or whose
volume cannot be measured: an open mesh) is still replaced, with a warning that
names its link (no convex decomposition is done).

A convex shape on the ground gets its own contact patch (:meth:`CollisionScene._ground_patch`):
the hull vertices within :data:`PATCH_DEPTH` of its lowest one, each with its own
distance, thinned to at most :data:`MAX_PATCH_POINTS` extreme ones, so a flat
face rests on its corners without rocking and a curved foot on its lowest point.

Conventions of a contact (all in the world frame):

- the normal ``n`` points from body B to body A (A = the second object of the
  coal pair, B = the first); ``phi`` is the signed distance along ``n``
  (negative = penetration);
- the contact velocity is ``c = R^T (v_A(p) - v_B(p))`` with ``R = [n, t1, t2]``,
  so ``c_n > 0`` is separating;
- ``normal_body`` is the joint that carries the normal (its face), ``point_body``
  the joint the point is attached to: as a body-fixed vertex (``radius = 0``) or
  as the point of a sphere/capsule cap at signed distance ``radius`` along ``n``
  from a body-fixed centre (``p = centre + radius * n``). Both matter for how the
  contact moves with ``q`` (the collision-geometry terms of the Jacobians).
- between two round shapes (spheres, capsules), a ball on a cylinder's side or rim, and a
  capsule or cylinder on a cylinder's side or rim, the normal is the line of their cores' closest
  points (a sphere's centre; the nearest point of a capsule's or a cylinder side's segment, or of a rim's circle, which
  slides along it), which turns as either moves, not with one body: ``gap`` is then the
  signed distance of the normal body's core point behind the point body's,
  ``x_N = x_P - gap * n``, and ``slide`` their sliding axes (0 for every other pair,
  whose normal the carrier turns).
- a cylinder's rim on a flat (the ground, a plane), a box's face or another cylinder's cap face touches
  it at the lowest point of each end's rim along the face's normal (``axis``: the point slides on the rim
  as the normal turns), not at coal's witness points, which are fixed on the rim; nearly flat on its disk,
  it rests on four points fixed on that rim, and where it overhangs the face's border (a box's edge, a face
  smaller than the disk, a cap's circle) also on the other corners of their overlap: where the rim crosses the
  border and the face's corners or cap points under the disk (taken as fixed on the disk, so the Jacobians are
  not exact there); between two cylinders a smaller disk wholly on the other's cap rests on its own four points
  instead (exact), and when it is the lower one (``up``) also on its rim point toward the upper one's axis, which
  slides on its rim (taken as fixed), as a disk under a box also holds its rim point toward the box's centre: by
  the square alone a can or a box on a post of half its radius tipped once its centre was 0.75 of the post's radius
  out between two of those points; the face carries its exact normal (coal's
  carries noise), as a cylinder's cap face does under a ball or a capsule's end. Tilted with its lowest rim point beyond a box's face (on a smaller post, over a
  table's edge), its disk rests on the face's border: the disk carries its exact normal and the face's corners
  under it (exact) and its edges' points below the rim (not exact) are the points. On its side across a box's face
  smaller than it (a log under a box), it rests on its lowest line where that is over the face (the ends, where the
  face's edges cross it, taken as fixed on the cylinder: not exact).
- a capsule or cylinder lying across a cylinder's end along a chord, touching its rim at one end (the line of the
  cores), also rests on its lowest point over the chord's other end, against the cap's plane (taken as fixed on the
  rod: not exact).
- a convex hull on a box's face rests on its vertices over the face, and where it overhangs the face (a hull on a
  smaller post) also on the face's corners under it (taken as fixed on the hull: not exact).
- a capsule lying on a box's face or a cylinder's cap, both ends over it, touches it as the ground at each end's
  hemisphere point with its own distance (coal's patch flattens both ends onto the lower one's plane).
- coal's normal between two boxes, hulls or cylinders is replaced where a direction of the separating axis test
  (face normals, crossings of edges) parts them by more than it does (:data:`NORMAL_SLACK`): touching exactly, coal
  can return a normal off by mrad or by 45 deg (CollisionScene._consistent). A face on a box's face: coal's points
  lie on coal's plane, and are moved along the normal onto the point body's face, each at its own distance.
"""

from __future__ import annotations

from dataclasses import dataclass

import math
import warnings

import coal
import numpy as np
import pinocchio as pin

from . import _kernels, core

_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)])
#: Tangential distance (m) within which a patch point is snapped to a shape vertex.
SNAP_TOLERANCE = 1e-4
#: GJK tolerance of every collision request (coal's default 1e-6 fails on exactly touching boxes).
GJK_TOLERANCE = 1e-8
#: A mesh counts as convex when its convex hull's volume exceeds the mesh's by at most this fraction.
CONVEXITY_TOLERANCE = 0.10
#: Most points of one convex shape's patch on the ground. A flat face keeps its extreme vertices
#: along 4 directions of the ground plane, 90 degrees apart (a rectangle keeps its 4 corners whatever
#: its orientation); a curved one its lowest vertex and the extreme ones along 3 directions, 120
#: degrees apart where the face is flat that way (see CURVED_SLOPE). More points cost more in the
#: contact solve (its time grows with the cube of its rows) and hold a body no better.
MAX_PATCH_POINTS = 4  # 7 when a curved hull rests on one of its faces (4 + 3)
#: On a curved face, an extreme vertex joins the lowest one only when the line between them rises
#: less than this slope (about 3 degrees): the face is flat that way (a lying cylinder along its axis)
#: and a single point would let the body pivot; on a round face (a ball-shaped foot) the lowest
#: vertex alone holds it, as a sphere's single contact does.
CURVED_SLOPE = 0.05
#: Height (m) above a convex shape's lowest vertex within which its vertices join its ground patch
#: (the scene's ``margin`` when that is smaller).
PATCH_DEPTH = 1e-3
#: Height difference (m) below which the lowest vertex of a patch counts as level with its extreme
#: ones (it is then not added: a flat face tilted by round-off keeps the same points).
FLAT_TOLERANCE = 1e-7
#: how much more than along coal's normal another direction must part two shapes for coal's normal to be replaced
#: (CollisionScene._consistent; coal's normal carries ~1e-5 rad of noise, ~1e-6 m over a 10 cm box: over a 2 m table
#: the noise alone can pass it, and the patch is then recomputed along the face's exact normal, an extra coal call)
NORMAL_SLACK = 1e-5
#: a hull's face normal whose component along a line is below this is taken as parallel to it (_corners_under_hull)
HULL_PARALLEL = 1e-12
#: how much deeper than coal's signed distance a cylinder's face part may read before it is taken for a face where the
#: shapes do not touch (_rim_on_face; coal's depth and ours agree to GJK's tolerance where they do)
FACE_SLACK = 1e-3
_ROUND = (coal.Sphere, coal.Capsule)
_RODS = (coal.Capsule, coal.Cylinder)
_LINE = (coal.Sphere, coal.Capsule, coal.Cylinder)  # cores on a centre line (_line_cores)
_FLAT = (coal.Halfspace, coal.Plane)
_POLY = (coal.Box, coal.ConvexBase, coal.Cylinder)  # shapes with a support function in every direction (_support)


@dataclass
class Contacts:
    """The contacts found at one configuration (nc of them), as arrays.

    ``points`` (nc, 3), ``normals`` (nc, 3), ``phi`` (nc,), ``body_a``/``body_b``
    (nc,) joint indices (0 = the world), ``normal_body``/``point_body`` (nc,),
    ``radius`` (nc,) signed offset of the point from its body-fixed centre along
    the normal, ``pair`` (nc,) index of the collision pair, ``axis`` (nc, 3) the unit axis
    of a cylinder whose rim carries the point (zeros otherwise): the point is then
    ``centre + radius u`` with ``u`` the unit projection of ``n`` normal to the axis
    (the lowest point of the rim circle of centre ``centre``, body-fixed). ``gap`` (nc,): on a centre line (two
    round shapes, spheres and capsules; a ball on a cylinder's side or rim; a rod on a cylinder's side:
    :func:`_line_cores`), the signed offset of the normal body's core point, ``x_N = x_P - gap n`` with
    ``x_P = p - radius n`` (the normal is the line of the cores' closest points and turns with both), else 0;
    ``slide`` (nc, 6): the unit axes along which ``x_P`` and ``x_N`` slide (a capsule's segment, the closest point
    inside it), zeros where the point is fixed (a sphere's centre, a capsule's end); on a cylinder's rim touched by
    a ball, ``x_N`` is the rim circle's closest point and its slide the rim's tangent scaled by ``sqrt(R / rho)``
    (:func:`_line_cores`) (module docstring).
    """

    points: np.ndarray
    normals: np.ndarray
    phi: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    normal_body: np.ndarray
    point_body: np.ndarray
    radius: np.ndarray
    pair: np.ndarray
    axis: np.ndarray | None = None
    gap: np.ndarray | None = None
    slide: np.ndarray | None = None

    def __post_init__(self):
        if self.axis is None:
            self.axis = np.zeros((len(self.phi), 3))
        if self.gap is None:
            self.gap = np.zeros(len(self.phi))
        if self.slide is None:
            self.slide = np.zeros((len(self.phi), 6))

    def __len__(self) -> int:
        return len(self.phi)

    @classmethod
    def empty(cls) -> "Contacts":
        z3 = np.zeros((0, 3))
        zi = np.zeros(0, dtype=np.intp)
        return cls(z3, z3.copy(), np.zeros(0), zi, zi.copy(), zi.copy(), zi.copy(), np.zeros(0), zi.copy(),
                   z3.copy(), np.zeros(0), np.zeros((0, 6)))


class CollisionScene:
    """Collision pairs of a model and their narrow phase (see the module docstring).

    ``ground``: height of a horizontal ground half-space (normal ``up``), or None.
    ``up``: the world's up axis (``(0, 0, 1)``; planar scenes may use ``(0, 1, 0)``): the ground's normal, and
    which of two disks resting on each other is on top (the lower one's rim point toward the upper one's axis).
    ``margin``: security margin (m) within which separated pairs are reported.
    ``planar``: the scene moves in the xy plane; patch points that differ only in
    z are merged (they give identical planar contact rows).
    ``self_collision``: the model's own objects collide with each other, static
    ones (a floor built in code) included; False: only the ground collides with
    the model (a robot file's links overlap where only an SRDF could sort out).
    ``pairs``: names of the object pairs that collide, replacing the rule above
    (the ground, when given, still collides with every moving object).
    ``patch_depth``: height above a ground patch's lowest vertex within which vertices join it
    (default :data:`PATCH_DEPTH`; never more than ``margin``). A compliant model, whose force reaches
    every vertex closer than its width however deep the lowest one is, asks for the whole margin.
    ``speculative``: each pair's margin grows with its objects' speeds, ``max(margin, dt (s_A + s_B))``
    with ``s`` an upper bound on the speed of an object's points along the step's path (:meth:`_margins`),
    when :meth:`detect` is given the step's velocity and ``dt``; the contact step solves again while its
    impulses grow some margin (:meth:`margins_grow`). With the margin alone, points faster than
    ``margin / dt`` cross it in one step and start the next one inside. Unbounded shapes (half-spaces,
    planes) on moving bodies are refused.
    """

    def __init__(self, model: pin.Model, geometry: pin.GeometryModel | None, *, ground: float | None = None,
                 up=(0.0, 0.0, 1.0), margin: float = 1e-3, planar: bool = False,
                 exclude: list[tuple[str, str]] | None = None, self_collision: bool = True,
                 pairs: list[tuple[str, str]] | None = None, patch_depth: float = PATCH_DEPTH,
                 speculative: bool = False):
        self.geometry = pin.GeometryModel() if geometry is None else geometry.copy()
        self.margin = float(margin)
        if not isinstance(speculative, (bool, np.bool_)):
            raise TypeError(f"speculative must be True or False, got {speculative!r}")
        self.speculative = bool(speculative)
        self.planar = planar
        up = np.asarray(up, dtype=float)
        if up.shape != (3,) or not np.isfinite(up).all() or not np.linalg.norm(up) > 0.0:
            raise ValueError(f"up must be a nonzero finite 3-vector, got {up!r}")
        self._up = up / np.linalg.norm(up)  # the world's up axis: which of two disks rests on the other
        gm = self.geometry
        objs = gm.geometryObjects
        n_model = len(objs)
        meshes = {i: objs[i].geometry for i in range(n_model) if isinstance(objs[i].geometry, coal.BVHModelBase)}
        for i in meshes:
            objs[i].geometry = _convex_hull(objs[i], model)
        if ground is not None:
            hs = coal.Halfspace(self._up, float(ground))
            ig = gm.addGeometryObject(pin.GeometryObject("__ground__", 0, pin.SE3.Identity(), hs))
            for i in range(n_model):
                if objs[i].parentJoint != 0:
                    gm.addCollisionPair(pin.CollisionPair(ig, i))
        excluded = {frozenset(p) for p in (exclude or [])}
        if pairs is not None:
            names = {objs[i].name: i for i in range(n_model)}
            for a, b in pairs:
                if a not in names or b not in names:
                    missing = [x for x in (a, b) if x not in names]
                    raise ValueError(f"collision pair ({a!r}, {b!r}): no collision object named {missing}; "
                                     f"objects: {sorted(names)}")
                i, k = names[a], names[b]
                if objs[i].parentJoint == objs[k].parentJoint:
                    raise ValueError(f"collision pair ({a!r}, {b!r}): both objects are on the same body")
                first, second = (i, k) if objs[i].parentJoint == 0 or objs[k].parentJoint != 0 else (k, i)
                gm.addCollisionPair(pin.CollisionPair(first, second))
            self_collision = None  # pairs given explicitly: no automatic ones
        for i in range(n_model if self_collision is not None else 0):
            for k in range(i + 1, n_model):
                ji, jk = objs[i].parentJoint, objs[k].parentJoint
                if ji == jk or (ji == 0 and jk == 0):
                    continue
                if not self_collision:
                    continue  # the model's own objects never collide; only the ground below
                if ji != 0 and jk != 0 and (model.parents[ji] == jk or model.parents[jk] == ji):
                    continue  # links joined by a joint overlap there by construction
                if frozenset((objs[i].name, objs[k].name)) in excluded:
                    continue
                # Put a static object first (B), so normals point from the static body out.
                first, second = (i, k) if ji == 0 or jk != 0 else (k, i)
                gm.addCollisionPair(pin.CollisionPair(first, second))
        self._pairs = [(p.first, p.second) for p in gm.collisionPairs]
        self._vertices = [_local_vertices(o.geometry) for o in objs]
        off_ground = set()  # objects in a pair with something other than the ground
        for first, second in self._pairs:
            if not isinstance(objs[first].geometry, coal.Halfspace):
                off_ground.update((first, second))
        for i, mesh in meshes.items():
            if i in off_ground:
                _warn_if_not_convex(objs[i], mesh, model)
        # Convex shapes on a half-space: the scene's own patch (see _ground_patch).
        self._hull_ground = [isinstance(objs[first].geometry, coal.Halfspace)
                             and isinstance(objs[second].geometry, coal.ConvexBase)
                             for first, second in self._pairs]
        # A capsule or cylinder against a half-space or plane: (rod, its object, the flat object,
        # sign, flat shape) for _rod_on_flat, else None.
        self._rod = []
        for first, second in self._pairs:
            sA, sB = objs[second].geometry, objs[first].geometry
            if isinstance(sB, _FLAT) and isinstance(sA, _RODS):
                self._rod.append((sA, second, first, -1.0, sB))
            elif isinstance(sA, _FLAT) and isinstance(sB, _RODS):
                self._rod.append((sB, first, second, 1.0, sA))
            else:
                self._rod.append(None)
        self._patch_depth = min(self.margin, float(patch_depth))
        self._info = []
        for first, second in self._pairs:  # first = B, second = A
            oA, oB = objs[second], objs[first]
            self._info.append((oA.parentJoint, oB.parentJoint, oA.geometry, oB.geometry, second, first))
        # The compiled twin of detect (cpp/src/detection.cpp), given the same static information.
        self._detector = None
        if self._pairs and core.available():
            rows = [[jA, jB, iA, iB, int(hull), 0 if rod is None else int(rod[3])]
                    for (jA, jB, _, _, iA, iB), hull, rod in zip(self._info, self._hull_ground, self._rod)]
            self._detector = core.module.Detector(
                gm, rows, self._vertices, self.margin, self._patch_depth, bool(planar), SNAP_TOLERANCE,
                FLAT_TOLERANCE, CURVED_SLOPE, MAX_PATCH_POINTS, _DIRECTIONS_4, _DIRECTIONS_3, self._up, FACE_SLACK,
                NORMAL_SLACK)
        #: each object's reach about its joint's origin (speculative margins; 0 on the world), else None
        for o in objs if self.speculative else ():
            if o.parentJoint != 0 and isinstance(o.geometry, _FLAT):
                raise ValueError(f"speculative margins need bounded shapes on moving bodies: {o.name!r} is a "
                                 f"{type(o.geometry).__name__} on joint {model.names[o.parentJoint]!r} (no bound on "
                                 "how fast its far points move)")
        self._reach = [_reach(o) for o in objs] if self.speculative else None
        if self._detector is not None and self._reach is not None:
            self._detector.set_reach(self._reach)
        # what create_data copies: the collision requests configured once (never used itself: its results stay empty)
        self._data_template = pin.GeometryData(gm)
        for req in self._data_template.collisionRequests:
            _configure(req, self.margin, GJK_TOLERANCE)

    @property
    def npairs(self) -> int:
        return len(self._pairs)

    def create_data(self) -> pin.GeometryData:
        """A new GeometryData of the scene, its collision requests configured (contacts on, the margin, GJK's
        tolerance): a copy of one configured once, since setting the requests' fields from Python costs as much as
        making the data (go1: 38 pairs, 24 us of 51; the copy takes 28 us), and each workspace needs one."""
        return self._data_template.copy()

    def detect(self, model: pin.Model, data: pin.Data, gdata: pin.GeometryData, q: np.ndarray, v=None,
               dt: float = 0.0) -> Contacts:
        """Contacts at ``q`` (runs forward kinematics and the narrow phase). ``v``, ``dt``: the step's
        velocity and time step, which set a speculative scene's margins (ignored otherwise).

        Runs the compiled detector (``cpp/src/detection.cpp``) when the core is available, else
        :meth:`_detect_reference`; both give the same contacts (tests/test_core_detection.py).
        """
        if self._detector is not None:
            arrays = self._detector.detect(model, data, gdata, q, v, dt)
            if arrays is not None:  # None: a case the compiled detector hands back
                return Contacts(*arrays)
        return self._detect_reference(model, data, gdata, q, v, dt)

    def _margins(self, model, data, q, v, dt) -> np.ndarray:
        """Every pair's speculative margin (npairs,): ``max(margin, d_A + d_B)``, ``d`` a bound on how far an
        object's points move along the step's path ``q + t v`` (t in [0, dt]): ``dt s0 + 1.5 dt^2 W S`` with ``s0 =
        |v| + |w| reach`` its body's twist at ``q``, ``W`` the sum of the angular rates of the joints that carry
        it, and ``S`` the sum over those joints of ``|v_J| + |w_J| D`` (``D`` bounding the distance from the
        joint's origin to the object's points over the step: the chain's link offsets, a translating joint's
        travel, the object's reach), which bounds its points' speed anywhere on the path, so that ``3 W S`` bounds
        their acceleration (a chain's links move on curves: their twist at ``q`` alone does not bound them). The
        margin itself without ``v``."""
        if v is None or dt == 0.0:
            return np.full(len(self._pairs), self.margin)
        v = np.asarray(v, dtype=float)
        if v.shape != (model.nv,) or not np.all(np.isfinite(v)):
            raise ValueError(f"v must be a finite velocity of shape ({model.nv},), got shape {v.shape}")
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f"dt must be a finite time step > 0, got {dt!r}")
        pin.forwardKinematics(model, data, q, v)
        nj = model.njoints
        lin, ang, link = np.zeros(nj), np.zeros(nj), np.zeros(nj)
        for m in range(1, nj):  # each joint's own motion (v_J: its twist less its parent's) and link length
            vJ = data.v[m] - data.liMi[m].actInv(data.v[model.parents[m]])
            lin[m], ang[m] = np.linalg.norm(vJ.linear), np.linalg.norm(vJ.angular)
            link[m] = np.linalg.norm(data.liMi[m].translation) + dt * lin[m]
        travel = np.zeros(len(self._reach))
        for i, o in enumerate(self.geometry.geometryObjects):
            j = o.parentJoint
            if j == 0:
                continue
            m, D, S, W = j, self._reach[i], 0.0, 0.0
            while m > 0:  # up the chain: D grows by each link's length as the joint gets farther
                S += lin[m] + ang[m] * D
                W += ang[m]
                D += link[m]
                m = model.parents[m]
            s0 = np.linalg.norm(data.v[j].linear) + np.linalg.norm(data.v[j].angular) * self._reach[i]
            travel[i] = dt * s0 + 1.5 * dt * dt * W * S
        return np.array([max(self.margin, travel[a] + travel[b]) for a, b in self._pairs])

    def _set_margins(self, model, data, gdata, q, v, dt) -> None:
        """The pairs' speculative margins (:meth:`_margins`) into ``gdata``'s collision requests."""
        for req, m in zip(gdata.collisionRequests, self._margins(model, data, q, v, dt)):
            req.security_margin = m

    def margins_grow(self, model, data, gdata, q, v, dt) -> bool:
        """Whether some pair's speculative margin at the velocity bound ``v`` exceeds the one ``gdata`` holds
        (the last detection's): the contact solve's impulses changed the velocities, and a pair the step may now
        close was not in its problem (False for a scene without speculative margins)."""
        if self._reach is None:
            return False
        if self._detector is not None:
            return bool(self._detector.margins_grow(model, data, gdata, q, v, dt))
        held = np.array([r.security_margin for r in gdata.collisionRequests])
        return bool(np.any(self._margins(model, data, q, v, dt) > held))

    def _detect_reference(self, model: pin.Model, data: pin.Data, gdata: pin.GeometryData,
                          q: np.ndarray, v=None, dt: float = 0.0) -> Contacts:
        """The Python implementation of :meth:`detect` (the reference of the compiled one)."""
        if self._reach is not None:
            self._set_margins(model, data, gdata, q, v, dt)
        if not self._pairs:
            pin.forwardKinematics(model, data, q)
            return Contacts.empty()
        if not pin.computeCollisions(model, data, self.geometry, gdata, q, False):  # no pair within the margin
            return Contacts.empty()
        hit = [k for k, r in enumerate(gdata.collisionResults) if r.isCollision()]
        pin.computeContactPatches(self.geometry, gdata)
        parts = []
        for k in hit:
            jA, jB, sA, sB, iA, iB = self._info[k]
            if self._hull_ground[k]:
                part = self._hull_part(k, np.asarray(gdata.oMg[iB].rotation @ sB.n, dtype=float), gdata)
                if part is not None:
                    parts.append(part)
                continue
            if self._rod[k] is not None:
                rod = self._rod_on_flat(k, gdata)
                if len(rod[0]):
                    parts.append(rod)
                continue
            patch = gdata.contactPatchResults[k].getContactPatch(0)
            if not _valid_normal(patch):
                patch = self._retry(k, gdata)
            patch = self._consistent(k, gdata, patch)
            n = np.array(patch.getNormal())
            if isinstance(sA, coal.ConvexBase) and isinstance(sB, coal.Box) and _aligned(sB, gdata.oMg[iB], n):
                # A hull on a box's face: the same vertex patch as on the ground, kept within the face
                # (coal's patch of a many-sided hull face is a clipped polygon, not body-fixed points).
                part = self._hull_part(k, _face_normal(sB, gdata.oMg[iB], n), gdata, face=True)
                if part is not None:
                    parts.append(part)
                    continue
            carrier, vertex_body, radius, n = self._classify(jA, jB, sA, sB, iA, iB, n, gdata)
            line = _line_cores(sA, gdata.oMg[iA], sB, gdata.oMg[iB])
            if line is not None:
                # the line of the cores' closest points (the point on P, the normal's N: _classify)
                xA, xB, slide, rA, rB, chord = line
                L = float(np.linalg.norm(xA - xB))
                if L > 0.0 and _separation_beyond(sA, gdata.oMg[iA], sB, gdata.oMg[iB], L - rA - rB,
                                                  np.array(patch.getNormal())):
                    line = None  # not where they touch: a can sunk into a post's cap is not side by side with it
                elif L > 0.0:
                    n = (xA - xB) / L
                    if vertex_body == jA:  # P = A: x_N = x_B = x_A - L n; the point on A's surface, rA behind
                        xP, gap, radius = xA, L, -rA
                    else:  # P = B: x_N = x_A = x_B + L n
                        xP, gap, radius, slide = xB, -L, rB, np.concatenate((slide[3:], slide[:3]))
                    P = (xP + radius * n)[None, :]
                    phi = np.array([L - rA - rB])
                    parts.append((P, n, phi, jA, jB, carrier, vertex_body, radius, k, None, gap, slide))
                    if chord is not None and phi[0] <= FLAT_TOLERANCE:
                        other = self._chord_end(k, gdata, *chord)
                        if other is not None:
                            parts.append(other)
                    continue
                # concentric, or another direction parts them more: no line (coal's normal, carried by N)
            on_A = vertex_body == jA
            rim = self._rim_on_face(k, gdata, np.array(patch.getNormal()), float(patch.penetration_depth))
            if rim is None:
                rim = self._capsule_on_face(k, gdata, n, on_A, float(patch.penetration_depth))
            if rim is not None:
                parts.append(rim)
                continue
            # The witness points on the body that carries the point (the patch
            # midpoints are not body-fixed), snapped to the box vertices they stand for.
            witness = patch.getPointShape2 if on_A else patch.getPointShape1
            P = np.array([witness(i) for i in range(patch.size())])
            if not np.all(np.abs(P) < 1e6):
                patch = self._retry(k, gdata)
                witness = patch.getPointShape2 if on_A else patch.getPointShape1
                P = np.array([witness(i) for i in range(patch.size())])
            iP = iA if on_A else iB
            if isinstance(sA if on_A else sB, coal.Sphere):
                # Exactly its centre + radius n (GJK's witness carries ~1e-8 of noise against hulls).
                P = (np.asarray(gdata.oMg[iP].translation) + radius * n)[None, :]
            vertices = self._vertices[iP]
            if vertices is not None:
                # A's vertices facing B are the lowest along n; B's the highest.
                M_P = gdata.oMg[iP]
                P = _kernels.snap_to_vertices(M_P.rotation, M_P.translation, vertices, P, n,
                                              -1.0 if on_A else 1.0, SNAP_TOLERANCE, bool(self.planar))
            sP, M_P = (sA, gdata.oMg[iA]) if on_A else (sB, gdata.oMg[iB])
            toward = -n if on_A else n  # the point body's outward normal facing the carrier
            a = _face_normal(sP, M_P, toward) if isinstance(sP, (coal.Box, coal.ConvexBase)) else None
            if a is not None and (isinstance(sP, coal.Box) or _dot3(a, toward) > 1.0 - 1e-6):
                # Face on face: coal's points off the point body's vertices (a smaller face's corners under a box)
                # lie on coal's plane, off the faces by its normal's noise (1.5e-7 m over 5 cm: a cube resting on a
                # post pushed at 1.5e-4 m/s, turned at 7e-3 rad/s); each is moved along n onto the point body's face
                # (a box's facing the carrier holds its support feature; a hull's only where it faces the carrier).
                t = (_support(sP, M_P, a) - (P[:, 0] * a[0] + P[:, 1] * a[1] + P[:, 2] * a[2])) / _dot3(n, a)
                P = P + t[:, None] * n
            if self.planar:
                P = _merge_planar(P)
            # Each point's own signed distance to the carrier's face plane (coal
            # gives one depth for the whole patch and flattens it onto one plane).
            if on_A:
                level = _support(sB, gdata.oMg[iB], n)
                phi = P @ n - level if level is not None else np.full(len(P), patch.penetration_depth)
            else:
                level = _support(sA, gdata.oMg[iA], -n)
                phi = -level - P @ n if level is not None else np.full(len(P), patch.penetration_depth)
            if len(P) > 1 and isinstance(sA, _RODS) and isinstance(sB, _RODS):
                # coal's patch of two rods off a centre line (a cylinder's rim or cap face) can hold a point far from
                # the carrier (crossing cylinders just past one's end: one on the other's far rim, 6.5 cm away, with
                # its plane distance 1 mm): only the points within the margin of the carrier itself
                true = [_rod_distance(sB if on_A else sA, gdata.oMg[iB if on_A else iA], x) for x in P]
                margin = gdata.collisionRequests[k].security_margin
                keep = [i for i, t in enumerate(true) if t <= margin] or [int(np.argmin(true))]
                P, phi = P[keep], phi[keep]
            parts.append((P, n, phi, jA, jB, carrier, vertex_body, radius, k, None))
        m = sum(len(p[0]) for p in parts)
        out = Contacts(np.empty((m, 3)), np.empty((m, 3)), np.empty(m), np.empty(m, dtype=np.intp),
                       np.empty(m, dtype=np.intp), np.empty(m, dtype=np.intp), np.empty(m, dtype=np.intp),
                       np.empty(m), np.empty(m, dtype=np.intp), np.zeros((m, 3)), np.zeros(m), np.zeros((m, 6)))
        i = 0
        for part in parts:  # the round-round parts carry their gap and slides too
            P, n, phi, jA, jB, carrier, vertex_body, radius, k, axis = part[:10]
            e = i + len(P)
            out.points[i:e] = P
            out.normals[i:e] = n
            out.phi[i:e] = phi
            out.body_a[i:e], out.body_b[i:e] = jA, jB
            out.normal_body[i:e], out.point_body[i:e] = carrier, vertex_body
            out.radius[i:e], out.pair[i:e] = radius, k
            if axis is not None:
                out.axis[i:e] = axis
            if len(part) > 10:
                out.gap[i:e], out.slide[i:e] = part[10], part[11]
            i = e
        return out

    def _rod_on_flat(self, k: int, gdata: pin.GeometryData):
        """Contacts of pair ``k``, a capsule or cylinder (a *rod*) against a flat carrier (half-space,
        plane; ``self._rod[k]``).

        The points are computed here, not read from coal: coal's patch of a rod lying on a plane
        flattens its points onto the deepest one's plane (a capsule tilted by 1e-5 rad reports both
        ends at the lower end's depth), so the raised end's distance, and every derivative of it,
        was wrong (step Jacobian errors of 1/dt in the tilt column). The deepest point of a rod
        against a plane is at one of its two ends: for a capsule ``end + radius s n`` (the
        hemisphere's point, ``s = -1`` on body A, ``+1`` on body B); for a cylinder the lowest
        point of that end's rim, ``end + radius s u`` with ``u`` the unit projection of ``n``
        normal to the axis. Both ends are kept when within the scene's margin, each with its own
        signed distance. A cylinder nearly flat on its disk (tilted less than 45 deg, its rim's far
        side within the patch depth) rests on four points fixed on that end's rim (:func:`_rod_points`): one sliding point
        per end let a can on the ground rock without end (0.05 rad/s a second after its release at
        1e-3 or 0.02 rad), and coal's patch held it only once flat to 1e-6.
        """
        jA, jB = self._info[k][:2]
        rod, i_rod, i_flat, sign, flat = self._rod[k]
        M_rod, M_flat = gdata.oMg[i_rod], gdata.oMg[i_flat]
        n = np.array(M_flat.rotation @ flat.n, dtype=float)  # out of the flat carrier
        if sign > 0:  # the flat carrier is body A: the normal points from B (the rod) to A
            n = -n
        margin = gdata.collisionRequests[k].security_margin  # the pair's (speculative) margin
        P, axis, radius = _rod_points(rod, M_rod, n, sign, self._patch_depth)
        P, phi = self._within_margin(P, self._flat_distance(P, n, sign, flat, M_flat), margin, n, sign, flat, M_flat)
        jr, jf = (jA, jB) if sign < 0 else (jB, jA)
        return (P, n, phi, jA, jB, jf, jr, radius, k, axis)

    def _rim_on_face(self, k: int, gdata: pin.GeometryData, n_coal: np.ndarray, d_coal: float):
        """Pair ``k``'s part for a cylinder whose rim touches a box's face or another cylinder's cap face, or None
        (then coal's patch).

        The points are :meth:`_rod_on_flat`'s: the lowest point of each end's rim along the face's exact normal
        (body-fixed rim centres; the point slides on the rim as the normal turns, which the kernels' ``axis`` terms
        hold), each with its distance to the face's plane, those within the pair's margin kept; the face carries the
        normal. coal's witness points there are body-fixed points of the rim, whose Jacobians missed that slide (a
        tilted cylinder on a free box: Fx 7e-4 to 5e-2 off central differences), and its normal near a tilted disk
        can be the disk's rather than the face's, which is why the face is chosen here and not by :meth:`_classify`.

        The face is the one of the other shape most aligned with coal's normal (a box's) or its cap on that side (a
        cylinder's), and on a box also the face its axis faces (a disk resting exactly on a box's edge gets any normal
        from coal: 0.98 horizontal read a 0.98 m penetration and threw a can off a table); a candidate counts where the
        rim's lowest line is over the face wherever it is within the margin, else, tilted less than 45 deg on a box,
        the face's border under its disk against the disk (:func:`_border_under_disk`; coal's patch held a can
        tilted on a post smaller than its disk), else not (an edge contact). A cylinder nearly flat on its disk (:func:`_rod_points`: tilted less than 45 deg, its
        rim's far side within the patch depth) rests on four points fixed on that end's rim, at quarter turns, those within
        the margin; where some are not over the face, on those that are and the other corners of the disk's overlap
        with the face (:func:`_disk_overhang_points`: the rim's crossings of the face's border, the face's corners or
        cap points under the disk; on coal's patch a can 1 cm inside a table's edge or 2 cm inside a 5 cm post's
        fell off, and one on a post off centre stayed tilted): one sliding point per end let a can rock on it without
        end, and coal's patch there carries a tilted disk's normal (a can tilted by 0.1 rad on a box stopped at 0.0076
        rad, resting on its own disk) or, between two near-parallel disks, one up to 0.15 rad off (a rocking can was
        kicked over by it).
        Between two cylinders each may be the face: a part whose points all move as the Jacobians hold (the smaller
        disk on the larger cap) is kept before one with overlap corners, then the larger separation along the face's
        normal (the better separating plane), separations within FLAT_TOLERANCE counting as level. A part deeper than
        coal's signed distance ``d_coal`` by more than FACE_SLACK is not where the shapes touch (no direction parts
        convex shapes by less than their signed distance) and is dropped: a box lying on a log (a cylinder on its side)
        faced its side by the log's axis, whose far end read -0.237 m there and launched the box."""
        jA, jB, sA, sB, iA, iB = self._info[k]
        margin = gdata.collisionRequests[k].security_margin
        best, best_rank = None, (False, 0.0)  # the part kept, whether exact and its lowest distance (before a merge)
        faces = []  # (cylinder is A, the face's normal from B to A): coal's, and on a box also the axis's face
        for on_A in (True, False):  # the cylinder is A (on B's face) or B (on A's)
            cyl, face, iP, iN = (sA, sB, iA, iB) if on_A else (sB, sA, iB, iA)
            if not (isinstance(cyl, coal.Cylinder) and isinstance(face, (coal.Box, coal.Cylinder))):
                continue
            M_P, M_N = gdata.oMg[iP], gdata.oMg[iN]
            sign = -1.0 if on_A else 1.0  # n points from B to A: out of the face when it is B
            n = -sign * _face_toward(face, M_N, -sign * n_coal)
            faces.append((on_A, n))
            if isinstance(face, coal.Box):  # at an exact touch of an edge coal's normal can be any (a disk on it)
                a = np.asarray(M_P.rotation)[:, 2]
                d = np.asarray(M_P.translation) - np.asarray(M_N.translation)
                n_axis = -sign * _face_toward(face, M_N, a if _dot3(a, d) > 0.0 else -a)
                if not np.array_equal(n_axis, n):
                    faces.append((on_A, n_axis))
        for on_A, n in faces:
            cyl, face, iP, iN = (sA, sB, iA, iB) if on_A else (sB, sA, iB, iA)
            M_P, M_N = gdata.oMg[iP], gdata.oMg[iN]
            sign = -1.0 if on_A else 1.0
            P, axis, radius = _rod_points(cyl, M_P, n, sign, self._patch_depth)
            exact = True  # every point fixed on the disk's rim or sliding on it as the Jacobians hold
            if axis is None:  # a disk overhanging the face: its fixed points over it and the overlap's corners
                over = np.array([_over_face(face, M_N, n, x) for x in P])
                if not over.all():
                    P = np.vstack((P[over], _disk_overhang_points(cyl, M_P, n, sign, face, M_N)))
                    exact = False
                elif isinstance(face, (coal.Cylinder, coal.Box)) and _dot3(n, self._up) * sign > 0.0:
                    # a larger cap or a box resting on this disk (its outward normal down): also the rim point toward
                    # its axis or centre, where a can or a box off centre on a smaller post tips (four points alone:
                    # at 0.75 of the post's radius between two of them); it slides on the rim, taken as fixed (ranked
                    # exact still)
                    if isinstance(face, coal.Cylinder):
                        toward = _rim_toward_cap(cyl, M_P, n, sign, face, M_N)
                    else:
                        toward = _rim_toward_centre(cyl, M_P, n, sign, M_N)
                        if toward is not None and not _over_face(face, M_N, n, toward):
                            toward = None
                    if toward is not None:
                        P = np.vstack((P, toward))
            phi = self._flat_distance(P, n, sign, face, M_N)
            keep = phi <= margin
            if not keep.any():
                continue
            span = P  # the part of the lowest line within the margin (phi is linear along it): both ends, or one to t
            if axis is None:  # standing on its disk: its points are over the face or on its border already
                span = ()
            elif not keep.all():
                i = int(np.argmax(keep))
                t = (margin - phi[i]) / (phi[1 - i] - phi[i])
                span = (P[i], P[i] + t * (P[1 - i] - P[i]))
            flat, M_flat, flip = face, M_N, False  # flip: the disk carries the normal, the face's border the points
            if (axis is not None and isinstance(face, coal.Box) and not abs(_dot3(axis, n)) > math.sqrt(0.5)
                    and not all(_over_face(face, M_N, n, x) for x in span)):
                # on its side across a box's face (a log under a box): its lowest line where it is over the face
                clipped = _clip_to_face(face, M_N, -sign * n, P[0], P[1])
                if clipped is None:
                    continue
                P, exact = clipped, False
                phi = self._flat_distance(P, n, sign, face, M_N)
                keep = phi <= margin
                if not keep.any():
                    continue
                span = ()
            if not all(_over_face(face, M_N, n, x) for x in span):
                # a tilted disk whose lowest rim point is beyond a box's face: on the face's border under the disk
                border = None if axis is None or not isinstance(face, coal.Box) else \
                    _border_under_disk(cyl, M_P, n, sign, face, M_N)
                if border is None:
                    continue
                P, n = border
                sign, flat, M_flat, flip, exact, axis, radius = -sign, cyl, M_P, True, False, None, 0.0
                phi = self._flat_distance(P, n, sign, flat, M_flat)
                keep = phi <= margin
                if not keep.any():
                    continue
            # an exact part first (a small disk on a larger cap rather than the cap's points carried onto the larger
            # disk), then the larger separation; separations within FLAT_TOLERANCE are level (two parallel disks: the
            # first order kept, not the one that round-off favours)
            low = float(phi.min())
            if low < d_coal - FACE_SLACK:
                continue
            if best is not None and (exact < best_rank[0] or
                                     (exact == best_rank[0] and low <= best_rank[1] + FLAT_TOLERANCE)):
                continue
            best_rank = (exact, low)
            P, phi = P[keep], phi[keep]
            if self.planar:
                P = _merge_planar(P)
                phi = self._flat_distance(P, n, sign, flat, M_flat)
            carrier, vertex_body = (jB, jA) if on_A != flip else (jA, jB)
            best = (P, n, phi, jA, jB, carrier, vertex_body, radius, k, axis)
        return best

    def _chord_end(self, k: int, gdata: pin.GeometryData, x_seg: np.ndarray, rod_is_A: bool, x_end: np.ndarray):
        """Pair ``k``'s part for the other end of the chord along which a rod (a capsule, a cylinder by its side; body
        A when ``rod_is_A``) lies across a cylinder's end (at ``x_end``), touching its rim at one end (the line of the
        cores' contact), or None beyond the pair's margin: the rod's lowest point over that end, ``x_seg`` on its
        segment, fixed on the rod, against the cap's plane (the cap carries its normal). By the one rim contact
        alone, a can or a capsule lying across a thin post rocked on it without end. Only while that rim contact is
        touching (its distance at most FLAT_TOLERANCE). The point slides along the rod as the rod moves, taken as
        fixed on it: the Jacobians are not exact (1e-4 relative at rest on a 1.5 cm post)."""
        jA, jB, sA, sB, iA, iB = self._info[k]
        rod, iR = (sA, iA) if rod_is_A else (sB, iB)
        cyl, iC = (sB, iB) if rod_is_A else (sA, iA)
        b = np.asarray(gdata.oMg[iR].rotation)[:, 2]
        a = _signed_axis(gdata.oMg[iC], x_end - np.asarray(gdata.oMg[iC].translation))  # out of this end
        u = a - _dot3(a, b) * b if isinstance(rod, coal.Cylinder) else a
        u = u / math.sqrt(_dot3(u, u))
        x = x_seg - float(rod.radius) * u
        phi = _dot3(a, x - x_end)
        if not phi <= gdata.collisionRequests[k].security_margin:
            return None
        n = a if rod_is_A else -a  # from B to A
        carrier, point_body = (jB, jA) if rod_is_A else (jA, jB)
        return (x[None, :], n, np.array([phi]), jA, jB, carrier, point_body, 0.0, k, None)

    def _capsule_on_face(self, k: int, gdata: pin.GeometryData, n: np.ndarray, on_A: bool, d_coal: float):
        """Pair ``k``'s part for a capsule (body A when ``on_A``) lying on a box's face or a cylinder's cap face of
        exact normal ``n`` (:meth:`_classify`'s), both ends over it, or None (then coal's patch).

        :meth:`_rod_on_flat`'s points: each end's hemisphere point along ``n``, with its own distance, those within the
        pair's margin. coal's patch flattens both ends onto the lower one's plane: a capsule released with one end
        raised by 0.01 rad on a table came to rest with that end 0.96 mm up. A part deeper than coal's signed distance
        ``d_coal`` by more than FACE_SLACK is not where the shapes touch (:meth:`_rim_on_face`)."""
        jA, jB, sA, sB, iA, iB = self._info[k]
        cap, face, iP, iN = (sA, sB, iA, iB) if on_A else (sB, sA, iB, iA)
        if not isinstance(cap, coal.Capsule):
            return None
        M_P, M_N = gdata.oMg[iP], gdata.oMg[iN]
        if not (isinstance(face, coal.Box) and _aligned(face, M_N, n) or _on_cap(face, M_N, n)):
            return None
        sign = -1.0 if on_A else 1.0
        P, _, radius = _rod_points(cap, M_P, n, sign, self._patch_depth)
        if not all(_over_face(face, M_N, n, x) for x in P):
            return None
        phi = self._flat_distance(P, n, sign, face, M_N)
        if float(phi.min()) < d_coal - FACE_SLACK:
            return None
        P, phi = self._within_margin(P, phi, gdata.collisionRequests[k].security_margin, n, sign, face, M_N)
        if not len(P):
            return None
        carrier, point_body = (jB, jA) if on_A else (jA, jB)
        return (P, n, phi, jA, jB, carrier, point_body, radius, k, None)

    def _hull_part(self, k, n, gdata, face=False):
        """Pair ``k``'s part for a convex body A on a flat body B (the ground, or a box face when
        ``face``) along ``n``: A's own vertex patch (:meth:`_ground_patch`), each point with its
        distance to B; None when no vertex is close."""
        jA, jB, sA, sB, iA, iB = self._info[k]
        M_B = gdata.oMg[iB]
        P = self._ground_patch(iA, gdata.oMg[iA], n, face=(sB, M_B) if face else None)
        if len(P) == 0:
            return None
        if face:
            # overhanging the face (a hull on a smaller post): also the face's corners under the hull, on the hull's
            # surface above them (taken as fixed on the hull: not exact), those within the patch depth of the
            # lowest point; by its vertices over the face alone it rocked on the post without end
            under = _corners_under_hull(sA, gdata.oMg[iA], sB, M_B, n)
            if len(under):
                low = float(self._flat_distance(P, n, -1.0, sB, M_B).min())
                under = under[self._flat_distance(under, n, -1.0, sB, M_B) <= low + self._patch_depth]
                # not one of the hull's own points (a hull flush with the face's edge has its vertices there)
                under = [x for x in under if not any(_dot3(x - y, x - y) <= SNAP_TOLERANCE * SNAP_TOLERANCE for y in P)]
                if under:
                    P = np.vstack((P, under))
        if self.planar:
            P = _merge_planar(P)
        return (P, n, self._flat_distance(P, n, -1.0, sB, M_B), jA, jB, jB, jA, 0.0, k, None)

    def _within_margin(self, P, phi, margin, n, sign, flat, M_flat):
        """``(P, phi)`` of the points within ``margin``, merged in a planar scene (an end behind the other in z gives
        the same planar rows; their distances then measured again)."""
        keep = phi <= margin
        P, phi = P[keep], phi[keep]
        if self.planar and len(P):
            P = _merge_planar(P)
            phi = self._flat_distance(P, n, sign, flat, M_flat)
        return P, phi

    @staticmethod
    def _flat_distance(P, n, sign, flat, M_flat):
        """Signed distances of points ``P`` of body A (``sign < 0``) or B to a flat carrier along ``n``."""
        if sign < 0:
            return P @ n - _support(flat, M_flat, n)
        return -_support(flat, M_flat, -n) - P @ n

    def _ground_patch(self, i: int, M: pin.SE3, n: np.ndarray, face=None) -> np.ndarray:
        """World points (k, 3) of convex object ``i`` (pose ``M``) touching a plane of normal ``n``.

        The candidates are the hull vertices within :data:`PATCH_DEPTH` (or
        ``margin`` if smaller) of the lowest one along ``n``; the caller measures
        each one's distance to the plane. Up to :data:`MAX_PATCH_POINTS` of them
        are kept: the extreme one along each of 4 directions of the plane (fixed
        in the object's frame, so the choice does not change as the body slides or
        turns about ``n``); when the lowest vertex lies more than
        :data:`FLAT_TOLERANCE` below all of those (a curved face), the lowest
        ones (those within :data:`FLAT_TOLERANCE` of it, thinned like a face) and
        those of the extreme ones along 3 directions that rise from it by less than
        :data:`CURVED_SLOPE` instead. A flat face gives its corners (a box face its
        4), a ball-shaped foot its lowest vertex, a lying cylinder its lowest
        vertex and its ends.

        ``face = (box, pose)``: the plane is that box's face of normal ``n``; only
        vertices over the face (within ``margin`` of its edges) count, and none is
        returned when the lowest vertex is not over it (an edge contact: coal's).
        """
        V = self._vertices[i]
        R, t = M.rotation, M.translation
        nl = R.T @ n
        h = V @ nl  # heights along n, up to the constant n . t
        cand = np.flatnonzero(h <= h.min() + self._patch_depth)
        if face is not None:
            box, MB = face
            local = np.abs((V[cand] @ R.T + t - MB.translation) @ MB.rotation)  # in the box's frame
            axis = _box_axis(MB, n)
            inside = np.all(np.delete(local <= box.halfSide + self.margin, axis, axis=1), axis=1)
            if not inside[int(np.argmin(h[cand]))]:
                return np.zeros((0, 3))
            cand = cand[inside]
        if len(cand) > MAX_PATCH_POINTS:
            t1, t2 = _tangents(nl)
            C, hc = V[cand], h[cand]
            keep = _extremes(C, t1, t2, _DIRECTIONS_4)
            lowest = int(hc.argmin())
            if hc[lowest] < hc[keep].min() - FLAT_TOLERANCE:  # curved: the lowest, and 3 around it if flat there
                # The lowest vertices (an edge or small face of the hull it rests on, up to round-off),
                # thinned like a flat face: a single argmin would flip between them.
                L = np.flatnonzero(hc <= hc[lowest] + FLAT_TOLERANCE)
                if len(L) > 1:
                    L = L[_extremes(C[L], t1, t2, _DIRECTIONS_4)]
                d = C - C[lowest]
                rise = hc - hc[lowest]
                run = np.sqrt(np.maximum(np.einsum("ij,ij->i", d, d) - rise * rise, 0.0))
                keep = sorted({e for e in _extremes(C, t1, t2, _DIRECTIONS_3) if rise[e] <= CURVED_SLOPE * run[e]}
                              | set(L.tolist()))
            cand = cand[keep]
        return V[cand] @ R.T + t

    def _retry(self, k, gdata):
        """Recompute pair ``k`` with coal directly and a tighter GJK tolerance.

        coal 3.0.3's GJK/EPA, at its default tolerance, can fail on two boxes that
        touch exactly (a depth of -DBL_MAX and points near 1e307): resting
        contacts sit right there.
        """
        jA, jB, sA, sB, iA, iB = self._info[k]
        M_B, M_A = pin.SE3(gdata.oMg[iB]), pin.SE3(gdata.oMg[iA])
        for tol in (1e-10, 1e-12):
            req = coal.CollisionRequest()
            _configure(req, gdata.collisionRequests[k].security_margin, tol)  # the pair's (speculative) margin
            res = coal.CollisionResult()
            coal.collide(sB, M_B, sA, M_A, req, res)
            if not res.isCollision():
                continue
            preq = coal.ContactPatchRequest()
            pres = coal.ContactPatchResult(preq)
            coal.computeContactPatch(sB, M_B, sA, M_A, res, preq, pres)
            patch = pres.getContactPatch(0)
            if _valid(patch):
                return patch
        names = [self.geometry.geometryObjects[i].name for i in (iB, iA)]
        raise RuntimeError(f"collision detection failed between {names[0]!r} and {names[1]!r} "
                           "(coal returned a non-finite contact even with a tight GJK tolerance)")

    def _consistent(self, k, gdata, patch):
        """Pair ``k``'s ``patch``, or coal's patch along a better normal where coal's is not where the shapes touch.

        Two boxes, hulls or cylinders touching exactly can get from coal a normal off the true one, by 3 mrad (a cube
        resting on a smaller post read 0.13 mm deep along it and was pushed up at 0.13 m/s) or by 45 deg, with a
        distance of 0 (read along the post's side face, phi -0.035 m: the cube thrown off the post). Their signed
        distance is their largest separation over all directions; where one of the separating axis test's
        directions (:func:`_separating_axes`) parts them by more than coal's normal does, by :data:`NORMAL_SLACK`,
        the one that parts them most is taken and coal computes the patch along it. A hull's face normals are
        candidates only where coal's normal contradicts its own distance by more than :data:`FACE_SLACK` (on the
        hot path, a hull's support costs its vertex count per direction)."""
        _, _, sA, sB, iA, iB = self._info[k]
        if not (isinstance(sA, _POLY) and isinstance(sB, _POLY)):
            return patch
        MA, MB = gdata.oMg[iA], gdata.oMg[iB]
        n = np.array(patch.getNormal())
        s_n = _separation(sA, MA, sB, MB, n[None, :])[0]
        E = _separating_axes(sA, MA, sB, MB, s_n < float(patch.penetration_depth) - FACE_SLACK)
        if not len(E):
            return patch
        E = np.concatenate((E, -E), axis=1).reshape(-1, 3)  # each direction, then its opposite
        sep = _separation(sA, MA, sB, MB, E)
        i = int(np.argmax(sep))
        if not sep[i] > s_n + NORMAL_SLACK:
            return patch
        e, depth = E[i], float(sep[i])
        # the patch's plane: midway between the shapes along e, through coal's point across
        p0 = np.asarray(patch.getPoint(0), dtype=float)
        mid = 0.5 * (_full_support(sB, MB, e[None, :])[0] - _full_support(sA, MA, -e[None, :])[0])
        pos = p0 + (mid - _dot3(e, p0)) * e
        res = coal.CollisionResult()
        res.addContact(coal.Contact(sB, sA, -1, -1, pos, e, depth))
        out = coal.ContactPatchResult(gdata.contactPatchRequests[k])
        coal.computeContactPatch(sB, pin.SE3(MB), sA, pin.SE3(MA), res, gdata.contactPatchRequests[k], out)
        again = out.getContactPatch(0)
        return again if _valid(again) else patch

    @staticmethod
    def _classify(jA, jB, sA, sB, iA, iB, n, gdata):
        """Which body carries the normal, which carries the point, the point's offset, the normal.

        Returns ``(normal_body, point_body, radius, n)``. Round shapes (sphere,
        capsule) carry the point on their surface at ``radius`` from a body-fixed
        centre (the normal belongs to the other body). Flat shapes (half-space,
        plane) carry the normal. Between two boxes, the body one of whose face
        normals is aligned with ``n`` carries it and the other's vertex is the
        point; when both are aligned (face on face) B carries the normal. A
        cylinder's cap face carries it, exactly, under a round shape (``n``
        along its axis); a cylinder's rim on a face is :meth:`_rim_on_face`'s.

        A face that carries the normal gives it exactly (its plane normal or box
        axis): coal's GJK/EPA normal carries ~1e-5 of noise, which over a 0.1 m
        box is a 1e-6 m error in the corners' signed distances, i.e. 1e-3 m/s
        after division by dt -- enough to flip which corner holds a resting box.
        """
        if isinstance(sA, _ROUND):
            return jB, jA, -float(sA.radius), _face_normal(sB, gdata.oMg[iB], n)
        if isinstance(sB, _ROUND):
            return jA, jB, float(sB.radius), _face_normal(sA, gdata.oMg[iA], -n, flip=True)
        if isinstance(sB, _FLAT) or not isinstance(sA, _FLAT) and _aligned(sB, gdata.oMg[iB], n):
            return jB, jA, 0.0, _face_normal(sB, gdata.oMg[iB], n)
        if isinstance(sA, _FLAT) or _aligned(sA, gdata.oMg[iA], n):
            return jA, jB, 0.0, _face_normal(sA, gdata.oMg[iA], -n, flip=True)
        return jB, jA, 0.0, n


def _rod_points(rod, M: pin.SE3, n: np.ndarray, sign: float, depth: float):
    """``(P, axis, radius)``: the points of a capsule or cylinder ``rod`` (pose ``M``) nearest a plane of normal
    ``n`` and how they move; ``sign`` -1 when the rod is body A (``n`` points from B to A), +1 when B.

    At its two ends (``P`` (2, 3), ``radius`` the signed offset ``sign r``): a capsule's hemisphere point
    ``end + sign r n`` (``axis`` None), a cylinder's lowest rim point ``end + sign r u`` with ``u`` the unit
    projection of ``n`` normal to its axis (``axis``: that axis; the point slides on the rim). A cylinder nearly flat
    on its disk -- standing on it (``|n x a| < 1e-6``: no lowest rim point), or tilted less than 45 deg with its
    rim's far side within ``depth`` (the scene's patch depth) of its lowest point, ``2 r |n x a| <= depth`` -- gets
    :func:`_disk_points` instead (fixed on its rim: ``axis`` None, ``radius`` 0). The 45 deg: a thin rod lying on a
    face has its rim's far side within any depth above ``2 r``, and must keep a point at each end."""
    r = float(rod.radius)
    a = np.array(M.rotation[:, 2], dtype=float)
    u, axis = n, None
    if isinstance(rod, coal.Cylinder):
        an = _dot3(a, n)
        w = n - an * a
        s = math.sqrt(_dot3(w, w))
        if s < 1e-6 or (2.0 * r * s <= depth and s < abs(an)):
            return _disk_points(rod, M, n, sign), None, 0.0
        u, axis = w / s, a
    centre = np.array(M.translation, dtype=float)
    ends = np.array([centre - rod.halfLength * a, centre + rod.halfLength * a])
    return ends + sign * r * u, axis, sign * r


def _facing_end(cyl, M: pin.SE3, n: np.ndarray, sign: float) -> np.ndarray:
    """The centre of the end of the cylinder ``cyl`` (pose ``M``) that faces a plane of normal ``n`` (``sign`` as
    :func:`_rod_points`')."""
    a = np.asarray(M.rotation)[:, 2]
    return np.asarray(M.translation) + (sign * float(cyl.halfLength) * (1.0 if _dot3(a, n) > 0.0 else -1.0)) * a


def _disk_points(cyl, M: pin.SE3, n: np.ndarray, sign: float) -> np.ndarray:
    """Four points (4, 3) fixed on the rim of the end of the cylinder ``cyl`` (pose ``M``) that faces a plane of
    normal ``n`` (:func:`_facing_end`), at quarter turns: ``end +- R x``, ``end +- R y`` with ``x``, ``y`` the
    cylinder's own axes across it."""
    R = np.asarray(M.rotation)
    end = _facing_end(cyl, M, n, sign)
    r = float(cyl.radius)
    return np.array([end + r * R[:, 0], end + r * R[:, 1], end - r * R[:, 0], end - r * R[:, 1]])


def _disk_edge_points(cyl, M: pin.SE3, n: np.ndarray, sign: float, box, M_box: pin.SE3) -> np.ndarray:
    """The points (k, 3) where the rim of the end of the cylinder ``cyl`` (pose ``M``) facing the box's face of
    normal ``n`` (:func:`_facing_end`) crosses the planes of that face's four edges, within the
    face's other half side: where a disk overhanging the face's edge is held (with its fixed points over the face).
    The rim's point at angle ``t`` is ``end + r (cos t x + sin t y)``; on the edge plane ``e . (p - c) = +-h`` that
    is ``A cos t + B sin t = C``."""
    R = np.asarray(M.rotation)
    end = _facing_end(cyl, M, n, sign)
    r = float(cyl.radius)
    RB, tB = np.asarray(M_box.rotation), np.asarray(M_box.translation)
    k = _box_axis(M_box, n)
    out = []
    for i in range(3):
        if i == k:
            continue
        j = 3 - i - k
        e, f = RB[:, i], RB[:, j]
        A, B = r * _dot3(R[:, 0], e), r * _dot3(R[:, 1], e)
        L = math.hypot(A, B)
        base = _dot3(end - tB, e)
        for side in (-1.0, 1.0):
            C = side * float(box.halfSide[i]) - base
            if not abs(C) < L:
                continue
            t0, dt = math.atan2(B, A), math.acos(C / L)
            for t in (t0 - dt, t0 + dt):
                x = end + r * (math.cos(t) * R[:, 0] + math.sin(t) * R[:, 1])
                if abs(_dot3(x - tB, f)) <= float(box.halfSide[j]):
                    out.append(x)
    return np.array(out).reshape(-1, 3)


def _disk_overhang_points(cyl, M: pin.SE3, n: np.ndarray, sign: float, face, M_face: pin.SE3) -> np.ndarray:
    """The corners (k, 3) of the overlap of a disk nearly flat on a face and that face, besides the disk's fixed rim
    points over the face: where the disk of the end of the cylinder ``cyl`` (pose ``M``) facing the face of normal
    ``n`` (``sign`` as :func:`_rod_points`') is held when it overhangs the face's border. On a box's face
    (``face``, pose ``M_face``), the rim's crossings of its edges (:func:`_disk_edge_points`) and the face's
    corners under the disk; on a cylinder's cap, the rim's crossings of the cap's circle, the cap's rim points under
    the disk (four at its quarter turns and the one toward the disk's centre) and the disk's rim point toward the
    cap's centre when over the cap (the overlap of two disks is symmetric about the line of their centres: those
    two are its extreme points on it). Points of the face are carried up onto the disk's plane along ``n``
    (:func:`_onto_disk`): every point is one of the disk's, the face's distance along ``n`` below it exact. None of
    them is fixed on the disk: the crossings, the face's points and the disk's rim point toward the cap's centre slide
    on it as the two bodies move relative to each other, which the contact Jacobians do not hold (they are taken as
    fixed: not exact there)."""
    end = _facing_end(cyl, M, n, sign)
    a = np.asarray(M.rotation)[:, 2]
    r = float(cyl.radius)
    RF, tF = np.asarray(M_face.rotation), np.asarray(M_face.translation)
    out = []
    if isinstance(face, coal.Box):
        out.extend(_disk_edge_points(cyl, M, n, sign, face, M_face))
        candidates = _face_corners(face, M_face, -sign * n)[1]
    else:
        af = _signed_axis(M_face, -sign * n)  # the cap's outward normal
        centre = tF + float(face.halfLength) * af
        R2 = float(face.radius)
        d = end - centre
        d = d - _dot3(d, af) * af  # the disk's centre projected onto the cap's plane, from the cap's centre
        dist = math.sqrt(_dot3(d, d))
        candidates = [centre + R2 * RF[:, 0], centre + R2 * RF[:, 1], centre - R2 * RF[:, 0], centre - R2 * RF[:, 1]]
        toward = _rim_toward_cap(cyl, M, n, sign, face, M_face)
        if toward is not None and _over_face(face, M_face, n, toward):
            out.append(toward)
        if dist > 1e-9 * max(r, R2):
            u = d / dist
            candidates.append(centre + R2 * u)
            if abs(r - R2) < dist < r + R2:  # the two circles cross (in the cap's plane)
                along = (dist * dist + R2 * R2 - r * r) / (2.0 * dist)
                half = math.sqrt(max(R2 * R2 - along * along, 0.0))
                v = np.cross(af, u)
                for side in (-1.0, 1.0):
                    x = _rim_toward(end, a, r, centre + along * u + side * half * v - end)
                    if x is not None:
                        out.append(x)
    for c in candidates:
        x = _onto_disk(c, end, a, n)
        if _dot3(x - end, x - end) <= r * r:
            out.append(x)
    return np.array(out, dtype=float).reshape(-1, 3)


def _rim_toward_cap(cyl, M: pin.SE3, n: np.ndarray, sign: float, cap, M_cap: pin.SE3):
    """The rim point of the end of the cylinder ``cyl`` (pose ``M``) facing the cylinder ``cap``'s cap of normal
    ``n`` (``sign`` as :func:`_rod_points`') toward that cap's axis (pose ``M_cap``), or None when the two axes meet
    the disk's plane at one point (to 1e-9 of the radii): the overlap of two disks is symmetric about the line of
    their centres and this point is its far end on the disk's side."""
    end = _facing_end(cyl, M, n, sign)
    af = _signed_axis(M_cap, -sign * n)  # the cap's outward normal
    d = end - np.asarray(M_cap.translation) - float(cap.halfLength) * af
    d = d - _dot3(d, af) * af  # the disk's centre projected onto the cap's plane, from the cap's centre
    if not math.sqrt(_dot3(d, d)) > 1e-9 * max(float(cyl.radius), float(cap.radius)):
        return None
    return _rim_toward(end, np.asarray(M.rotation)[:, 2], float(cyl.radius), -d)


def _rim_toward_centre(cyl, M: pin.SE3, n: np.ndarray, sign: float, M_box: pin.SE3):
    """The rim point of the end of the cylinder ``cyl`` (pose ``M``) facing a box's face of normal ``n`` (``sign``
    as :func:`_rod_points`') toward the box's centre (pose ``M_box``; a uniform box's centre of mass), or None when
    that centre is over the disk's (to 1e-9 of the radius)."""
    end = _facing_end(cyl, M, n, sign)
    d = end - np.asarray(M_box.translation)
    d = d - _dot3(d, n) * n  # the disk's centre from the box's, across n
    if not math.sqrt(_dot3(d, d)) > 1e-9 * float(cyl.radius):
        return None
    return _rim_toward(end, np.asarray(M.rotation)[:, 2], float(cyl.radius), -d)


def _border_under_disk(cyl, M: pin.SE3, n: np.ndarray, sign: float, box, M_box: pin.SE3):
    """A cylinder ``cyl`` (pose ``M``) tilted on the rim of its end facing the box's face of normal ``n`` (``sign``
    as :func:`_rod_points`'), whose lowest rim point is beyond the face: ``(P, n_disk)``, the points (k, 3) of the
    face's border under its disk -- the face's corners under it and, where its rim crosses the face's edges
    (:func:`_disk_edge_points`), the edges' points below -- and its disk's exact normal (from B to A), which it
    carries; None when tilted by 45 deg or more (on its side) or when nothing of the border is under the disk. The
    disk rests there on the face's edge: coal's patch carried the disk's normal against the face's own support and
    held a can tilted on a post smaller than its disk (0.02 rad, still). The corners are the box's vertices (exact
    Jacobians); the edges' points slide along the edges, which the Jacobians do not hold."""
    a = np.asarray(M.rotation)[:, 2]
    if not abs(_dot3(a, n)) > math.sqrt(0.5):
        return None
    nf = -sign * n  # the face's outward normal
    end = _facing_end(cyl, M, n, sign)
    r = float(cyl.radius)
    centre, corners = _face_corners(box, M_box, nf)
    out = []
    for c in corners:
        w = c - end
        w = w - _dot3(w, a) * a
        if _dot3(w, w) <= r * r:
            out.append(c)
    for x in _disk_edge_points(cyl, M, n, sign, box, M_box):
        out.append(x - _dot3(x - centre, nf) * nf)
    if not out:
        return None
    return np.array(out, dtype=float), sign * _signed_axis(M, -nf)


def _clip_to_face(box, M: pin.SE3, nf: np.ndarray, P0: np.ndarray, P1: np.ndarray):
    """The part of the segment ``P0 P1`` whose projection along ``nf`` lies on the box's face of outward normal
    ``nf`` (pose ``M``): its two ends (2, 3) on the segment, where it crosses the face's edges (or ``P0``, ``P1``
    inside), or None when none of it is over the face. A cylinder on its side across a face (a log under a box)
    rests there: the ends slide along its lowest line with the face's edges, which the Jacobians take as fixed on the
    cylinder (a box rocking on a log: Fx wholly off central differences, as it was on coal's witness points)."""
    centre, k = _face_centre(box, M, nf)
    R = np.asarray(M.rotation)
    h = np.asarray(box.halfSide, dtype=float)
    D = P1 - P0
    t0, t1 = 0.0, 1.0
    for i in range(3):
        if i == k:
            continue
        p, q = _dot3(D, R[:, i]), _dot3(P0 - centre, R[:, i])  # -h <= q + t p <= h
        if p == 0.0:
            if abs(q) > h[i]:
                return None
            continue
        lo, hi = sorted(((-h[i] - q) / p, (h[i] - q) / p))
        t0, t1 = max(t0, lo), min(t1, hi)
    if not t0 < t1:
        return None
    return np.array([P0 + t0 * D, P0 + t1 * D])


def _face_centre(box, M: pin.SE3, nf: np.ndarray):
    """``(centre, k)``: the middle of the face of outward normal ``nf`` of the box ``box`` (pose ``M``) and the index
    of the box's axis normal to it."""
    R, t = np.asarray(M.rotation), np.asarray(M.translation)
    k = _box_axis(M, nf)
    hk = float(box.halfSide[k])
    return t + (hk if _dot3(R[:, k], nf) > 0.0 else -hk) * R[:, k], k


def _face_corners(box, M: pin.SE3, nf: np.ndarray):
    """``(centre, corners)``: the middle of the face of outward normal ``nf`` of the box ``box`` (pose ``M``) and its
    four corners (a list, sides ``(-, -), (-, +), (+, -), (+, +)`` along its two other axes in order)."""
    R = np.asarray(M.rotation)
    centre, k = _face_centre(box, M, nf)
    i, j = [m for m in range(3) if m != k]
    h = np.asarray(box.halfSide, dtype=float)
    return centre, [centre + si * h[i] * R[:, i] + sj * h[j] * R[:, j] for si in (-1.0, 1.0) for sj in (-1.0, 1.0)]


def _corners_under_hull(hull, M: pin.SE3, box, M_box: pin.SE3, n: np.ndarray) -> np.ndarray:
    """The points (k, 3) of the hull ``hull`` (pose ``M``) right above the corners of the face of outward normal
    ``n`` of the box ``box`` (pose ``M_box``), along ``n``, for those corners under the hull (the line through the
    corner along ``n`` meets it: for each face plane N . x + d <= 0 of the hull's, an interval of the line; a face
    along ``n``, to :data:`HULL_PARALLEL`, keeps the line within it to as much), in the corners' order."""
    R, t = np.asarray(M.rotation), np.asarray(M.translation)
    N, d = np.asarray(hull.normals()), np.asarray(hull.offsets())
    nl = _rt(R, n)
    b = N[:, 0] * nl[0] + N[:, 1] * nl[1] + N[:, 2] * nl[2]
    out = []
    for c in _face_corners(box, M_box, n)[1]:
        cl = _rt(R, c - t)
        a = N[:, 0] * cl[0] + N[:, 1] * cl[1] + N[:, 2] * cl[2] + d  # a + s b <= 0 on the line c + s n
        lo, hi, meets = -math.inf, math.inf, True
        for ai, bi in zip(a.tolist(), b.tolist()):
            if bi > HULL_PARALLEL:
                hi = min(hi, -ai / bi)
            elif bi < -HULL_PARALLEL:
                lo = max(lo, -ai / bi)
            elif ai > HULL_PARALLEL:  # a side face along n: the line is within it (to round-off) or outside
                meets = False
        if meets and lo <= hi and lo > -math.inf:
            out.append(c + lo * n)
    return np.array(out, dtype=float).reshape(-1, 3)


def _rt(R: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``R^T d``, each entry summed left to right (the compiled twin's order)."""
    return np.array([R[0, i] * d[0] + R[1, i] * d[1] + R[2, i] * d[2] for i in range(3)])


def _rim_toward(end: np.ndarray, a: np.ndarray, r: float, d: np.ndarray):
    """The point of the rim (centre ``end``, axis ``a``, radius ``r``) in the direction of ``d`` projected normal to
    ``a``; None when ``d`` is along ``a``."""
    w = d - _dot3(d, a) * a
    s = math.sqrt(_dot3(w, w))
    if not s > 1e-12:
        return None
    return end + (r / s) * w


def _onto_disk(x: np.ndarray, end: np.ndarray, a: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The point of the disk's plane (through ``end``, normal ``a``) on the line through ``x`` along ``n``."""
    return x + (_dot3(end - x, a) / _dot3(n, a)) * n


def _face_toward(face, M: pin.SE3, d: np.ndarray) -> np.ndarray:
    """The exact outward normal of the box ``face``'s face most aligned with ``d`` (:func:`_face_normal`'s), or of
    the cylinder ``face``'s cap on ``d``'s side (its signed axis); pose ``M``."""
    if isinstance(face, coal.Box):
        return _face_normal(face, M, d)
    return _signed_axis(M, d)


def _signed_axis(M: pin.SE3, d: np.ndarray) -> np.ndarray:
    """The local z axis of pose ``M`` (a cylinder's), turned to ``d``'s side: the outward normal of its cap there."""
    a = np.array(M.rotation[:, 2], dtype=float)
    return a if _dot3(a, d) > 0.0 else -a


def _box_axis(M: pin.SE3, d: np.ndarray) -> int:
    """The index of the axis of pose ``M`` (a box's) most aligned with ``d``, up to sign: its face of normal ``d``."""
    return int(np.argmax(np.abs(M.rotation.T @ d)))


def _over_face(face, M: pin.SE3, n: np.ndarray, x: np.ndarray) -> bool:
    """The point ``x`` projects onto the face of normal ``n`` of the box ``face`` (within its two other half
    sides), or onto the cap disk of the cylinder ``face`` (within its radius of the axis); pose ``M``."""
    d = x - np.asarray(M.translation)
    if isinstance(face, coal.Box):
        local = np.asarray(M.rotation).T @ d
        k = _box_axis(M, n)
        return all(abs(local[i]) <= face.halfSide[i] for i in range(3) if i != k)
    a = np.asarray(M.rotation)[:, 2]
    w = d - _dot3(a, d) * a
    return _dot3(w, w) <= float(face.radius) ** 2


def _rod_distance(rod, M: pin.SE3, x: np.ndarray) -> float:
    """The signed distance of the point ``x`` to the capsule or cylinder ``rod`` of pose ``M`` (negative inside)."""
    o, a = np.asarray(M.translation), np.asarray(M.rotation)[:, 2]
    d = x - o
    axial = _dot3(a, d)
    h, r = float(rod.halfLength), float(rod.radius)
    if isinstance(rod, coal.Capsule):
        w = d - min(max(axial, -h), h) * a
        return math.sqrt(_dot3(w, w)) - r
    w = d - axial * a
    radial, out = math.sqrt(_dot3(w, w)) - r, abs(axial) - h
    if radial <= 0.0 or out <= 0.0:
        return max(radial, out)
    return math.hypot(radial, out)


def _reach(obj: pin.GeometryObject) -> float:
    """The radius about its joint's origin that holds ``obj`` (speculative margins): its placement's offset plus
    its shape's local bounding sphere; 0 for the world's objects (unbounded shapes on moving bodies are refused)."""
    if obj.parentJoint == 0:
        return 0.0
    g = obj.geometry
    g.computeLocalAABB()
    centre = obj.placement.act(np.asarray(g.aabb_center, dtype=float))
    radius = float(g.aabb_radius)
    return float(np.linalg.norm(centre)) + radius


def _dot3(x, y) -> float:
    """``x . y`` of two 3-vectors summed in order, as the compiled detector does (numpy's ``@`` may round otherwise,
    and a feature test at its boundary would then decide differently)."""
    return float(x[0] * y[0] + x[1] * y[1] + x[2] * y[2])


def _cylinder_feature(c: np.ndarray, cylinder, M: pin.SE3):
    """The feature of ``cylinder`` (pose ``M``) nearest a sphere's centre ``c``: ``(feature, axial, w, rho)`` with
    feature ``"side"`` (``c`` strictly between the end planes), ``"rim"`` (beyond an end plane and outside the
    radius) or ``"face"`` (beyond an end plane, within the radius), ``axial`` = a . (c - centre), ``w`` the part of
    ``c - centre`` normal to the axis ``a``, ``rho`` = |w|."""
    o, a = np.asarray(M.translation), np.asarray(M.rotation)[:, 2]
    d = c - o
    axial = _dot3(a, d)
    w = d - axial * a
    rho = math.sqrt(_dot3(w, w))
    if abs(axial) < float(cylinder.halfLength):
        return "side", axial, w, rho
    return ("rim" if rho > float(cylinder.radius) else "face"), axial, w, rho


def _line_cores(sA, MA: pin.SE3, sB, MB: pin.SE3):
    """The centre line of two shapes whose contact lies on the line of their cores' closest points, or None:
    ``(x_A, x_B, slides (6,), r_A, r_B, chord)``, the closest points, their slides and the radii each surface
    stands off its point (the contact's distance is ``|x_A - x_B| - r_A - r_B``), and ``chord``: for a rod across a
    cylinder's end along a chord, ``(x_seg, rod_is_A, x_end)`` for :meth:`CollisionScene._chord_end`, else None.

    Two round shapes (spheres, capsules; :func:`_round_cores`). A cylinder's side is a capsule's where the other
    core's closest point on its axis lies strictly between its end planes (the cylinder is inside the capsule of
    its radius, and touches it there): a ball, a capsule or another cylinder against it. A ball beyond a
    cylinder's end plane (:func:`_cylinder_feature`) within the radius touches the cap face, which carries the
    normal (None); outside it, the rim circle at ``x_r = end + R u`` (``u`` the unit radial direction of the
    ball's centre ``c``, at ``rho`` from the axis; ``x_r`` is on the cylinder's surface: its standoff radius is 0). ``x_r`` slides along the rim's
    tangent ``t = a x u`` as ``c`` moves, at ``ds = (R / rho)`` times the relative tangential velocity (keeping
    ``(c - x_r) . t = 0`` on a circle of curvature 1 / R): the kernels' slide of a straight core
    (``contact._kernels.centre_line``: ``ds = w . a + r . (w_N x a)``, bilinear in ``a``) gives this with the
    slide ``sqrt(R / rho) t``. A capsule, or a cylinder by its side, across a cylinder's rim: the segment's and
    the rim circle's closest points (:func:`_rod_rim`). A rod over a cylinder's cap face, or two cylinders' ends:
    None (coal's normal, carried by one body)."""
    for first, s1, M1, s2, M2 in ((True, sA, MA, sB, MB), (False, sB, MB, sA, MA)):
        if isinstance(s1, coal.Sphere) and isinstance(s2, coal.Cylinder):
            c = np.asarray(M1.translation)
            feature, axial, w, rho = _cylinder_feature(c, s2, M2)
            if feature == "face":
                return None
            if feature == "side":  # a capsule's side there
                xA, xB, slide = _round_cores(sA, MA, sB, MB)
                return xA, xB, slide, float(sA.radius), float(sB.radius), None
            a = np.asarray(M2.rotation)[:, 2]
            end = np.asarray(M2.translation) + math.copysign(float(s2.halfLength), axial) * a
            x_r, sl_rim = _rim_point(end, a, float(s2.radius), w, rho)
            slide = np.zeros(6)
            slide[3:] = sl_rim  # the rim's slide, on the cylinder's side
            if first:  # A: the sphere
                return c.copy(), x_r, slide, float(s1.radius), 0.0, None
            return x_r, c.copy(), np.concatenate((slide[3:], slide[:3])), 0.0, float(s1.radius), None
    if not (isinstance(sA, _LINE) and isinstance(sB, _LINE)):
        return None
    xA, xB, slide = _round_cores(sA, MA, sB, MB)
    endA = isinstance(sA, coal.Cylinder) and not slide[:3].any()
    endB = isinstance(sB, coal.Cylinder) and not slide[3:].any()
    # a cylinder's point at an end of its segment: its rim (or its cap face: coal's); with both at an end, either
    # cylinder's rim may meet the other's side (whose segment point _rod_rim finds inside it)
    for rim_on_B in ([True, False] if endA and endB else [endB] if endA or endB else []):
        rod, M_rod, cyl, M_cyl, x_end = (sA, MA, sB, MB, xB) if rim_on_B else (sB, MB, sA, MA, xA)
        rim = _rod_rim(rod, M_rod, cyl, M_cyl, x_end)
        if rim is None:
            continue
        x_rod, x_rim, sl_rod, sl_rim, x_other = rim
        chord = None if x_other is None else (x_other, rim_on_B, x_end)
        if rim_on_B:
            return x_rod, x_rim, np.concatenate((sl_rod, sl_rim)), float(rod.radius), 0.0, chord
        return x_rim, x_rod, np.concatenate((sl_rim, sl_rod)), 0.0, float(rod.radius), chord
    if endA or endB:
        return None
    return xA, xB, slide, float(sA.radius), float(sB.radius), None


def _extent(shape, M: pin.SE3, d: np.ndarray) -> float:
    """``max over the shape of d . x`` for a round shape or a cylinder (pose ``M``): its centre's, plus the
    half length along its axis and the radius across (a ball's and a capsule's: its whole length ``|d|``)."""
    c = np.asarray(M.translation)
    if isinstance(shape, coal.Sphere):
        return _dot3(d, c) + float(shape.radius) * math.sqrt(_dot3(d, d))
    a = np.asarray(M.rotation)[:, 2]
    da = _dot3(d, a)
    across = d if isinstance(shape, coal.Capsule) else d - da * a
    return _dot3(d, c) + float(shape.halfLength) * abs(da) + float(shape.radius) * math.sqrt(_dot3(across, across))


def _separation(sA, MA: pin.SE3, sB, MB: pin.SE3, E: np.ndarray) -> np.ndarray:
    """How far two boxes, hulls or cylinders (:data:`_POLY`) part along each row e of ``E`` (from B to A): min over
    A of e . x minus max over B (negative: they overlap along e)."""
    return -_full_support(sA, MA, -E) - _full_support(sB, MB, E)


def _full_support(shape, M: pin.SE3, E: np.ndarray) -> np.ndarray:
    """``max over the shape of e . x`` for each row e of ``E``, for a :data:`_POLY` shape, in every direction (the
    rows of :func:`_support` and :func:`_extent`, each sum left to right as theirs)."""
    R, t = np.asarray(M.rotation), np.asarray(M.translation)
    Et = E[:, 0] * t[0] + E[:, 1] * t[1] + E[:, 2] * t[2]
    L = E[:, 0, None] * R[0] + E[:, 1, None] * R[1] + E[:, 2, None] * R[2]  # rows R^T e
    if isinstance(shape, coal.Box):
        h = shape.halfSide
        return Et + (np.abs(L[:, 0]) * h[0] + np.abs(L[:, 1]) * h[1] + np.abs(L[:, 2]) * h[2])
    if isinstance(shape, coal.ConvexBase):
        P = shape.points()
        return Et + (L[:, None, 0] * P[:, 0] + L[:, None, 1] * P[:, 1] + L[:, None, 2] * P[:, 2]).max(axis=1)
    da = L[:, 2]  # a cylinder: along its axis a = R[:, 2], and across
    across = (E[:, 0] - da * R[0, 2]) ** 2 + (E[:, 1] - da * R[1, 2]) ** 2 + (E[:, 2] - da * R[2, 2]) ** 2
    return Et + float(shape.halfLength) * np.abs(da) + float(shape.radius) * np.sqrt(across)


def _separating_axes(sA, MA: pin.SE3, sB, MB: pin.SE3, hulls: bool) -> np.ndarray:
    """The candidate normals (k, 3) between two :data:`_POLY` shapes, as the separating axis test's: the face
    normals (a box's 3 axes, a cylinder's axis, a hull's face normals when ``hulls``), then the crossings of A's
    edge directions with B's (a box's axes, a cylinder's axis: its side's lines), unit, those of nearly parallel
    edges left out."""
    def faces(s, M):
        R = np.asarray(M.rotation)
        if isinstance(s, coal.Box):
            return [R[:, i] for i in range(3)]
        if isinstance(s, coal.ConvexBase):
            return [R @ nl for nl in np.asarray(s.normals())] if hulls else []
        return [R[:, 2]]

    def edges(s, M):
        R = np.asarray(M.rotation)
        return [R[:, i] for i in range(3)] if isinstance(s, coal.Box) else [R[:, 2]] if isinstance(s, coal.Cylinder) \
            else []

    out = faces(sA, MA) + faces(sB, MB)
    for a in edges(sA, MA):
        for b in edges(sB, MB):
            c = np.cross(a, b)
            norm = math.sqrt(_dot3(c, c))
            if norm > 1e-6:
                out.append(c / norm)
    return np.array(out, dtype=float).reshape(-1, 3)


def _separation_beyond(sA, MA: pin.SE3, sB, MB: pin.SE3, phi: float, n_coal: np.ndarray) -> bool:
    """Whether two round shapes or cylinders (:func:`_line_cores`') are parted by more than ``phi`` (to
    FLAT_TOLERANCE) along coal's normal or a cylinder's axis (either way): then the line of their cores' closest
    points, whose distance is ``phi``, is not where they touch (their signed distance is the largest separation over
    all directions). Two parallel cylinders end to end whose segments overlap (a can sunk 1e-5 into a post's cap)
    have their closest points anywhere along the overlap and read as side by side: -0.34 m from a 30 cm post's side,
    a can thrown up by 7 cm or turned by 0.8 rad in one step."""
    dirs = [n_coal] + [np.asarray(M.rotation)[:, 2] for s, M in ((sA, MA), (sB, MB)) if isinstance(s, coal.Cylinder)]
    for d in dirs:
        for e in (d, -d):  # from B to A: min over A of e . x - max over B
            if -_extent(sA, MA, -e) - _extent(sB, MB, e) > phi + FLAT_TOLERANCE:
                return True
    return False


#: samples of a rod's segment before the Newton iterations of its closest point to a rim circle (_rod_rim)
RIM_SAMPLES = 32


def _rod_rim(rod, M_rod: pin.SE3, cyl, M_cyl: pin.SE3, x_end: np.ndarray):
    """A rod (capsule, or a cylinder by its side) against the rim of the cylinder ``cyl`` at its end ``x_end``:
    ``(x_rod, x_rim, slide_rod, slide_rim, x_other)``, the closest points of the rod's segment and the rim
    circle, their slides (the segment's axis where its point is inside it; the rim's tangent times
    ``sqrt(R / rho)``, as for a ball: the kernels' two-slide system holds with it, since it scales the rim's row by
    ``sqrt(R / rho)`` and its unknown by the inverse) and, where the rod crosses the end along a chord, the
    segment's point over the chord's other end (else None; :meth:`CollisionScene._chord_end`), or None where the
    contact is not on the rim: the rod's point within the radius or behind the end plane, a cap face closer than
    the rim, or a rod-cylinder's point at its own end.

    The segment's point minimizes the squared distance to the circle, ``z^2 + (rho - R)^2`` (``z`` along the
    outward axis from the end, ``rho`` from the axis): Newton's method on the derivative from every local minimum
    of :data:`RIM_SAMPLES` + 1 samples, within its neighbourhood, and the lowest (the compiled detector runs the
    same steps)."""
    p0, b, h2 = np.asarray(M_rod.translation), np.asarray(M_rod.rotation)[:, 2], float(rod.halfLength)
    a = np.asarray(M_cyl.rotation)[:, 2]
    o = np.asarray(M_cyl.translation)
    a = a if _dot3(a, x_end - o) > 0.0 else -a  # outward at this end
    R = float(cyl.radius)
    ab = _dot3(a, b)

    def at(s):  # (z, w, rho) of the segment's point at s
        d = (p0 + s * b) - x_end
        z = _dot3(a, d)
        w = d - z * a
        return z, w, math.sqrt(_dot3(w, w))

    samples = []
    for i in range(RIM_SAMPLES + 1):
        z, _, rho = at(-h2 + 2.0 * h2 * i / RIM_SAMPLES)
        samples.append(z * z + (rho - R) * (rho - R))
    best, gbest = None, math.inf
    for i in range(RIM_SAMPLES + 1):  # every sampled local minimum, refined (a rod across the end: two crossings)
        if (i > 0 and samples[i - 1] < samples[i]) or (i < RIM_SAMPLES and samples[i + 1] < samples[i]):
            continue
        s = -h2 + 2.0 * h2 * i / RIM_SAMPLES
        lo, hi = max(-h2, s - 2.0 * h2 / RIM_SAMPLES), min(h2, s + 2.0 * h2 / RIM_SAMPLES)
        for _ in range(40):
            z, w, rho = at(s)
            if rho == 0.0:
                return None
            drho = _dot3(w, b) / rho
            g1 = 2.0 * (z * ab + (rho - R) * drho)
            g2 = 2.0 * (ab * ab + drho * drho + (rho - R) * ((1.0 - ab * ab) - drho * drho) / rho)
            step = -g1 / g2 if g2 > 0.0 else (-0.25 if g1 > 0.0 else 0.25) * (hi - lo)
            nxt = min(max(s + step, lo), hi)
            if abs(nxt - s) <= 1e-15 * (1.0 + abs(s)):
                s = nxt
                break
            s = nxt
        z, _, rho = at(s)
        g = z * z + (rho - R) * (rho - R)
        if g < gbest:
            best, gbest = s, g
    s = best
    z, w, rho = at(s)
    if not (z > 0.0 and rho > R):
        return None  # within the radius (the cap face) or behind the end plane
    inside = abs(s) < h2 * (1.0 - 1e-9)
    if isinstance(rod, coal.Cylinder) and not inside:
        return None  # the rod-cylinder's own end: not its side
    # the cap face, where the segment passes over the disk (rho <= R), at z: closer than the rim there?
    w0 = (p0 - x_end) - _dot3(a, p0 - x_end) * a
    bp = b - ab * a
    A2, B2, C2 = _dot3(bp, bp), 2.0 * _dot3(w0, bp), _dot3(w0, w0) - R * R
    rim_distance = math.sqrt(z * z + (rho - R) * (rho - R))
    x_other = None  # the segment's point over the chord's other end, where it crosses the end along a chord
    if A2 > 0.0:
        disc = B2 * B2 - 4.0 * A2 * C2
        if disc > 0.0:
            r1, r2 = (-B2 - math.sqrt(disc)) / (2.0 * A2), (-B2 + math.sqrt(disc)) / (2.0 * A2)
            s1, s2 = max(r1, -h2), min(r2, h2)
            if s1 <= s2 and min(at(s1)[0], at(s2)[0]) < rim_distance:
                return None
            if -h2 <= r1 and r2 <= h2:
                x_other = p0 + (r2 if abs(r2 - s) > abs(r1 - s) else r1) * b
    elif C2 <= 0.0:
        return None  # the whole segment over the disk
    x_rim, sl_rim = _rim_point(x_end, a, R, w, rho)
    return p0 + s * b, x_rim, (b.copy() if inside else np.zeros(3)), sl_rim, x_other


def _rim_point(end: np.ndarray, a: np.ndarray, R: float, w: np.ndarray, rho: float):
    """``(x_rim, slide)``: the point of the rim circle (centre ``end``, axis ``a``, radius ``R``) nearest a point
    whose part normal to the axis is ``w`` (``rho = |w| > 0``), ``end + R u`` with ``u = w / rho``, and its slide,
    the rim's tangent ``a x u`` scaled by ``sqrt(R / rho)`` (:func:`_line_cores`)."""
    u = w / rho
    return end + R * u, math.sqrt(R / rho) * np.cross(a, u)


def _core(shape, M: pin.SE3):
    """A round shape's core: ``(centre, unit axis, half-length)``, a segment (a capsule or a cylinder's side, along
    its local z) or a point (a sphere: half-length 0)."""
    if isinstance(shape, (coal.Capsule, coal.Cylinder)):
        return np.asarray(M.translation), np.asarray(M.rotation)[:, 2].copy(), float(shape.halfLength)
    return np.asarray(M.translation), np.zeros(3), 0.0


def _round_cores(sA, MA: pin.SE3, sB, MB: pin.SE3):
    """The closest points ``(x_A, x_B)`` of two round shapes' cores and their slides (6,): each core's unit axis
    where its closest point lies inside its segment (it slides as the shapes move), zeros where it is fixed (a
    sphere's centre or a segment's end). Parallel overlapping segments: the middle of the overlap on A."""
    oA, aA, hA = _core(sA, MA)
    oB, aB, hB = _core(sB, MB)
    w0 = oA - oB
    b, d, e = _dot3(aA, aB), _dot3(aA, w0), _dot3(aB, w0)
    den = 1.0 - b * b
    if hA > 0.0 and hB > 0.0 and den > 1e-12:
        s = float(np.clip((b * e - d) / den, -hA, hA))
    elif hA > 0.0 and hB > 0.0:  # parallel: the middle of the overlap of B's projection onto A's segment
        lo, hi = max(-hA, -d - hB), min(hA, -d + hB)
        s = 0.5 * (lo + hi) if lo <= hi else float(np.clip(-d, -hA, hA))
    else:
        s = float(np.clip(-d, -hA, hA)) if hA > 0.0 else 0.0
    t = float(np.clip(b * s + e, -hB, hB)) if hB > 0.0 else 0.0
    if hA > 0.0:  # A's best point for B's (clamped) one
        s = float(np.clip(b * t - d, -hA, hA))
    slide = np.zeros(6)
    if hA > 0.0 and abs(s) < hA * (1.0 - 1e-9):
        slide[:3] = aA
    if hB > 0.0 and abs(t) < hB * (1.0 - 1e-9):
        slide[3:] = aB
    return oA + s * aA, oB + t * aB, slide


def _tangents(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The contact frame's tangents ``(t1, t2)`` of unit ``n`` (:func:`contact._kernels.tangent_basis`)."""
    b = _kernels.tangent_basis(float(n[0]), float(n[1]), float(n[2]))
    return np.array(b[:3]), np.array(b[3:6])


def _patch_directions(k: int) -> np.ndarray:
    """``(cos, sin)`` (2, k) of ``k`` directions spread evenly, offset by 0.3 rad from the tangent axes
    (a box's edges are often along them: a direction normal to an edge would tie its two corners)."""
    a = 0.3 + 2.0 * np.pi * np.arange(k) / k
    return np.array([np.cos(a), np.sin(a)])


_DIRECTIONS_4, _DIRECTIONS_3 = _patch_directions(4), _patch_directions(3)


def _extremes(C: np.ndarray, t1: np.ndarray, t2: np.ndarray, directions: np.ndarray) -> list[int]:
    """Indices (sorted, distinct) of the points ``C`` (k, 3) farthest along each of ``directions``
    (2, m), given in the plane basis ``(t1, t2)``."""
    W = np.outer(t1, directions[0]) + np.outer(t2, directions[1])
    return sorted(set((C @ W).argmax(axis=0).tolist()))


def _convex_hull(obj: pin.GeometryObject, model: pin.Model) -> coal.ConvexBase:
    """The convex hull of mesh ``obj`` (computed once per mesh by coal/qhull and kept on the mesh, so
    the simulators derived from one model, e.g. by ``with_parameters``, share it).

    Raises ``ValueError`` naming the mesh and its link when the mesh is not a solid:
    non-finite vertices, fewer than 4, or all in one plane (qhull would crash on it).
    """
    mesh = obj.geometry
    if mesh.convex is None:
        V = np.asarray(mesh.vertices(), dtype=float).reshape(-1, 3)
        where = f"collision mesh {obj.name!r} of link {_link_name(obj, model)!r}"
        if not np.all(np.isfinite(V)):
            raise ValueError(f"{where} has non-finite vertex coordinates")
        sv = np.linalg.svd(V - V.mean(axis=0), compute_uv=False) if len(V) >= 4 else np.zeros(3)
        if sv[0] == 0.0 or sv[2] <= 1e-9 * sv[0]:
            raise ValueError(f"{where} is not a solid ({len(V)} vertices, all in one plane or line: "
                             f"extents {np.ptp(V, axis=0) if len(V) else []} m); a flat mesh cannot collide. "
                             "Give it a thickness or replace it by a box in the model file.")
        try:
            mesh.buildConvexHull(True, "Qt")
        except RuntimeError as exc:  # coal: "Too many neighbors." (a vertex shared by > 255 hull edges)
            msg = str(exc).strip().splitlines()[-1].replace("message: ", "").rstrip(".")
            raise ValueError(f"{where}: coal could not build its convex hull ({len(V)} vertices): {msg}. "
                             "Simplify the mesh (fewer vertices) or replace it by primitives.") from None
    return mesh.convex


def convexity(mesh) -> float:
    """Volume of a mesh's convex hull over the mesh's own volume (>= 1; 1 = convex).

    The mesh volume is coal's divergence-theorem sum over its triangles (its
    absolute value: mirrored meshes, scaled by -1 on an axis, come out negative).
    Returns ``inf`` when that volume cannot be trusted: an open or inconsistently
    oriented mesh gives a value below the hull's or near zero.
    """
    if mesh.convex is None:
        mesh.buildConvexHull(True, "Qt")
    vm, vh = abs(mesh.computeVolume()), mesh.convex.computeVolume()
    if not (vm > 0.0 and vh > 0.0) or vm > vh * (1.0 + 1e-9):
        return float("inf")
    return vh / vm


def _link_name(obj: pin.GeometryObject, model: pin.Model) -> str:
    if 0 <= obj.parentFrame < model.nframes:
        return model.frames[obj.parentFrame].name
    return model.names[obj.parentJoint]


def _warn_if_not_convex(obj: pin.GeometryObject, mesh, model: pin.Model) -> None:
    """Warn when ``mesh`` (of ``obj``), which collides with bodies other than the ground, is replaced
    by a loose hull."""
    ratio = convexity(mesh)
    if ratio <= 1.0 + CONVEXITY_TOLERANCE:
        return
    how = ("its volume cannot be measured (open mesh)" if not np.isfinite(ratio)
           else f"its convex hull is {100 * (ratio - 1):.0f}% larger in volume")
    warnings.warn(f"collision mesh {obj.name!r} of link {_link_name(obj, model)!r} is not convex ({how}, "
                  f"more than {100 * CONVEXITY_TOLERANCE:.0f}%): its contacts with other bodies use the hull, "
                  "which touches where the mesh does not (contacts with the ground are exact). For exact "
                  "contact, give that link convex parts or primitives.", stacklevel=4)


def _support(shape, M: pin.SE3, d: np.ndarray) -> float | None:
    """``max over the shape of d . x`` (its support function), for the flat carriers, boxes, hulls and a cylinder
    along its axis (:func:`_on_cap`); None otherwise (a cylinder off its axis: coal's normal there, with which a
    plane distance would read its noise -- 0.15 rad of it on two near-parallel disks gave -4.6 cm)."""
    if isinstance(shape, _FLAT):
        n = M.rotation @ shape.n
        off = shape.d + n @ M.translation
        return off if n @ d > 0 else None
    if isinstance(shape, coal.Box):
        R = M.rotation
        return float(d @ M.translation + np.abs(R.T @ d) @ shape.halfSide)
    if isinstance(shape, coal.ConvexBase):
        return float(d @ M.translation + (shape.points() @ (M.rotation.T @ d)).max())
    if _on_cap(shape, M, d):  # a cylinder along its axis: its cap face's plane (the rim's farthest point along d)
        a = np.asarray(M.rotation)[:, 2]
        da = _dot3(d, a)
        w = d - da * a
        return _dot3(d, M.translation) + float(shape.halfLength) * abs(da) + float(shape.radius) * math.sqrt(_dot3(w, w))
    return None


def _local_vertices(shape) -> np.ndarray | None:
    """The vertices (k, 3) of a polyhedral shape in its own frame (box corners, hull points); None otherwise."""
    if isinstance(shape, coal.Box):
        return np.ascontiguousarray(_BOX_SIGNS * shape.halfSide)
    if isinstance(shape, coal.ConvexBase):
        return np.ascontiguousarray(shape.points(), dtype=float)
    return None


def _configure(req, margin: float, gjk_tolerance: float) -> None:
    req.enable_contact = True
    req.security_margin = margin
    req.gjk_tolerance = gjk_tolerance


def _valid_normal(patch) -> bool:
    """The patch has points, a finite unit normal and a sane depth (points are checked on reading)."""
    if patch.size() == 0:
        return False
    n = np.asarray(patch.getNormal())
    depth = patch.penetration_depth
    return bool(np.all(np.isfinite(n)) and abs(n @ n - 1.0) < 1e-6 and np.isfinite(depth) and abs(depth) < 1e3)


def _merge_planar(P: np.ndarray) -> np.ndarray:
    """Drop points that repeat another's (x, y) (in a planar scene they give the same rows); z set to 0."""
    keep = []
    for i in range(len(P)):
        if not any(abs(P[i, 0] - P[j, 0]) < 1e-9 and abs(P[i, 1] - P[j, 1]) < 1e-9 for j in keep):
            keep.append(i)
    out = P[keep]
    out[:, 2] = 0.0
    return out


def _valid(patch) -> bool:
    """A contact patch coal computed sensibly: finite unit normal, finite sane depth and points."""
    return _valid_normal(patch) and all(np.all(np.abs(patch.getPoint(i)) < 1e6) for i in range(patch.size()))


def _aligned(shape, M: pin.SE3, n: np.ndarray) -> bool:
    """``n`` is (up to sign) the normal of one of the shape's faces."""
    if isinstance(shape, coal.Box):
        return np.abs(M.rotation.T @ n).max() > 1.0 - 1e-6
    if isinstance(shape, coal.ConvexBase):
        return np.abs(shape.normals() @ (M.rotation.T @ n)).max() > 1.0 - 1e-6
    return False


def _on_cap(shape, M: pin.SE3, n: np.ndarray) -> bool:
    """``shape`` is a cylinder and ``n`` (up to sign) its axis, the normal of its cap faces (as :func:`_aligned`)."""
    if not isinstance(shape, coal.Cylinder):
        return False
    return abs(_dot3(np.asarray(M.rotation)[:, 2], n)) > 1.0 - 1e-6


def _face_normal(shape, M: pin.SE3, d: np.ndarray, *, flip: bool = False) -> np.ndarray:
    """The exact outward normal of ``shape``'s face closest to direction ``d`` (world frame).

    For a flat shape, its plane normal; for a box, the signed axis most aligned
    with ``d``; for a cylinder, its signed axis where ``d`` is along it (:func:`_on_cap`); otherwise ``d`` itself. ``flip`` returns the opposite (for a
    carrier that is body A, whose outward normal is ``-n``).
    """
    if isinstance(shape, _FLAT):
        out = M.rotation @ shape.n
    elif isinstance(shape, coal.Box):
        c = M.rotation.T @ d
        k = int(np.argmax(np.abs(c)))
        out = M.rotation[:, k] * np.sign(c[k])
    elif isinstance(shape, coal.ConvexBase):
        N = shape.normals()
        out = M.rotation @ N[int(np.argmax(N @ (M.rotation.T @ d)))]
    elif _on_cap(shape, M, d):
        out = _signed_axis(M, d)
    else:
        out = d
    out = np.array(out, dtype=float)
    return -out if flip else out
