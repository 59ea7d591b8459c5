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


# -- Ctrl-C / SIGTERM while CasADi runs a callback -------------------------------------------------
# A signal lands in whatever Python code runs, which during an IPOPT solve is nearly always one of
# the callbacks below. An exception escaping a callback into CasADi turns into an evaluation error
# (a printed traceback, IPOPT's Invalid_Number_Detected, a failed run), and one raised inside
# CasADi's own argument conversion is even replaced by an unrelated error. So while a solver runs
# CasADi (:class:`interrupts_noted`), a signal is only noted here, never raised: Ctrl-C's default
# handler is replaced for that time, and another handler (the CLI's, for SIGTERM / SIGHUP) asks
# :func:`note_interrupt` first. A KeyboardInterrupt that still reaches a callback is noted too. The
# solver's iteration callback then asks IPOPT to stop (User_Requested_Stop) and the solve reports
# INTERRUPTED with the last iterate.

_interrupt: list = []
_noting = {"depth": 0}


def note_interrupt(signum) -> bool:
    """For a signal handler: while a solver runs CasADi, note ``signum`` (the solver stops at its
    next iteration) and return True; otherwise return False (the handler raises as usual)."""
    if _noting["depth"] == 0:
        return False
    _interrupt.append(signum)
    return True


class interrupts_noted:
    """Within this block (a CasADi solve) Ctrl-C and other signals whose handler calls
    :func:`note_interrupt` are noted, not raised; see :func:`interrupt_requested`."""

    def __enter__(self):
        import signal
        import threading

        self.previous = None
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous = signal.signal(signal.SIGINT, lambda signum, frame: note_interrupt(signum))
        _noting["depth"] += 1
        return self

    def __exit__(self, *exc):
        import signal

        _noting["depth"] -= 1
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _is_interrupt(exc: BaseException | None) -> bool:
    """``exc`` is a KeyboardInterrupt, or an error raised because of one (CasADi's SWIG conversions
    turn a signal arriving inside them into a SystemError caused by the KeyboardInterrupt)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def interrupt_requested() -> bool:
    """Whether a Ctrl-C / SIGTERM arrived inside a callback since :func:`clear_interrupt`."""
    return bool(_interrupt)


def clear_interrupt() -> None:
    """Forget a noted signal (a solver does this when it starts and once it has reported it)."""
    _interrupt.clear()


class CasadiCallback(ca.Callback):
    """A CasADi function evaluated in Python: the one callback class of the bridge (and of the shooting
    solver's IPOPT iteration recorder).

    ``sp_in``/``sp_out``: the sparsities of its inputs and outputs; ``fn(arg) -> [outputs]`` computes
    them; ``names_in``/``names_out`` name them (CasADi's ``i0``, ``o0`` ... otherwise). ``jacobian``,
    if given, lets CasADi differentiate it: ``jacobian(cb, name, opts)`` returns the Jacobian function
    of callback ``cb`` (inputs: ``cb``'s inputs, then one empty placeholder per output,
    :meth:`jacobian_sparsity_in`), kept alive here while CasADi uses it. :func:`block_jacobian`
    makes one from dense blocks.
    """

    def __init__(self, name, sp_in, sp_out, fn, *, jacobian=None, names_in=(), names_out=(), opts=None):
        ca.Callback.__init__(self)
        self.sp_in, self.sp_out, self.fn, self.jacobian = list(sp_in), list(sp_out), fn, jacobian
        self.names_in, self.names_out = list(names_in), list(names_out)
        self.construct(name, opts or {})

    def get_n_in(self):
        return len(self.sp_in)

    def get_n_out(self):
        return len(self.sp_out)

    def get_name_in(self, i):
        return self.names_in[i] if self.names_in else f"i{i}"

    def get_name_out(self, i):
        return self.names_out[i] if self.names_out else f"o{i}"

    def get_sparsity_in(self, i):
        return self.sp_in[i]

    def get_sparsity_out(self, i):
        return self.sp_out[i]

    def eval(self, arg):
        # A signal noted mid-evaluation: evaluate again (the signal is not raised twice), so CasADi
        # gets a true value; a third one in a row gives NaN (IPOPT cuts its step; the solve stops).
        for _ in range(3):
            try:
                return self.fn(arg)
            except BaseException as exc:  # noqa: BLE001 -- only a signal is kept from CasADi
                if not _is_interrupt(exc):
                    raise
                _interrupt.append(exc)
        return [ca.DM(sp, np.nan) for sp in self.sp_out]

    def has_jacobian(self):
        return self.jacobian is not None

    def get_jacobian(self, name, inames, onames, opts):
        self._jac = self.jacobian(self, name, opts)
        return self._jac

    def jacobian_sparsity_in(self):
        """The inputs of this function's Jacobian: its own inputs, then an empty placeholder per output."""
        return self.sp_in + [ca.Sparsity(sp.size1(), sp.size2()) for sp in self.sp_out]


def block_jacobian(blocks):
    """A ``jacobian`` for :class:`CasadiCallback`: one output block per (output, input) pair of the
    callback; ``blocks(arg) -> {(o, i): DM}`` fills the dense ones (``blocks(None)``: which are dense),
    the rest are structural zeros. Its own derivative is not defined (the second level)."""

    def make(cb, name, opts):
        n_in, n_out = len(cb.sp_in), len(cb.sp_out)
        dense = blocks(None)
        sp_out = []
        for o in range(n_out):
            no = cb.sp_out[o].numel()
            for i in range(n_in):
                ni = cb.sp_in[i].numel()
                sp_out.append(ca.Sparsity.dense(no, ni) if (o, i) in dense else ca.Sparsity(no, ni))

        def fn(arg):
            vals = blocks(arg)
            out = []
            for o in range(n_out):
                for i in range(n_in):
                    out.append(vals[(o, i)] if (o, i) in vals else ca.DM(sp_out[len(out)]))
            return out

        return CasadiCallback(name, cb.jacobian_sparsity_in(), sp_out, fn, opts=opts)

    return make


#: A Jacobian callback whose own derivative is zero (no dense blocks): the dynamics' curvature left out.
ZERO_CURVATURE = block_jacobian(lambda arg: {})


def _step_jacobian(dyn):
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

    sp_out = [ca.Sparsity.dense(nx, nx), ca.Sparsity.dense(nx, nu)]
    return lambda cb, name, opts: CasadiCallback(name, cb.jacobian_sparsity_in(), sp_out, fn,
                                                 jacobian=ZERO_CURVATURE, opts=opts)


def casadi_step(dyn, name: str = "step") -> ca.Callback:
    """``x_next = f(x, u)`` as a CasADi function with the simulator's exact Jacobian (see the module)."""
    _euclidean(dyn, "casadi_step")
    nx, nu = dyn.nx, dyn.nu

    def fn(arg):
        try:
            return [ca.DM(dyn.step(_vec(arg[0]), _vec(arg[1])))]
        except (RuntimeError, ValueError):
            # A trial point where the simulation diverges: NaN tells IPOPT to cut its step back.
            return [ca.DM.nan(nx, 1)]

    return CasadiCallback(name, [ca.Sparsity.dense(nx, 1), ca.Sparsity.dense(nu, 1)], [ca.Sparsity.dense(nx, 1)],
                          fn, jacobian=_step_jacobian(dyn), names_in=("x", "u"), names_out=("x_next",))


def _cost_gradient(cost, nx, nu):
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

    sp_out = [ca.Sparsity.dense(1, k) for k in ([nx, nu] if nu else [nx])]
    return lambda cb, name, opts: CasadiCallback(name, cb.jacobian_sparsity_in(), sp_out, fn,
                                                 jacobian=block_jacobian(hessian), opts=opts)


def casadi_cost(cost, *, nx: int, nu: int, terminal: bool = False, name: str = "cost") -> ca.Callback:
    """A ``trajopt.Cost`` as a CasADi function ``l(x, u)`` (or ``l(x)`` when ``terminal``) with
    its exact gradient (Hessians are left to the solver, e.g. IPOPT's L-BFGS)."""
    nu = 0 if terminal else nu

    def fn(arg):
        if nu:
            return [ca.DM(cost.value(_vec(arg[0]), _vec(arg[1])))]
        return [ca.DM(cost.value(_vec(arg[0])))]

    sp_in = [ca.Sparsity.dense(k, 1) for k in ([nx, nu] if nu else [nx])]
    return CasadiCallback(name, sp_in, [ca.Sparsity.dense(1, 1)], fn, jacobian=_cost_gradient(cost, nx, nu))


# -- local charts: tangent increments around constant reference states (free-flyers) -----------------


def _local_step_jacobian(dyn):
    """``(J1 Fx Jd, J1 Fu)`` and structural zeros for the reference states; curvature declared zero."""
    ndx, nu, nx = dyn.ndx, dyn.nu, dyn.nx

    def fn(arg):
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

    sp_out = [ca.Sparsity.dense(ndx, ndx), ca.Sparsity.dense(ndx, nu), ca.Sparsity(ndx, nx), ca.Sparsity(ndx, nx)]
    return lambda cb, name, opts: CasadiCallback(name, cb.jacobian_sparsity_in(), sp_out, fn,
                                                 jacobian=ZERO_CURVATURE, opts=opts)


def casadi_step_local(dyn, name: str = "step_local") -> ca.Callback:
    """``d' = step_local(d, u, xb, xb')``: the step in local charts around constant reference
    states (see the module), with its exact Jacobian ``J1 Fx Jd`` / ``J1 Fu`` (``Jd`` of
    ``xb (+) d``, ``J1`` of ``x+ (-) xb'``). Works for every state, Euclidean or not."""

    def fn(arg):
        d, u, xb, xb1 = (_vec(a) for a in arg)
        try:
            x_next = dyn.step(dyn.state_integrate(xb, d), u)
            return [ca.DM(dyn.state_difference(xb1, x_next))]
        except (RuntimeError, ValueError):
            return [ca.DM.nan(dyn.ndx, 1)]

    sp_in = [ca.Sparsity.dense(k, 1) for k in (dyn.ndx, dyn.nu, dyn.nx, dyn.nx)]
    return CasadiCallback(name, sp_in, [ca.Sparsity.dense(dyn.ndx, 1)], fn, jacobian=_local_step_jacobian(dyn),
                          names_in=("d", "u", "xb", "xb_next"), names_out=("d_next",))


def casadi_cost_local(cost, dyn, *, terminal: bool = False, name: str = "cost_local") -> ca.Callback:
    """A ``trajopt.Cost`` in a local chart: ``l(d, u, xb)`` (``l(d, xb)`` when ``terminal``) of
    ``x = xb (+) d``, with its exact gradient ``Jd' Lx`` and Gauss-Newton Hessian ``Jd' Lxx Jd``."""
    sizes = [dyn.ndx, dyn.nx] if terminal else [dyn.ndx, dyn.nu, dyn.nx]
    n = len(sizes)

    def x_of(arg):
        return dyn.state_integrate(_vec(arg[n - 1]), _vec(arg[0]))

    def fn(arg):
        x = x_of(arg)
        return [ca.DM(cost.value(x) if terminal else cost.value(x, _vec(arg[1])))]

    def derivs(arg):  # arg: the function's inputs (reference state last), then placeholders
        xb, d = _vec(arg[n - 1]), _vec(arg[0])
        x = dyn.state_integrate(xb, d)
        dv = cost.derivatives(x) if terminal else cost.derivatives(x, _vec(arg[1]))
        _, Jd = dyn.state_integrate_jacobians(xb, d)
        return dv, Jd

    def hessian(arg):  # Gauss-Newton: Jd' Lxx Jd (and the u blocks)
        if arg is None:
            return {(0, 0): 1} if terminal else {(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 1}
        dv, Jd = derivs(arg)
        out = {(0, 0): ca.DM(Jd.T @ dv.Lxx @ Jd)}
        if not terminal:
            out.update({(0, 1): ca.DM(Jd.T @ dv.Lxu), (1, 0): ca.DM(dv.Lxu.T @ Jd), (1, 1): ca.DM(dv.Luu)})
        return out

    def grad(arg):
        dv, Jd = derivs(arg)
        out = [ca.DM(Jd.T @ dv.Lx).T]
        if not terminal:
            out.append(ca.DM(dv.Lu).T)
        out.append(ca.DM(ca.Sparsity(1, dyn.nx)))
        return out

    sp_grad = [ca.Sparsity.dense(1, k) for k in sizes[:-1]] + [ca.Sparsity(1, sizes[-1])]

    def gradient(cb, jname, opts):
        return CasadiCallback(jname, cb.jacobian_sparsity_in(), sp_grad, grad, jacobian=block_jacobian(hessian),
                              opts=opts)

    return CasadiCallback(name, [ca.Sparsity.dense(k, 1) for k in sizes], [ca.Sparsity.dense(1, 1)], fn,
                          jacobian=gradient)
