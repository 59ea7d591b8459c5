"""Model loading: URDF (with package:// meshes), MJCF, models built in code."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dynamics import EXAMPLE_ROBOTS, ModelBuilder, Simulator, example_robot_urdf, infer_package_dirs
from trajopt import fd_tolerance, max_relative_error, step_jacobians_fd


def test_ur5_loads_with_mesh_collision_geometry():
    sim = Simulator.from_urdf(example_robot_urdf("ur5"))
    assert (sim.nq, sim.nv, sim.nu) == (6, 6, 6)
    assert sim.geometry is not None and sim.geometry.ngeoms == 8
    assert np.allclose(sim.u_upper, [150, 150, 150, 28, 28, 28])
    assert np.allclose(sim.u_lower, -sim.u_upper)


def test_go1_floating_base_is_unactuated():
    sim = Simulator.from_urdf(example_robot_urdf("go1"), floating_base=True)
    assert (sim.nq, sim.nv, sim.nu) == (19, 18, 12)
    assert np.array_equal(sim.actuated_dofs, np.arange(6, 18))
    assert np.allclose(sim.B[6:], np.eye(12)) and not sim.B[:6].any()
    assert sim.geometry.ngeoms == 38


def test_package_dirs_inference_for_example_robot_data():
    path = example_robot_urdf("go1")
    dirs = infer_package_dirs(path)
    assert len(dirs) == 1 and os.path.isdir(os.path.join(dirs[0], "example-robot-data"))


@pytest.mark.parametrize("name", sorted(EXAMPLE_ROBOTS))
def test_every_listed_example_robot_exists(name):
    assert os.path.isfile(example_robot_urdf(name))


def test_unknown_example_robot():
    with pytest.raises(ValueError, match="unknown example robot 'r2d2'"):
        example_robot_urdf("r2d2")


MJCF = """<mujoco model="mjscene">
  <worldbody>
    <body name="ball" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="cart" pos="0 0 2">
      <joint name="slider" type="slide" axis="1 0 0" range="-1 1"/>
      <geom type="box" size="0.15 0.1 0.05" mass="1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" range="-90 90"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slider" ctrlrange="-1 1" gear="20"/></actuator>
</mujoco>
"""


def test_mjcf_scene_loads_completely(tmp_path):
    path = tmp_path / "scene.xml"
    path.write_text(MJCF)
    sim = Simulator.from_mjcf(path)
    # Both top-level bodies are there (Pinocchio 4.1 alone keeps only the first).
    assert (sim.nq, sim.nv) == (7 + 2, 6 + 2)
    assert sim.actuated_joints == ["slider"] and np.allclose(sim.u_upper, [20.0])
    j = sim.model.joints[sim.model.getJointId("slider")]
    assert sim.model.lowerPositionLimit[j.idx_q] == -1.0 and sim.model.upperPositionLimit[j.idx_q] == 1.0
    h = sim.model.joints[sim.model.getJointId("hinge")]
    assert sim.model.upperPositionLimit[h.idx_q] == pytest.approx(np.pi / 2)
    assert sim.default_state()[2] == pytest.approx(1.0)  # the ball starts where the file puts it
    assert sim.geometry.ngeoms == 3
    assert not list(tmp_path.glob(".mjcf_*"))  # the temporary wrapper file is gone
    rng = np.random.default_rng(0)
    x = sim.default_state()
    x[sim.nq:] = rng.standard_normal(sim.nv)
    u = np.array([3.0])
    _, Fx, Fu = sim.step_derivatives(x, u)
    fd = step_jacobians_fd(sim, x, u)
    assert max_relative_error(Fx, fd.Fx) < fd_tolerance() * max(1, np.abs(Fx).max())


def test_model_built_in_code():
    b = ModelBuilder("arm", gravity=(0, -9.81, 0))
    j1 = b.add_joint("revolute", name="shoulder", axis="z", lower=0.0, upper=np.pi, effort=100.0)
    b.add_body(j1, mass=1.0, box=(0.25, 0.05, 0.05), offset=(0.125, 0, 0))
    j2 = b.add_joint("revolute", name="elbow", parent="shoulder", axis="z", placement=(0.25, 0, 0), effort=50.0)
    b.add_body(j2, mass=1.0, capsule=(0.02, 0.2), offset=(0.1, 0, 0), rotation=(0, np.pi / 2, 0))
    p = b.add_joint("translation2d", name="ball")
    b.add_body(p, mass=0.5, sphere=0.05)
    b.add_static_box("floor", (3.0, 0.25, 0.5), (1.0, -0.7, 0.0))
    model, geom = b.build()
    sim = Simulator(model, geometry=geom, actuated=["shoulder", "elbow"])
    assert (sim.nq, sim.nv, sim.nu) == (4, 4, 2)
    assert np.allclose(sim.u_upper, [100.0, 50.0])
    assert geom.ngeoms == 4
    assert np.allclose(model.gravity.linear, [0, -9.81, 0])
    x = np.array([0.3, -0.2, 0.1, 0.5, 1.0, 0.0, 0.2, -0.1])
    _, Fx, Fu = sim.step_derivatives(x, np.array([1.0, -2.0]))
    fd = step_jacobians_fd(sim, x, np.array([1.0, -2.0]))
    assert max_relative_error(Fu, fd.Fu) < fd_tolerance() * max(1, np.abs(Fu).max())


def test_builder_errors():
    b = ModelBuilder()
    with pytest.raises(ValueError, match="unknown joint kind 'hinge'"):
        b.add_joint("hinge", name="j")
    with pytest.raises(ValueError, match="unknown joint axis 'w'"):
        b.add_joint("revolute", name="j", axis="w")
    j = b.add_joint("revolute", name="j")
    with pytest.raises(ValueError, match="a joint named 'j' already exists"):
        b.add_joint("revolute", name="j")
    with pytest.raises(ValueError, match="exactly one of"):
        b.add_body(j, mass=1.0)
    with pytest.raises(ValueError, match="mass must be positive"):
        b.add_body(j, mass=0.0, sphere=0.1)
    with pytest.raises(ValueError, match="no joint named 'nope'"):
        b.add_joint("revolute", name="k", parent="nope")
