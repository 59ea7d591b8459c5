"""contactraj core: the optimal-control problem, the plugin protocol, costs, finite differences.

Notation (the same in every module, after Crocoddyl):

====================  ==========================================================
``nq``, ``nv``        configuration and velocity sizes
``nx = nq + nv``      state size; a state is ``x = concat(q, v)``
``ndx = 2 nv``        tangent-space size of the state (free-flyer quaternions!)
``nu``                control size; ``tau = B u`` (unactuated joints take none)
``T``                 horizon (number of steps)
``xs``                states, (T+1, nx);  ``us``: controls, (T, nu)
``Fx``, ``Fu``        step Jacobians d x+/dx (ndx, ndx) and d x+/du (ndx, nu)
``L, Lx, Lu``         cost value and gradient (ndx), (nu)
``Lxx, Lxu, Luu``     cost Hessian blocks (ndx, ndx), (ndx, nu), (nu, nu)
``Qxx, Quu, Vx, Vxx`` DDP's action-value and value derivatives
``K, k``              DDP feedback gain (nu, ndx) and feed-forward (nu)
``damping``           Levenberg-Marquardt damping of the Gauss-Newton solvers (never ``lam``)
====================  ==========================================================

Contact (one step's ``m`` constraint rows; :mod:`contact.adapter`, DESIGN.md "One step"):

====================  ==========================================================
``J``                 contact Jacobian (m, nv), contact frame, normal row first
``A``                 Delassus matrix ``J M^-1 J^T`` (m, m) (DESIGN.md writes it ``G``)
``b``                 free contact velocity (m,): ``J v_f`` plus stabilisation (DESIGN's ``g``)
``lam``               contact impulses ``lambda`` (m,); solutions hold them in ``.lam``
``c``                 contact velocities after the step ``A lam + b`` (m,)
``phi``               signed distances of the normal rows
``MJt``               ``M^-1 J^T`` (nv, m): impulses to velocity changes
``dv_fixed``          ``dv+/dtheta`` at fixed impulses (nv, ncols); ``dv+ = dv_fixed + MJt dlam``
====================  ==========================================================

:mod:`contact.lcp` writes its boxed LCP in the textbook form ``w = A x + b``: there ``x`` is ``lam``
and ``w`` is ``c`` (its module docstring); ``LCPSolution.x`` and ``NCPSolution.x`` are read-only
aliases of ``.lam``.

Jacobians live in the tangent space: ``x (+) dx`` is ``state_integrate`` and
``state_difference(x0, x1)`` is the ``dx`` with ``x1 = x0 (+) dx``.

Any object with ``step``/``step_derivatives``/``state_integrate``/``state_difference``
and ``nx``/``ndx``/``nu`` is a :class:`Dynamics` (``dynamics.Simulator`` is one). Solvers take a
trajectory's states and Jacobians (``xs`` (T+1, nx), ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu)) in
one call, :func:`rollout_derivatives` / :func:`knot_derivatives`, which use the dynamics' own
batched calls when it has them.

:class:`ParameterDynamics` makes a simulator's named physical parameters (masses, COMs, inertias,
placements, friction) time-invariant decision variables of an OCP, for every solver (co-design).
"""

from .casadi_bridge import casadi_cost, casadi_cost_local, casadi_step, casadi_step_local
from .costs import ControlCost, Cost, CostDerivatives, CostSum, FunctionCost, StateCost
from .numdiff import FDJacobians, fd_tolerance, max_relative_error, step_jacobians_fd
from .lsq import LeastSquares
from .ocp import OCP
from .parametric import ParameterDynamics
from .protocol import Dynamics, check_dynamics, difference_jacobians, knot_derivatives, rollout_derivatives

__all__ = [
    "OCP",
    "LeastSquares",
    "ParameterDynamics",
    "casadi_cost",
    "casadi_cost_local",
    "casadi_step",
    "casadi_step_local",
    "ControlCost",
    "Cost",
    "CostDerivatives",
    "CostSum",
    "Dynamics",
    "FDJacobians",
    "FunctionCost",
    "StateCost",
    "check_dynamics",
    "difference_jacobians",
    "fd_tolerance",
    "knot_derivatives",
    "max_relative_error",
    "rollout_derivatives",
    "step_jacobians_fd",
]
