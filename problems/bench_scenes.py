"""Benchmark suites: named scenes ``(name, simulator, x, u)`` at a state in contact.

``ncp_paper_suite()`` -- the NCP paper's timing table (its Fig. 2 / Tab. II-III: half-cheetah,
humanoid, UR5, Go1, H1, Atlas) on our models, every one under the Coulomb cone (``contact="ncp"``):

- ``half-cheetah``: the registered problem's bench state (the first step of its zero-control
  rollout with a contact carrying an impulse), planar, capsules.
- ``humanoid``: gymnasium's MuJoCo ``humanoid.xml`` (``Simulator.from_mjcf``: 23 dof, 17 motors,
  capsules and spheres), dropped from its file pose with zero controls; the first state whose
  step has a ground contact carrying an impulse.
- ``ur5-box``: the registered problem's bench state (fingertip pressing on a box that rests on
  the ground, holding torques).
- ``go1``: ``go1-hold``'s bench state (standing on four foot spheres, holding torques).
- ``g1-pushup``: the Unitree G1 (35 dof) in its push-up pose at static-contact torques
  (``problems.load("g1-pushup")``): URDF collision meshes (as convex hulls) with ground patches.
- ``talos-meshes``: Talos (``talos_reduced.urdf``, 38 dof) standing half-sitting with *every*
  collision mesh of the URDF kept (as convex hulls against the ground: 4-corner patches under
  the soles, the link meshes tested every step) -- the Atlas-class scene -- at its static-contact
  torques.
"""

from __future__ import annotations

import os

import numpy as np

from . import load
from ._scene import first_contact_state, static_contact_torques
from .legged import _talos_paths, talos_standing_state

HUMANOID_MJCF = ("gymnasium", "envs/mujoco/assets/humanoid.xml")


def _humanoid_mjcf() -> str:
    import importlib.util

    spec = importlib.util.find_spec(HUMANOID_MJCF[0])
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the humanoid scene needs gymnasium's humanoid.xml: `pip install gymnasium`")
    return os.path.join(spec.submodule_search_locations[0], HUMANOID_MJCF[1])


def humanoid_scene(contact: str = "ncp"):
    import warnings

    from dynamics import Simulator

    with warnings.catch_warnings():  # the MJCF's solver options and tendons are not represented
        warnings.simplefilter("ignore")
        sim = Simulator.from_mjcf(_humanoid_mjcf(), contact=contact)
    return (sim, *first_contact_state(sim, sim.neutral_state(), 2000, pressing=True, required=True))


def talos_meshes_scene(contact: str = "ncp"):
    from dynamics import Simulator

    urdf, srdf = _talos_paths()
    urdf = os.path.join(os.path.dirname(urdf), "talos_reduced.urdf")
    import pinocchio as pin

    sim = Simulator.from_urdf(urdf, floating_base=True, ground=0.0, friction=0.8, contact=contact, name="talos-meshes")
    pin.loadReferenceConfigurations(sim.model, srdf, False)
    x = talos_standing_state(sim)
    u, _, _ = static_contact_torques(sim, x[: sim.nq])
    return sim, x, u


def _problem_scene(name, **options):
    prob = load(name, **options)
    x, u = prob.info["bench_state"]
    return prob.dynamics, np.asarray(x, float), np.asarray(u, float)


def _held_scene(name):
    """A static-hold problem's rest state at its static-contact torques (least-squares impulses near
    an even share of the weight, :func:`problems._scene.static_contact_torques`)."""
    prob = load(name)
    sim, x = prob.dynamics, prob.info["x_rest"].copy()
    return sim, x, static_contact_torques(sim, x[: sim.nq])[0]


#: name -> builder of ``(sim, x, u)``, in the order of the paper's table
NCP_PAPER = {
    "half-cheetah": lambda: _problem_scene("half-cheetah", contact="ncp"),
    "humanoid": humanoid_scene,
    "ur5-box": lambda: _problem_scene("ur5-box", contact="ncp"),
    "go1": lambda: _problem_scene("go1-hold", contact="ncp"),
    "g1-pushup": lambda: _held_scene("g1-pushup"),
    "talos-meshes": talos_meshes_scene,
}

SUITES = {"ncp-paper": NCP_PAPER}


def suite(name: str):
    """The scenes of suite ``name``: a list of ``(scene name, sim, x, u)``."""
    if name not in SUITES:
        raise ValueError(f"unknown bench suite {name!r}; available: {', '.join(sorted(SUITES))}")
    return [(scene, *build()) for scene, build in SUITES[name].items()]
