"""Registry of named problems."""

from __future__ import annotations

import inspect
from collections.abc import Callable

_REGISTRY: dict[str, tuple[Callable, str]] = {}
_RECIPES: dict[str, tuple[str, dict]] = {}
_ADVICE: dict[str, dict[str, dict]] = {}


def register(name: str, summary: str, *, method: str | None = "ddp", options: dict | None = None,
             methods: dict[str, dict] | None = None):
    """Decorator: register ``factory(**options) -> trajopt.OCP`` under ``name``.

    ``method`` and ``options`` are the problem's recipe: what ``solvers.solve(ocp)`` and
    ``trajopt solve NAME`` use when no method is named (``load`` stores them on the OCP as
    ``default_method`` / ``default_options``). ``method=None`` for inverse problems (least
    squares, solved by Gauss-Newton). ``methods`` is the problem's advice for named methods
    (``method_options`` on the OCP, see :func:`solvers.resolve`).
    """

    def deco(factory):
        if name in _REGISTRY:
            raise ValueError(f"problem {name!r} is registered twice")
        _REGISTRY[name] = (factory, summary)
        if method is not None:
            _RECIPES[name] = (method, dict(options or {}))
        _ADVICE[name] = {m: dict(o) for m, o in (methods or {}).items()}
        return factory

    return deco


def recipe(name: str) -> str:
    """The problem's default method and options in one line (e.g. ``ddp, smoothing=auto``)."""
    _lookup(name)
    if name not in _RECIPES:
        return "gauss-newton"
    method, opts = _RECIPES[name]
    return options_line(method, opts)


def advice(name: str) -> dict[str, str]:
    """The problem's advice per named method, each in one line (``{"shooting": "search=cem, ..."}``)."""
    _lookup(name)
    return {m: options_line(None, o) for m, o in _ADVICE[name].items()}


def options_line(method: str | None, opts: dict) -> str:
    """``method, k=v, ...`` in one line (the method left out when None)."""
    return ", ".join(([method] if method else []) + [f"{k}={v}" for k, v in opts.items()])


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
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(params))
        if unknown:
            known = [k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
            raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for "
                             f"problem {name!r}; its options: {', '.join(known)}")
    problem = factory(**options)
    if name in _RECIPES and hasattr(problem, "default_method"):
        problem.default_method, opts = _RECIPES[name]
        problem.default_options = dict(opts)
        problem.method_options = {m: dict(o) for m, o in _ADVICE[name].items()}
    return problem


def _lookup(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; available: {', '.join(names())}") from None
