// What step.cpp (the fused hard-LCP contact solve, FusedLCP) offers the other parts of the core.
#pragma once
#include "common.hpp"
#include <Eigen/Core>
#include <nanobind/eigen/dense.h>
#include <pinocchio/multibody.hpp>

#include <memory>

#include "kinematics.hpp"
#include "lcp.hpp"
#include "linalg.hpp"
#include "ncp.hpp"
#include "relaxed.hpp"

namespace contactraj {

// FusedLCP.solve's body for the FusedLCP object ``fused``: v+ into ``v_next`` and the StepState (None
// without rows) into ``state``; ``*dq_c`` the position correction's tangent displacement (inside the
// state) or nullptr without one. False (nothing written) when the detector hands back to Python.
bool fused_lcp_solve(nb::handle fused, nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                     const Eigen::VectorXd& v_free, double dt, nb::handle previous, Eigen::VectorXd& v_next,
                     nb::object& state, const Eigen::VectorXd** dq_c);

// The position correction's tangent displacement dq_c of a StepState (``state``), or nullptr (None, or no
// correction); throws when ``state`` is something else.
const Eigen::VectorXd* step_state_correction(nb::handle state);

// ``state`` is a StepState.
bool is_step_state(nb::handle state);

// The linearization of a StepState's LCP at its solution (lcp::linearize) and, when no friction row is bounded
// (K = J_C M^-1 J_C^T symmetric), K's factor: made once per state by whichever Jacobian asks first (the
// state Jacobians of FusedLCP.jacobian, the parameter Jacobians of params.cpp) and kept with the state.
struct ReducedFactor {
  lcp::Reduced red;
  SymFactor sym;  // sym_factor(red.K) when !red.bounded: sym_apply solves with it, the rank-r products read F
  LstsqFactor ls;  // lstsq_factor(red.K) when red.bounded: lstsq_apply solves with it
};

// An NCP state's mode equations at its solution (ncp::linearization: E dz = -(Fc dc + ...) on the unknowns act)
// with E's least-squares factor and solution operator (lstsq_pinv), made once per state: the state Jacobians
// (step.cpp ncp_velocity_jacobian) and the parameter Jacobians (params.cpp model_columns) solve with it.
struct NcpFactor {
  RowMat E, Fc;
  IdxVec act;
  LstsqFactor ls;
};

// A relaxed state's linearization at its solution (relaxed::linearization: E dz = -(Fc dc + Fphi dphi) on the
// unknowns keep, E regular), made once per state, and E^-1 (solve on the identity), made by inverse() when the
// parameter Jacobians' map path first asks (params.cpp model_columns; a few columns solve with E directly).
struct RelaxedFactor {
  RowMat E, Fc, Fphi;
  const RowMat& inverse() const {
    if (Einv.rows() != E.rows()) Einv = solve(E, RowMat::Identity(E.rows(), E.rows()));
    return Einv;
  }

 private:
  mutable RowMat Einv;
};

// The detector's arrays of a StepState's contacts (Contacts, contact/detection.py), read once when the state is made:
// pointers into the arrays its ``contacts`` tuple holds (alive as long as the state), so that the Jacobians do not
// cast them from Python objects again (a cast per array costs about 0.1 us: 1 us per parameter Jacobian on the
// catapult).
struct ContactArrays {
  const double *points = nullptr, *normals = nullptr, *phi = nullptr, *radius = nullptr, *axes = nullptr,
               *gap = nullptr, *slide = nullptr;
  const int64_t *body_a = nullptr, *body_b = nullptr, *normal_body = nullptr, *point_body = nullptr,
                *pair = nullptr;
};

// What the parameter Jacobians (params.cpp) read of a StepState, by reference (valid while the state
// lives): J, M^-1, M^-1 J^T, the LCP and its solution, and the contact rows' count (nc r).
struct StepStateView {
  const RowMat& J;
  const RowMat& Minv;
  const RowMat& MJt;
  const lcp::Problem& problem;
  const lcp::Solution& solution;
  int64_t m_contact;
  const ReducedFactor& factor;  // made now when the state has none yet
  // what the placement and position-correction columns read: the detector's arrays (nullptr without
  // contacts), the contacts' count and rows each, the normal rows with their bias slopes, and the
  // position correction (nullptr without one) with its rows
  const ContactArrays* arrays;
  int64_t nc, r;
  const lcp::VectorXl& normal_rows;
  const Eigen::VectorXd& bias_slope;
  const Correction* correction;
  const lcp::VectorXl& deep_rows;
  const ContactGeometry* geo;  // the contacts' kinematics at q on the system's model (nullptr without contacts)
  // NCP contact (the Coulomb-cone NCP of ncp.cpp, FusedLCP ncp=True): its problem and solution. Then problem and
  // factor above are empty and solution is not an LCP's (its x and w are the impulses and velocities, but its
  // modes are the NCP's group modes): read the NCP's own
  const ncp::State* ncp = nullptr;
  // relaxed contact (relaxed.cpp's central path, FusedLCP kappa > 0): its problem and solution (problem, solution
  // and factor above as for the NCP)
  const relaxed::State* relaxed = nullptr;
  const NcpFactor* ncp_factor = nullptr;  // the NCP's (made now when the state has none yet)
  const RelaxedFactor* relaxed_factor = nullptr;  // the relaxed model's (likewise)
};
// The view of ``state`` (a StepState of LCP, NCP or relaxed contact; throws nanobind's cast error otherwise).
StepStateView step_state_view(nb::handle state);

// FusedLCP.jacobian's body (Simulator._contact_velocity_jacobian without adjoint) for the StepState ``state``.
void fused_lcp_jacobian(nb::handle fused, const pinocchio::Model& M, pinocchio::Data& D, nb::handle state,
                        const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                        const Eigen::VectorXd& v_next, double dt, const IdxVec& actuated, const IdxVec& spring_dofs,
                        const Eigen::VectorXd& stiffness, const IdxVec& damp_dofs, const Eigen::VectorXd& damping,
                        nb::DRef<RowMat> dv_dx, nb::DRef<RowMat> dv_du);

// ContactModel.correction_jacobian for the StepState ``state`` (which has a correction): d dq_c/dq (nv, nv)
// into ``out``; ``model0``/``data0`` the gravity-free copy of the step's model and a workspace of it.
void fused_lcp_correction_jacobian(nb::handle fused, nb::handle state, const Eigen::VectorXd& q,
                                   const pinocchio::Model& model0, pinocchio::Data& data0, RowMat& out);

// A ParameterPlan (params.cpp)?
bool is_parameter_plan(nb::handle plan);

// ParameterPlan.compute(state, q, v, tau, v_next, dt, impulses=False)'s Fp (ndx, npar) into ``Fp`` (state: a
// StepState or None without contact): the fused step's derivatives with parameters in one call. ``ready``: the
// step's Data after the state Jacobians' RNEA derivatives (contact) or ABA derivatives (none), whose kinematics
// the plan reads instead of computing its own (params.cpp ParameterPlan::compute_into), or nullptr.
void parameter_plan_into(nb::handle plan, nb::handle state, const Eigen::VectorXd& q, const Eigen::VectorXd& v,
                         const Eigen::VectorXd& tau, const Eigen::VectorXd& v_next, double dt, Eigen::Ref<RowMat> Fp,
                         const pinocchio::Data* ready);

}  // namespace contactraj
