"""One box resting on the ground, as coal.Box and as a 12-triangle mesh (collided as its hull):
time of step and step_derivatives of each (issue 12: a mesh model at most 2x the primitive one).
Run from the project root: python scripts/bench_mesh_vs_primitive.py"""

import os
import sys
import timeit
import numpy as np
import pinocchio as pin
import coal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_mesh_collision import _box_mesh, _bvh, HALF
from dynamics import Simulator


def sim_with(shape):
    m = pin.Model()
    j = m.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    m.appendBodyToJoint(j, pin.Inertia.FromBox(1.0, 0.2, 0.2, 0.2), pin.SE3.Identity())
    g = pin.GeometryModel()
    g.addGeometryObject(pin.GeometryObject("b", j, pin.SE3.Identity(), shape))
    return Simulator(m, geometry=g, ground=0.0, dt=1e-3)


h = np.asarray(HALF) if np.ndim(HALF) else np.full(3, HALF)
for name, shape in [("box", coal.Box(*(2 * h))), ("box mesh", _bvh(*_box_mesh()))]:
    s = sim_with(shape)
    x = s.neutral_state()
    x[2] = h[2] + 1e-4
    xs = s.rollout(x, np.zeros((300, s.nu)))
    x = xs[-1]
    u = np.zeros(s.nu)
    t1 = min(timeit.repeat(lambda: s.step(x, u), number=500, repeat=5)) / 500 * 1e6
    d = s.create_data()
    t2 = min(timeit.repeat(lambda: s.step_derivatives(x, u, data=d), number=500, repeat=5)) / 500 * 1e6
    print(f"{name:10s} rest z {x[2]:.5f} contacts {len(s.contacts.phi)} step {t1:.1f} us  step_derivatives {t2:.1f} us")
