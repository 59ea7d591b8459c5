// The parameter Jacobian Fp = dx+/dp of one step (dynamics/parameters.py step_derivatives, whose module
// docstring has the mathematics) in one call, for a step without contact or with the fused LCP's contact
// state (a StepState): the same operations in the same order as the Python path, which stays the reference
// (and serves the other contact states: NCP, the Python LCP's).
//
//   tau_total = tau + J^T lambda / dt,  a = ABA(q, v, tau_total)          (the step's model, LOCAL as pin.aba)
//   R = Y(q, v, a) dpi/dp (+ R_extra)                                       (regressor, one 10-block per column)
//   G = -dt M^-1 R,  dc = J G (+ dc_extra)                                  (M^-1 and J of the state)
//   e: friction's bounded rows, lambda_i / mu_i;  dc += A e
//   K dz = -dc[C] (lcp::linearize of the solution's modes: sym_lstsq, or lstsq when some row is bounded)
//   dlambda = e + P dz (or dz on the rows C),  dv = G + M^-1 J^T dlambda
//   Fp = (dIntegrate_ARG1(q, dq) (dt dv + dqp_extra), dv)                  (the identity when euclidean)
//
// R_extra / dc_extra / dqp_extra are the placement columns and the position correction's derivative, made
// in Python (augmented model, contact kinematics) and passed in; None where there is none. The linearization
// and K's factor are the state Jacobians' (the StepState's ReducedFactor, step.hpp: lcp::linearize and
// sym_factor's SymFactor, made once per state by the first Jacobian that asks); a bounded K (lstsq) is solved
// again here (small: the sliding rows' reduced block).
#include "common.hpp"
#include "lcp.hpp"
#include "linalg.hpp"
#include "step.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/ndarray.h>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/regressor.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace contactraj {
namespace {

using ArrD = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutMat = nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Map = Eigen::Map<const RowMat>;
using OutMap = Eigen::Map<RowMat>;

std::string shape(int64_t r, int64_t c) { return "(" + std::to_string(r) + ", " + std::to_string(c) + ")"; }

// A (rows, cols) C-order array as a matrix; None as (0, 0). Names the argument on a wrong shape.
Map optional_matrix(const ArrD& a, const char* name, int64_t rows, int64_t cols) {
  if (!a.is_valid()) return Map(nullptr, 0, 0);
  const int64_t r = static_cast<int64_t>(a.shape(0)), c = static_cast<int64_t>(a.shape(1));
  if (r != rows || c != cols)
    throw std::invalid_argument(std::string("parameter_jacobian: ") + name + " has shape " + shape(r, c) +
                                ", expected " + shape(rows, cols));
  return Map(a.data(), r, c);
}

// R (nv, npar) = Y(q, v, a) dpi/dp: column k is Y's 10 columns of joint body[k] times dpi[:, k] (0: the
// column is left as it is). Y is Pinocchio's joint torque regressor (nv, 10 (njoints - 1)).
void regressor_columns(const pinocchio::Model& M, pinocchio::Data& D, const Eigen::VectorXd& q,
                       const Eigen::VectorXd& v, const Eigen::VectorXd& a, const IdxVec& body, const CRowRef& dpi,
                       RowMat& R) {
  pinocchio::computeJointTorqueRegressor(M, D, q, v, a);
  const auto& Y = D.jointTorqueRegressor;
  for (Eigen::Index k = 0; k < body.size(); ++k)
    if (body[k] > 0) R.col(k).noalias() = Y.middleCols(10 * (body[k] - 1), 10) * dpi.col(k);
}

void check_chain(const pinocchio::Model& M, const IdxVec& body, const CRowRef& dpi, int64_t npar) {
  if (body.size() != npar || dpi.rows() != 10 || dpi.cols() != npar)
    throw std::invalid_argument("parameter_jacobian: body must have npar = " + std::to_string(npar) +
                                " entries and dpi shape (10, npar), got " + std::to_string(body.size()) + " and " +
                                shape(dpi.rows(), dpi.cols()));
  for (Eigen::Index k = 0; k < npar; ++k)
    if (body[k] < 0 || body[k] >= M.njoints)
      throw std::invalid_argument("parameter_jacobian: body[" + std::to_string(k) + "] = " +
                                  std::to_string(body[k]) + " is not a joint id (0 .. " +
                                  std::to_string(M.njoints - 1) + ")");
}

// Fp (ndx, npar) into ``Fp`` and dlambda (m, npar) into ``dlam`` (m = 0 without contact); see the header.
void parameter_jacobian(nb::handle step_model, nb::handle model, nb::handle data, nb::handle state,
                        const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                        const Eigen::VectorXd& dq, double dt, bool euclidean, const IdxVec& body, const CRowRef& dpi,
                        int64_t friction_col, const ArrD& R_extra, const ArrD& dc_extra, const ArrD& dqp_extra,
                        OutMat Fp, OutMat dlam_out) {
  const pinocchio::Model& M = model_of(step_model);
  const pinocchio::Model& M_int = model_of(model);
  pinocchio::Data& D = data_of(data);
  const int64_t nv = M.nv, npar = static_cast<int64_t>(Fp.shape(1));
  if (q.size() != M.nq || v.size() != nv || tau.size() != nv || dq.size() != nv)
    throw std::invalid_argument("parameter_jacobian: q, v, tau or dq has the wrong size");
  if (M_int.nq != M.nq || M_int.nv != nv) throw std::invalid_argument("parameter_jacobian: the models differ");
  if (static_cast<int64_t>(Fp.shape(0)) != 2 * nv)
    throw std::invalid_argument("parameter_jacobian: Fp has shape " + shape(Fp.shape(0), Fp.shape(1)) +
                                ", expected (2 nv, npar) = " + shape(2 * nv, npar));
  if (friction_col >= npar) throw std::invalid_argument("parameter_jacobian: friction_col out of range");
  check_chain(M, body, dpi, npar);
  const bool contact = !state.is_none();
  const StepStateView* st = nullptr;
  std::optional<StepStateView> view;
  if (contact) {
    view.emplace(step_state_view(state));
    st = &*view;
  }
  const int64_t m = contact ? st->J.rows() : 0;
  if (static_cast<int64_t>(dlam_out.shape(0)) != m || static_cast<int64_t>(dlam_out.shape(1)) != npar)
    throw std::invalid_argument("parameter_jacobian: dlam has shape " + shape(dlam_out.shape(0), dlam_out.shape(1)) +
                                ", expected (m, npar) = " + shape(m, npar));
  const Map Rx = optional_matrix(R_extra, "R_extra", nv, npar);
  const Map dcx = optional_matrix(dc_extra, "dc_extra", m, npar);
  const Map dqx = optional_matrix(dqp_extra, "dqp_extra", nv, npar);
  if (friction_col >= 0 && !contact)
    throw std::invalid_argument("parameter_jacobian: a friction column needs a contact state");

  // the fixed-impulse part: G = -dt M^-1 (dRNEA/dp - dF/dp)
  Eigen::VectorXd tau_total = tau;
  if (contact) tau_total.noalias() += st->J.transpose() * st->solution.x / dt;
  RowMat Minv_own;
  if (!contact) {
    pinocchio::computeMinverse(M, D, q);
    Minv_own = D.Minv;
    Minv_own.triangularView<Eigen::StrictlyLower>() = Minv_own.transpose().triangularView<Eigen::StrictlyLower>();
  }
  const RowMat& Minv = contact ? st->Minv : Minv_own;
  const Eigen::VectorXd a = pinocchio::aba(M, D, q, v, tau_total, pinocchio::Convention::LOCAL);
  RowMat R = RowMat::Zero(nv, npar);
  regressor_columns(M, D, q, v, a, body, dpi, R);
  if (Rx.size()) R += Rx;
  RowMat dv(nv, npar);
  dv.noalias() = Minv * R;
  dv *= -dt;

  OutMap dlam(dlam_out.data(), m, npar);
  if (contact) {
    const lcp::Problem& prob = st->problem;
    const lcp::Solution& sol = st->solution;
    // dc = J G (+ the placements' kinematic and distance terms)
    RowMat dc(m, npar);
    dc.noalias() = st->J * dv;
    if (dcx.size()) dc += dcx;
    // friction: the bounded rows' explicit impulse derivative e (lambda_i = s_i mu lambda_n), c moves by A e
    dlam.setZero();
    bool any_e = false;
    if (friction_col >= 0) {
      for (int64_t i = 0; i < m; ++i)
        if (sol.modes[i] == 3 && prob.mu[i] > 0) {
          dlam(i, friction_col) = sol.x[i] / prob.mu[i];
          any_e = any_e || dlam(i, friction_col) != 0.0;
        }
      if (any_e) dc.col(friction_col).noalias() += prob.A * dlam.col(friction_col);
    }
    const lcp::Reduced& red = st->factor.red;
    const int64_t k = red.C.size();
    if (k) {
      RowMat rhs(k, npar);
      for (int64_t i = 0; i < k; ++i) rhs.row(i) = -dc.row(red.C[i]);
      RowMat dz(k, npar);
      if (red.bounded) {
        dz = lstsq(red.K, rhs, RANK_RTOL);
        dlam.noalias() += red.P * dz;
      } else {
        sym_apply(st->factor.sym, rhs, dz);  // sym_lstsq(K, rhs): the state Jacobians' factor
        for (int64_t i = 0; i < k; ++i) dlam.row(red.C[i]) += dz.row(i);
      }
    }
    dv.noalias() += st->MJt * dlam;
  }

  OutMap F(Fp.data(), 2 * nv, npar);
  F.bottomRows(nv) = dv;
  RowMat dqp = dt * dv;
  if (dqx.size()) dqp += dqx;
  if (euclidean) {
    F.topRows(nv) = dqp;
  } else {
    Eigen::MatrixXd J1 = Eigen::MatrixXd::Zero(nv, nv);  // dIntegrate writes the joints' diagonal blocks only
    pinocchio::dIntegrate(M_int, q, dq, J1, pinocchio::ARG1);
    F.topRows(nv).noalias() = J1 * dqp;
  }
}

// dRNEA(q, v, a)/dp (nv, npar) on the inertial columns (body[k] > 0), zero elsewhere: the regressor chain of
// dynamics/parameters.py _rnea_derivative for the other contact states and the position correction.
RowMat parameter_regressor(nb::handle model, nb::handle data, const Eigen::VectorXd& q, const Eigen::VectorXd& v,
                           const Eigen::VectorXd& a, const IdxVec& body, const CRowRef& dpi) {
  const pinocchio::Model& M = model_of(model);
  if (q.size() != M.nq || v.size() != M.nv || a.size() != M.nv)
    throw std::invalid_argument("parameter_regressor: q, v or a has the wrong size");
  check_chain(M, body, dpi, body.size());
  RowMat R = RowMat::Zero(M.nv, body.size());
  regressor_columns(M, data_of(data), q, v, a, body, dpi, R);
  return R;
}

}  // namespace

void bind_params(nb::module_& m) {
  m.def("parameter_jacobian", &parameter_jacobian, nb::arg("step_model"), nb::arg("model"), nb::arg("data"),
        nb::arg("state").none(), nb::arg("q"), nb::arg("v"), nb::arg("tau"), nb::arg("dq"), nb::arg("dt"),
        nb::arg("euclidean"), nb::arg("body"), nb::arg("dpi"), nb::arg("friction_col"), nb::arg("R_extra").none(),
        nb::arg("dc_extra").none(), nb::arg("dqp_extra").none(), nb::arg("Fp"), nb::arg("dlam"),
        "Fp (ndx, npar) and dlambda (m, npar) into Fp and dlam: dynamics/parameters.py step_derivatives for a step "
        "without contact (state None) or with a fused LCP StepState");
  m.def("parameter_regressor", &parameter_regressor, nb::arg("model"), nb::arg("data"), nb::arg("q"), nb::arg("v"),
        nb::arg("a"), nb::arg("body"), nb::arg("dpi"),
        "Y(q, v, a) dpi/dp (nv, npar): the inertial columns of dRNEA/dp (zero where body[k] = 0)");
}

}  // namespace contactraj
