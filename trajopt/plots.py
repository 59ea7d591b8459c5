"""Plots (matplotlib is imported inside each function, with a file backend)."""

from __future__ import annotations

import os

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    """Lay out, write (creating the folder) and close a figure; returns ``path``."""
    plt = _pyplot()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_states(xs, *, dt: float, names=None, title: str = "", path: str, nq: int | None = None) -> str:
    """Configuration and velocity trajectories against time; writes ``path`` (PNG) and returns it.

    ``xs`` (T+1, nx); ``names`` one label per state entry; ``nq`` splits the
    positions (top panel) from the velocities (bottom panel).
    """
    plt = _pyplot()
    xs = np.asarray(xs)
    nx = xs.shape[1]
    nq = nx // 2 if nq is None else nq
    names = names or [f"x[{i}]" for i in range(nx)]
    t = np.arange(len(xs)) * dt
    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for i in range(nq):
        axes[0].plot(t, xs[:, i], label=names[i])
    for i in range(nq, nx):
        axes[1].plot(t, xs[:, i], label=names[i])
    axes[0].set_ylabel("configuration q")
    axes[1].set_ylabel("velocity v")
    axes[1].set_xlabel("time [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines and len(ax.lines) <= 12:
            ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_convergence(histories: dict, *, path: str, title: str = "") -> str:
    """Cost against iteration and against wall time, one line per method; writes ``path``.

    When the iterations carry the problem's own figures (``info["metrics"]``, e.g. the
    catapult's distance to the target), a third panel shows the first of them against
    wall time: a cost that includes a regularization can flatten while the figure that
    matters still moves.
    """
    plt = _pyplot()
    metric = next((k for hist in histories.values() for h in hist if h.get("metrics") for k in h["metrics"]), None)
    fig, axes = plt.subplots(1, 3 if metric else 2, figsize=(15 if metric else 10, 4))
    for name, hist in histories.items():
        if not hist:
            continue
        cost = np.array([h["cost"] for h in hist], dtype=float)
        t = np.array([h["time"] for h in hist], dtype=float)
        shift = min(0.0, np.nanmin(cost)) - 1e-12
        axes[0].semilogy(np.arange(1, len(cost) + 1), cost - shift, marker=".", label=name)
        axes[1].semilogy(t, cost - shift, marker=".", label=name)
        if metric:
            pts = [(h["time"], h["metrics"][metric]) for h in hist if metric in h.get("metrics", {})]
            if pts:
                mt, mv = np.array(pts).T
                axes[2].plot(mt, mv, marker=".", label=name)
    axes[0].set_xlabel("iteration")
    axes[1].set_xlabel("wall time [s]")
    negative = any(h and min(x["cost"] for x in h) < 0 for h in histories.values())
    for ax in axes[:2]:
        ax.set_ylabel("cost - min cost" if negative else "cost")
    if metric:
        values = [h["metrics"][metric] for hist in histories.values() for h in hist if metric in h.get("metrics", {})]
        if min(values) > 0:
            axes[2].set_yscale("log")
        axes[2].set_xlabel("wall time [s]")
        axes[2].set_ylabel(metric.replace("_", " "))
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_controls(us, *, dt: float, lower=None, upper=None, path: str, title: str = "") -> str:
    """Controls against time, with their bounds dashed; writes ``path``."""
    plt = _pyplot()
    us = np.asarray(us)
    t = np.arange(len(us)) * dt
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for i in range(us.shape[1]):
        line, = ax.plot(t, us[:, i], label=f"u[{i}]")
        for bound in (lower, upper):
            if bound is not None and np.isfinite(bound[i]):
                ax.axhline(bound[i], color=line.get_color(), ls="--", lw=0.8)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("control")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, path)


def animate_planar(qs, shapes_fn, *, dt: float, path: str, frames: int = 80, target=None, title: str = "") -> str:
    """A GIF of a planar motion: ``shapes_fn(q)`` gives the shapes to draw (see
    ``Simulator.shapes_2d``); ``target`` (x, y) is marked. Writes ``path``."""
    plt = _pyplot()
    from matplotlib.animation import FuncAnimation, PillowWriter
    from matplotlib.patches import Circle, Polygon

    qs = np.asarray(qs)
    idx = np.unique(np.linspace(0, len(qs) - 1, min(frames, len(qs))).astype(int))
    all_pts = []
    for i in idx[:: max(1, len(idx) // 10)]:
        for kind, data in shapes_fn(qs[i]):
            all_pts.append(data.reshape(-1, 2) if kind == "polygon" else np.asarray(data[:2])[None])
    if target is not None:
        all_pts.append(np.asarray(target, float)[None])
    P = np.vstack(all_pts)
    lo, hi = P.min(axis=0) - 0.3, P.max(axis=0) + 0.3
    # the figure's height follows the scene's aspect within 1:4 .. 4:1 (the axes keep equal scales inside it): a
    # motion far taller than wide (a diverged flight 1e6 m up) made a figure of ~1e5 inches, and 24 GB of frames
    aspect = float(np.clip((hi[1] - lo[1]) / max(hi[0] - lo[0], 1e-9), 0.25, 4.0))
    fig, ax = plt.subplots(figsize=(6, 6 * aspect))
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.grid(alpha=0.2)

    def draw(k):
        for patch in list(ax.patches) + list(ax.lines):
            patch.remove()
        i = idx[k]
        for kind, data in shapes_fn(qs[i]):
            if kind == "polygon":
                ax.add_patch(Polygon(data, closed=True, fc="tab:blue", ec="k", alpha=0.6))
            elif kind == "circle":
                ax.add_patch(Circle(data[:2], data[2], fc="tab:orange", ec="k", alpha=0.7))
            else:
                ax.plot([data[0], data[2]], [data[1], data[3]], lw=max(2.0, 200 * data[4]), color="tab:green",
                        solid_capstyle="round", alpha=0.7)
        if target is not None:
            ax.plot([target[0]], [target[1]], "rx", ms=12, mew=3)
        ax.set_title(f"{title}  t = {i * dt:.3f} s")
        return []

    anim = FuncAnimation(fig, draw, frames=len(idx), blit=False)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=20))
    plt.close(fig)
    return path


def plot_residuals(histories: dict, *, path: str, title: str = "") -> str:
    """Residual norm against iteration (log scale), one line per run; writes ``path``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = [name for name, hist in histories.items() if hist]
    for name in drawn:
        hist = histories[name]
        ax.semilogy([h["iteration"] + 1 for h in hist], [h["residual"] for h in hist], marker="o", label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("residual |r|")
    ax.grid(alpha=0.3, which="both")
    if drawn:
        ax.legend()
    else:  # every run stopped at its start (e.g. a start that already solves the problem): say so, not a blank plot
        ax.text(0.5, 0.5, "no iterations: every run stopped at its start", transform=ax.transAxes, ha="center")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def errors_in_sigmas(bars: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(z, has_bar)`` for the entries of ``bars`` (``{name: {"estimate", "sigma", "true"}}``): ``has_bar`` where
    the error bar is finite and nonzero, ``z = (estimate - true) / sigma`` there and NaN elsewhere (an entry the
    data do not see has no error in sigmas: not 0, a perfect fit). The error-bar plot and the CLI's table."""
    has_bar = np.array([0 < b["sigma"] < np.inf for b in bars.values()], dtype=bool)
    z = np.array([(b["estimate"] - b["true"]) / b["sigma"] if k else np.nan
                  for b, k in zip(bars.values(), has_bar, strict=True)], dtype=float)
    return z, has_bar


def plot_error_bars(bars: dict, *, path: str, title: str = "") -> str:
    """Identified parameters against their true values, in units of their Gauss-Newton error bars: one row per
    entry of ``bars`` (``{name: {"estimate", "sigma", "true"}}``, ``summary["error_bars"]``), the error
    ``(estimate - true) / sigma`` as a point with its own +-1 sigma, on bands of 1 and 2 sigma; an entry with
    ``sigma`` 0 or not finite (the data do not see it) is listed with its value in the label and no point.
    Writes ``path``."""
    plt = _pyplot()
    names = list(bars)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.3 * max(1, len(names))))
    y = np.arange(len(names))[::-1]
    z, seen = errors_in_sigmas(bars)
    ax.axvspan(-2, 2, color="tab:green", alpha=0.10, lw=0, label="within 2 sigma")
    ax.axvspan(-1, 1, color="tab:green", alpha=0.18, lw=0, label="within 1 sigma")
    ax.axvline(0.0, color="k", lw=0.8)
    ok = np.isfinite(z)
    ax.errorbar(z[ok], y[ok], xerr=1.0, fmt="o", color="tab:blue", capsize=3, label="estimate +- sigma")
    labels = [f"{n}  {b['estimate']:.4g} +- {b['sigma']:.2g}" if k else f"{n}  {b['estimate']:.4g} (no error bar)"
              for n, b, k in zip(names, bars.values(), seen, strict=True)]
    ax.set_yticks(y, labels, fontsize=8)
    reach = max(3.0, float(np.abs(z[ok]).max()) + 1.5) if ok.any() else 3.0
    ax.set_xlim(-reach, reach)
    ax.set_xlabel("(estimate - true) / sigma")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8, frameon=False)
    if title:
        ax.set_title(title, pad=24)
    return _save(fig, path)
