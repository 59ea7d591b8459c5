"""A size check before allocating: a problem whose arrays would not fit the memory this process may use (the
machine's, or its container's or batch job's limit) is refused by name, rather than killed by the system without a
message (nothing saved) or swapping for hours."""

from __future__ import annotations

import os

#: the share of :func:`physical_memory` a problem's arrays may take (:func:`check_memory`)
MEMORY_SHARE = 0.5

#: where cgroups are mounted, and where this process's own are named (one line per hierarchy: ``id:controllers:path``)
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def cgroup_limit_files() -> list[str]:
    """The files that may hold a memory limit on this process: cgroup v2's ``memory.max`` and v1's
    ``memory.limit_in_bytes`` of its own cgroup (``/proc/self/cgroup``) and of each cgroup above it, where a batch
    scheduler's job (Slurm, ``systemd-run -p MemoryMax``) or a container without its own cgroup namespace has its
    limit, and at the mount's root, which is a container's own cgroup in its namespace."""
    paths = []
    try:
        with open(PROC_CGROUP) as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        _, controllers, path = parts
        if controllers == "":  # v2 (the unified hierarchy: at the root, or under unified/ on a hybrid machine)
            homes, name = ("", "unified"), "memory.max"
        elif "memory" in controllers.split(","):  # v1's memory controller
            homes, name = ("memory",), "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for home in homes:
            for depth in range(len(parts), -1, -1):  # the process's own cgroup, then each one above it
                paths.append(os.path.join(CGROUP_ROOT, home, *parts[:depth], name))
    for fallback in (os.path.join(CGROUP_ROOT, "memory.max"), os.path.join(CGROUP_ROOT, "memory",
                                                                           "memory.limit_in_bytes")):
        if fallback not in paths:
            paths.append(fallback)
    return paths


def physical_memory() -> int | None:
    """The memory this process may use, in bytes: the machine's, or the lowest cgroup limit on it when lower (a
    container's, a batch scheduler's job's; shared with whatever else runs in that cgroup); None where the system
    says neither."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        total = None
    for path in cgroup_limit_files():
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max": no limit (v1's "none" is a huge number, which the min absorbs)
            total = int(text) if total is None else min(total, int(text))
    return total


def check_memory(what: str, nbytes: float, advice: str) -> None:
    """ValueError before any allocation when ``what`` (e.g. ``ur5-sysid's residual Jacobian``) would take
    ``nbytes`` (an estimate), more than :data:`MEMORY_SHARE` of :func:`physical_memory`: such a run ends killed by
    the system (no message, nothing saved) or swapping for hours. ``advice`` says which options shrink it."""
    total = physical_memory()
    if total is not None and nbytes > MEMORY_SHARE * total:
        raise ValueError(f"{what} would take about {nbytes / 2**30:.3g} GiB, more than {MEMORY_SHARE:.0%} of the "
                         f"{total / 2**30:.3g} GiB this process may use; {advice}")
