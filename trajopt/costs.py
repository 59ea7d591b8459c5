"""Costs with first and second derivatives in the tangent space.

A cost is evaluated at a knot ``(x, u)``; at the terminal knot ``u`` is ``None``
and only the state part counts. ``derivatives`` returns :class:`CostDerivatives`
with ``Lx`` (ndx), ``Lu`` (nu), ``Lxx`` (ndx, ndx), ``Lxu`` (ndx, nu), ``Luu`` (nu, nu)
(the control parts are zero at the terminal knot).

Built in: :class:`StateCost` (weighted tracking ``0.5 r' W r`` with
``r = difference(x_ref, x)``), :class:`ControlCost` (``0.5 (u - u_ref)' R (u - u_ref)``)
and :class:`FunctionCost` (a user callable, with user derivatives or finite
differences). Costs add (``a + b``) and scale (``2.0 * a``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from .numdiff import cost_derivatives_fd
from .protocol import difference_jacobians


@dataclass
class CostDerivatives:
    """Value and derivatives of a cost at one knot (shapes in the module docstring)."""

    L: float
    Lx: np.ndarray
    Lu: np.ndarray
    Lxx: np.ndarray
    Lxu: np.ndarray
    Luu: np.ndarray

    @classmethod
    def zeros(cls, ndx: int, nu: int) -> "CostDerivatives":
        return cls(0.0, np.zeros(ndx), np.zeros(nu), np.zeros((ndx, ndx)), np.zeros((ndx, nu)), np.zeros((nu, nu)))

    def add_(self, other: "CostDerivatives", w: float = 1.0) -> "CostDerivatives":
        self.L += w * other.L
        self.Lx += w * other.Lx
        self.Lu += w * other.Lu
        self.Lxx += w * other.Lxx
        self.Lxu += w * other.Lxu
        self.Luu += w * other.Luu
        return self


def stack_derivatives(ders, ndx: int, nu: int) -> CostDerivatives:
    """Per-knot :class:`CostDerivatives` stacked into one with a leading knot axis."""
    n = len(ders)
    out = CostDerivatives(np.empty(n), np.empty((n, ndx)), np.empty((n, nu)), np.empty((n, ndx, ndx)),
                          np.empty((n, ndx, nu)), np.empty((n, nu, nu)))
    for t, d in enumerate(ders):
        out.L[t] = d.L
        out.Lx[t], out.Lu[t], out.Lxx[t], out.Lxu[t], out.Luu[t] = d.Lx, d.Lu, d.Lxx, d.Lxu, d.Luu
    return out


def _weights(w, n, what):
    W = np.asarray(w, dtype=float)
    if W.ndim == 0:
        W = np.full(n, float(W))
    if W.ndim == 1:
        if W.shape != (n,):
            raise ValueError(f"{what} weights have shape {W.shape}, expected ({n},) or ({n}, {n})")
        W = np.diag(W)
    if W.shape != (n, n):
        raise ValueError(f"{what} weights have shape {W.shape}, expected ({n},) or ({n}, {n})")
    if not np.allclose(W, W.T):
        raise ValueError(f"{what} weight matrix is not symmetric")
    return W


class Cost(abc.ABC):
    """Base class: sizes ``ndx``, ``nu``; ``value(x, u=None)`` and ``derivatives(x, u=None)``."""

    ndx: int
    nu: int

    @abc.abstractmethod
    def value(self, x, u=None) -> float:
        """The cost at ``(x, u)`` (``u`` None at the terminal knot)."""

    @abc.abstractmethod
    def derivatives(self, x, u=None) -> CostDerivatives:
        """Value and derivatives at ``(x, u)``."""

    def derivatives_along(self, xs, us) -> CostDerivatives:
        """:meth:`derivatives` at the knots ``(xs[t], us[t])`` (``xs`` (n, nx), ``us`` (n, nu)), stacked:
        a :class:`CostDerivatives` whose fields have a leading knot axis (``L`` (n,), ``Lx`` (n, ndx),
        ...). This default calls :meth:`derivatives` per knot; a cost may compute it for all knots at
        once (it must give the same numbers)."""
        return stack_derivatives([self.derivatives(x, u) for x, u in zip(xs, us, strict=True)], self.ndx, self.nu)

    def __add__(self, other: "Cost") -> "CostSum":
        return CostSum([(1.0, self), (1.0, other)])

    def __rmul__(self, w: float) -> "CostSum":
        return CostSum([(float(w), self)])


class CostSum(Cost):
    """A weighted sum of costs."""

    def __init__(self, terms):
        flat = []
        for w, c in terms:
            if isinstance(c, CostSum):
                flat += [(w * w2, c2) for w2, c2 in c.terms]
            else:
                flat.append((w, c))
        if not flat:
            raise ValueError("an empty cost sum")
        sizes = {(c.ndx, c.nu) for _, c in flat}
        if len(sizes) != 1:
            raise ValueError(f"costs of different sizes (ndx, nu) cannot be added: {sorted(sizes)}")
        self.terms = flat
        self.ndx, self.nu = sizes.pop()

    def value(self, x, u=None) -> float:
        return sum(w * c.value(x, u) for w, c in self.terms)

    def derivatives(self, x, u=None) -> CostDerivatives:
        out = CostDerivatives.zeros(self.ndx, self.nu)
        for w, c in self.terms:
            out.add_(c.derivatives(x, u), w)
        return out

    def derivatives_along(self, xs, us) -> CostDerivatives:
        n = len(xs)
        out = CostDerivatives(np.zeros(n), np.zeros((n, self.ndx)), np.zeros((n, self.nu)),
                              np.zeros((n, self.ndx, self.ndx)), np.zeros((n, self.ndx, self.nu)),
                              np.zeros((n, self.nu, self.nu)))
        for w, c in self.terms:
            out.add_(c.derivatives_along(xs, us), w)
        return out


class StateCost(Cost):
    """``0.5 r' W r`` with ``r = state_difference(x_ref, x)`` (ndx).

    ``weights``: scalar, (ndx,) diagonal or (ndx, ndx). The Hessian is the
    Gauss-Newton one, exact on Euclidean states.
    """

    def __init__(self, dynamics, x_ref, weights=1.0):
        self.dynamics = dynamics
        self.ndx, self.nu = dynamics.ndx, dynamics.nu
        self.x_ref = np.asarray(x_ref, dtype=float).copy()
        if self.x_ref.shape != (dynamics.nx,):
            raise ValueError(f"x_ref has shape {self.x_ref.shape}, expected ({dynamics.nx},)")
        self.W = _weights(weights, self.ndx, "state")

    def value(self, x, u=None) -> float:
        r = self.dynamics.state_difference(self.x_ref, x)
        return 0.5 * float(r @ self.W @ r)

    def derivatives(self, x, u=None) -> CostDerivatives:
        r = self.dynamics.state_difference(self.x_ref, x)
        _, Jr = difference_jacobians(self.dynamics, self.x_ref, np.asarray(x, dtype=float))
        WJ = self.W @ Jr
        out = CostDerivatives.zeros(self.ndx, self.nu)
        out.L = 0.5 * float(r @ self.W @ r)
        out.Lx = Jr.T @ (self.W @ r)
        out.Lxx = Jr.T @ WJ
        return out


class ControlCost(Cost):
    """``0.5 (u - u_ref)' R (u - u_ref)``; zero at the terminal knot."""

    def __init__(self, dynamics, weights=1.0, u_ref=None):
        self.ndx, self.nu = dynamics.ndx, dynamics.nu
        self.R = _weights(weights, self.nu, "control")
        self.u_ref = np.zeros(self.nu) if u_ref is None else np.asarray(u_ref, dtype=float).copy()
        if self.u_ref.shape != (self.nu,):
            raise ValueError(f"u_ref has shape {self.u_ref.shape}, expected ({self.nu},)")

    def value(self, x, u=None) -> float:
        if u is None:
            return 0.0
        e = np.asarray(u, dtype=float) - self.u_ref
        return 0.5 * float(e @ self.R @ e)

    def derivatives(self, x, u=None) -> CostDerivatives:
        out = CostDerivatives.zeros(self.ndx, self.nu)
        if u is None:
            return out
        e = np.asarray(u, dtype=float) - self.u_ref
        out.L = 0.5 * float(e @ self.R @ e)
        out.Lu = self.R @ e
        out.Luu = self.R.copy()
        return out

    def derivatives_along(self, xs, us) -> CostDerivatives:
        n = len(xs)
        E = np.asarray(us, dtype=float) - self.u_ref
        RE = np.einsum("ij,tj->ti", self.R, E)  # R e per knot
        L = 0.5 * np.einsum("ti,ti->t", np.einsum("tj,ji->ti", E, self.R), E)  # (e' R) e per knot
        return CostDerivatives(L, np.zeros((n, self.ndx)), RE,
                               np.zeros((n, self.ndx, self.ndx)), np.zeros((n, self.ndx, self.nu)),
                               np.broadcast_to(self.R, (n, self.nu, self.nu)).copy())


class FunctionCost(Cost):
    """A user cost ``fun(x, u) -> float`` (``u`` is None at the terminal knot).

    ``derivatives(x, u)``, if given, returns a :class:`CostDerivatives`; otherwise
    derivatives come from central finite differences in the tangent space
    (gradient with step 1e-6, Hessian from differences of gradients; fine for
    prototyping, slow for long horizons).
    """

    def __init__(self, dynamics, fun, derivatives=None, *, fd_step: float = 1e-6):
        self.dynamics = dynamics
        self.ndx, self.nu = dynamics.ndx, dynamics.nu
        self.fun = fun
        self._derivatives = derivatives
        self.h = fd_step

    def value(self, x, u=None) -> float:
        val = float(self.fun(x, u))
        if not np.isfinite(val):
            raise ValueError(f"cost function {getattr(self.fun, '__name__', self.fun)!r} returned {val}")
        return val

    def derivatives(self, x, u=None) -> CostDerivatives:
        if self._derivatives is not None:
            return self._derivatives(x, u)
        L, g0, H = cost_derivatives_fd(self.value, self.dynamics, x, u, h=self.h)
        out = CostDerivatives.zeros(self.ndx, self.nu)
        out.L = L
        out.Lx = g0[: self.ndx]
        out.Lxx = H[: self.ndx, : self.ndx]
        if u is not None:
            out.Lu = g0[self.ndx:]
            out.Luu = H[self.ndx:, self.ndx:]
            out.Lxu = H[: self.ndx, self.ndx:]
        return out
