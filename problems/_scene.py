"""Scene helpers the problems share: where a model's lowest point is, a bench state in contact."""

from __future__ import annotations

import coal
import numpy as np
import pinocchio as pin

from dynamics import Simulator


def lowest_point(sim: Simulator, q: np.ndarray, *, axis: int, names=None) -> float:
    """Lowest coordinate along ``axis`` (1: y up, 2: z up) over the collision objects ``names``
    (default: every object on a moving body) at configuration ``q``; spheres, boxes, cylinders,
    capsules and meshes (their vertices)."""
    model, geom = sim.model, sim.geometry
    data = model.createData()
    gdata = pin.GeometryData(geom)
    pin.updateGeometryPlacements(model, data, geom, gdata, q)
    ids = ([geom.getGeometryId(n) for n in names] if names is not None
           else [k for k, obj in enumerate(geom.geometryObjects) if obj.parentJoint != 0])
    low = np.inf
    for k in ids:
        obj, M = geom.geometryObjects[k], gdata.oMg[k]
        shape = obj.geometry
        if isinstance(shape, coal.Sphere):
            low = min(low, M.translation[axis] - shape.radius)
        elif isinstance(shape, coal.Box):
            low = min(low, M.translation[axis] - np.abs(M.rotation[axis]) @ shape.halfSide)
        elif isinstance(shape, (coal.Cylinder, coal.Capsule)):
            a = abs(M.rotation[axis, 2])  # the shape's axis is its local z
            rim = shape.radius if isinstance(shape, coal.Capsule) else shape.radius * np.sqrt(max(0.0, 1.0 - a * a))
            low = min(low, M.translation[axis] - shape.halfLength * a - rim)
        elif hasattr(shape, "vertices"):  # a mesh (BVH) or convex hull: its lowest vertex
            V = np.asarray(shape.vertices())
            low = min(low, float((V @ M.rotation[axis] + M.translation[axis]).min()))
        else:
            raise TypeError(f"{obj.name}: only spheres, boxes, cylinders, capsules and meshes are handled, "
                            f"got {type(shape).__name__}")
    return float(low)


def first_contact_state(sim: Simulator, x0: np.ndarray, horizon: int):
    """A state in contact for the benchmark: the first state of the zero-control rollout
    whose step has a contact carrying an impulse (or the last state if none)."""
    data = sim.create_data()
    x = x0
    u = np.zeros(sim.nu)
    for _ in range(horizon):
        x_next = sim.step(x, u, data=data)
        report = sim.contact_report(data)
        if report is not None and len(report) and np.abs(report.impulses).max() > 0:
            return x.copy(), u
        x = x_next
    return x.copy(), u
