"""A size check before allocating: a problem whose arrays would not fit this machine's memory is refused by name,
rather than killed by the system without a message (nothing saved) or swapping for hours."""

from __future__ import annotations

import os

#: the share of this machine's memory a problem's arrays may take (:func:`check_memory`)
MEMORY_SHARE = 0.5


def physical_memory() -> int | None:
    """This machine's memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_memory(what: str, nbytes: float, advice: str) -> None:
    """ValueError before any allocation when ``what`` (e.g. ``ur5-sysid's residual Jacobian``) would take
    ``nbytes`` (an estimate), more than :data:`MEMORY_SHARE` of this machine's memory: such a run ends killed by
    the system (no message, nothing saved) or swapping for hours. ``advice`` says which options shrink it."""
    total = physical_memory()
    if total is not None and nbytes > MEMORY_SHARE * total:
        raise ValueError(f"{what} would take about {nbytes / 2**30:.3g} GiB, more than {MEMORY_SHARE:.0%} of this "
                         f"machine's {total / 2**30:.3g} GiB; {advice}")
