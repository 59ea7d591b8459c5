"""Planar half-cheetah (9 dof) on the ground, after MuJoCo's ``half_cheetah.xml``.

Built in code in our planar convention: xy plane, **y up**, joints turn about z.
MuJoCo's (x, z) becomes our (x, y); its hinges about +y turn about our -z, so
every angle and range here is the MuJoCo one negated. Bodies are capsules of
radius 0.046 m and density 1000 kg/m^3 (MuJoCo's default), so a capsule of
half-length h weighs ``1000 (pi r^2 2h + 4/3 pi r^3)`` and has its own inertia:

=========  ===============  ==========  ====================  =============
body       joint at          half-len   mass [kg]             torque [N m]
=========  ===============  ==========  ====================  =============
torso      root (x, y, yaw)  0.5 (+head 0.15)  7.06 + 2.40   unactuated
bthigh     (-0.5, 0)         0.145      2.34                  120
bshin      (0.16, -0.25)     0.15       2.40                  90
bfoot      (-0.28, -0.14)    0.094      1.66                  60
fthigh     (0.5, 0)          0.133      2.18                  120
fshin      (-0.14, -0.24)    0.106      1.82                  60
ffoot      (0.13, -0.18)     0.07       1.34                  30
=========  ===============  ==========  ====================  =============

The root is a 2-D translation followed by a yaw hinge (massless in between);
the torso starts 0.7 m above the ground. Ground friction 0.4 (MuJoCo's value);
only the ground collides with the body (no self-collision, as in MuJoCo's
model, whose links pass through each other).
"""

from __future__ import annotations

import numpy as np

from dynamics import ModelBuilder, Simulator
from trajopt import OCP, ControlCost, CostDerivatives, FunctionCost

from ._registry import register
from ._scene import first_contact_state

RADIUS = 0.046
ROOT_HEIGHT = 0.7  # the torso's start height; the root's y coordinate is measured from it
DENSITY = 1000.0

# name, parent, joint position (MuJoCo x, z), range (MuJoCo), gear,
# capsule centre (MuJoCo x, z), capsule axis angle about MuJoCo y, half-length
LEGS = [
    ("bthigh", "torso", (-0.5, 0.0), (-0.52, 1.05), 120.0, (0.1, -0.13), -3.8, 0.145),
    ("bshin", "bthigh", (0.16, -0.25), (-0.785, 0.785), 90.0, (-0.14, -0.07), -2.03, 0.15),
    ("bfoot", "bshin", (-0.28, -0.14), (-0.4, 0.785), 60.0, (0.03, -0.097), -0.27, 0.094),
    ("fthigh", "torso", (0.5, 0.0), (-1.0, 0.7), 120.0, (-0.07, -0.12), 0.52, 0.133),
    ("fshin", "fthigh", (-0.14, -0.24), (-1.2, 0.87), 60.0, (0.065, -0.09), -0.6, 0.106),
    ("ffoot", "fshin", (0.13, -0.18), (-0.5, 0.5), 30.0, (0.045, -0.07), -0.6, 0.07),
]


def _capsule_mass(half_length: float) -> float:
    r = RADIUS
    return DENSITY * (np.pi * r * r * 2 * half_length + 4.0 / 3.0 * np.pi * r**3)


def _axis_rotation(angle: float) -> np.ndarray:
    """Rotation taking a capsule's local z to MuJoCo's axis ``R_y(angle) z``, in our frame."""
    c, s = np.cos(-angle), np.sin(-angle)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # z -> y
    return Rz @ Rx


def half_cheetah_simulator(*, dt: float = 1e-3, friction: float = 0.4, contact: str = "lcp") -> Simulator:
    b = ModelBuilder("half-cheetah", gravity=(0.0, -9.81, 0.0))
    b.add_joint("translation2d", name="rootxy", placement=(0.0, ROOT_HEIGHT, 0.0))
    torso = b.add_joint("revolute", name="torso", parent="rootxy", axis="z")
    b.add_body(torso, mass=_capsule_mass(0.5), capsule=(RADIUS, 1.0), rotation=_axis_rotation(np.pi / 2),
               name="torso_capsule")
    b.add_body(torso, mass=_capsule_mass(0.15), capsule=(RADIUS, 0.3), offset=(0.6, 0.1, 0.0),
               rotation=_axis_rotation(0.87), name="head")
    for name, parent, (jx, jz), (lo, hi), gear, (gx, gz), angle, half in LEGS:
        j = b.add_joint("revolute", name=name, parent=parent, axis="z", placement=(jx, jz, 0.0),
                        lower=-hi, upper=-lo, effort=gear)
        b.add_body(j, mass=_capsule_mass(half), capsule=(RADIUS, 2 * half), offset=(gx, gz, 0.0),
                   rotation=_axis_rotation(angle), name=f"{name}_capsule")
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=dt, actuated=[leg[0] for leg in LEGS], friction=friction,
                     planar=True, ground=0.0, self_collision=False, contact=contact)


@register("half-cheetah", "planar 9-dof half-cheetah on the ground runs forward; 500 steps of 1 ms")
def half_cheetah(*, horizon: int = 500, dt: float = 1e-3, control_weight: float = 1e-6, contact: str = "lcp") -> OCP:
    sim = half_cheetah_simulator(dt=dt, contact=contact)
    x0 = sim.neutral_state()

    def value(x, u=None):
        return -float(x[0])

    def derivatives(x, u=None):
        out = CostDerivatives.zeros(sim.ndx, sim.nu)
        out.L = -float(x[0])
        out.Lx[0] = -1.0
        return out

    def metrics(xs, us):
        return {"final_root_x": float(xs[-1, 0]), "final_torso_height": ROOT_HEIGHT + float(xs[-1, 1])}

    return OCP(dynamics=sim, x0=x0, horizon=horizon, running_cost=ControlCost(sim, control_weight),
               terminal_cost=FunctionCost(sim, value, derivatives), name="half-cheetah", metrics=metrics,
               info={"bench_state": first_contact_state(sim, x0, horizon)})
