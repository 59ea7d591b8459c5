"""Pinocchio side of the toolkit: model loading (URDF, MJCF, code), smooth dynamics
and its analytical derivatives, integration, and the :class:`Simulator`
(one step and its Jacobians in the tangent space).

Imports flow one way: ``dynamics`` may use ``contact``, never ``trajopt``,
``solvers`` or ``problems``.
"""

from .build import ModelBuilder
from .robots import EXAMPLE_ROBOTS, example_robot_urdf, infer_package_dirs
from .simulator import ModelError, SimData, SimulationError, Simulator, validate_model

__all__ = [
    "EXAMPLE_ROBOTS",
    "ModelBuilder",
    "ModelError",
    "SimData",
    "SimulationError",
    "Simulator",
    "example_robot_urdf",
    "infer_package_dirs",
    "validate_model",
]
