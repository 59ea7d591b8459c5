// What step.cpp (the fused hard-LCP contact solve, FusedLCP) offers the other parts of the core.
#pragma once
#include "common.hpp"
#include <Eigen/Core>

namespace contactraj {

// FusedLCP.solve's body for the FusedLCP object ``fused``: v+ into ``v_next`` and the StepState (None
// without rows) into ``state``; ``*dq_c`` the position correction's tangent displacement (inside the
// state) or nullptr without one. False (nothing written) when the detector hands back to Python.
bool fused_lcp_solve(nb::handle fused, nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                     const Eigen::VectorXd& v_free, double dt, nb::handle previous, Eigen::VectorXd& v_next,
                     nb::object& state, const Eigen::VectorXd** dq_c);

}  // namespace contactraj
