"""Compliant (penalty) contact: forces that are smooth functions of the distance and the velocity.

DiffHand (Xu et al. 2021, after Geilinger et al. 2020) and MuJoCo's soft contacts let bodies
interpenetrate a little and push them apart with a spring. Here, per contact (and per joint-limit row:
the same law in joint units), with ``phi`` its signed distance and ``c = J v+`` its contact-frame
velocity (normal ``c_n`` first, tangential ``c_T``)::

    f_n = k delta(phi) - d sigma(phi) c_n                          normal force
    f_T = -mu k delta(phi) c_T / sqrt(|c_T|^2 + v_s^2)             regularized Coulomb friction

* ``delta`` is ``max(0, -phi)`` smoothed over ``|phi| < w`` (the *width*): ``(w - phi)^2 / (4 w)`` there,
  ``-phi`` below, 0 above. It is C^1: zero with zero slope at ``phi = w`` (onset, a gap of ``w``),
  slope -1 from ``phi = -w`` on. Beyond ``w`` in penetration the spring is exactly ``k (-phi)``.
* ``sigma`` weighs the damping in over the same band: the smoothstep ``3 s^2 - 2 s^3`` of
  ``s = (w - phi) / (2 w)`` (0 at onset, 1 from ``phi = -w`` on, C^1), so ``f_n`` and its Jacobian are
  continuous at onset even when the contact arrives with a velocity (DiffHand multiplies its damping
  by the depth for the same reason). Kelvin-Voigt damping: a contact separating fast feels a small
  pull (``-d sigma c_n``) as a linear damped spring does; the closed forms below are those of that spring.
* Friction is bounded by ``mu`` times the *elastic* part ``k delta`` (always >= 0, so friction never
  flips with the damping's pull) and regularized over the slip speed ``v_s`` (``slip_velocity``):
  ``|f_T| = mu k delta |c_T| / sqrt(|c_T|^2 + v_s^2)`` is ``mu f`` to within ``v_s^2 / (2 |c_T|^2)`` when
  sliding well above ``v_s``, and viscous, ``mu k delta / v_s``, when ``|c_T| << v_s`` (a "sticking"
  contact creeps at ``~v_s |f_T| / (mu f)``). Smooth everywhere, including ``c_T = 0``.

``k`` (N/m, per contact point), ``d`` (N s/m), ``w`` (m), ``v_s`` (m/s): defaults :data:`STIFFNESS`,
:data:`DAMPING`, :data:`WIDTH`, :data:`SLIP_VELOCITY`. A body resting on ``n`` contacts carries ``m g / n``
on each: ``delta(phi) = m g / (n k)``, so ``phi = -m g / (n k)`` when that is deeper than ``w``, else
``phi = w - 2 sqrt(w m g / (n k))``. The defaults give a 1 kg cube on its 4 corners 0.98 mm of
penetration (``m g / (4 k) = 0.981 mm``, just inside the band: ``phi = -0.981 mm`` to 3 digits), and a
1 kg ball on one point 3.9 mm. Damping ratio of a body of mass ``m`` on ``n`` contacts:
``zeta = n d / (2 sqrt(n k m))``: 1.0 for the 1 kg cube on 4 corners (it settles without bouncing),
0.5 for a 1 kg ball (coefficient of restitution ``exp(-pi zeta / sqrt(1 - zeta^2)) = 0.16``).

Time stepping: impulses ``lambda = dt f(phi(q), J v+)``, so ``v+ = v_f + M^-1 J^T lambda``: the distance is
taken at the start of the step (explicit in position: the spring is integrated by semi-implicit, i.e.
symplectic, Euler, which keeps an undamped bounce's energy bounded), the velocity at its end (implicit:
the damping and the friction, whose viscous slope ``mu k delta / v_s`` is very stiff, are backward Euler).
Chosen by measurement (``python scripts/penalty_schemes.py``; a 1 kg cube, side 0.2 m, mu 0.5, the
default parameters, 1 s): at dt = 1 ms the explicit scheme ``lambda = dt f(phi, J v)`` (pre-step velocity)
settles a cube dropped flat, but one dropped tilted (centre at 0.2 m) still jitters at 0.037 m/s after
1 s (an explicit viscous friction of gain ``dt mu k delta / (v_s m_eff)``, estimated ~5 here, is
unstable beyond 2), at 10 ms a flat drop
bounces off (0.8 m/s), at 20 ms the tilted drop diverges; ``lambda = dt f(phi, J v_f)`` (the free
velocity) also rests 0.2 mm too shallow (its damping sees the ``-g dt`` of ``v_f``). This scheme settles
every resting and dropped case to below 1e-10 m/s at the closed-form depth (0.98 mm) at 1, 5 and 10 ms, and to 3e-3 m/s at
20 ms. Stability limit: the spring is explicit, so a contact of effective mass ``m_eff = 1 /
(J M^-1 J^T)_nn`` needs ``dt < 2 sqrt(m_eff / k)`` without damping (damping raises it to ``dt sqrt(k /
m_eff) < sqrt(4 + 2 dt d / m_eff)``): 40 ms for a 1 kg ball on one contact at the default ``k``
(measured: an undamped oscillation about rest stays bounded at 38 ms, grows 10^4-fold by 42 ms),
~20 ms for a cube's corner (``m_eff`` ~ 0.25 kg); a light link or a stiffer ``k`` asks a smaller step.
Damping and friction set no limit.

The adapter (:mod:`contact.adapter`): ``solve`` finds ``lambda`` with ``F(lambda) = lambda - dt f(phi,
A lambda + b) = 0`` by Newton's method (backtracking on ``|F|``) from the previous step's impulses;
``F_lambda + F_c A = I - dt (df/dc) A`` is always regular (``-df/dc`` is block-diagonal positive
semi-definite), and its linearization carries ``F_c = -dt df/dc`` and ``F_phi = -dt df/dphi``, so the
step's implicit-function machinery gives the exact Jacobian: ``dphi/dq = J_n`` and ``d(J^T lambda)/dq``,
``d(J w)/dq`` come from the contact kinematics as for every model. The step gives this model
``b = J v_f`` with no penetration bias and makes no position correction (``compliant = True``): a
penetration is the spring's state, not an error to remove.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .adapter import Linearization

#: Default contact stiffness (N/m per contact point): a 1 kg cube on 4 corners sinks ~1 mm.
STIFFNESS = 2500.0
#: Default contact damping (N s/m per contact point): critical for a 1 kg cube on 4 corners.
DAMPING = 50.0
#: Default smoothing width (m): the force starts (C^1) at a gap of ``w``, is ``k (-phi)`` from ``-w`` on.
WIDTH = 1e-3
#: Default slip-velocity scale of the regularized friction (m/s).
SLIP_VELOCITY = 1e-3
#: Relative residual (to the impulse scale) at which Newton's method stops.
TOLERANCE = 1e-13
#: Newton iterations before a solve is declared failed.
MAX_ITER = 60


@dataclass(frozen=True)
class PenaltyParameters:
    """``stiffness`` k (N/m), ``damping`` d (N s/m), ``width`` w (m), ``slip_velocity`` v_s (m/s) of the
    module docstring; :meth:`checked` builds one from user values (None: the default) or raises
    ``ValueError`` naming the option."""

    stiffness: float = STIFFNESS
    damping: float = DAMPING
    width: float = WIDTH
    slip_velocity: float = SLIP_VELOCITY

    @classmethod
    def checked(cls, *, stiffness=None, damping=None, width=None, slip_velocity=None) -> "PenaltyParameters":
        def value(name, x, default, positive):
            if x is None:
                return default
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise ValueError(f"contact_{name} must be a number, got {x!r}")
            x = float(x)
            ok = math.isfinite(x) and (x > 0 if positive else x >= 0)
            if not ok:
                raise ValueError(f"contact_{name} must be a finite number {'> 0' if positive else '>= 0'}, got {x!r}")
            return x

        return cls(value("stiffness", stiffness, STIFFNESS, True), value("damping", damping, DAMPING, False),
                   value("width", width, WIDTH, True), value("slip_velocity", slip_velocity, SLIP_VELOCITY, True))


def spring(phi, width: float):
    """``(delta, delta')`` of the module docstring at distances ``phi``: ``max(0, -phi)`` smoothed over
    ``|phi| < width`` (C^1)."""
    phi = np.asarray(phi, dtype=float)
    band = (phi > -width) & (phi < width)
    u = width - phi
    delta = np.where(phi >= width, 0.0, np.where(band, u * u / (4.0 * width), -phi))
    ddelta = np.where(phi >= width, 0.0, np.where(band, -u / (2.0 * width), -1.0))
    return delta, ddelta


def damping_weight(phi, width: float):
    """``(sigma, sigma')``: the smoothstep of ``s = (w - phi) / (2 w)`` on [0, 1] (0 at onset, 1 from ``-w`` on)."""
    phi = np.asarray(phi, dtype=float)
    s = np.clip((width - phi) / (2.0 * width), 0.0, 1.0)
    sigma = s * s * (3.0 - 2.0 * s)
    dsigma = np.where((s > 0.0) & (s < 1.0), -6.0 * s * (1.0 - s) / (2.0 * width), 0.0)
    return sigma, dsigma


def resting_distance(load: float, stiffness: float = STIFFNESS, width: float = WIDTH) -> float:
    """The distance ``phi`` at which one contact carries the normal force ``load`` (N) at rest:
    ``delta(phi) = load / k`` (module docstring)."""
    depth = load / stiffness
    if depth >= width:
        return -depth
    return width - 2.0 * math.sqrt(width * depth)


@dataclass
class PenaltyProblem:
    """One step's penalty problem over ``m`` rows: ``A`` (m, m), ``b`` (m,) ``= J v_f`` (no bias);
    ``normal`` (nn,) the normal and limit rows, ``phi`` (nn,) their distances; ``tangent`` (nc, r - 1)
    each contact's tangent rows (its normal row is ``normal[i]``); ``mu`` (nc,) each contact's friction; ``dt``; the model's parameters;
    ``elastic``/``delastic`` (nn,) ``k delta(phi)`` and its derivative, ``sigma``/``dsigma`` (nn,) the
    damping weight and its derivative."""

    A: np.ndarray
    b: np.ndarray
    normal: np.ndarray
    phi: np.ndarray
    tangent: np.ndarray
    mu: np.ndarray
    dt: float
    params: PenaltyParameters
    elastic: np.ndarray
    delastic: np.ndarray
    sigma: np.ndarray
    dsigma: np.ndarray


@dataclass
class PenaltySolution:
    """Impulses ``lam`` (m,), contact velocities ``c`` (m,), Newton ``iterations``, the final residual
    norm (max abs, impulse units), ``converged``, ``warm_start_hit`` (a warm start was used and held)."""

    lam: np.ndarray
    c: np.ndarray
    iterations: int
    residual: float
    converged: bool
    warm_start_hit: bool = False


def forces(p: PenaltyProblem, c: np.ndarray, *, derivatives: bool = True):
    """``(f, df/dc, df/dphi)`` at contact velocities ``c`` (m,): forces (m,) of the module docstring and,
    with ``derivatives``, their Jacobians (m, m) with respect to ``c`` and to the distances (columns laid
    out like impulses: nonzero only on the normal rows that carry a ``phi``)."""
    m = len(c)
    f = np.zeros(m)
    fc = np.zeros((m, m)) if derivatives else None
    fphi = np.zeros((m, m)) if derivatives else None
    n = p.normal
    d = p.params.damping
    cn = c[n]
    f[n] = p.elastic - d * p.sigma * cn
    if derivatives:
        fc[n, n] = -d * p.sigma
        fphi[n, n] = p.delastic - d * p.dsigma * cn
    if p.tangent.size and (p.mu > 0).any():
        vs2 = p.params.slip_velocity ** 2
        ni = n[: len(p.tangent)]
        el, dl = p.elastic[: len(p.tangent)], p.delastic[: len(p.tangent)]
        for i, rows in enumerate(p.tangent):
            if el[i] == 0.0 and dl[i] == 0.0:
                continue
            ct = c[rows]
            rho = math.sqrt(float(ct @ ct) + vs2)
            f[rows] = -p.mu[i] * el[i] * ct / rho
            if derivatives:
                fc[np.ix_(rows, rows)] = -p.mu[i] * el[i] * (np.eye(len(rows)) / rho - np.outer(ct, ct) / rho**3)
                fphi[rows, ni[i]] = -p.mu[i] * dl[i] * ct / rho
    return f, fc, fphi


def penalty_residual(p: PenaltyProblem, lam: np.ndarray) -> np.ndarray:
    """The optimality residual (m,) ``F(lambda) = lambda - dt f(phi, A lambda + b)``, in impulse units:
    zero exactly at the step's impulses."""
    lam = np.asarray(lam, dtype=float)
    return lam - p.dt * forces(p, p.A @ lam + p.b, derivatives=False)[0]


def _scale(p: PenaltyProblem) -> float:
    """A characteristic impulse: ``dt k w`` (the spring at the edge of the band), or the elastic impulses."""
    el = float(np.abs(p.elastic).max()) if p.elastic.size else 0.0
    return p.dt * max(p.params.stiffness * p.params.width, el)


def solve_penalty(p: PenaltyProblem, guess: np.ndarray | None = None, *, max_iter: int = MAX_ITER) -> PenaltySolution:
    """``lambda`` with :func:`penalty_residual` = 0 by Newton's method with backtracking on ``max|F|``,
    from ``guess`` (the previous step's impulses on the same rows) or from zero. Raises ``ValueError`` on
    non-finite data."""
    m = len(p.b)
    if not np.isfinite(p.A.sum() + p.b.sum() + p.phi.sum()):
        raise ValueError("solve_penalty: A, b or phi contains non-finite values")
    tol = TOLERANCE * _scale(p)
    warm = guess is not None and len(guess) == m and np.isfinite(guess).all()
    lam = np.array(guess, dtype=float) if warm else np.zeros(m)
    eye = np.eye(m)
    norm = np.inf
    its = 0
    for its in range(max_iter + 1):
        c = p.A @ lam + p.b
        f, fc, _ = forces(p, c)
        F = lam - p.dt * f
        norm = float(np.abs(F).max()) if m else 0.0
        if norm <= tol or its == max_iter:
            break
        E = eye - p.dt * fc @ p.A
        step = np.linalg.solve(E, -F)
        alpha = 1.0
        for _ in range(40):
            trial = lam + alpha * step
            Ft = trial - p.dt * forces(p, p.A @ trial + p.b, derivatives=False)[0]
            if np.abs(Ft).max() <= (1.0 - 1e-4 * alpha) * norm:
                break
            alpha *= 0.5
        else:  # no decrease: round-off level reached
            break
        lam = trial
    converged = norm <= max(tol, 1e3 * tol)
    return PenaltySolution(lam, p.A @ lam + p.b, its, norm, bool(converged), warm_start_hit=bool(warm and its <= 2))


class PenaltyAdapter:
    """The penalty model as a contact adapter (:mod:`contact.adapter`) at time step ``dt`` (s).

    ``compliant = True`` tells the step that penetration is this model's state: ``b = J v_f`` with no
    penetration bias, no position correction, no Newton restitution (the damping sets the bounce).
    ``reach``: the distance within which its forces act (the step detects contacts at least that far)."""

    name = "penalty"
    compliant = True

    def __init__(self, params: PenaltyParameters, dt: float):
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"the penalty contact model needs a time step dt > 0, got {dt!r}")
        self.params, self.dt = params, float(dt)
        self.reach = params.width

    def problem(self, A, b, layout, phi, previous=None) -> PenaltyProblem:
        """The penalty problem on the rows of ``layout``; ``phi`` (nc + nlim,) the distances of its normal
        rows (contacts, then limits)."""
        normal = layout.normal_rows
        r = layout.r
        tangent = (np.arange(layout.nc)[:, None] * r + np.arange(1, r)[None, :]).astype(np.intp)
        w, k = self.params.width, self.params.stiffness
        delta, ddelta = spring(phi, w)
        sigma, dsigma = damping_weight(phi, w)
        return PenaltyProblem(A, b, normal, np.asarray(phi, dtype=float), tangent,
                              layout.mu, self.dt,
                              self.params, k * delta, k * ddelta, sigma, dsigma)

    def solve(self, p: PenaltyProblem, guess: PenaltySolution | None = None) -> PenaltySolution:
        """Raises ``ArithmeticError`` when Newton's method does not converge (the step reports it)."""
        sol = solve_penalty(p, None if guess is None else guess.lam)
        if not sol.converged:
            raise ArithmeticError(f"the penalty contact solve did not converge (residual {sol.residual:.3g} "
                                  f"after {sol.iterations} Newton iterations)")
        return sol

    def residual(self, p: PenaltyProblem, lam) -> np.ndarray:
        return penalty_residual(p, lam)

    def linearize(self, p: PenaltyProblem, sol: PenaltySolution) -> Linearization:
        """:func:`penalty_residual` at the solution, over all rows: ``F_lambda = I``, ``F_c = -dt df/dc``,
        ``F_phi = -dt df/dphi``; ``E = I - dt (df/dc) A`` (regular)."""
        m = len(p.b)
        _, fc, fphi = forces(p, sol.c)
        Fc = -p.dt * fc
        return Linearization(E=np.eye(m) + Fc @ p.A, Fc=Fc, unknowns=np.arange(m), Fphi=-p.dt * fphi, regular=True)

    def contact_modes(self, sol: PenaltySolution, layout) -> np.ndarray:
        """1 where a contact carries a force (its distance is below the width), 0 elsewhere (nc,)."""
        lam = sol.lam[: layout.nc * layout.r].reshape(layout.nc, layout.r)
        return (np.abs(lam).max(axis=1) > 0).astype(np.int64) if layout.nc else np.zeros(0, dtype=np.int64)

    def reclassify(self, p, sol, dl_dlam):
        """Nothing to reclassify (the penalty Jacobian already sees contacts inside the width): None."""
        return None
