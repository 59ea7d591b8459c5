"""How the command line spells a problem option's value: one parser for ``solve --option KEY=VALUE`` and
``sweep --set KEY=V1,V2`` (the sweep splits its values on ``,`` first, so a vector there takes ``:``).

``3`` an int, ``1e-3`` a float, ``True``, ``lcp`` a word; a vector ``2.6:2.0``, ``2.6,2.0`` or ``(2.6, 2.0)``;
``nan`` and ``inf`` are floats (so that ``target=nan,1`` reaches the problem's own check, which names it).
"""

from __future__ import annotations

import ast


class OptionError(ValueError):
    """A value that cannot be read at all (an empty one)."""


def parse_value(text: str):
    text = str(text).strip()
    if not text:
        raise OptionError("an empty value")
    if ":" in text:
        return tuple(parse_value(t) for t in text.split(":"))
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if "," in text:
        return tuple(parse_value(t) for t in text.strip("()[] ").split(","))
    try:
        return float(text)  # nan, inf
    except ValueError:
        return text
