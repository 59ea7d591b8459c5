"""Registry of named problems."""

from __future__ import annotations

from collections.abc import Callable

_REGISTRY: dict[str, tuple[Callable, str]] = {}


def register(name: str, summary: str):
    """Decorator: register ``factory(**options) -> trajopt.OCP`` under ``name``."""

    def deco(factory):
        if name in _REGISTRY:
            raise ValueError(f"problem {name!r} is registered twice")
        _REGISTRY[name] = (factory, summary)
        return factory

    return deco


def names() -> list[str]:
    """Every registered problem name, sorted."""
    return sorted(_REGISTRY)


def describe(name: str) -> str:
    """One-line summary of a problem."""
    return _lookup(name)[1]


def factory(name: str):
    """The function that builds problem ``name`` (to inspect its options)."""
    return _lookup(name)[0]


def load(name: str, **options):
    """Build the problem ``name`` (an OCP); ``options`` go to its factory (e.g. ``horizon=``)."""
    factory, _ = _lookup(name)
    return factory(**options)


def _lookup(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; available: {', '.join(names())}") from None
