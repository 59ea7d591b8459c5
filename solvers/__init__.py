"""Trajectory-optimization solvers over the ``trajopt`` plugin protocol (never ``dynamics``)."""
