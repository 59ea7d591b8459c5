"""System identification through the simulator (issue 14): physical parameters recovered from recorded
trajectories by Gauss-Newton on the trajectory's state error, with exact parameter sensitivities
(:func:`trajopt.sensitivity.parameter_sensitivity`).

Both problems are ``trajopt.LeastSquares`` (``trajopt solve NAME`` runs :func:`solvers.gauss_newton`). The
data are made by the simulator itself from a stated seed; ``noise=sigma`` adds independent Gaussian noise
of standard deviation ``sigma`` to every recorded state coordinate (tangent space), seeded by ``seed + 1``.

**Residual: the state error along the trajectory** (output error), ``r = [x_t(p) (-) x_t^obs]`` for the
recorded knots ``t``, ``x_t(p)`` the rollout under the recorded controls. ``ur5-sysid`` cuts the recording
into windows of ``window`` steps, each rolled out from its own start state, an unknown too (``x_obs (+) s_w``;
the UR5 under open-loop torques drifts away from the recording within a second, and the wrists' response
to a centimetre of COM is far from linear over 2 s); ``cube-sysid`` rolls out once from the known pose. Chosen over the inverse-dynamics residual
``RNEA(q, v, a; p) - tau`` because the measurement noise then enters the residual additively and
independently (``r = x_t(p) - x_t^true - noise``), so Gauss-Newton is the maximum-likelihood estimator and
its covariance ``(J'J)^-1 sigma^2`` is the estimate's error bar; the inverse-dynamics residual needs
accelerations differentiated from noisy velocities (noise amplified by ``1/dt``, and in its regressor too,
which biases the estimate), and through contact it would need the unknown impulses. Its cost: a rollout and
a chained sensitivity per iteration (cheap here: ~0.1 ms per step with all 60 inertial parameters on the UR5).

Metrics: ``parameter_error`` = max over the identified entries of ``|z_i - z_i^true| / |z_i^true|``; with
noise also ``max_sigma_error`` = max of ``|z_i - z_i^true| / sigma_i`` and the error bars ``sigma_i`` (the
square root of the diagonal of ``(J'J)^-1 sigma^2``) in ``info`` (``error_bars(z)``).

``ur5-sysid``
    The UR5 of example-robot-data (:func:`problems.manipulators.ur5_simulator`, dt = 10 ms, no contact on
    this trajectory), with one change stated here: its wrist links' inertias are made isotropic, ``I_zz``
    set to the URDF's ``I_xx = I_yy`` (the URDF's sit on the edge of the triangle inequality, ``I_zz`` =
    0.2194 against ``I_xx + I_yy`` = 0.2223 kg m^2, so a 2 % change of one entry is no mass distribution at
    all). *True robot*: these nominal values perturbed with ``truth_seed``: every mass
    times U(0.9, 1.1), every COM coordinate plus or minus U(0.5, 1.5) cm (a random sign), every principal
    second moment of mass times U(0.9, 1.1) (the diagonal inertia entries follow; off-diagonals stay 0:
    :func:`ur5_truth`). *Data*: 2 s (200 steps) from rest at ``UR5_START``, under the feedforward torques of
    the nominal model along a multi-sine reference (5 sines per joint, random phases and amplitudes from
    ``seed``) plus PD feedback on the reference (:data:`UR5_BANDWIDTH`), clipped to the URDF limits; every state
    recorded.

    *Identified*: :data:`UR5_IDENTIFIED`, 20 entries (the upper arm's and forearm's masses, 11 COM
    coordinates, 7 diagonal inertia entries). The 60 inertial entries of the six links are not all identifiable from joint motion: the
    joint-torque regressor ``Y(q, v, a) dpi/dp`` of all 60 has rank 36 (the UR5's base parameters; the
    shoulder link's mass and COM do not act at all). The subset was chosen by taking entries in the order
    masses, COM coordinates, diagonal inertias (``zz`` first: the upper arm and forearm are thin rods, whose
    ``xx`` and ``yy`` sit within 3-8 % of the triangle inequality, so a start 15 % off them is often no
    mass distribution) and keeping each one that raises the rank of the regressor columns stacked over random
    states (``tests/test_sysid.py`` checks it has full rank); of the 25 so found, the three wrist masses
    were then dropped (known): their differences are the three weakest directions of the state-error
    Jacobian (singular values 5e-5 to 6e-4 of the largest), and Gauss-Newton stalled on them. Then two
    COM coordinates were dropped (known) by the same numerical test: with the columns scaled to unit norm and
    the window start states projected out, the reduced state-error Jacobian at the start has its two weakest
    singular values at 0.5 % and 0.7 % of the largest (seed 0, truth_seed 5; the next at 1.5 %), both mostly
    ``com:wrist_3_link[1]`` against ``com:wrist_2_link[1]`` and ``com:wrist_1_link[2]`` against
    ``com:wrist_2_link[2]`` (nearly the same moment about the wrist axes on this excitation); the first
    Gauss-Newton step put ``com:wrist_3_link[1]`` at 0.22 m (the link is 0.1 m) and the solver stalled at
    residual 1.9 on 2 of 8 variants. Without ``com:wrist_3_link[1]`` and ``com:wrist_1_link[2]``, 7 of 8
    variants reach <= 5e-10 (measured; ``seed=4, truth_seed=4`` still stops at residual 0.81). A reparametrization
    in the torques' linear coordinates (first moments ``m c``, moments about the joint) was measured too and
    did not help (same stops, one more failure). The other 40 entries are held at their true values (known). Masses and inertias are estimated as logarithms
    (:class:`Identification`). The start ``z0`` is the nominal (unperturbed) value of
    each identified entry: up to 10 % or 1.5 cm off.

``cube-sysid``: see :func:`cube_sysid`.
"""

from __future__ import annotations

import time

import numpy as np
import pinocchio as pin

from trajopt.lsq import LeastSquares
from trajopt.sensitivity import ParameterJacobians, parameter_sensitivity, trajectory_jacobians

from ._options import check_memory, integer, parameter_contact, random_seed, real, twist
from ._registry import register
from ._scene import lowest_point
from .manipulators import UR5_START, ur5_simulator

#: The identified subset of the UR5's inertial parameters: ``(name, entry)``, entry indexing the name's block
#: (COM: x, y, z; inertia: Pinocchio's order xx, xy, yy, xz, yz, zz).
UR5_IDENTIFIED = (
    [(f"mass:{link}", 0) for link in ("upper_arm_link", "forearm_link")]
    + [("com:upper_arm_link", 0), ("com:upper_arm_link", 1), ("com:upper_arm_link", 2),
       ("com:forearm_link", 0), ("com:forearm_link", 1), ("com:wrist_1_link", 0),
       ("com:wrist_2_link", 0), ("com:wrist_2_link", 1), ("com:wrist_2_link", 2),
       ("com:wrist_3_link", 0), ("com:wrist_3_link", 2)]
    + [(f"inertia:{link}", 5) for link in ("upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link",
                                           "wrist_3_link")]
    + [("inertia:wrist_2_link", 0), ("inertia:wrist_3_link", 2)])
UR5_WRIST = ("wrist_1_link", "wrist_2_link", "wrist_3_link")


def _check_steps(steps, window, name="window", low=1, why=""):
    """``steps`` and the steps between knots or windows, the option ``name`` (``window``, cube-sysid's ``every``),
    at least ``low`` (``why``: the reason, in the message)."""
    steps = integer("steps", steps, 2)
    try:
        window = integer(name, window, low)
    except ValueError as exc:  # the reason for the bound with a count below it (not with 2.5 or True)
        below = isinstance(window, (int, np.integer)) and not isinstance(window, (bool, np.bool_))
        raise ValueError(f"{exc}{why if below else ''}") from None
    if window > steps:
        raise ValueError(f"{name} ({window}) must not exceed steps ({steps})")
    return steps, window


def _check_noise(noise):
    return real("noise", noise, "a standard deviation >= 0", at_least=0.0)


class Identification:
    """The pieces both problems share: the full parameter vector ``p`` of the named blocks ``names``, the
    identified entries ``index`` into it and the simulator with them set. The unknowns are ``z = p[index]``,
    except on the entries flagged ``log`` (masses and inertias: positive), where ``z = log p[index]``: every
    ``z`` is then a positive mass or moment, and a Gauss-Newton step of a poorly determined one does not
    leave the physical range (with plain values it did, on 2 of 7 UR5 variants: the line search then
    shrinks to nothing)."""

    def __init__(self, sim, names, index, p_true, log):
        self.sim, self.names, self.index = sim, list(names), np.asarray(index, dtype=np.intp)
        self.p_true = np.asarray(p_true, dtype=float)
        self.log = np.asarray(log, dtype=bool)
        self.base = sim.with_parameters(self.names, self.p_true)  # the fixed entries at their true values

    def values(self, z):
        """The identified parameters' physical values at ``z``."""
        return np.where(self.log, np.exp(np.where(self.log, z, 0.0)), z)

    def unknowns(self, values):
        return np.where(self.log, np.log(np.where(self.log, values, 1.0)), values)

    def chain(self, z):
        """``d values / d z`` (diagonal)."""
        return np.where(self.log, self.values(z), 1.0)

    def system(self, z):
        p = self.p_true.copy()
        p[self.index] = self.values(z)
        return self.base.with_parameters(self.names, p)


def _directions(J: np.ndarray, scale: float = 0.0):
    """``(s, V, seen, blind)`` of ``J``'s singular value decomposition: ``seen`` the directions whose singular
    value is at least 1e-10 of the largest (or of ``scale``, when larger), ``blind`` the unknowns along any other
    (their weight in it above 1e-8)."""
    J = np.asarray(J, dtype=float)
    # V only (n x n): the thin decomposition where J has at least as many rows as columns (no m x m U)
    _, sv, Vt = np.linalg.svd(J, full_matrices=J.shape[0] < J.shape[1])
    s = np.zeros(Vt.shape[0])
    s[:len(sv)] = sv
    seen = s > 1e-10 * max(float(s.max()), scale, 1e-300)
    V = Vt.T
    blind = np.abs(V[:, ~seen]).max(axis=1) > 1e-8 if (~seen).any() else np.zeros(len(s), dtype=bool)
    return s, V, seen, blind


def error_bars(J: np.ndarray, sigma: float, *, scale: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(standard deviations, covariance)`` of a Gauss-Newton estimate: ``cov = (J'J)^-1 sigma^2``. Where
    ``J`` is rank deficient (singular values below 1e-10 of the largest, or of ``scale`` when larger, as in
    :func:`unidentified`: directions the data do not see), the parameters along those directions are
    unidentified: their standard deviations and covariance rows and columns are ``inf`` (the rest from the
    pseudo-inverse), instead of a singular-matrix error after the solve."""
    s, V, seen, blind = _directions(J, scale)
    cov = (V[:, seen] / s[seen] ** 2) @ V[:, seen].T * sigma ** 2
    cov[blind, :] = np.inf
    cov[:, blind] = np.inf
    return np.sqrt(np.diag(cov)), cov


def unidentified(J: np.ndarray, n: int, *, scale: float = 0.0) -> int:
    """How many of the first ``n`` unknowns the data do not determine at the Jacobian ``J`` of the residual: those
    along a direction whose singular value is below 1e-10 of the largest (or of ``scale``, when larger: the
    Jacobian's own scale when ``J`` is a part of it), as :func:`error_bars` marks them blind. An estimate there
    fits the data whatever it is, so a residual at 0 and a Gauss-Newton status ``converged`` say nothing of it.
    E.g. ur5-sysid at ``dt=1e-9``: 2 microseconds of data, residual 4.5e-13, parameter_error 3.5."""
    return int(_directions(J, scale)[3][:n].sum())


def ur5_nominal_simulator(*, dt: float = 0.01):
    """The UR5 with cylinder wrist inertias (module docstring)."""
    sim = ur5_simulator(dt=dt)
    names, values = [], []
    for link in UR5_WRIST:
        ixx = float(sim.get_parameters(f"inertia:{link}")[0])
        names.append(f"inertia:{link}")
        values.append([ixx, 0.0, ixx, 0.0, 0.0, ixx])
    return sim.with_parameters(names, np.concatenate(values))


def ur5_reference(*, steps, dt, seed):
    """A seeded multi-sine reference ``(q, v, a)`` (steps+1, 6) each from ``UR5_START``: per joint
    ``sum_k a_k (sin(w_k t + phi_k) - sin(phi_k))``, 5 sines, ``w_k`` in U(1, 6) rad/s, amplitudes summing to
    at most 0.4 rad (shoulder and elbow) or 0.8 rad (wrist)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps + 1) * dt
    w = rng.uniform(1.0, 6.0, (6, 5))
    phi = rng.uniform(0, 2 * np.pi, (6, 5))
    amp = rng.uniform(0.3, 1.0, (6, 5)) * np.array([0.4, 0.4, 0.4, 0.8, 0.8, 0.8])[:, None] / 5
    arg = w[None] * t[:, None, None] + phi[None]
    q = UR5_START + (amp[None] * (np.sin(arg) - np.sin(phi)[None])).sum(-1)
    v = (amp[None] * w[None] * np.cos(arg)).sum(-1)
    a = -(amp[None] * w[None] ** 2 * np.sin(arg)).sum(-1)
    return q, v, a


#: Bandwidth (rad/s) of the PD controller that records the UR5's data: ``Kp = M_ii w^2``, ``Kd = 2 M_ii w``
#: (critically damped on each joint's own inertia, ``M_ii`` the nominal mass matrix at the start).
UR5_BANDWIDTH = 15.0


def ur5_record(truth, nominal, *, steps, seed):
    """Run the true robot ``truth`` from rest at the reference's start under the nominal model's feedforward
    torques along :func:`ur5_reference` plus PD feedback (:data:`UR5_BANDWIDTH`), clipped to the URDF
    limits. Returns ``(xs (steps+1, 12), us (steps, 6))``: the torques applied, known exactly."""
    q_r, v_r, a_r = ur5_reference(steps=steps, dt=truth.dt, seed=seed)
    m, d = nominal.model, nominal.model.createData()
    Mii = np.diag(pin.crba(m, d, q_r[0]))
    kp, kd = Mii * UR5_BANDWIDTH ** 2, 2 * Mii * UR5_BANDWIDTH
    xs = np.empty((steps + 1, truth.nx))
    us = np.empty((steps, truth.nu))
    xs[0] = np.concatenate((q_r[0], np.zeros(6)))
    for k in range(steps):
        q, v = xs[k, :6], xs[k, 6:]
        u = pin.rnea(m, d, q_r[k], v_r[k], a_r[k]) + kp * (q_r[k] - q) + kd * (v_r[k] - v)
        us[k] = np.clip(u, -truth.u_upper, truth.u_upper)
        xs[k + 1] = truth.step(xs[k], us[k])
    return xs, us


def ur5_truth(nominal, names, *, truth_seed):
    """The true parameter vector of ``names`` (module docstring: the nominal values perturbed)."""
    rng = np.random.default_rng(truth_seed)
    p = nominal.get_parameters(names).copy()
    off = 0
    for n in names:
        size = nominal.parameter_size(n)
        kind = n.split(":")[0]
        if kind == "mass":
            p[off] *= rng.uniform(0.9, 1.1)
        elif kind == "com":
            p[off:off + 3] += rng.choice([-1.0, 1.0], 3) * rng.uniform(0.005, 0.015, 3)
        elif kind == "inertia":
            diag = p[off + np.array([0, 2, 5])]
            sigma = diag.sum() / 2 - diag  # the second moment of mass (principal here: off-diagonals are 0)
            sigma *= rng.uniform(0.9, 1.1, 3)
            p[off + np.array([0, 2, 5])] = sigma.sum() - sigma
        off += size
    return p


def _windowed_problem(name, ident: Identification, xs_obs, us, window, z_true, sigma, extra_info):
    """The least squares of a recording ``xs_obs`` (T+1, nx) under ``us`` (T, nu) cut into windows of
    ``window`` steps (module docstring: each window's start state is an unknown)."""
    sim0 = ident.sim
    T, ndx, nz = len(us), sim0.ndx, len(ident.index)
    starts = np.arange(0, T + 1, window)
    nw = len(starts)
    def windows(z):
        """(start index, stop index (excl.), start state) of every window at ``z``."""
        out = []
        for w, t0 in enumerate(starts):
            s = z[nz + w * ndx:nz + (w + 1) * ndx]
            out.append((t0, min(t0 + window, T + 1), sim0.state_integrate(xs_obs[t0], s)))
        return out

    def residual(z):
        sim = ident.system(z[:nz])
        r = []
        for t0, t1, x0 in windows(z):
            xs = sim.rollout(x0, us[t0:t1 - 1])
            r += [sim0.state_difference(xs_obs[t], xs[t - t0]) for t in range(t0, t1)]
        return np.concatenate(r)

    def jacobian(z):
        sim = ident.system(z[:nz])
        r, rows = [], []
        for w, (t0, t1, x0) in enumerate(windows(z)):
            s = z[nz + w * ndx:nz + (w + 1) * ndx]
            xs, S = parameter_sensitivity(sim, x0, us[t0:t1 - 1], ident.names,
                                          initial=sim0.state_integrate_jacobians(xs_obs[t0], s)[1])
            npar = S.shape[2] - ndx
            for t in range(t0, t1):
                x = xs[t - t0]
                r.append(sim0.state_difference(xs_obs[t], x))
                D = sim0.state_difference_jacobians(xs_obs[t], x)[1]
                row = np.zeros((ndx, nz + nw * ndx))
                row[:, :nz] = (D @ S[t - t0][:, ident.index]) * ident.chain(z[:nz])
                row[:, nz + w * ndx:nz + (w + 1) * ndx] = D @ S[t - t0][:, npar:]
                rows.append(row)
        return np.concatenate(r), np.vstack(rows)

    def projected(J):
        """``(P, scale)``: the parameters' columns of ``J`` with each window's rows' own start-offset columns
        projected out (what the offsets can absorb), stacked (rows x nz), and the offsets' largest singular value.
        The offsets are window-local, so ``P'P`` is the Schur complement of their blocks in ``J'J``: the parameters'
        information with the offsets estimated too, whose inverse is their block of ``(J'J)^-1``. The whole J's SVD
        costs rows x columns^2 (20 s at steps=1000, window=5), this rows x (nz + ndx)^2."""
        parts, scale, r0 = [], 0.0, 0
        for w, t0 in enumerate(starts):
            r1 = r0 + ndx * (min(t0 + window, T + 1) - t0)
            S = J[r0:r1, nz + w * ndx:nz + (w + 1) * ndx]
            Q = np.linalg.qr(S)[0]
            P = J[r0:r1, :nz]
            parts.append(P - Q @ (Q.T @ P))
            scale = max(scale, float(np.linalg.norm(S, 2)))
            r0 = r1
        return np.vstack(parts), scale

    def bars(z, J=None):
        """The error bars (standard deviations, physical units) of the identified parameters at ``z`` (``J``: the
        residual's Jacobian there, when already made)."""
        P, scale = projected(jacobian(z)[1] if J is None else J)
        return error_bars(P, sigma, scale=scale)[0] * ident.chain(z[:nz])

    def metrics(z):
        zp = ident.values(z[:nz])
        J = jacobian(z)[1]  # one Jacobian for both (it was made twice with noise)
        P, scale = projected(J)
        out = {"parameter_error": float(np.max(np.abs(zp - z_true) / np.abs(z_true))),
               "unidentified": unidentified(P, nz, scale=scale)}
        if sigma > 0:
            sd = bars(z, J)
            out["max_sigma_error"] = float(np.max(np.abs(zp - z_true) / sd))
            out["max_relative_error_bar"] = float(np.max(sd / np.abs(z_true)))
        return out

    z0 = np.concatenate((ident.unknowns(extra_info.pop("z0")), np.zeros(nw * ndx)))
    info = {"true": z_true.copy(), "noise": sigma, "us": us, "observed": xs_obs, "window": window,
            "parameters": nz, "error_bars": bars if sigma > 0 else None, "values": ident.values,
            "compare_fd": False,
            # Gauss-Newton's budget: at dt = 2 ms (--option dt=0.002) the fit wanders 45 iterations at a small
            # damping before its quadratic end and converges at 52 (parameter_error 1.6e-9, 1 s), past the
            # default 50 (MAX_ITERATIONS there at parameter_error 2.4e-5); the registered one converges in 5-8
            "max_iter": 100,
            "bench_state": (xs_obs[0].copy(), us[0].copy()), **extra_info}
    return LeastSquares(name, residual, jacobian, z0, dynamics=sim0, metrics=metrics, info=info,
                        layout=f"{nz} parameters, then {nw} window start offsets of {ndx}")


@register("ur5-sysid", "recover 20 inertial parameters of a UR5 (masses, COMs, inertias) from 2 s of recorded "
          "motion under known torques", method=None)
def ur5_sysid(*, steps: int = 200, dt: float = 0.01, window: int = 10, seed: int = 0, truth_seed: int = 0,
              noise: float = 0.0) -> LeastSquares:
    """Module docstring. ``seed``: the reference the data follow (and the noise, with ``seed + 1``);
    ``truth_seed``: the true robot; ``noise``: standard deviation of the recorded states' noise (rad, rad/s);
    ``window``: a window (an unknown start state) every ``window`` steps, holding ``window - 1`` of them (>= 2)."""
    sigma = _check_noise(noise)
    steps, window = _check_steps(steps, window, low=2, why=" (a window of one knot holds no step: the parameters "
                                 "would not enter its residual)")
    # the residual's Jacobian is dense: (steps + 1) 12 rows, 20 + 12 per window columns; its rows and their stack,
    # then the error bars' SVD (U as large): four of it (measured 2026-11-28, steps=1000, window=5: 2.5 times one)
    nw = steps // window + 1
    check_memory(f"ur5-sysid's residual Jacobian ({steps} steps, {nw} windows)",
                 4 * 8 * (steps + 1) * 12 * (len(UR5_IDENTIFIED) + 12 * nw), "fewer steps or a longer window")
    seed, truth_seed = random_seed("seed", seed), random_seed("truth_seed", truth_seed)
    nominal = ur5_nominal_simulator(dt=dt)
    names = [n for n in nominal.parameter_names() if n.split(":")[0] in ("mass", "com", "inertia")]
    offsets = dict(zip(names, np.cumsum([0] + [nominal.parameter_size(n) for n in names])))
    index = [offsets[n] + k for n, k in UR5_IDENTIFIED]
    p_true = ur5_truth(nominal, names, truth_seed=truth_seed)
    ident = Identification(nominal, names, index, p_true, [n.split(":")[0] != "com" for n, _ in UR5_IDENTIFIED])
    xs, us = ur5_record(ident.base, nominal, steps=steps, seed=seed)
    if sigma > 0:
        rng = np.random.default_rng(seed + 1)
        xs = np.array([nominal.state_integrate(x, rng.normal(0.0, sigma, nominal.ndx)) for x in xs])
    return _windowed_problem("ur5-sysid", ident, xs, us, window, p_true[ident.index], sigma,
                             {"identified": [f"{n}[{k}]" for n, k in UR5_IDENTIFIED], "names": names,
                              "p_true": p_true, "z0": nominal.get_parameters(names)[ident.index]})


CUBE_TRUE_FRICTION = 0.5
CUBE_TRUE_TWIST = np.array([1.0, 0.3, -0.2, 0.5, -1.0, 2.0])
CUBE_TILT = (0.3, 0.2)
#: An observed knot is in flight while the cube's lowest corner is higher than this (m) above the ground:
#: more than the simulator's contact margin (5 mm), so no contact, even a speculative one, acted before it.
CUBE_FLIGHT_CLEARANCE = 0.01


def cube_sysid_start(sim, twist, height=0.05):
    """The tilted cube ``height`` above the ground (:data:`CUBE_TILT`, roll and pitch in rad) with ``twist``."""
    q = sim.neutral_state()[:sim.nq]
    R = pin.rpy.rpyToMatrix(*CUBE_TILT, 0.0)
    q[3:7] = pin.Quaternion(R).coeffs()
    q[2] = height - lowest_point(sim, q, axis=2)  # q[2] = 0 here: the lowest corner's depth below the centre
    return np.concatenate((q, twist))


def _gauss_newton_1d(fun, y, *, flat=None, max_iter=8, max_step=0.5):
    """Gauss-Newton on one unknown ``y`` (here ``log friction``): ``fun(y) -> (r, dr/dy)``, ``fun(y, True) ->
    r``. Each step is capped at ``max_step`` and halved (5 times at most) until ``|r|`` decreases; stops on
    no decrease, a step below 1e-10 or after ``max_iter``. Where the derivative is zero, ``flat(y)`` proposes
    a step (None: stop), taken if it decreases ``|r|``."""
    r, J = fun(y)
    norm = float(np.linalg.norm(r))
    for _ in range(max_iter):
        H = float(J @ J)
        if H == 0.0:
            dy = None if flat is None or norm == 0.0 else flat(y)
            if dy is None or not np.linalg.norm(fun(y + dy, True)) < norm:
                break
        else:
            dy = float(np.clip(-(J @ r) / H, -max_step, max_step))
            for _ in range(6):
                if np.linalg.norm(fun(y + dy, True)) < norm:
                    break
                dy *= 0.5
            else:
                break
        y += dy
        r, J = fun(y)
        norm = float(np.linalg.norm(r))
        if abs(dy) < 1e-10:
            break
    return y


@register("cube-sysid", "recover the friction and the initial twist of a tumbling, sliding cube from its observed "
          "motion", method=None)
def cube_sysid(*, steps: int = 300, every: int = 10, height: float = 0.05, dt: float = 1e-3, contact: str = "ncp",
               seed: int = 0,
               noise: float = 0.0, true_friction: float = CUBE_TRUE_FRICTION, true_twist=None,
               guess_friction: float = 0.3, guess_offset=(0.15, -0.1, 0.08, 0.1, -0.1, 0.15),
               start: str = "staged") -> LeastSquares:
    """The cube of ``cube-throw`` (1 kg, 0.2 m, its own box inertia; ground at z = 0), tilted by
    :data:`CUBE_TILT`, its lowest corner ``height`` above the ground, thrown with a spinning twist: with the
    defaults it flies 85 ms, lands on a corner, tumbles onto a face, slides and stops (~220 ms), observed
    every ``every`` steps up to ``steps`` (1 ms each). Unknowns ``z = (friction, twist (6, local frame))``;
    the start pose is known. Residual: the state error at every observed knot (module docstring). ``ValueError``
    when no observed knot has the cube near the ground, or when every contact of the recording sticks (friction
    would not act on the residual, or only as a lower bound).

    The corner impacts make that residual rough away from the answer: at the true twist its norm is 0 at
    friction 0.5, 1.7 at 0.49 and 3.0 at 0.48 (one knot 15 ms after the landing carries it: the second
    corner's impact moves by a step), with local minima between; in friction alone it is flat wherever every
    contact sticks. Gauss-Newton from the raw guess (``start="raw"``: friction ``guess_friction``, twist
    ``true twist + guess_offset``, itself 0.4 off) stalls at parameter_error 0.077 (residual 3.0; ``trajopt solve
    cube-sysid --option start=raw``, 2026-11-27). ``start="staged"`` (default) makes the start
    in two stated stages before any solver runs (time in ``info["start_time"]``):

    1. *Flight*: the twist from the knots before the observed cube comes within
       :data:`CUBE_FLIGHT_CLEARANCE` of the ground, by Gauss-Newton through the same cube without a ground
       (ballistic; friction does not act; from ``guess_offset`` it reaches the true twist to 1e-15 noise-free).
    2. *Friction by a homotopy over the horizon*: with that twist held, ``log friction`` is fitted by
       Gauss-Newton (:func:`_gauss_newton_1d`, steps capped at a factor e^0.5) to the first ``K`` knots, for
       ``K`` from the first knot after the landing to all of them, each stage starting from the last: every
       new knot moves the estimate a little, so each stage starts inside its basin. The log keeps the steps
       from jumping into the region where every contact sticks (a plain step from 0.3 went to 0.995 there on
       true friction 0.8, and stayed).

    Gauss-Newton (the solver) then refines all 7 unknowns from there. The observed cube must fly past at
    least one knot (``ValueError`` otherwise). With ``noise``: every observed state perturbed in the tangent
    space, seeded by ``seed + 1`` (``seed`` has no other effect: the throw is fixed by ``true_twist``). ``height``
    (m, > 0): of the lowest corner above the ground. ``contact``: ``"ncp"`` or ``"lcp"``, the models whose
    parameter derivatives the residual's Jacobian uses (:data:`problems._options.PARAMETER_CONTACTS`)."""
    sigma = _check_noise(noise)
    steps, every = _check_steps(steps, every, "every")
    # a rollout's sensitivities and their bookkeeping: ~13 kB per step measured (2026-11-28, 20k and 60k steps)
    check_memory(f"cube-sysid's rollout sensitivities ({steps} steps)", 16_000 * (steps + 1), "fewer steps")
    seed = random_seed("seed", seed)
    if start not in ("staged", "raw"):
        raise ValueError(f"start must be 'staged' or 'raw', got {start!r}")
    true_twist = CUBE_TRUE_TWIST if true_twist is None else twist("true_twist", true_twist)
    guess_offset = twist("guess_offset", guess_offset)
    true_friction, guess_friction = (real(what, mu, "a friction coefficient > 0", above=0.0)
                                     for what, mu in (("true_friction", true_friction),
                                                      ("guess_friction", guess_friction)))
    # cube_sysid_start puts the lowest corner ``height`` above the ground (z = 0): <= 0 starts it in the ground
    height = real("height", height, "a finite height > 0 m (of the cube's lowest corner above the ground, z = 0)",
                  above=0.0)
    contact = parameter_contact(contact)
    from dynamics import Simulator

    from .inverse import cube_simulator

    sim0 = cube_simulator(dt=dt, contact=contact, friction=true_friction)
    us = np.zeros((steps, 0))
    knots = np.arange(every, steps + 1, every)
    observed = sim0.rollout(cube_sysid_start(sim0, true_twist, height), us)[knots]
    if sigma > 0:
        rng = np.random.default_rng(seed + 1)
        observed = np.array([sim0.state_integrate(x, rng.normal(0.0, sigma, sim0.ndx)) for x in observed])
    E = np.zeros((sim0.ndx, sim0.nv))
    E[sim0.nv:] = np.eye(sim0.nv)
    free = Simulator(sim0.model, dt=dt)  # the same cube without a ground: its flight

    def rows(z, count, *, sim=None, jac=True):
        """The residual of the first ``count`` knots (and its Jacobian w.r.t. ``z``) through ``sim`` (None:
        the cube on the ground with friction ``z[0]``; ``free``: no ground, the friction column zero)."""
        x0 = cube_sysid_start(sim0, z[1:], height)
        T = int(knots[count - 1])
        system = sim0.with_parameters("friction", z[:1]) if sim is None else sim
        if not jac:
            xs = system.rollout(x0, us[:T])
            return np.concatenate([sim0.state_difference(o, xs[t]) for o, t in zip(observed[:count], knots[:count],
                                                                                   strict=True)])
        if sim is None:
            xs, S = parameter_sensitivity(system, x0, us[:T], ["friction"], initial=E)
        else:  # no ground: no parameter acts; the twist's columns alone, the friction column zero
            jt = trajectory_jacobians(system, x0, us[:T])
            flight = ParameterJacobians(jt.xs, jt.Fx, jt.Fu, np.zeros((T, sim0.ndx, 0)), ())
            xs, S_twist = parameter_sensitivity(system, x0, us[:T], (), initial=E, jac=flight)
            S = np.zeros((T + 1, sim0.ndx, 7))
            S[:, :, 1:] = S_twist
        r, J = [], []
        for o, t in zip(observed[:count], knots[:count], strict=True):
            r.append(sim0.state_difference(o, xs[t]))
            J.append(sim0.state_difference_jacobians(o, xs[t])[1] @ S[t])
        return np.concatenate(r), np.vstack(J)

    def residual(z):
        return rows(z, len(knots), jac=False)

    def friction_used(twist, mu, count):
        """The largest ratio ``|lambda_T| / lambda_n`` of any contact impulse over the first ``count`` knots
        of the rollout with friction ``mu``: the residual there does not depend on friction above it."""
        system = sim0.with_parameters("friction", [mu])
        x, used = cube_sysid_start(sim0, twist, height), 0.0
        for _ in range(int(knots[count - 1])):
            x = system.step(x, us[0])
            lam = system.contacts.impulses if system.contacts is not None else np.zeros((0, 3))
            on = lam[:, 0] > 1e-12 * max(1.0, float(lam[:, 0].max(initial=0.0)))
            if on.any():
                used = max(used, float((np.linalg.norm(lam[on, 1:], axis=1) / lam[on, 0]).max()))
        return used

    def jacobian(z):
        return rows(z, len(knots))

    z_true = np.concatenate(([true_friction], true_twist))

    def bars(z):
        return error_bars(jacobian(z)[1], sigma)[0]

    def metrics(z):
        nonzero = np.abs(z_true) > 0
        J = jacobian(z)[1]
        out = {"parameter_error": float(np.max(np.abs(z - z_true)[nonzero] / np.abs(z_true[nonzero]))),
               "friction": float(z[0]), "unidentified": unidentified(J, len(z))}
        if sigma > 0:
            sd = error_bars(J, sigma)[0]
            out["max_sigma_error"] = float(np.max(np.abs(z - z_true) / sd))
            out["max_relative_error_bar"] = float(np.max(sd[nonzero] / np.abs(z_true[nonzero])))
        return out

    guess = np.concatenate(([guess_friction], true_twist + guess_offset))
    lowest = np.array([lowest_point(sim0, o[:sim0.nq], axis=2) for o in observed])  # the ground is z = 0
    flight = int(np.argmax(lowest < CUBE_FLIGHT_CLEARANCE)) if (lowest < CUBE_FLIGHT_CLEARANCE).any() else len(knots)
    if flight == len(knots):  # before any work: a residual that does not depend on friction at all
        raise ValueError(f"the observed cube never comes within {CUBE_FLIGHT_CLEARANCE} m of the ground up to the last "
                         f"knot (step {knots[-1]}; lowest point {lowest.min():.3g} m): friction does not act on the "
                         "recording and cannot be identified; observe longer (steps) or drop it from lower (height)")
    # before any work: friction blind at the truth (its column 0, or below 1e-10 of the Jacobian's scale: a huge
    # true_friction left a 5e-18 column, which an exact-zero test took for information, then Gauss-Newton stalled)
    if _directions(rows(z_true, len(knots))[1])[3][0]:
        used = friction_used(true_twist, true_friction, len(knots))
        if used < (1.0 - 1e-6) * true_friction:  # a sliding contact's ratio is mu up to the solver's tolerance
            raise ValueError(f"friction never reaches its limit in the recording up to the last knot (step "
                             f"{knots[-1]}): every contact sticks (the largest |lambda_T| / lambda_n is {used:.4g}, "
                             f"below the true friction {true_friction:g}), so the recorded states are the same for any "
                             f"friction above {used:.4g} and it cannot be identified; observe longer (steps) or throw "
                             "with a lower true_friction")
        raise ValueError(f"the recording up to the last knot (step {knots[-1]}) does not determine friction: the "
                         "residual's Jacobian is blind along it at the true values (a singular value below 1e-10 "
                         "of the largest); observe longer (steps) or throw differently (twist)")
    t_start = time.perf_counter()
    z0 = guess.copy()
    if start == "staged":
        if flight < 1:
            raise ValueError(f"the observed cube is within {CUBE_FLIGHT_CLEARANCE} m of the ground at the first "
                             f"knot (step {knots[0]}): no flight to estimate the twist from; observe more often "
                             "(every) or drop it from higher (height)" + (
                                 f"; or lower the noise: noise={sigma:g} moves every observed pose by about that "
                                 "much" if sigma > 0 else ""))
        # Stage 1: the twist from the flight, Gauss-Newton without a ground (smooth, nearly linear).
        for _ in range(20):
            r, J = rows(z0, flight, sim=free)
            step = np.linalg.lstsq(J[:, 1:], -r, rcond=None)[0]
            z0[1:] += step
            if np.linalg.norm(step) < 1e-12 * (1 + np.linalg.norm(z0)):
                break
        # Stage 2: log friction over a growing horizon, the twist held.

        def fit(count):
            def fun(y, residual_only=False):
                z = z0.copy()
                z[0] = np.exp(y)
                if residual_only:
                    return rows(z, count, jac=False)
                r, J = rows(z, count)
                return r, J[:, 0] * z[0]
            return fun

        def below_used(count):
            def flat(y):
                used = friction_used(z0[1:], np.exp(y), count)
                return None if used == 0.0 else float(np.log(0.95 * used) - y)
            return flat

        for count in range(flight + 1, len(knots) + 1):
            z0[0] = np.exp(_gauss_newton_1d(fit(count), float(np.log(z0[0])), flat=below_used(count)))
    return LeastSquares("cube-sysid", residual, jacobian, z0, dynamics=sim0, metrics=metrics,
                        layout="friction, then the initial twist's 6 (vx, vy, vz, wx, wy, wz)",
                        info={"true": z_true, "guess": guess, "start": start, "flight_knots": flight,
                              "start_time": time.perf_counter() - t_start,
                              "identified": ["friction"] + [f"twist[{k}]" for k in range(6)],
                              "noise": sigma, "observed": observed, "knots": knots,
                              "error_bars": bars if sigma > 0 else None,
                              "bench_state": (cube_sysid_start(sim0, z0[1:], height), np.zeros(0))})
