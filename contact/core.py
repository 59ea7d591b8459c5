"""The compiled step core (``contactraj_core``, C++ in ``cpp/``), or None when it is not usable.

``pip install -e .`` builds it with scikit-build-core against the headers inside the ``pin`` and
``coal`` wheels (see ``CMakeLists.txt``). The Python implementation is the reference: every
function of the core is tested against it, and wherever the core is missing (its build failed,
it was built against another Pinocchio or from other sources than ``cpp/src`` holds -- an edited
tree not rebuilt --, ``CONTACTRAJ_NO_CORE=1`` is set at install or at run time) the toolkit runs
the reference path, after one warning that says why.

``core.module`` is the extension module or None; ``core.reason`` says why it is None.

Development: ``cmake -S cpp -B /tmp/core && cmake --build /tmp/core`` builds the core alone in a few
seconds; ``CONTACTRAJ_CORE_PATH=/tmp/core/contactraj_core....so`` makes this module load that file
instead of the installed one (a worktree's own build; its sources are not compared then).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import warnings

import pinocchio  # loads libpinocchio, libcoal and libboost_python, which the extension links to

module = None
reason = ""


def _load():
    global module, reason
    if os.environ.get("CONTACTRAJ_NO_CORE"):
        reason = "CONTACTRAJ_NO_CORE is set"
        return
    path = os.environ.get("CONTACTRAJ_CORE_PATH")
    try:
        if path:
            spec = importlib.util.spec_from_file_location("contactraj_core", path)
            if spec is None:
                raise ImportError(f"CONTACTRAJ_CORE_PATH={path!r} is not an extension module")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module("contactraj_core")
    except (ImportError, OSError) as exc:
        reason = f"it is not installed or does not load ({exc}); its build log is contactraj_core_build.log " \
                 "in site-packages"
        return
    if mod.pinocchio_version != pinocchio.__version__:
        reason = (f"it was built against Pinocchio {mod.pinocchio_version} and Pinocchio {pinocchio.__version__} "
                  "is installed; reinstall contactraj (pip install -e .) to rebuild it")
        return
    held = source_hash()
    if not path and held is not None and getattr(mod, "source_hash", None) != held:
        # an edited tree that was not rebuilt: its Python would call the old module with new arguments
        reason = (f"it was built from other sources than {SOURCES} holds (edited since the last build); "
                  "reinstall contactraj (pip install -e .) to rebuild it")
        return
    module, reason = mod, ""


#: the core's sources, next to the package in a source tree or an editable install (absent from a wheel)
SOURCES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpp", "src")


def source_hash(directory: str = SOURCES) -> str | None:
    """The SHA-256 that cpp/source_hash.cmake builds into the module (``source_hash``): over ``"<name>:<sha256>\n"``
    of the directory's ``*.cpp`` and ``*.hpp`` files sorted by name; None where the directory does not exist."""
    if not os.path.isdir(directory):
        return None
    acc = ""
    for name in sorted(f for f in os.listdir(directory) if f.endswith((".cpp", ".hpp"))):
        with open(os.path.join(directory, name), "rb") as fh:
            acc += f"{name}:{hashlib.sha256(fh.read()).hexdigest()}\n"
    return hashlib.sha256(acc.encode()).hexdigest()


_load()
_warned = False


def available() -> bool:
    """True when the compiled core is usable; warns once (RuntimeWarning, with the reason) when not."""
    global _warned
    if module is None and not _warned and not os.environ.get("CONTACTRAJ_NO_CORE"):
        _warned = True
        warnings.warn(f"contactraj: the compiled step core is not used: {reason}. The Python reference path "
                      "runs instead (same results, slower).", RuntimeWarning, stacklevel=2)
    return module is not None
