"""The problem registry: ``problems.load(name) -> trajopt.OCP`` and ``problems.names()``.

Each problem module registers a factory with :func:`register`; every body's mass
and inertia is stated in its module.
"""

from ._registry import advice, describe, factory, load, names, options_line, recipe, register

# Importing the modules registers their problems.
from . import cartpole, cheetah, design, drone, inverse, legged, manipulators, planar, sysid  # noqa: E402,F401

__all__ = ["advice", "describe", "factory", "load", "names", "options_line", "recipe", "register"]
