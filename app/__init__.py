"""The ``trajopt`` command line: the application on top of the toolkit.

``app`` imports everything (``problems``, ``solvers``, ``dynamics``, ``trajopt``); nothing imports
``app`` (the layers of DESIGN.md, held by ``tests/test_layers.py``). Its modules:

- :mod:`app.cli`: the command (``trajopt`` console script, ``python -m app``): list, simulate,
  solve, compare, sweep, bench; writing results that are never lost (atomic files, locks, signals);
- :mod:`app.sweep`: parameter and seed sweeps on Dask;
- :mod:`app.viewer`: ``scene.html``, 3-D playback of a trajectory in the browser.
"""

from .cli import main

__all__ = ["main"]
