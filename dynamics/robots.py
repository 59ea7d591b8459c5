"""Locate robot description files, in particular those of ``example-robot-data``.

The ``example-robot-data`` wheel ships its URDFs and meshes (no Python module),
under ``<site-packages>/cmeel.prefix/share/example-robot-data/robots``. Its URDFs
refer to meshes as ``package://example-robot-data/robots/...``, so the package
directory to hand to Pinocchio is ``.../share``.

:func:`resolve_mesh_path` and :func:`load_urdf_geometry` find the meshes of any
URDF the way a user expects (Pinocchio alone finds only absolute paths and
``package://`` ones under given ``package_dirs``): relative paths next to the
file and in the folders above it, ``package://NAME/...`` in the given folders,
next to the file and up its folders, ``package:///abs/...`` and ``file://``
as absolute paths (or, when that path does not exist here, by its trailing
parts next to the file and up its folders).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

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


def _ancestors(folder: str) -> list[str]:
    """``folder`` and every folder above it, nearest first."""
    out = [folder]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


def _tails(rel: str) -> list[str]:
    """The trailing parts of a path, longest first (``a/b/c.stl`` -> ``a/b/c.stl``, ``b/c.stl``, ``c.stl``)."""
    parts = [p for p in rel.replace("\\", "/").split("/") if p and p != "."]
    return [os.path.join(*parts[i:]) for i in range(len(parts))]


def mesh_path_candidates(filename: str, urdf_dir: str, package_dirs: Sequence[str] = ()) -> list[str]:
    """Where a URDF's mesh ``filename`` may be, in the order they are tried (see the module docstring).

    - ``package://NAME/REST``: ``DIR/NAME/REST`` for each of ``package_dirs``, then
      for the URDF's folder and each folder above it, ``A/REST`` when ``A`` is
      named ``NAME`` and ``A/NAME/REST``;
    - ``package:///ABS``, ``file://ABS`` and absolute paths: ``ABS``, then its
      trailing parts (``meshes/foot.stl``, ``foot.stl``) in the URDF's folder and above;
    - a relative path: in the URDF's folder, then in each folder above it.
    """
    urdf_dir = os.path.abspath(urdf_dir)
    up = _ancestors(urdf_dir)
    out: list[str] = []
    if filename.startswith("package://") and not filename.startswith("package:///"):
        name, _, rest = filename[len("package://"):].partition("/")
        out += [os.path.join(d, name, rest) for d in package_dirs]
        for a in up:
            if os.path.basename(a) == name:
                out.append(os.path.join(a, rest))
            out.append(os.path.join(a, name, rest))
        return out
    if filename.startswith("package://"):
        path = filename[len("package://"):]
    elif filename.startswith("file://"):
        path = filename[len("file://"):]
    else:
        path = filename
    if os.path.isabs(path):
        out.append(path)
        tails = _tails(path)[1:]  # a path from another machine: its trailing parts, here
    else:
        tails = [path]
    out += [os.path.join(a, t) for t in tails for a in up]
    return out


def resolve_mesh_path(filename: str, urdf_path: str, package_dirs: Sequence[str] = ()) -> str:
    """Absolute path of the mesh ``filename`` named in the URDF at ``urdf_path``.

    Tries :func:`mesh_path_candidates` in order and returns the first existing
    file; raises ``FileNotFoundError`` naming the mesh, the URDF and every place
    looked in otherwise.
    """
    tried = mesh_path_candidates(filename, os.path.dirname(os.path.abspath(urdf_path)), package_dirs)
    for c in tried:
        if os.path.isfile(c):
            return os.path.abspath(c)
    shown = "\n  ".join(dict.fromkeys(tried))
    raise FileNotFoundError(f"mesh {filename!r} named in {urdf_path} not found; looked in:\n  {shown}\n"
                            "Pass package_dirs= (folders that contain the packages of package:// paths) "
                            "or fix the path.")


def load_urdf_geometry(model, path: str, package_dirs: Sequence[str] | None = None):
    """The collision ``pinocchio.GeometryModel`` of the URDF at ``path`` for ``model``.

    Every mesh of a ``<collision>`` element is located first with
    :func:`resolve_mesh_path` (``package_dirs`` first when given, else the
    folders :func:`infer_package_dirs` finds, then next to the file and up its
    folders), so a missing mesh raises ``FileNotFoundError`` naming the mesh,
    its link and where it was looked for, before Pinocchio parses anything.
    """
    import pinocchio as pin

    dirs = list(package_dirs) if package_dirs is not None else infer_package_dirs(path)
    tree = ET.parse(path)
    for link in tree.getroot().iter("link"):
        for col in link.iter("collision"):
            for mesh in col.iter("mesh"):
                fn = mesh.get("filename")
                if fn is None:
                    raise ValueError(f"{path}: a collision <mesh> of link {link.get('name')!r} has no filename")
                try:
                    mesh.set("filename", resolve_mesh_path(fn, path, dirs))
                except FileNotFoundError as exc:
                    raise FileNotFoundError(f"link {link.get('name')!r}: {exc}") from None
    xml = ET.tostring(tree.getroot(), encoding="unicode")
    return pin.buildGeomFromUrdfString(model, xml, pin.GeometryType.COLLISION, package_dirs=dirs)
