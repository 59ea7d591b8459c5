"""The plugin protocol: what a solver may assume about a differentiable step.

Any object with these members plugs in (structural typing: no base class to
inherit): ``dynamics.Simulator``, a user's own step, a wrapped CasADi function.
Sizes follow the package notation (``nx``, ``ndx``, ``nu``).
"""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Dynamics(Protocol):
    """A discrete-time differentiable step ``x+ = f(x, u)`` on a state manifold.

    - ``step(x, u) -> x+`` (nx,)
    - ``step_derivatives(x, u) -> (x+, Fx, Fu)`` with ``Fx`` (ndx, ndx), ``Fu`` (ndx, nu)
      in the tangent space of the state manifold
    - ``state_integrate(x, dx) -> x (+) dx`` and ``state_difference(x0, x1) -> dx``
      with ``x1 = x0 (+) dx``

    Optional, used when present (:func:`rollout_derivatives`, :func:`knot_derivatives` loop
    ``step_derivatives`` otherwise): ``rollout_derivatives(x0, us) -> (xs, Fx, Fu)`` and
    ``knot_derivatives(xs, us) -> (xs_next, Fx, Fu)``, a whole trajectory's states and Jacobians
    in one call.
    """

    nx: int
    ndx: int
    nu: int

    def step(self, x: np.ndarray, u: np.ndarray) -> np.ndarray: ...

    def step_derivatives(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def state_integrate(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray: ...

    def state_difference(self, x0: np.ndarray, x1: np.ndarray) -> np.ndarray: ...


def check_dynamics(obj) -> None:
    """Raise ``TypeError`` naming what ``obj`` lacks to be used as dynamics."""
    missing = [m for m in ("nx", "ndx", "nu", "step", "step_derivatives", "state_integrate", "state_difference")
               if not hasattr(obj, m)]
    if missing:
        raise TypeError(f"{type(obj).__name__} cannot be used as dynamics: it lacks {', '.join(missing)} "
                        "(see trajopt.Dynamics)")


def check_complementarity_aware(dyn) -> None:
    """Raise ``ValueError`` (before any solving) when ``dyn`` cannot give complementarity-aware
    Jacobians (``step_derivatives(x, u, adjoint=...)``): it asks ``dyn.check_complementarity_aware()``
    when the dynamics has one (:meth:`dynamics.Simulator.check_complementarity_aware`); other
    dynamics must at least take ``adjoint=`` (a ``step_derivatives`` without it, e.g. a design's
    :class:`trajopt.ParameterDynamics`, would fail with a TypeError after the first rollout)."""
    check = getattr(dyn, "check_complementarity_aware", None)
    if check is not None:
        check()
        return
    try:
        params = inspect.signature(dyn.step_derivatives).parameters
    except (TypeError, ValueError):  # no signature to read (a compiled callable): trusted
        return
    if "adjoint" not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        raise ValueError(f"{type(dyn).__name__}.step_derivatives takes no adjoint=: complementarity-aware Jacobians "
                         "(Nimble's, for LCP contact) need dynamics that give them, e.g. dynamics.Simulator")


def difference_jacobians(dyn, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Jacobians of ``dyn.state_difference(x0, x1)`` w.r.t. x0 and x1 (ndx x ndx each).

    Uses ``dyn.state_difference_jacobians`` when the dynamics offers it; a plain
    vector state (``nx == ndx``) gives ``(-I, I)``.
    """
    f = getattr(dyn, "state_difference_jacobians", None)
    if f is not None:
        return f(x0, x1)
    if dyn.nx != dyn.ndx:
        raise TypeError(f"{type(dyn).__name__} has a non-Euclidean state (nx={dyn.nx}, ndx={dyn.ndx}) "
                        "but no state_difference_jacobians")
    eye = np.eye(dyn.ndx)
    return -eye, eye.copy()


class RolloutError(RuntimeError):
    """A protocol-level rollout of a user's dynamics reached a non-finite state; ``xs`` holds the
    states before it (as ``dynamics.SimulationError`` does for the simulator's own rollouts)."""

    def __init__(self, message: str, xs: np.ndarray | None = None):
        super().__init__(message)
        self.xs = xs


def _controls(dyn, us) -> np.ndarray:
    us = np.asarray(us, dtype=float)
    if us.ndim == 1 and dyn.nu == 1:
        us = us[:, None]
    if us.ndim != 2 or us.shape[1] != dyn.nu:
        raise ValueError(f"controls us have shape {us.shape}, expected (T, {dyn.nu})")
    return us


def checked_step(dyn, out, where: str):
    """``out`` (what ``dyn.step_derivatives`` returned) as ``(x_next, Fx, Fu)`` after checking the
    protocol's shapes, ``(nx,)``, ``(ndx, ndx)``, ``(ndx, nu)``: a user's dynamics returning another
    shape raises ValueError naming it (numpy would broadcast some shapes silently)."""
    name = f"{type(dyn).__name__}.step_derivatives"
    if not isinstance(out, tuple | list) or len(out) != 3:
        raise ValueError(f"{name} returned {type(out).__name__}, expected (x_next, Fx, Fu) ({where})")
    expected = {"x_next": (dyn.nx,), "Fx": (dyn.ndx, dyn.ndx), "Fu": (dyn.ndx, dyn.nu)}
    arrays = []
    for (what, shape), a in zip(expected.items(), out, strict=True):
        a = np.asarray(a, dtype=float)
        if a.shape != shape:
            sizes = {"x_next": "(nx,)", "Fx": "(ndx, ndx)", "Fu": "(ndx, nu)"}[what]
            raise ValueError(f"{name} returned {what} of shape {a.shape}, expected {sizes} = {shape} ({where}; "
                             "see trajopt.Dynamics)")
        arrays.append(a)
    return tuple(arrays)


def rollout_derivatives(dyn, x0, us):
    """``(xs, Fx, Fu)``: states (T+1, nx) from ``x0`` under ``us`` (T, nu) and every step's Jacobians,
    ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu).

    ``dyn.rollout_derivatives(x0, us)`` when the dynamics has it (``dynamics.Simulator``: one call,
    one contact solve per step); otherwise a loop of ``dyn.step_derivatives``, whose own next
    states make the rollout. A non-finite state raises :class:`RolloutError` naming the step, and
    an error of ``step_derivatives`` gets a note naming it.
    """
    f = getattr(dyn, "rollout_derivatives", None)
    if f is not None:
        return f(x0, us)
    x0 = np.asarray(x0, dtype=float)
    if x0.shape != (dyn.nx,):
        raise ValueError(f"initial state x0 has shape {x0.shape}, expected ({dyn.nx},)")
    us = _controls(dyn, us)
    T = len(us)
    xs = np.empty((T + 1, dyn.nx))
    Fx = np.empty((T, dyn.ndx, dyn.ndx))
    Fu = np.empty((T, dyn.ndx, dyn.nu))
    xs[0] = x0
    for t in range(T):
        try:
            xs[t + 1], Fx[t], Fu[t] = checked_step(dyn, dyn.step_derivatives(xs[t], us[t]), f"rollout step {t}")
        except Exception as exc:
            exc.add_note(f"(rollout step {t} of {T})")
            raise
        if not np.isfinite(xs[t + 1]).all():
            raise RolloutError(f"rollout step {t}: {type(dyn).__name__}.step_derivatives returned a non-finite "
                               "state; the simulation diverged", xs=xs[: t + 1].copy())
    return xs, Fx, Fu


def knot_derivatives(dyn, xs, us):
    """``(xs_next, Fx, Fu)``: the step from every knot ``xs[t]`` under ``us[t]`` -- next states (T, nx),
    ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu) -- for knot states that need not be a rollout (multiple
    shooting) or that are one already (the Jacobians along a solver's accepted rollout).

    ``xs`` has T or T+1 rows (the last state of a trajectory starts no step). ``dyn.knot_derivatives``
    when the dynamics has it (``dynamics.Simulator``: one call, and the contact solves of a rollout it
    has just taken are reused), else a loop of ``dyn.step_derivatives``.
    """
    f = getattr(dyn, "knot_derivatives", None)
    if f is not None:
        return f(xs, us)
    us = _controls(dyn, us)
    T = len(us)
    xs = np.asarray(xs, dtype=float)
    if xs.ndim != 2 or xs.shape[1] != dyn.nx or len(xs) not in (T, T + 1):
        raise ValueError(f"knot states xs have shape {xs.shape}, expected ({T}, {dyn.nx}) or ({T + 1}, {dyn.nx})")
    xs_next = np.empty((T, dyn.nx))
    Fx = np.empty((T, dyn.ndx, dyn.ndx))
    Fu = np.empty((T, dyn.ndx, dyn.nu))
    for t in range(T):
        try:
            xs_next[t], Fx[t], Fu[t] = checked_step(dyn, dyn.step_derivatives(xs[t], us[t]), f"knot {t}")
        except Exception as exc:
            exc.add_note(f"(knot {t} of {T})")
            raise
    return xs_next, Fx, Fu
