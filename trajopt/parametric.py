"""Physical parameters as decision variables of an optimal-control problem (co-design, issue 14).

:class:`ParameterDynamics` wraps a simulator (anything with ``parameter_names``, ``parameter_size``,
``get_parameters``, ``with_parameters`` and ``step_derivatives(x, u, params=...)``: :class:`dynamics.Simulator`)
so that named physical parameters ``p`` (masses, COMs, inertias, placements, friction, ...) become
time-invariant unknowns that any solver of the plugin protocol optimizes together with the controls -- DDP,
single-shooting Gauss-Newton, multiple shooting with IPOPT, CEM -- without a solver of its own.

**Design knots.** The state is augmented, ``x' = (x, p, k)``: the system's state, the parameters and a
counter ``k`` of the design knots done. The horizon gets ``L = ceil(np / nu)`` knots in front; at design knot
``k < L`` the control sets the parameter slice ``p[k nu : (k+1) nu]`` and nothing moves. Control entry ``u_i``
sets ``p_j = c_j + h_j s`` with ``c``, ``h`` the centre and half-width of the parameter's bounds and ``s`` the
control scaled to its own bounds (``(u_i - uc_i) / uh_i``; ``u_i`` itself where that control is unbounded),
clipped to ``[-1, 1]``: the solvers' control bounds are the parameters' bounds. Every later knot is the
simulator's step at ``p``, which the state carries unchanged::

    F'x = [[Fx, Fp], [0, I]],    F'u = [[Fu], [0]]

with ``Fp`` the exact parameter Jacobian of :meth:`dynamics.Simulator.step_derivatives` (a placement's ``p`` is
the increment ``M exp6(p)`` from the simulator's own placement, and ``Fp``'s columns are with respect to a further
increment of the simulator at ``p``: they are mapped by ``exp6``'s right Jacobian, ``Jexp6(p)``). So ``p`` is
constant along the trajectory by construction, and its gradient is the sum over the knots of the adjoint
times ``Fp``, which the solvers' backward passes compute. :meth:`ParameterDynamics.ocp` lifts an OCP on the
system (costs on ``x``, ``u``) to the augmented one: no cost at the design knots unless given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pinocchio as pin

from .costs import Cost, CostDerivatives
from .ocp import OCP


class ParameterDynamics:
    """``sim`` with the parameters ``names`` as decision variables within ``[lower, upper]`` (module docstring).

    ``lower``/``upper`` (np,) bound the flat parameter vector (``sim.parameter_size(names)`` entries, in the
    order of ``names``), finite, ``lower < upper``, and within what the simulator accepts for a mass (> 0 here:
    at 0 a joint may have nothing to move), a friction (>= 0) and a restitution ((0, 1]: a simulator with e = 0
    everywhere has no restitution parameter), since a design knot may set any value between them (inertia boxes
    are not checked: the simulator refuses an inertia that breaks the triangle inequality when a knot reaches
    one); a placement's value is an increment (0 at ``sim``'s own).
    Plugin protocol of :mod:`trajopt`; ``nx = sim.nx + np + 1``, ``ndx = sim.ndx + np + 1``, ``nu = sim.nu``.
    """

    def __init__(self, sim, names, lower, upper, *, cache: int = 64):
        if isinstance(names, np.ndarray) and names.ndim == 0 and names.dtype.kind == "U":  # np.array("friction")
            names = str(names)
        if isinstance(names, str):
            names = [names]
        elif isinstance(names, (set, frozenset, Mapping, bytes, bytearray)) or not isinstance(names, Iterable):
            # a set's order would pair the bounds with the parameters by hash; a dict's values would be dropped
            raise TypeError(f"parameter names must be a name or a sequence of names (sim.parameter_names()), in the "
                            f"order of the bounds, got {type(names).__name__} {names!r:.80}")
        self.names = list(names)
        if not self.names:
            raise ValueError("ParameterDynamics needs at least one parameter name (see sim.parameter_names())")
        self.np = int(sim.parameter_size(self.names))  # raises naming an unknown or repeated parameter
        lower, upper = (_bounds(what, b, self.np, self.names) for what, b in (("lower", lower), ("upper", upper)))
        for what, b in (("lower", lower), ("upper", upper)):
            if b.shape != (self.np,):
                raise ValueError(f"{what} bounds have shape {b.shape}, expected ({self.np},): one per entry of "
                                 f"{self.names}")
            if not np.isfinite(b).all():
                raise ValueError(f"{what} bounds must be finite (a design knot maps the control box onto them)")
        if not (lower < upper).all():
            bad = np.flatnonzero(~(lower < upper))
            raise ValueError(f"parameter bounds need lower < upper; entries {bad.tolist()} have "
                             f"{lower[bad].tolist()} >= {upper[bad].tolist()}")
        _check_physical_bounds(sim, self.names, lower, upper)
        if sim.nu < 1:
            raise ValueError("ParameterDynamics needs a system with controls (nu >= 1): design knots set the "
                             "parameters through the controls; without controls fit parameters by least "
                             "squares (trajopt.LeastSquares, as problems.sysid does)")
        self.sim, self.lower, self.upper = sim, lower, upper
        self.center, self.half = 0.5 * (lower + upper), 0.5 * (upper - lower)
        self.nsx, self.nsdx, self.nu = sim.nx, sim.ndx, sim.nu
        self.design_knots = math.ceil(self.np / self.nu)
        self.nx = self.nsx + self.np + 1
        self.ndx = self.nsdx + self.np + 1
        ul = getattr(sim, "u_lower", None)
        uu = getattr(sim, "u_upper", None)
        self.u_lower = np.full(self.nu, -np.inf) if ul is None else np.broadcast_to(ul, (self.nu,)).astype(float)
        self.u_upper = np.full(self.nu, np.inf) if uu is None else np.broadcast_to(uu, (self.nu,)).astype(float)
        bounded = np.isfinite(self.u_lower) & np.isfinite(self.u_upper)
        self._uc, self._uh = np.zeros(self.nu), np.ones(self.nu)  # (np.where would evaluate inf - inf: a warning)
        self._uc[bounded] = 0.5 * (self.u_lower[bounded] + self.u_upper[bounded])
        self._uh[bounded] = 0.5 * (self.u_upper[bounded] - self.u_lower[bounded])
        self._cache: dict = {}
        self._cache_size = int(cache)
        self.nominal = np.asarray(sim.get_parameters(self.names), dtype=float).copy()
        self._placements, off = [], 0  # the placement blocks' offsets: their chart needs exp6's Jacobian
        for n in self.names:
            if n.startswith("placement:"):
                self._placements.append(off)
            off += int(sim.parameter_size(n))

    # -- the parameters --------------------------------------------------------------------------------
    def _slice(self, k: int) -> slice:
        return slice(k * self.nu, min((k + 1) * self.nu, self.np))

    def simulator(self, p):
        """The system at parameters ``p`` (np,), cached (a rollout uses one ``p`` throughout)."""
        p = np.asarray(p, dtype=float)
        key = tuple(p.tolist())
        sim = self._cache.get(key)
        if sim is None:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            sim = self._cache[key] = self.sim.with_parameters(self.names, p)
        return sim

    def _scaled(self, u, k):
        sl = self._slice(k)
        n = sl.stop - sl.start
        s = (np.asarray(u, dtype=float)[:n] - self._uc[:n]) / self._uh[:n]
        return sl, np.clip(s, -1.0, 1.0), (np.abs(s) < 1.0) / self._uh[:n]

    def control_of(self, p) -> np.ndarray:
        """The design knots' controls (L, nu) that set ``p`` (inverse of the map in the module docstring)."""
        p = np.asarray(p, dtype=float)
        if p.shape != (self.np,) or not np.isfinite(p).all():
            raise ValueError(f"parameters must be {self.np} finite numbers ({self.names}), got shape {p.shape}")
        if ((p < self.lower) | (p > self.upper)).any():
            raise ValueError(f"parameters {p.tolist()} leave the bounds [{self.lower.tolist()}, {self.upper.tolist()}]")
        us = np.tile(self._uc, (self.design_knots, 1))
        for k in range(self.design_knots):
            sl = self._slice(k)
            n = sl.stop - sl.start
            us[k, :n] = self._uc[:n] + self._uh[:n] * (p[sl] - self.center[sl]) / self.half[sl]
        return us

    def parameters_of(self, x) -> np.ndarray:
        """The parameters an augmented state carries."""
        return np.asarray(x, dtype=float)[self.nsx:self.nsx + self.np].copy()

    def augment(self, x, p=None) -> np.ndarray:
        """The augmented start state: ``x`` before the design knots (``p`` only a placeholder there, the nominal
        values by default; the design knots overwrite it)."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.nsx,):
            raise ValueError(f"state x has shape {x.shape}, expected ({self.nsx},)")
        p = self.nominal if p is None else np.asarray(p, dtype=float)
        if p.shape != (self.np,):
            raise ValueError(f"parameters p have shape {p.shape}, expected ({self.np},) for {self.names}")
        return np.concatenate((x, p, [0.0]))

    # -- plugin protocol -------------------------------------------------------------------------------
    def _split(self, x):
        x = np.asarray(x, dtype=float)
        if x.shape != (self.nx,):
            raise ValueError(f"augmented state has shape {x.shape}, expected ({self.nx},) = (sim.nx {self.nsx} + "
                             f"{self.np} parameters + 1 knot counter)")
        tail = x[self.nsx:]
        if not np.isfinite(tail).all():  # (the system's part: the simulator's own check names it)
            bad = (np.flatnonzero(~np.isfinite(tail)) + self.nsx).tolist()
            raise ValueError(f"augmented state: non-finite parameters or knot counter at indices {bad} "
                             f"(parameters {self.names} at {self.nsx}..{self.nsx + self.np - 1}, counter at "
                             f"{self.nx - 1})")
        return x[:self.nsx], x[self.nsx:self.nsx + self.np], int(round(x[-1]))

    def _design_knot(self, x, u, k):
        xs, p, _ = self._split(x)
        u = np.asarray(u, dtype=float)
        if u.shape != (self.nu,) or not np.isfinite(u).all():
            raise ValueError(f"design knot {k}: control u must be {self.nu} finite numbers (it sets parameters of "
                             f"{self.names}), got {u.tolist()}")
        sl, s, ds = self._scaled(u, k)
        p = p.copy()
        p[sl] = self.center[sl] + self.half[sl] * s
        x_next = np.concatenate((xs, p, [k + 1.0]))
        Fx = np.eye(self.ndx)
        n0 = self.nsdx
        idx = np.arange(sl.start, sl.stop) + n0
        Fx[idx, idx] = 0.0
        Fx[-1, -1] = 0.0
        Fu = np.zeros((self.ndx, self.nu))
        Fu[idx, np.arange(sl.stop - sl.start)] = self.half[sl] * ds
        return x_next, Fx, Fu

    def step(self, x, u):
        xs, p, k = self._split(x)
        if k < self.design_knots:
            return self._design_knot(x, u, k)[0]
        return np.concatenate((self.simulator(p).step(xs, u), p, [float(k)]))

    def step_derivatives(self, x, u):
        xs, p, k = self._split(x)
        if k < self.design_knots:
            return self._design_knot(x, u, k)
        xn, Fx_s, Fu_s, Fp = self.simulator(p).step_derivatives(xs, u, params=self.names)
        for o in self._placements:  # Fp is w.r.t. an increment delta of M exp6(p): M exp6(p + dp) = .. exp6(Jexp6(p) dp)
            Fp[:, o:o + 6] = Fp[:, o:o + 6] @ pin.Jexp6(p[o:o + 6])
        n = self.nsdx
        Fx = np.zeros((self.ndx, self.ndx))
        Fx[:n, :n] = Fx_s
        Fx[:n, n:n + self.np] = Fp
        Fx[n:n + self.np, n:n + self.np] = np.eye(self.np)
        Fu = np.zeros((self.ndx, self.nu))
        Fu[:n] = Fu_s
        return np.concatenate((xn, p, [float(k)])), Fx, Fu

    def state_integrate(self, x, dx):
        x, dx = np.asarray(x, dtype=float), np.asarray(dx, dtype=float)
        xs = self.sim.state_integrate(x[:self.nsx], dx[:self.nsdx])
        return np.concatenate((xs, x[self.nsx:] + dx[self.nsdx:]))

    def state_difference(self, x0, x1):
        x0, x1 = np.asarray(x0, dtype=float), np.asarray(x1, dtype=float)
        d = self.sim.state_difference(x0[:self.nsx], x1[:self.nsx])
        return np.concatenate((d, x1[self.nsx:] - x0[self.nsx:]))

    def state_difference_jacobians(self, x0, x1):
        n = self.nsdx
        J0, J1 = -np.eye(self.ndx), np.eye(self.ndx)
        f = getattr(self.sim, "state_difference_jacobians", None)
        if f is not None:
            J0[:n, :n], J1[:n, :n] = f(np.asarray(x0)[:self.nsx], np.asarray(x1)[:self.nsx])
        return J0, J1

    def rollout(self, x0, us):
        """States (T+1, nx') from ``x0`` under ``us`` (T, nu): the design knots, then one rollout of the
        system at the parameters they set."""
        us = np.asarray(us, dtype=float)
        xs = np.empty((len(us) + 1, self.nx))
        xs[0] = x0
        t = 0
        while t < len(us) and self._split(xs[t])[2] < self.design_knots:
            xs[t + 1] = self.step(xs[t], us[t])
            t += 1
        xsim, p, k = self._split(xs[t])
        xs[t:, :self.nsx] = self.simulator(p).rollout(xsim, us[t:])
        xs[t:, self.nsx:] = xs[t, self.nsx:]
        return xs

    # (knot_derivatives and rollout_derivatives: trajopt.protocol's loops of step_derivatives)

    # -- problems --------------------------------------------------------------------------------------
    def lift(self, cost: Cost) -> Cost:
        """A cost on the system's ``(x, u)`` read on the augmented knot (zero rows and columns for ``p`` and the
        knot counter)."""
        return _LiftedCost(self, cost)

    def ocp(self, x0, horizon: int, running_cost, terminal_cost, *, p_init=None, us_init=None, name="co-design",
            **kwargs) -> OCP:
        """The OCP ``minimize sum l(x_t, u_t) + l_T(x_T)`` over the controls and the parameters: ``horizon``
        steps of the system after the design knots; ``running_cost`` one cost or ``horizon`` costs on the
        system; ``p_init`` the parameters to start from (default: the simulator's own), ``us_init`` (horizon,
        nu) the torques. Other keywords go to :class:`trajopt.OCP`."""
        L = self.design_knots
        running = [running_cost] * horizon if isinstance(running_cost, Cost) else list(running_cost)
        if len(running) != horizon:
            raise ValueError(f"{len(running)} running costs for a horizon of {horizon}")
        zero = _ZeroCost(self.ndx, self.nu)
        costs = [zero] * L + [self.lift(c) for c in running]
        p0 = self.nominal if p_init is None else np.asarray(p_init, dtype=float)
        guess = np.zeros((L + horizon, self.nu))
        guess[:L] = self.control_of(p0)
        if us_init is not None:
            u = np.asarray(us_init, dtype=float)
            if u.shape != (horizon, self.nu):
                raise ValueError(f"us_init has shape {u.shape}, expected (horizon {horizon}, nu {self.nu})")
            guess[L:] = u
        else:
            guess[L:] = np.clip(0.0, self.u_lower, self.u_upper)
        return OCP(dynamics=self, x0=self.augment(x0, p0), horizon=L + horizon, running_cost=costs,
                   terminal_cost=self.lift(terminal_cost), us_init=guess, name=name, **kwargs)


#: the scalar parameter kinds and the values the simulator accepts (``Simulator.with_parameters``): (lowest,
#: whether the lowest itself is valid, highest). A box of bounds holds only valid values iff its ends do. Friction's
#: range is the simulator's own, [0, sim.MAX_FRICTION] (_check_physical_bounds).
_SCALAR_RANGES = {"mass": (0.0, False, np.inf, "> 0 kg here (the simulator takes 0 for a massless link, but a "
                                                "design at 0 may leave a joint with nothing to move)"),
                  "restitution": (0.0, False, 1.0, "in (0, 1] here (the simulator takes 0, but a simulator inelastic "
                                                   "everywhere has no restitution parameter, and at e = 0 a pair has "
                                                   "no impact rows to differentiate: use a small positive bound)")}


def _bounds(what, value, n, names) -> np.ndarray:
    """``value`` (one number, or ``n``) as ``n`` floats; ValueError naming the bounds when it is no number (text,
    None, complex, a bool), before the shape and finiteness checks."""
    try:
        b = np.asarray(value)
        if b.dtype.kind not in "iuf":
            raise TypeError(f"elements of type {b.dtype}")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} bounds must be numbers (one, or one per entry of {names}), got {value!r:.80} "
                         f"({exc})") from None
    return np.full(n, float(b)) if b.ndim == 0 else b.astype(float)


def _check_physical_bounds(sim, names, lower, upper):
    """ValueError naming the parameter when the bounds of a mass, friction or restitution admit a value the
    simulator rejects (mass < 0, friction < 0, restitution outside [0, 1]) or at which the parameter vanishes or may
    leave the model singular (restitution 0, mass 0): a design knot may set any value within the bounds, and the
    step there would fail mid-solve. A centre of mass or a placement is tried at its box's corner farthest from
    its own value of 0 (each entry at the bound of larger magnitude): the simulator refuses one beyond the distance
    it simulates (10 km), which a box of +-1e5 admitted, failing mid-solve with a ModelError."""
    off = 0
    for n in names:
        kind = n.split(":", 1)[0]
        size = int(sim.parameter_size(n))
        rng = _SCALAR_RANGES.get(kind)
        if kind == "friction":  # the simulator's own range (trajopt imports nothing of dynamics: tests/test_layers)
            top = float(getattr(sim, "MAX_FRICTION", np.inf))
            rng = (0.0, True, top, f"in [0, {top:g}]")
        if rng is not None:
            lo, closed, hi, want = rng
            if not (lower[off] >= lo if closed else lower[off] > lo) or upper[off] > hi:
                raise ValueError(f"bounds [{lower[off]:g}, {upper[off]:g}] of parameter {n!r} admit invalid values: "
                                 f"a {kind} must be {want}")
        elif kind in ("com", "placement"):
            lo, hi = lower[off:off + size], upper[off:off + size]
            far = np.where(np.abs(lo) > np.abs(hi), lo, hi)
            try:
                sim.with_parameters([n], far)
            except ValueError as exc:  # ModelError is a ValueError
                raise ValueError(f"bounds of parameter {n!r} admit invalid values: at their corner {far.tolist()} "
                                 f"the simulator refuses the model ({exc})") from None
        off += size


class _ZeroCost(Cost):
    def __init__(self, ndx, nu):
        self.ndx, self.nu = ndx, nu

    def value(self, x, u=None) -> float:
        return 0.0

    def derivatives(self, x, u=None) -> CostDerivatives:
        return CostDerivatives.zeros(self.ndx, self.nu)


class _LiftedCost(Cost):
    """A cost on the system's knot read on the augmented state (zero rows/columns for ``p`` and ``k``)."""

    def __init__(self, dyn: ParameterDynamics, cost: Cost):
        if (cost.ndx, cost.nu) != (dyn.nsdx, dyn.nu):
            raise ValueError(f"a cost has sizes (ndx={cost.ndx}, nu={cost.nu}) but the system has "
                             f"(ndx={dyn.nsdx}, nu={dyn.nu})")
        self.dyn, self.cost = dyn, cost
        self.ndx, self.nu = dyn.ndx, dyn.nu

    def value(self, x, u=None) -> float:
        return self.cost.value(np.asarray(x)[:self.dyn.nsx], u)

    def derivatives(self, x, u=None) -> CostDerivatives:
        d = self.cost.derivatives(np.asarray(x)[:self.dyn.nsx], u)
        n = self.dyn.nsdx
        out = CostDerivatives.zeros(self.ndx, self.nu)
        out.L = d.L
        out.Lx[:n], out.Lu[:] = d.Lx, d.Lu
        out.Lxx[:n, :n], out.Lxu[:n], out.Luu[:] = d.Lxx, d.Lxu, d.Luu
        return out
