"""A size check before allocating: a problem whose arrays would not fit the memory this process may use (the
machine's, or its container's or batch job's limit) is refused by name, rather than killed by the system without a
message (nothing saved) or swapping for hours."""

from __future__ import annotations

import os

#: the share of :func:`physical_memory` a problem's arrays may take (:func:`check_memory`)
MEMORY_SHARE = 0.5

#: where a container's or a batch job's memory limit is read (cgroup v2, then v1): it may be far below the machine's
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def physical_memory() -> int | None:
    """The memory this process may use, in bytes: the machine's, or a cgroup's limit when lower (a container, a
    batch scheduler's job); None where the system says neither."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        total = None
    for path in CGROUP_LIMITS:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max": no limit
            total = int(text) if total is None else min(total, int(text))
        break
    return total


def check_memory(what: str, nbytes: float, advice: str) -> None:
    """ValueError before any allocation when ``what`` (e.g. ``ur5-sysid's residual Jacobian``) would take
    ``nbytes`` (an estimate), more than :data:`MEMORY_SHARE` of :func:`physical_memory`: such a run ends killed by
    the system (no message, nothing saved) or swapping for hours. ``advice`` says which options shrink it."""
    total = physical_memory()
    if total is not None and nbytes > MEMORY_SHARE * total:
        raise ValueError(f"{what} would take about {nbytes / 2**30:.3g} GiB, more than {MEMORY_SHARE:.0%} of the "
                         f"{total / 2**30:.3g} GiB this process may use; {advice}")
