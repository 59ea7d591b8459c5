"""The differentiable step (and costs) as CasADi functions with exact Jacobians.

``casadi_step(dyn)`` returns a :class:`casadi.Function` ``x_next = step(x, u)``
usable on ``MX`` symbols inside any ``casadi.Opti`` or ``nlpsol`` problem. CasADi
calls back into Python for the value, and for its Jacobian it calls a second
callback that returns the simulator's analytical ``Fx`` and ``Fu`` (no finite
differences, no CasADi AD through the simulator)::

    import casadi as ca
    from trajopt import casadi_step
    f = casadi_step(sim)
    opti = ca.Opti()
    X = opti.variable(sim.nx, T + 1)
    U = opti.variable(sim.nu, T)
    for t in range(T):
        opti.subject_to(X[:, t + 1] == f(X[:, t], U[:, t]))

A trial point where the simulation diverges evaluates to NaN (IPOPT then cuts
its step back) instead of raising through CasADi.

``casadi_step`` needs a Euclidean state (``nx == ndx``: every joint revolute or
prismatic), because CasADi differentiates in coordinates, not on the Lie group.
For free-flyers and spherical joints, ``casadi_step_local(dyn)`` is the step in
local charts: ``d' = step_local(d, u, xb, xb')`` with ``x = xb (+) d`` and
``x+ = xb' (+) d'`` for given reference states ``xb, xb'`` (constants, e.g. an
initial rollout), tangent increments in and out, so CasADi only ever sees
Euclidean variables; ``casadi_cost_local`` does the same for costs. The
returned functions keep their callbacks alive; keep them alive while CasADi
uses them.

Second derivatives: the step's Jacobian declares its own derivative zero and
the costs give their exact Hessians, so an exact-Hessian solver (IPOPT with
``hessian_approximation = exact``) gets the Gauss-Newton Hessian of the
Lagrangian (the costs' curvature, not the dynamics').
"""

from __future__ import annotations

import casadi as ca
import numpy as np


def _euclidean(dyn, what):
    if dyn.nx != dyn.ndx:
        raise ValueError(
            f"{what} needs a Euclidean state (nx == ndx); {getattr(dyn, 'name', type(dyn).__name__)} has "
            f"nx={dyn.nx}, ndx={dyn.ndx} (a free-flyer or spherical joint): CasADi would differentiate the "
            "quaternion coordinates, not the tangent space. Use casadi_step_local (tangent increments around "
            "reference states), which method='shooting' does for such systems."
        )


def _vec(a) -> np.ndarray:
    return np.asarray(a, dtype=float).ravel()


class _Blocks(ca.Callback):
    """A callback with given input/output sparsities whose outputs come from ``fn(arg)``.

    With ``jacobian`` (a ``blocks`` function for :func:`_second_level`), CasADi may differentiate
    it: the Jacobian callbacks of the step (``_ZERO``: the dynamics' curvature left out) and of
    the costs (their exact Hessian blocks) are such callbacks.
    """

    def __init__(self, name, sp_in, sp_out, fn, opts=None, jacobian=None):
        ca.Callback.__init__(self)
        self.sp_in, self.sp_out, self.fn, self.jacobian_blocks = sp_in, sp_out, fn, jacobian
        self.construct(name, opts or {})

    def has_jacobian(self):
        return self.jacobian_blocks is not None

    def get_jacobian(self, name, inames, onames, opts):
        self._jac = _second_level(name, self, opts, self.jacobian_blocks)
        return self._jac

    def get_n_in(self):
        return len(self.sp_in)

    def get_n_out(self):
        return len(self.sp_out)

    def get_sparsity_in(self, i):
        return self.sp_in[i]

    def get_sparsity_out(self, i):
        return self.sp_out[i]

    def eval(self, arg):
        return self.fn(arg)


def _second_level(name, cb, opts, blocks):
    """The Jacobian of a Jacobian callback ``cb``: one output block per (output, input) pair of
    ``cb``; ``blocks(arg) -> {(o, i): DM}`` fills the dense ones, the rest are structural zeros."""
    n_in, n_out = cb.get_n_in(), cb.get_n_out()
    sp_in = [cb.get_sparsity_in(i) for i in range(n_in)] + [
        ca.Sparsity(cb.get_sparsity_out(o).size1(), cb.get_sparsity_out(o).size2()) for o in range(n_out)]
    dense = blocks(None)
    sp_out = []
    for o in range(n_out):
        no = cb.get_sparsity_out(o).numel()
        for i in range(n_in):
            ni = cb.get_sparsity_in(i).numel()
            sp_out.append(ca.Sparsity.dense(no, ni) if (o, i) in dense else ca.Sparsity(no, ni))

    def fn(arg):
        vals = blocks(arg)
        out = []
        for o in range(n_out):
            for i in range(n_in):
                out.append(vals[(o, i)] if (o, i) in vals else ca.DM(sp_out[len(out)]))
        return out

    return _Blocks(name, sp_in, sp_out, fn, opts)


def _ZERO(arg):
    """No dense blocks: a Jacobian callback whose own derivative is zero."""
    return {}


def _step_jacobian(name, dyn, opts):
    """``(Fx, Fu)`` of the step. Its own derivative (the dynamics' curvature) is declared zero: the
    Gauss-Newton Hessian keeps only the costs' curvature.

    CasADi calls it knot by knot, at the point where it has just evaluated the step itself, so the
    simulator's kept contact solve of that step serves the Jacobian (``Simulator.KEPT_SOLVES``; no
    second detection or solve). One call for all knots (``knot_derivatives``) would need one callback
    over the whole transcription instead of one per knot: not done."""
    nx, nu = dyn.nx, dyn.nu

    def fn(arg):
        try:
            _, Fx, Fu = dyn.step_derivatives(_vec(arg[0]), _vec(arg[1]))
        except (RuntimeError, ValueError):
            return [ca.DM.nan(nx, nx), ca.DM.nan(nx, nu)]
        return [ca.DM(Fx), ca.DM(Fu)]

    sp_in = [ca.Sparsity.dense(nx, 1), ca.Sparsity.dense(nu, 1), ca.Sparsity(nx, 1)]
    sp_out = [ca.Sparsity.dense(nx, nx), ca.Sparsity.dense(nx, nu)]
    return _Blocks(name, sp_in, sp_out, fn, opts, jacobian=_ZERO)


class _Step(ca.Callback):
    def __init__(self, name, dyn):
        ca.Callback.__init__(self)
        self.dyn = dyn
        self.construct(name, {})

    def get_n_in(self):
        return 2

    def get_n_out(self):
        return 1

    def get_name_in(self, i):
        return ["x", "u"][i]

    def get_name_out(self, i):
        return "x_next"

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.dyn.nx if i == 0 else self.dyn.nu, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(self.dyn.nx, 1)

    def eval(self, arg):
        try:
            return [ca.DM(self.dyn.step(_vec(arg[0]), _vec(arg[1])))]
        except (RuntimeError, ValueError):
            # A trial point where the simulation diverges: NaN tells IPOPT to cut its step back.
            return [ca.DM.nan(self.dyn.nx, 1)]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        self._jac = _step_jacobian(name, self.dyn, opts)
        return self._jac


def casadi_step(dyn, name: str = "step") -> ca.Callback:
    """``x_next = f(x, u)`` as a CasADi function with the simulator's exact Jacobian (see the module)."""
    _euclidean(dyn, "casadi_step")
    return _Step(name, dyn)


def _cost_gradient(name, cost, nx, nu, opts):
    """``(Lx', Lu')`` (``Lx'`` when terminal, ``nu = 0``); its Jacobian: the exact Hessian blocks."""

    def derivatives(arg):
        return cost.derivatives(_vec(arg[0]), _vec(arg[1])) if nu else cost.derivatives(_vec(arg[0]))

    def fn(arg):
        d = derivatives(arg)
        return [ca.DM(d.Lx).T, ca.DM(d.Lu).T] if nu else [ca.DM(d.Lx).T]

    def hessian(arg):
        if arg is None:  # which blocks are dense
            return {(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 1} if nu else {(0, 0): 1}
        d = derivatives(arg)
        if nu:
            return {(0, 0): ca.DM(d.Lxx), (0, 1): ca.DM(d.Lxu), (1, 0): ca.DM(d.Lxu.T), (1, 1): ca.DM(d.Luu)}
        return {(0, 0): ca.DM(d.Lxx)}

    sizes = [nx, nu] if nu else [nx]
    sp_in = [ca.Sparsity.dense(k, 1) for k in sizes] + [ca.Sparsity(1, 1)]
    sp_out = [ca.Sparsity.dense(1, k) for k in sizes]
    return _Blocks(name, sp_in, sp_out, fn, opts, jacobian=hessian)


class _Cost(ca.Callback):
    def __init__(self, name, cost, nx, nu):
        ca.Callback.__init__(self)
        self.cost, self.nx, self.nu = cost, nx, nu
        self.construct(name, {})

    def get_n_in(self):
        return 2 if self.nu else 1

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.nx if i == 0 else self.nu, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(1, 1)

    def eval(self, arg):
        if self.nu:
            return [ca.DM(self.cost.value(_vec(arg[0]), _vec(arg[1])))]
        return [ca.DM(self.cost.value(_vec(arg[0])))]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        self._jac = _cost_gradient(name, self.cost, self.nx, self.nu, opts)
        return self._jac


def casadi_cost(cost, *, nx: int, nu: int, terminal: bool = False, name: str = "cost") -> ca.Callback:
    """A ``trajopt.Cost`` as a CasADi function ``l(x, u)`` (or ``l(x)`` when ``terminal``) with
    its exact gradient (Hessians are left to the solver, e.g. IPOPT's L-BFGS)."""
    return _Cost(name, cost, nx, 0 if terminal else nu)


# -- local charts: tangent increments around constant reference states (free-flyers) -----------------


class _LocalStep(ca.Callback):
    def __init__(self, name, dyn):
        ca.Callback.__init__(self)
        self.dyn = dyn
        self.construct(name, {})

    def get_n_in(self):
        return 4

    def get_n_out(self):
        return 1

    def get_name_in(self, i):
        return ["d", "u", "xb", "xb_next"][i]

    def get_name_out(self, i):
        return "d_next"

    def get_sparsity_in(self, i):
        d = self.dyn
        return ca.Sparsity.dense([d.ndx, d.nu, d.nx, d.nx][i], 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(self.dyn.ndx, 1)

    def eval(self, arg):
        d, u, xb, xb1 = (_vec(a) for a in arg)
        try:
            x_next = self.dyn.step(self.dyn.state_integrate(xb, d), u)
            return [ca.DM(self.dyn.state_difference(xb1, x_next))]
        except (RuntimeError, ValueError):
            return [ca.DM.nan(self.dyn.ndx, 1)]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        dyn = self.dyn
        ndx, nu, nx = dyn.ndx, dyn.nu, dyn.nx

        def blocks(arg):
            d, u, xb, xb1 = (_vec(a) for a in arg[:4])
            try:
                x = dyn.state_integrate(xb, d)
                x_next, Fx, Fu = dyn.step_derivatives(x, u)
                _, Jd = dyn.state_integrate_jacobians(xb, d)
                _, J1 = dyn.state_difference_jacobians(xb1, x_next)
                A, B = J1 @ Fx @ Jd, J1 @ Fu
            except (RuntimeError, ValueError):
                A, B = np.full((ndx, ndx), np.nan), np.full((ndx, nu), np.nan)
            return [ca.DM(A), ca.DM(B), ca.DM(ca.Sparsity(ndx, nx)), ca.DM(ca.Sparsity(ndx, nx))]

        n_in = self.get_n_in()
        sp_in = [self.get_sparsity_in(i) for i in range(n_in)] + [ca.Sparsity(ndx, 1)]
        sp_out = [ca.Sparsity.dense(ndx, ndx), ca.Sparsity.dense(ndx, nu), ca.Sparsity(ndx, nx), ca.Sparsity(ndx, nx)]
        self._jac = _Blocks(name, sp_in, sp_out, blocks, opts, jacobian=_ZERO)
        return self._jac


def casadi_step_local(dyn, name: str = "step_local") -> ca.Callback:
    """``d' = step_local(d, u, xb, xb')``: the step in local charts around constant reference
    states (see the module), with its exact Jacobian ``J1 Fx Jd`` / ``J1 Fu`` (``Jd`` of
    ``xb (+) d``, ``J1`` of ``x+ (-) xb'``). Works for every state, Euclidean or not."""
    return _LocalStep(name, dyn)


class _LocalCost(ca.Callback):
    """``l(xb (+) d, u)`` (or ``l(xb (+) d)``): gradient ``Jd' Lx``; Gauss-Newton Hessian ``Jd' Lxx Jd``."""

    def __init__(self, name, cost, dyn, terminal):
        ca.Callback.__init__(self)
        self.cost, self.dyn, self.terminal = cost, dyn, terminal
        self.construct(name, {})

    def _sizes(self):
        d = self.dyn
        return [d.ndx, d.nx] if self.terminal else [d.ndx, d.nu, d.nx]

    def get_n_in(self):
        return len(self._sizes())

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self._sizes()[i], 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(1, 1)

    def _x(self, arg):
        return self.dyn.state_integrate(_vec(arg[-1]), _vec(arg[0]))

    def eval(self, arg):
        x = self._x(arg)
        return [ca.DM(self.cost.value(x) if self.terminal else self.cost.value(x, _vec(arg[1])))]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        outer = self
        sizes = self._sizes()
        n = len(sizes)

        def derivs(arg):  # arg: this function's inputs (reference state last), then placeholders
            xb, d = _vec(arg[n - 1]), _vec(arg[0])
            x = outer.dyn.state_integrate(xb, d)
            dv = outer.cost.derivatives(x) if outer.terminal else outer.cost.derivatives(x, _vec(arg[1]))
            _, Jd = outer.dyn.state_integrate_jacobians(xb, d)
            return dv, Jd

        def hessian(arg):  # Gauss-Newton: Jd' Lxx Jd (and the u blocks)
            if arg is None:
                return {(0, 0): 1} if outer.terminal else {(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 1}
            dv, Jd = derivs(arg)
            out = {(0, 0): ca.DM(Jd.T @ dv.Lxx @ Jd)}
            if not outer.terminal:
                out.update({(0, 1): ca.DM(Jd.T @ dv.Lxu), (1, 0): ca.DM(dv.Lxu.T @ Jd), (1, 1): ca.DM(dv.Luu)})
            return out

        def grad(arg):
            dv, Jd = derivs(arg)
            out = [ca.DM(Jd.T @ dv.Lx).T]
            if not outer.terminal:
                out.append(ca.DM(dv.Lu).T)
            out.append(ca.DM(ca.Sparsity(1, outer.dyn.nx)))
            return out

        sp_in = [ca.Sparsity.dense(k, 1) for k in sizes] + [ca.Sparsity(1, 1)]
        sp_out = [ca.Sparsity.dense(1, k) for k in sizes[:-1]] + [ca.Sparsity(1, sizes[-1])]
        self._jac = _Blocks(name, sp_in, sp_out, grad, opts, jacobian=hessian)
        return self._jac


def casadi_cost_local(cost, dyn, *, terminal: bool = False, name: str = "cost_local") -> ca.Callback:
    """A ``trajopt.Cost`` in a local chart: ``l(d, u, xb)`` (``l(d, xb)`` when ``terminal``) of
    ``x = xb (+) d``, with its exact gradient and Gauss-Newton Hessian."""
    return _LocalCost(name, cost, dyn, terminal)
