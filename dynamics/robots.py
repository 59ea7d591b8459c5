"""Locate robot description files, in particular those of ``example-robot-data``.

The ``example-robot-data`` wheel ships its URDFs and meshes (no Python module),
under ``<site-packages>/cmeel.prefix/share/example-robot-data/robots``. Its URDFs
refer to meshes as ``package://example-robot-data/robots/...``, so the package
directory to hand to Pinocchio is ``.../share``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re

#: Short names for the robots the toolkit uses, relative to the robots folder.
EXAMPLE_ROBOTS = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
    "panda": "panda_description/urdf/panda.urdf",
    "double_pendulum": "double_pendulum_description/urdf/double_pendulum_simple.urdf",
}


@functools.cache
def example_robot_data_share() -> str:
    """The ``share`` folder of the installed ``example-robot-data`` distribution."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError as exc:
        raise FileNotFoundError(
            "example-robot-data is not installed; install it with "
            "`pip install example-robot-data`"
        ) from exc
    share = str(dist.locate_file("cmeel.prefix/share"))
    if not os.path.isdir(os.path.join(share, "example-robot-data", "robots")):
        raise FileNotFoundError(
            f"example-robot-data is installed but its robots folder is missing under {share}"
        )
    return share


def example_robot_urdf(name: str) -> str:
    """Path of the URDF of an example-robot-data robot by short name (see ``EXAMPLE_ROBOTS``)."""
    try:
        rel = EXAMPLE_ROBOTS[name]
    except KeyError:
        raise ValueError(
            f"unknown example robot {name!r}; known: {', '.join(sorted(EXAMPLE_ROBOTS))}"
        ) from None
    return os.path.join(example_robot_data_share(), "example-robot-data", "robots", rel)


_PACKAGE_RE = re.compile(r"package://([^/\"']+)/")


def infer_package_dirs(path: str) -> list[str]:
    """Folders that resolve the ``package://NAME/...`` mesh paths of a URDF.

    For each package named in the file, walk up from the URDF's folder and take the
    first ancestor that either *is* the package (its name is ``NAME``: its parent is
    returned) or *contains* it (``ancestor/NAME`` exists). Packages that cannot be
    found are left for Pinocchio to report, with the mesh it could not open.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        names = set(_PACKAGE_RE.findall(f.read()))
    dirs: list[str] = []
    start = os.path.dirname(os.path.abspath(path))
    for name in sorted(names):
        d = start
        while True:
            if os.path.basename(d) == name:
                found = os.path.dirname(d)
            elif os.path.isdir(os.path.join(d, name)):
                found = d
            else:
                found = None
            if found is not None:
                if found not in dirs:
                    dirs.append(found)
                break
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return dirs
