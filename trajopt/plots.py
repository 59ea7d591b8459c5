"""Plots (matplotlib is imported inside each function, with a file backend)."""

from __future__ import annotations

import os

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


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
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
