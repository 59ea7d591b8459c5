"""The optimal-control problem: dynamics, start state, horizon, costs, control bounds.

    minimize   sum_{t<T} l_t(x_t, u_t) + l_T(x_T)
    subject to x_{t+1} = f(x_t, u_t),  x_0 = x0,  u_lower <= u_t <= u_upper

``xs`` is (T+1, nx), ``us`` is (T, nu), T = ``horizon``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .costs import Cost, stack_derivatives
from .memory import check_memory
from .protocol import check_dynamics


def check_solver_memory(dyn, horizon: int, name: str) -> None:
    """ValueError before any allocation when a solver's arrays for ``dyn`` over ``horizon`` knots would not fit
    (:func:`trajopt.memory.check_memory`): what a solver keeps per knot, the step's Jacobians, the gains, the costs'
    second derivatives and their copies (about six ndx x (ndx + nu) blocks), and ~1 kB of objects (measured
    2026-11-28: DDP on the pendulum 1.2 kB per knot). Every :class:`OCP` checks it; a factory that makes per-knot
    arrays of its own calls it first. Multiple shooting's CasADi graph (37 kB per knot) is checked by the solvers
    that build it (solvers.shooting.check_graph_memory): a fixed 40 kB here refused DDP problems 20 times smaller
    than it said (pendulum, 100000 knots, on 7 GiB)."""
    check_memory(f"{name}'s solver arrays over a horizon of {horizon} knots",
                 horizon * (8 * (6 * dyn.ndx * (dyn.ndx + dyn.nu) + 4 * (dyn.nx + dyn.nu)) + 1_000),
                 "a shorter horizon")


@dataclass
class OCP:
    """An optimal-control problem over a differentiable step (see the module docstring).

    ``running_cost`` is one cost for every knot or a sequence of ``horizon`` costs.
    ``u_lower``/``u_upper`` default to the dynamics' own ``u_lower``/``u_upper``
    when it has them (torque limits), else unbounded. ``us_init`` is the initial
    guess for solvers (default: zeros clipped into the bounds), (T, nu) or one control (nu,) for every knot
    (made after the size check: a factory need not tile a horizon of controls before it). ``metrics`` maps
    ``(xs, us)`` to the problem's own figures (e.g. ``distance_to_target``).
    ``default_method`` and ``default_options`` (e.g. ``{"smoothing": "auto", "time_limit": 60}``)
    are what ``solvers.solve(ocp)`` uses when no method is named: the problem's own recipe.
    ``method_options`` maps a method name to the problem's advice for it (e.g. the catapult's
    ``{"shooting": {"search": "cem", "shot_length": None}}``), used when that method is named.
    """

    dynamics: object
    x0: np.ndarray
    horizon: int
    running_cost: Cost | Sequence[Cost]
    terminal_cost: Cost
    u_lower: np.ndarray | None = None
    u_upper: np.ndarray | None = None
    name: str = "ocp"
    us_init: np.ndarray | None = None
    metrics: Callable[[np.ndarray, np.ndarray], dict] | None = None
    info: dict = field(default_factory=dict)
    default_method: str = "ddp"
    default_options: dict = field(default_factory=dict)
    method_options: dict = field(default_factory=dict)

    def __post_init__(self):
        check_dynamics(self.dynamics)
        dyn = self.dynamics
        if not (isinstance(self.horizon, (int, np.integer)) and self.horizon > 0):
            raise ValueError(f"horizon must be a positive integer, got {self.horizon!r}")
        self.horizon = int(self.horizon)
        check_solver_memory(dyn, self.horizon, self.name)  # before the costs' list is made
        x0 = np.asarray(self.x0, dtype=float)
        if x0.shape != (dyn.nx,):
            raise ValueError(f"x0 has shape {x0.shape}, expected ({dyn.nx},)")
        if not np.all(np.isfinite(x0)):
            raise ValueError("x0 contains non-finite values")
        self.x0 = x0.copy()
        if isinstance(self.running_cost, Cost):
            self._running = [self.running_cost] * self.horizon
        else:
            self._running = list(self.running_cost)
            if len(self._running) != self.horizon:
                raise ValueError(f"{len(self._running)} running costs for a horizon of {self.horizon}")
        for c in self._running + [self.terminal_cost]:
            if not isinstance(c, Cost):
                raise TypeError(f"costs must be trajopt.Cost instances, got {type(c).__name__}")
            if (c.ndx, c.nu) != (dyn.ndx, dyn.nu):
                raise ValueError(f"a cost has sizes (ndx={c.ndx}, nu={c.nu}) but the dynamics has "
                                 f"(ndx={dyn.ndx}, nu={dyn.nu})")
        nu = dyn.nu
        lo = getattr(dyn, "u_lower", None) if self.u_lower is None else self.u_lower
        hi = getattr(dyn, "u_upper", None) if self.u_upper is None else self.u_upper
        self.u_lower = np.full(nu, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float), (nu,)).copy()
        self.u_upper = np.full(nu, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), (nu,)).copy()
        if np.any(self.u_lower > self.u_upper):
            raise ValueError(f"control bounds cross: lower {self.u_lower} > upper {self.u_upper}")
        if not isinstance(self.default_method, str):
            raise TypeError(f"default_method must be a method name, got {self.default_method!r}")
        self.default_options = dict(self.default_options)
        if not all(isinstance(m, str) and isinstance(o, dict) for m, o in dict(self.method_options).items()):
            raise TypeError(f"method_options must map method names to option dicts, got {self.method_options!r}")
        self.method_options = {m: dict(o) for m, o in dict(self.method_options).items()}
        if self.us_init is None:
            self.us_init = np.clip(np.zeros((self.horizon, nu)), self.u_lower, self.u_upper)
        else:
            us = self.us_init
            if np.ndim(us) == 1 and np.size(us) == nu and not (nu == 1 and self.horizon == 1):  # one for every knot
                us = np.tile(np.asarray(us, dtype=float), (self.horizon, 1))
            self.us_init = self.check_controls(us)

    # -- sizes and helpers ---------------------------------------------------------------
    @property
    def nx(self) -> int:
        return self.dynamics.nx

    @property
    def ndx(self) -> int:
        return self.dynamics.ndx

    @property
    def nu(self) -> int:
        return self.dynamics.nu

    def running(self, t: int) -> Cost:
        """The running cost of knot ``t``."""
        return self._running[t]

    def running_derivatives(self, xs, us):
        """The running costs' derivatives at the knots ``t < T`` of ``xs`` (T+1, nx), ``us`` (T, nu), stacked
        (:meth:`trajopt.costs.Cost.derivatives_along`: ``Lx`` (T, ndx), ..., ``Luu`` (T, nu, nu)); knots
        that share one cost object are computed in one call."""
        T = self.horizon
        if all(c is self._running[0] for c in self._running):
            return self._running[0].derivatives_along(xs[:T], us)
        return stack_derivatives([self._running[t].derivatives(xs[t], us[t]) for t in range(T)], self.ndx, self.nu)

    def check_controls(self, us) -> np.ndarray:
        """``us`` as a (T, nu) float array, or a ValueError naming what is wrong."""
        us = np.asarray(us, dtype=float)
        if us.ndim == 1 and self.nu == 1 and len(us) == self.horizon:
            us = us[:, None]
        if us.shape != (self.horizon, self.nu):
            raise ValueError(f"controls have shape {us.shape}, expected (horizon {self.horizon}, nu {self.nu})")
        if not np.all(np.isfinite(us)):
            raise ValueError("controls contain non-finite values")
        return us.copy()

    def rollout(self, us) -> np.ndarray:
        """States (T+1, nx) from ``x0`` under ``us`` (T, nu)."""
        us = self.check_controls(us)
        rollout = getattr(self.dynamics, "rollout", None)
        if rollout is not None:
            return rollout(self.x0, us)
        xs = np.empty((self.horizon + 1, self.nx))
        xs[0] = self.x0
        for t in range(self.horizon):
            xs[t + 1] = self.dynamics.step(xs[t], us[t])
        return xs

    def cost(self, xs, us) -> float:
        """Total cost of a trajectory (xs (T+1, nx), us (T, nu))."""
        xs = np.asarray(xs, dtype=float)
        us = self.check_controls(us)
        if xs.shape != (self.horizon + 1, self.nx):
            raise ValueError(f"states have shape {xs.shape}, expected ({self.horizon + 1}, {self.nx})")
        total = sum(self._running[t].value(xs[t], us[t]) for t in range(self.horizon))
        return float(total + self.terminal_cost.value(xs[-1]))

    def evaluate(self, xs, us) -> dict:
        """The problem's own figures for a trajectory (``metrics``), plus its cost."""
        out = {"cost": self.cost(xs, us)}
        if self.metrics is not None:
            out.update({k: float(v) for k, v in self.metrics(np.asarray(xs), np.asarray(us)).items()})
        return out
