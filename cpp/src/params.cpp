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
#include "kinematics.hpp"
#include "lcp.hpp"
#include "linalg.hpp"
#include "step.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/ndarray.h>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/regressor.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace contactraj {
namespace {


std::string shape(int64_t r, int64_t c) { return "(" + std::to_string(r) + ", " + std::to_string(c) + ")"; }

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

// One parameter list's compiled Jacobian (ParameterPlan in Python): what does not change between calls
// (the models, the chain of the inertial columns, the augmented model of the placements and its index
// maps) is kept; compute() is dynamics/parameters.py _reference_jacobian for a step without contact or with
// a fused LCP StepState.
class ParameterPlan {
 public:
  ParameterPlan(nb::object step_model, nb::object model, nb::object data, nb::object model0, nb::object data0,
                const IdxVec& body, const RowMat& dpi, int64_t friction_col, bool euclidean, double erp,
                nb::object aug_model, nb::object aug_data, nb::object aug_model0, nb::object aug_data0,
                const IdxVec& dofs, const IdxVec& qidx, const IdxVec& idmap, const IdxVec& pcol, bool planar)
      : objects_{step_model, model, data, model0, data0, aug_model, aug_data, aug_model0, aug_data0},
        M_(&model_of(step_model)), Mint_(&model_of(model)), D_(&data_of(data)), M0_(&model_of(model0)),
        D0_(&data_of(data0)), body_(body), dpi_(dpi), friction_(friction_col), euclidean_(euclidean), erp_(erp),
        planar_(planar) {
    const int64_t npar = body.size(), nv = M_->nv;
    check_chain(*M_, body_, dpi_, npar);
    if (Mint_->nq != M_->nq || Mint_->nv != nv || M0_->nv != nv)
      throw std::invalid_argument("ParameterPlan: the models differ");
    if (friction_col >= npar) throw std::invalid_argument("ParameterPlan: friction_col out of range");
    for (int64_t k = 0; k < npar; ++k) inertial_ = inertial_ || body_[k] > 0;
    if (aug_model.is_none()) {
      if (pcol.size() && (pcol.array() >= 0).any())
        throw std::invalid_argument("ParameterPlan: placement columns without an augmented model");
      return;
    }
    A_ = &model_of(aug_model);
    AD_ = &data_of(aug_data);
    A0_ = &model_of(aug_model0);
    AD0_ = &data_of(aug_data0);
    const int64_t na = A_->nv;
    if (dofs.size() != nv || qidx.size() != M_->nq || idmap.size() != M_->njoints || pcol.size() != npar ||
        A0_->nv != na)
      throw std::invalid_argument("ParameterPlan: dofs (nv), qidx (nq), idmap (njoints) or pcol (npar) has the "
                                  "wrong size, or the augmented models differ");
    for (int64_t i = 0; i < nv; ++i)
      if (dofs[i] < 0 || dofs[i] >= na) throw std::invalid_argument("ParameterPlan: dofs out of range");
    for (int64_t i = 0; i < qidx.size(); ++i)
      if (qidx[i] < 0 || qidx[i] >= A_->nq) throw std::invalid_argument("ParameterPlan: qidx out of range");
    for (int64_t j = 0; j < idmap.size(); ++j)
      if (idmap[j] < 0 || idmap[j] >= A_->njoints) throw std::invalid_argument("ParameterPlan: idmap out of range");
    for (int64_t k = 0; k < npar; ++k) {
      if (pcol[k] >= na) throw std::invalid_argument("ParameterPlan: pcol out of range");
      if (pcol[k] >= 0) {
        if (body_[k] > 0) throw std::invalid_argument("ParameterPlan: a column both inertial and a placement");
        pk_.push_back(k);
        pa_.push_back(pcol[k]);
      }
    }
    dofs_ = dofs;
    pcols_ = Eigen::Map<const IdxVec>(pa_.data(), pa_.size());
    qidx_ = qidx;
    idmap_ = idmap;
    q0_ = pinocchio::neutral(*A_);
    SupportMasks s = support_masks(*A_);
    asupport_ = std::move(s.support);
    amask_ = std::move(s.mask);
  }

  // Fp (ndx, npar) into ``Fp`` and dlambda (m, npar) into ``dlam`` (m = 0 without contact); see the header.
  nb::tuple compute(nb::handle state, const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                    const Eigen::VectorXd& v_next, double dt) {
    const pinocchio::Model& M = *M_;
    pinocchio::Data& D = *D_;
    const int64_t nv = M.nv, npar = body_.size();
    if (q.size() != M.nq || v.size() != nv || tau.size() != nv || v_next.size() != nv)
      throw std::invalid_argument("ParameterPlan.compute: q, v, tau or v_next has the wrong size");
    const bool contact = !state.is_none();  // without contact a friction column is 0
    std::optional<StepStateView> view;
    if (contact) view.emplace(step_state_view(state));
    const StepStateView* st = contact ? &*view : nullptr;
    const int64_t m = contact ? st->J.rows() : 0;
    const int64_t mc = contact ? st->m_contact : 0;
    const bool placements = A_ != nullptr && !pk_.empty();

    // the acceleration at tau + J^T lambda / dt
    tau_total_ = tau;
    if (contact) tau_total_.noalias() += st->J.transpose() * st->solution.x / dt;
    if (!contact) {
      pinocchio::computeMinverse(M, D, q);
      Minv_own_ = D.Minv;
      Minv_own_.triangularView<Eigen::StrictlyLower>() = Minv_own_.transpose().triangularView<Eigen::StrictlyLower>();
    }
    const RowMat& Minv = contact ? st->Minv : Minv_own_;
    a_ = pinocchio::aba(M, D, q, v, tau_total_, pinocchio::Convention::LOCAL);

    // the contacts on the augmented model (placements in contact): _Augmented.geometry
    const bool geo_aug = placements && mc > 0;
    if (placements) {
      qa_ = q0_;
      for (int64_t i = 0; i < qidx_.size(); ++i) qa_[qidx_[i]] = q[i];
    }
    if (geo_aug) aug_geometry(*st);

    // R = dRNEA/dp - d(J^T lambda / dt)/dp
    R_.setZero(nv, npar);
    if (inertial_) regressor_columns(M, D, q, v, a_, body_, dpi_, R_);
    if (placements) {
      if (geo_aug) {
        lam_c_ = st->solution.x.head(mc);
        force_(lam_c_);
      }
      placement_rnea(*A_, *AD_, v, a_, geo_aug ? 1.0 / dt : 0.0, R_);
    }
    dv_.noalias() = Minv * R_;
    dv_ *= -dt;

    RowMat dlam_mat(m, npar);
    auto& dlam = dlam_mat;
    if (contact) {
      const lcp::Problem& prob = st->problem;
      const lcp::Solution& sol = st->solution;
      dc_.noalias() = st->J * dv_;
      if (geo_aug) {  // _add_placement_contact_terms: J's and the distances' placement derivatives
        velocity_(v_next);
        for (int64_t i = 0; i < mc; ++i)
          for (size_t c = 0; c < pk_.size(); ++c) dc_(i, pk_[c]) += dJv_(i, c);
        for (int64_t a = 0; a < st->normal_rows.size(); ++a) {
          const int64_t row = st->normal_rows[a];
          if (row >= mc) continue;
          const double s = st->bias_slope[a] / dt;
          for (size_t c = 0; c < pk_.size(); ++c) dc_(row, pk_[c]) += s * ageo_.J(row, pa_[c]);
        }
      }
      // friction: the bounded rows' explicit impulse derivative e (lambda_i = s_i mu lambda_n), c moves by A e
      dlam.setZero();
      bool any_e = false;
      if (friction_ >= 0) {
        for (int64_t i = 0; i < m; ++i)
          if (sol.modes[i] == 3 && prob.mu[i] > 0) {
            dlam(i, friction_) = sol.x[i] / prob.mu[i];
            any_e = any_e || dlam(i, friction_) != 0.0;
          }
        if (any_e) dc_.col(friction_).noalias() += prob.A * dlam.col(friction_);
      }
      const lcp::Reduced& red = st->factor.red;
      const int64_t k = red.C.size();
      if (k) {
        rhs_.resize(k, npar);
        for (int64_t i = 0; i < k; ++i) rhs_.row(i) = -dc_.row(red.C[i]);
        dz_.resize(k, npar);
        if (red.bounded) {
          dz_ = lstsq(red.K, rhs_, RANK_RTOL);
          dlam.noalias() += red.P * dz_;
        } else {
          sym_apply(st->factor.sym, rhs_, dz_);  // sym_lstsq(K, rhs): the state Jacobians' factor
          for (int64_t i = 0; i < k; ++i) dlam.row(red.C[i]) += dz_.row(i);
        }
      }
      dv_.noalias() += st->MJt * dlam;
    }

    RowMat F(2 * nv, npar);
    F.bottomRows(nv) = dv_;
    dqp_ = dt * dv_;
    dq_ = v_next * dt;
    if (contact && st->correction) {
      correction_derivative(*st, q, geo_aug);
      dqp_ += dqc_;
      dq_ += st->correction->dq;
    }
    if (euclidean_) {
      F.topRows(nv) = dqp_;
    } else {
      J1_.setZero(nv, nv);  // dIntegrate writes the joints' diagonal blocks only
      pinocchio::dIntegrate(*Mint_, q, dq_, J1_, pinocchio::ARG1);
      F.topRows(nv).noalias() = J1_ * dqp_;
    }
    auto Fp = to_numpy(std::move(F), {size_t(2 * nv), size_t(npar)});
    if (!contact) return nb::make_tuple(Fp, nb::none());
    return nb::make_tuple(Fp, to_numpy(std::move(dlam_mat), {size_t(m), size_t(npar)}));
  }

 private:
  // _Augmented.geometry: computeJointJacobians at q_aug, the state's contacts with their bodies mapped
  void aug_geometry(const StepStateView& st) {
    const int64_t nc = st.nc;
    pinocchio::computeJointJacobians(*A_, *AD_, qa_);
    nb::handle c = st.contacts;
    auto mapped = [&](int k, IdxVec& out) {
      const int64_t* p = static_cast<const int64_t*>(
          nb::cast<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>(c[k]).data());
      out.resize(nc);
      for (int64_t i = 0; i < nc; ++i) out[i] = idmap_[p[i]];
    };
    auto dbl = [&](int k) {
      return static_cast<const double*>(nb::cast<nb::ndarray<const double, nb::c_contig, nb::device::cpu>>(c[k]).data());
    };
    mapped(3, ba_);
    mapped(4, bb_);
    mapped(5, bn_);
    mapped(6, bp_);
    points_ = dbl(0);
    using M3 = Eigen::Map<const RowMat>;
    ageo_ = contact_geometry(AD_->J, asupport_, ba_, bb_, bn_, bp_, M3(points_, nc, 3), M3(dbl(1), nc, 3),
                             Eigen::Map<const Eigen::VectorXd>(dbl(7), nc), M3(dbl(9), nc, 3), planar_);
    nc_ = nc;
  }
  Eigen::Map<const RowMat> points() const { return Eigen::Map<const RowMat>(points_, nc_, 3); }

  // fd_ = d(J^T lam)/dq_aug on the augmented geometry (contact/kinematics.py force_derivative)
  void force_(const Eigen::VectorXd& lam) {
    fd_.resize(dofs_.size(), pcols_.size());  // the original dofs' rows of the placement columns only
    force_derivative_block(ageo_.J6A, ageo_.J6B, ageo_.D, ageo_.dD, ageo_.dp, points(), lam, amask_, dofs_, pcols_,
                           fd_);
  }
  // dJv_ = d(J w)/dq_aug at the original model's velocity w (velocity_derivative on the augmented geometry)
  void velocity_(const Eigen::VectorXd& w) {
    wa_.setZero(A_->nv);
    for (int64_t i = 0; i < dofs_.size(); ++i) wa_[dofs_[i]] = w[i];
    dJv_.resize(ageo_.J.rows(), pcols_.size());  // the placement columns only
    velocity_derivative_cols(ageo_.J6A, ageo_.J6B, ageo_.D, ageo_.dD, ageo_.dp, points(), wa_, amask_, pcols_, dJv_);
  }

  // _placement_rnea: the placement columns of R = dRNEA(q, v, a)/ddelta - fd_ * fscale (fscale 0: no contact
  // force term) on the augmented model ``A`` (the step's or its gravity-free copy)
  void placement_rnea(const pinocchio::Model& A, pinocchio::Data& AD, const Eigen::VectorXd& v,
                      const Eigen::VectorXd& a, double fscale, RowMat& R) {
    va_.setZero(A.nv);
    aa_.setZero(A.nv);
    for (int64_t i = 0; i < dofs_.size(); ++i) {
      va_[dofs_[i]] = v[i];
      aa_[dofs_[i]] = a[i];
    }
    pinocchio::computeRNEADerivatives(A, AD, qa_, va_, aa_);
    for (int64_t i = 0; i < dofs_.size(); ++i)
      for (size_t c = 0; c < pk_.size(); ++c) {
        double x = AD.dtau_dq(dofs_[i], pa_[c]);
        if (fscale != 0.0) x -= fd_(i, c) * fscale;
        R(i, pk_[c]) = x;
      }
  }

  // _correction_derivative: d dq_c/dp (nv, npar) into dqc_
  void correction_derivative(const StepStateView& st, const Eigen::VectorXd& q, bool geo_aug) {
    const Correction& c = *st.correction;
    const int64_t nv = M_->nv, npar = body_.size(), mc = st.m_contact, k = st.deep_rows.size();
    Jd_.resize(k, nv);
    for (int64_t a = 0; a < k; ++a) Jd_.row(a) = st.J.row(st.deep_rows[a]);
    R_.setZero(nv, npar);
    zero_ = Eigen::VectorXd::Zero(nv);
    if (inertial_) regressor_columns(*M0_, *D0_, q, zero_, c.dq, body_, dpi_, R_);
    const bool placements = A_ != nullptr && !pk_.empty();
    if (placements) {
      if (geo_aug) {
        lam_c_ = Eigen::VectorXd::Zero(mc);
        for (int64_t a = 0; a < k; ++a)
          if (st.deep_rows[a] < mc) lam_c_[st.deep_rows[a]] = c.lam[a];
        force_(lam_c_);
      }
      placement_rnea(*A0_, *AD0_, zero_, c.dq, geo_aug ? 1.0 : 0.0, R_);
    }
    Dc_.noalias() = st.Minv * R_;
    Dc_ = -Dc_;
    rhs_.noalias() = Jd_ * Dc_;
    rhs_ = -rhs_;
    if (geo_aug) {
      velocity_(c.dq);
      for (int64_t a = 0; a < k; ++a) {
        const int64_t row = st.deep_rows[a];
        if (row >= mc) continue;
        for (size_t j = 0; j < pk_.size(); ++j) rhs_(a, pk_[j]) -= dJv_(row, j);
        for (size_t j = 0; j < pk_.size(); ++j) rhs_(a, pk_[j]) -= erp_ * ageo_.J(row, pa_[j]);
      }
    }
    const RowMat dl = lstsq(c.A, rhs_, RANK_RTOL);
    dqc_ = Dc_;
    dqc_.noalias() += c.W * dl;
  }

  std::vector<nb::object> objects_;  // keeps the Python models and data alive
  const pinocchio::Model* M_;
  const pinocchio::Model* Mint_;
  pinocchio::Data* D_;
  const pinocchio::Model* M0_;
  pinocchio::Data* D0_;
  const pinocchio::Model* A_ = nullptr;
  pinocchio::Data* AD_ = nullptr;
  const pinocchio::Model* A0_ = nullptr;
  pinocchio::Data* AD0_ = nullptr;
  IdxVec body_;
  RowMat dpi_;
  int64_t friction_;
  bool euclidean_;
  double erp_;
  bool planar_;
  bool inertial_ = false;
  IdxVec dofs_, qidx_, idmap_, pcols_;
  std::vector<int64_t> pk_, pa_;  // the placement columns and their augmented velocity index
  Eigen::VectorXd q0_;
  RowMat asupport_, amask_;
  // per call
  Eigen::VectorXd tau_total_, a_, qa_, va_, aa_, wa_, lam_c_, zero_, dq_;
  RowMat Minv_own_, R_, dv_, dc_, rhs_, dz_, dqp_, fd_, dJv_, Jd_, Dc_, dqc_;
  Eigen::MatrixXd J1_;
  ContactGeometry ageo_;
  IdxVec ba_, bb_, bn_, bp_;
  const double* points_ = nullptr;
  int64_t nc_ = 0;
};

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
  nb::class_<ParameterPlan>(m, "ParameterPlan",
                            "One parameter list's compiled Jacobian (dynamics/parameters.py): models, chain and "
                            "the placements' augmented model kept; compute() per step")
      .def(nb::init<nb::object, nb::object, nb::object, nb::object, nb::object, const IdxVec&, const RowMat&, int64_t,
                    bool, double, nb::object, nb::object, nb::object, nb::object, const IdxVec&, const IdxVec&,
                    const IdxVec&, const IdxVec&, bool>(),
           nb::arg("step_model"), nb::arg("model"), nb::arg("data"), nb::arg("model0"), nb::arg("data0"),
           nb::arg("body"), nb::arg("dpi"), nb::arg("friction_col"), nb::arg("euclidean"), nb::arg("erp"),
           nb::arg("aug_model").none(), nb::arg("aug_data").none(), nb::arg("aug_model0").none(),
           nb::arg("aug_data0").none(), nb::arg("dofs"), nb::arg("qidx"), nb::arg("idmap"), nb::arg("pcol"),
           nb::arg("planar"))
      .def("compute", &ParameterPlan::compute, nb::arg("state").none(), nb::arg("q"), nb::arg("v"), nb::arg("tau"),
           nb::arg("v_next"), nb::arg("dt"),
           "(Fp (ndx, npar), dlambda (m, npar) or None without contact): dynamics/parameters.py step_derivatives for a "
           "step without contact (state None) or with a fused LCP StepState");
  m.def("parameter_regressor", &parameter_regressor, nb::arg("model"), nb::arg("data"), nb::arg("q"), nb::arg("v"),
        nb::arg("a"), nb::arg("body"), nb::arg("dpi"),
        "Y(q, v, a) dpi/dp (nv, npar): the inertial columns of dRNEA/dp (zero where body[k] = 0)");
}

}  // namespace contactraj
