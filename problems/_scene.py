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


def first_contact_state(sim: Simulator, x0: np.ndarray, horizon: int, *, pressing: bool = False,
                        required: bool = False):
    """A state in contact for the benchmark: ``(x, u)``, the first state of the zero-control rollout
    whose step has a contact carrying an impulse (``pressing``: a positive normal impulse; the two differ
    only where a penalty contact's damping pulls), or the last state if none (``required``: RuntimeError)."""
    data = sim.create_data()
    x = x0
    u = np.zeros(sim.nu)
    for _ in range(horizon):
        x_next = sim.step(x, u, data=data)
        report = sim.contact_report(data)
        if report is not None and len(report.impulses):
            carried = report.impulses[:, 0].max() if pressing else np.abs(report.impulses).max()
            if carried > 0:
                return x.copy(), u
        x = x_next
    if required:
        raise RuntimeError(f"no contact in {horizon} steps")
    return x.copy(), u


def static_contact_torques(sim: Simulator, q: np.ndarray, *, normal_share=None, pinned=None):
    """Torques that hold ``q`` at rest in its contacts, and the impulses they imply.

    Returns ``(u, lam, J)``: ``lam`` (m,) contact-frame impulses (rows normal,
    t1, t2 per contact, in the order of the simulator's contact detection) with
    ``J^T lam = g(q) dt`` on the unactuated coordinates, closest (least squares)
    to ``lam_ref``: normal impulses ``normal_share`` (nc,) (default: the weight
    ``m g dt`` of the moving bodies shared evenly), no friction. ``pinned`` maps contact indices to
    fixed contact-frame impulses (r,) (kept exactly). Actuated torques:
    ``u = (g dt - J^T lam)_actuated / dt``.
    """
    model, dt = sim.model, sim.dt
    contacts, J = sim.contact_jacobian(q)
    nc, r = len(contacts), sim.contact_rows
    if nc == 0:
        raise ValueError("no contact at this configuration")
    g = pin.computeGeneralizedGravity(model, model.createData(), q).copy()
    weight = sum(I.mass for I in model.inertias[1:]) * np.linalg.norm(model.gravity.linear)
    lam_ref = np.zeros(nc * r)
    lam_ref[::r] = weight * dt / nc if normal_share is None else np.asarray(normal_share, dtype=float)
    free = np.ones(nc * r, dtype=bool)
    for i, val in (pinned or {}).items():
        lam_ref[i * r:(i + 1) * r] = val
        free[i * r:(i + 1) * r] = False
    passive = np.setdiff1d(np.arange(sim.nv), sim.actuated_dofs)
    A = J[:, passive].T  # (n_passive, m)
    resid = g[passive] * dt - A @ lam_ref
    lam = lam_ref.copy()
    lam[free] += np.linalg.lstsq(A[:, free], resid, rcond=None)[0]
    tau = (g * dt - J.T @ lam) / dt
    return tau[sim.actuated_dofs].copy(), lam, J
