"""Pieces shared by the solvers: rollouts, cost evaluation, the progress table."""

from __future__ import annotations

import sys

import numpy as np


def knot_weights(T: int, K: int):
    """``(i, w)``: step t's controls are ``(1 - w[t]) P[i[t]] + w[t] P[i[t] + 1]`` for ``K < T`` knot
    values ``P`` spread over ``T`` steps (piecewise linear; CEM's and gn's parametrisation)."""
    s = np.linspace(0.0, K - 1.0, T)
    i = np.minimum(s.astype(int), K - 2)
    return i, s - i


def rollout(ocp, us) -> np.ndarray:
    """States (T+1, nx) under ``us``; a diverging simulation raises (SimulationError is a RuntimeError)."""
    return ocp.rollout(us)


def evaluate(ocp, xs, us) -> float:
    cost = ocp.cost(xs, us)
    if not np.isfinite(cost):
        raise ValueError(f"non-finite cost {cost}")
    return cost


def record(info: dict, history: list, progress: "Progress", callback, *, ocp=None, xs=None, us=None) -> None:
    """The end of every solver iteration: keep ``info``, show its row, hand it to the callback.

    Given the iterate (``ocp, xs, us``) and a problem with ``metrics``, ``info["metrics"]`` gets the
    problem's own figures (e.g. the catapult's distance to the target) for the convergence plot.
    """
    metrics = getattr(ocp, "metrics", None)
    if metrics is not None and xs is not None:
        info["metrics"] = {k: float(v) for k, v in metrics(np.asarray(xs), np.asarray(us)).items()}
    history.append(info)
    progress.row(info)
    if callback is not None:
        callback(info)


def out_of_time(info: dict, time_limit: float | None) -> bool:
    return time_limit is not None and info["time"] > time_limit


class Progress:
    """The verbose iteration table, which doubles as the progress display."""

    def __init__(self, method: str, verbose: bool, columns: list[str], stream=None):
        self.verbose = verbose
        self.columns = columns
        self.stream = stream or sys.stdout
        self.method = method
        self._rows = 0

    def row(self, info: dict) -> None:
        if not self.verbose:
            return
        if self._rows % 20 == 0:
            head = f"{'iter':>5} {'cost':>14} " + " ".join(f"{c:>10}" for c in self.columns) + f" {'time [s]':>9}"
            print(f"[{self.method}]\n{head}", file=self.stream)
        vals = " ".join(_fmt(info.get(c)) for c in self.columns)
        print(f"{info['iteration']:>5} {info['cost']:>14.6e} {vals} {info['time']:>9.2f}", file=self.stream, flush=True)
        self._rows += 1

    def done(self, status, cost, wall) -> None:
        if self.verbose:
            print(f"[{self.method}] {status.value}: cost {cost:.6e} after {self._rows} iterations, {wall:.2f} s",
                  file=self.stream, flush=True)


def _fmt(v) -> str:
    if v is None:
        return f"{'-':>10}"
    if isinstance(v, (int, np.integer)):
        return f"{v:>10d}"
    return f"{v:>10.3e}"
