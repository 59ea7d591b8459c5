"""Small models shared by several test files."""

from __future__ import annotations

import numpy as np

from dynamics.build import ModelBuilder


def three_bar_chain(*, floating=False, limits=False, tip_sphere=False, root_collision=True, armature=0.0):
    """Three bars on revolute joints (axes y, x, y) hanging along -z, the last one colliding; optionally on a
    free-flyer body (colliding when ``root_collision``), position limits [-0.5, 0.8] on the last joint, a
    0.3 kg sphere at the tip, and ``armature`` on the first revolute joint. Returns ``(model, geometry)``."""
    b = ModelBuilder("chain")
    parent = 0
    if floating:
        parent = b.add_joint("free", name="root")
        b.add_body(parent, mass=2.0, box=(0.3, 0.2, 0.1), collision=root_collision)
    place = (0.0, 0.0, 0.0 if floating else 1.0)
    for i, axis in enumerate("yxy"):
        lim = dict(lower=-0.5, upper=0.8) if limits and i == 2 else {}
        parent = b.add_joint("revolute", name=f"j{i}", parent=parent, axis=axis, placement=place, **lim)
        b.add_body(parent, mass=1.0 - 0.2 * i, box=(0.05, 0.05, 0.3), offset=(0.0, 0.0, -0.15),
                   collision=i == 2)
        place = (0.0, 0.0, -0.3)
    if tip_sphere:
        b.add_body(parent, mass=0.3, sphere=0.05, offset=(0.0, 0.0, -0.3))
    model, geom = b.build()
    if armature:
        arm = np.zeros(model.nv)
        arm[model.nv - 3] = armature
        model.armature = arm
    return model, geom
