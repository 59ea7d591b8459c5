// The whole hard-LCP step in one call: Simulator.step / Simulator._step / Simulator.rollout of
// dynamics/simulator.py for contact="lcp" without smoothing (or no contact at all), with no Python
// between the pieces: the input checks of _check_x / _check_u, tau = B u plus the passive springs and
// damping (_tau), the free velocity v + dt ABA(q, v, tau) on the step's model (_velocity), may_touch,
// the contact solve (FusedLCP's own code, step.cpp: fused_lcp_solve, not a copy), the configuration
// update with the position correction (_integrate) and the bounds of _check_next.
//
// Same operations in the same order as the Python path, through the same Pinocchio functions (the
// explicitly instantiated aba and integrate of libpinocchio_default, which pin.aba / pin.integrate
// call), so a step is bit for bit the Python path's (tests/test_core_step.py).
//
// Nothing of the workspace's Python bookkeeping is touched here (SimData.contact, .stats, .kept): the
// caller does it from the returned codes and states. Any step that would raise on the Python path (bad
// or doubtful input, a non-finite velocity, a failed contact solve, a state beyond the bounds) or that
// the detector hands back returns FALLBACK having written nothing the caller keeps, and the caller runs
// that step on the Python path, which raises its own error (or takes the step) with its own message.
#include "common.hpp"
#include "step.hpp"
#include "profile.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>
#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace contactraj {
namespace {

using VectorXl = Eigen::Matrix<int64_t, Eigen::Dynamic, 1>;
using CVec = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using CMat = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutMat = nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutVec = nb::ndarray<double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Step outcomes (Simulator._step_fused reads them).
enum Code : int {
  FALLBACK = -1,  // run this step on the Python path (it raises, or the detector handed back)
  NO_CONTACT = 0,  // no contact model: SimData.contact untouched, nothing kept
  NOT_NEAR = 1,  // nothing may touch: SimData.contact = None, nothing kept
  SOLVED = 2,  // a contact solve ran: the state (None without rows) is SimData.contact and kept
  KEPT = 3,  // step_derivatives: the solve step() kept for this (x, u) served (its state is SimData.contact)
};

// Below this every sum of a state's entries is finite (|x_i| <= 1e300, fewer than 1e7 entries), so
// "all entries within it" is the Python checks' math.isfinite(x.sum()) whatever numpy's summation
// order; a larger finite entry is left to the Python check.
constexpr double FINITE_SAFE = 1e300;

bool all_safe(const double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(p[i]) <= FINITE_SAFE)) return false;
  return true;
}

struct Limit {
  int64_t iq, iv;
  double s, ref;
};

class FusedStep {
 public:
  FusedStep(nb::object step_model, nb::object model, double dt, const VectorXl& actuated, bool all_actuated,
            bool passive, const Eigen::VectorXd& damping, bool damped, const VectorXl& spring_dofs,
            const VectorXl& spring_q, const Eigen::VectorXd& stiffness, const Eigen::VectorXd& spring_ref,
            bool euclidean, std::vector<std::vector<int64_t>> unit_blocks, double unit_tol, nb::object fused,
            bool contact_model, bool touch_always, std::vector<std::vector<double>> limits, double margin,
            double max_velocity, double max_position, nb::object model0)
      : step_model_obj_(std::move(step_model)), model_obj_(std::move(model)), dt_(dt), actuated_(actuated),
        all_actuated_(all_actuated), passive_(passive), damping_(damping), damped_(damped),
        spring_dofs_(spring_dofs), spring_q_(spring_q), stiffness_(stiffness), spring_ref_(spring_ref),
        euclidean_(euclidean), unit_tol_(unit_tol), fused_(std::move(fused)), contact_model_(contact_model),
        touch_always_(touch_always), margin_(margin), max_velocity_(max_velocity), max_position_(max_position),
        model0_obj_(std::move(model0)) {
    step_model_ = &model_of(step_model_obj_);
    model_ = &model_of(model_obj_);
    nq_ = model_->nq;
    nv_ = model_->nv;
    nu_ = actuated_.size();
    if (step_model_->nq != nq_ || step_model_->nv != nv_) throw std::invalid_argument("FusedStep: the models differ");
    if (damping_.size() != nv_) throw std::invalid_argument("FusedStep: damping must have nv entries");
    const int64_t ns = spring_dofs_.size();
    if (spring_q_.size() != ns || stiffness_.size() != ns || spring_ref_.size() != ns)
      throw std::invalid_argument("FusedStep: spring_dofs, spring_q, stiffness and spring_ref differ in size");
    for (int64_t a = 0; a < nu_; ++a)
      if (actuated_[a] < 0 || actuated_[a] >= nv_) throw std::invalid_argument("FusedStep: actuated dof out of range");
    for (int64_t a = 0; a < ns; ++a)
      if (spring_dofs_[a] < 0 || spring_dofs_[a] >= nv_ || spring_q_[a] < 0 || spring_q_[a] >= nq_)
        throw std::invalid_argument("FusedStep: spring index out of range");
    for (const auto& b : unit_blocks) {
      if (b.size() != 2 || b[0] < 0 || b[1] < 1 || b[0] + b[1] > nq_)
        throw std::invalid_argument("FusedStep: each unit block is (first q index, size)");
      units_.push_back({b[0], b[1]});
    }
    for (const auto& l : limits) {
      if (l.size() != 4) throw std::invalid_argument("FusedStep: each limit is (iq, iv, sign, reference)");
      limits_.push_back({static_cast<int64_t>(l[0]), static_cast<int64_t>(l[1]), l[2], l[3]});
    }
    if (contact_model_ && fused_.is_none())
      throw std::invalid_argument("FusedStep: a contact model needs its FusedLCP");
    if (!model0_obj_.is_none()) {  // the position correction's gravity-free model (ContactModel._model0)
      model0_ = &model_of(model0_obj_);
      if (model0_->nq != nq_ || model0_->nv != nv_) throw std::invalid_argument("FusedStep: model0 differs");
      data0_ = std::make_unique<pinocchio::Data>(*model0_);
    }
    for (int64_t j = 1; j < model_->njoints; ++j)
      if (model_->joints[j].nv() > 0) blocks_.push_back({model_->joints[j].idx_v(), model_->joints[j].nv()});
    std::vector<int64_t> damp_list;  // np.flatnonzero(damping)
    for (int64_t i = 0; i < nv_; ++i)
      if (damping_[i] != 0.0) damp_list.push_back(i);
    damp_dofs_ = Eigen::Map<const VectorXl>(damp_list.data(), static_cast<int64_t>(damp_list.size()));
    tau_.resize(nv_);
    v_free_.resize(nv_);
    dq_.resize(nv_);
    q_.resize(nq_);
    q_next_.resize(nq_);
  }

  // Simulator.step (check) / _step: x+ into out (nx,), (code, state).
  nb::tuple step(nb::handle data, nb::handle gdata, nb::handle x, nb::handle u, nb::handle previous,
                 nb::DRef<Eigen::VectorXd> out) {
    PROF_SCOPE("step");
    if (out.size() != nq_ + nv_) throw std::invalid_argument("FusedStep.step: out must have nx entries");
    CVec xa, ua;
    if (!nb::try_cast(x, xa, false) || !nb::try_cast(u, ua, false) || !inputs_ok(xa.data(), xa.shape(0)) ||
        static_cast<int64_t>(ua.shape(0)) != nu_ || !all_safe(ua.data(), nu_))
      return nb::make_tuple(int(FALLBACK), nb::none());
    nb::object state;
    const int code = one(data_of(data), data, gdata, xa.data(), ua.data(), previous, out.data(), state);
    if (code != SOLVED) return nb::make_tuple(code, nb::none());
    return nb::make_tuple(code, state);
  }

  // Simulator.rollout's loop from knot t0: xs (T+1, nx) with xs[t0] set, us (T, nu) checked. Steps until
  // the end or the first FALLBACK; returns (t_stop, codes, states): codes/states of steps t0..t_stop-1
  // (states: the StepState or None of each SOLVED step, None otherwise), t_stop == T when all ran.
  nb::tuple rollout(nb::handle data, nb::handle gdata, OutMat xs, CMat us, int64_t t0, nb::handle previous) {
    const int64_t T = static_cast<int64_t>(us.shape(0));
    if (xs.shape(0) != static_cast<size_t>(T + 1) || static_cast<int64_t>(xs.shape(1)) != nq_ + nv_ ||
        static_cast<int64_t>(us.shape(1)) != nu_)
      throw std::invalid_argument("FusedStep.rollout: xs must be (T + 1, nx) and us (T, nu)");
    if (t0 < 0 || t0 > T) throw std::invalid_argument("FusedStep.rollout: t0 out of range");
    auto& D = data_of(data);
    const int64_t nx = nq_ + nv_;
    double* X = xs.data();
    const double* U = us.data();
    std::vector<int> codes;
    nb::list states;
    nb::object prev = nb::borrow(previous);
    int64_t t = t0;
    for (; t < T; ++t) {
      nb::object state;
      const int code = one(D, data, gdata, X + t * nx, U + t * nu_, prev, X + (t + 1) * nx, state);
      if (code == FALLBACK) break;
      codes.push_back(code);
      if (code == SOLVED) {
        states.append(state);
        prev = state;
      } else {
        states.append(nb::none());
        if (code == NOT_NEAR) prev = nb::none();
      }
    }
    return nb::make_tuple(t, codes, states);
  }

  // Simulator.step_derivatives (checks) / _step_derivatives without adjoint: x+ into out (nx,), Fx (ndx, ndx) and
  // Fu (ndx, nu) written in full; (code, state). ``kept_v``/``kept_state``: the v+ and StepState (or None) that
  // step() kept for this (x, u) (Python looks them up), or kept_v None: the step runs here (code as step()'s).
  // KEPT: the kept solve served. A kept state that is no StepState (the Python path's) and every case step()
  // hands to Python return FALLBACK with nothing the caller keeps written (out, Fx, Fu are the caller's
  // scratch: the Python path overwrites them).
  nb::tuple step_derivatives(nb::handle data, nb::handle gdata, nb::handle x, nb::handle u, nb::handle previous,
                             nb::handle kept_v, nb::handle kept_state, OutVec out, OutMat Fx, OutMat Fu,
                             nb::handle plan, std::optional<OutMat> Fp) {
    PROF_SCOPE("sd");
    const int64_t nq = nq_, nv = nv_, ndx = 2 * nv_;
    if (static_cast<int64_t>(out.shape(0)) != nq + nv || Fx.shape(0) != static_cast<size_t>(ndx) ||
        Fx.shape(1) != static_cast<size_t>(ndx) || Fu.shape(0) != static_cast<size_t>(ndx) ||
        static_cast<int64_t>(Fu.shape(1)) != nu_)
      throw std::invalid_argument("FusedStep.step_derivatives: out must be (nx,), Fx (ndx, ndx) and Fu (ndx, nu)");
    if (!plan.is_none() && (!is_parameter_plan(plan) || !Fp || Fp->shape(0) != static_cast<size_t>(ndx)))
      throw std::invalid_argument("FusedStep.step_derivatives: plan must be a ParameterPlan with Fp (ndx, npar)");
    CVec xa, ua;
    if (!nb::try_cast(x, xa, false) || !nb::try_cast(u, ua, false) || !inputs_ok(xa.data(), xa.shape(0)) ||
        static_cast<int64_t>(ua.shape(0)) != nu_ || !all_safe(ua.data(), nu_))
      return nb::make_tuple(int(FALLBACK), nb::none());
    auto& D = data_of(data);
    const double* xp = xa.data();
    double* o = out.data();
    Eigen::Map<const Eigen::VectorXd> q(xp, nq);
    nb::object state;
    int code;
    if (!kept_v.is_none()) {  // _step_derivatives' kept branch: step()'s v+ and state, no solve
      CVec kv;
      if (!nb::try_cast(kept_v, kv, false) || static_cast<int64_t>(kv.shape(0)) != nv) return nb::make_tuple(int(FALLBACK), nb::none());
      if (!kept_state.is_none() && !is_step_state(kept_state)) return nb::make_tuple(int(FALLBACK), nb::none());
      compute_tau(xp, ua.data());
      q_ = q;
      v_next_ = Eigen::Map<const Eigen::VectorXd>(kv.data(), nv);
      if (!integrate_checked(q, v_next_, step_state_correction(kept_state), o)) return nb::make_tuple(int(FALLBACK), nb::none());
      state = nb::borrow(kept_state);
      code = KEPT;
    } else {
      {
      PROF_SCOPE("sd.one");
      code = one(D, data, gdata, xp, ua.data(), previous, o, state);
      }
      if (code == FALLBACK) return nb::make_tuple(code, nb::none());
      v_next_ = Eigen::Map<const Eigen::VectorXd>(o + nq, nv);
    }
    const bool contact = (code == SOLVED || code == KEPT) && !state.is_none();
    v_ = Eigen::Map<const Eigen::VectorXd>(xp + nq, nv);
    Eigen::Map<RowMat> FX(Fx.data(), ndx, ndx), FU(Fu.data(), ndx, nu_);
    if (!contact) {  // _step_derivatives without a contact state: ABA derivatives, the passive terms, B
      const Eigen::Ref<const Eigen::VectorXd> qr(q_), vr(v_), tr(tau_);
      pinocchio::computeABADerivatives(*step_model_, D, qr, vr, tr);
      auto& minv = D.Minv;  // pin.computeABADerivatives' Minv: its upper triangle mirrored (make_symmetric)
      minv.template triangularView<Eigen::StrictlyLower>() = minv.transpose().template triangularView<Eigen::StrictlyLower>();
      for (int64_t i = 0; i < nv; ++i)
        for (int64_t j = 0; j < nv; ++j) {
          FX(nv + i, j) = D.ddq_dq(i, j) * dt_;
          FX(nv + i, nv + j) = D.ddq_dv(i, j) * dt_;
        }
      for (int64_t i = 0; i < nv; ++i) FX(nv + i, nv + i) += 1.0;
      if (passive_) {  // _add_passive_jacobian
        for (int64_t a = 0; a < spring_dofs_.size(); ++a) {
          const int64_t j = spring_dofs_[a];
          for (int64_t i = 0; i < nv; ++i) FX(nv + i, j) -= (dt_ * minv(i, j)) * stiffness_[a];
        }
        for (int64_t a = 0; a < damp_dofs_.size(); ++a) {
          const int64_t j = damp_dofs_[a];
          for (int64_t i = 0; i < nv; ++i) FX(nv + i, nv + j) -= (dt_ * minv(i, j)) * damping_[j];
        }
      }
      for (int64_t a = 0; a < nu_; ++a) {
        const int64_t j = actuated_[a];
        for (int64_t i = 0; i < nv; ++i) FU(nv + i, a) = minv(i, j) * dt_;
      }
    } else {
      fused_lcp_jacobian(fused_, *step_model_, D, state, q_, v_, tau_, v_next_, dt_, actuated_, spring_dofs_,
                         stiffness_, damp_dofs_, damping_, FX.bottomRows(nv), FU.bottomRows(nv));
    }
    PROF_SCOPE("sd.config");
    // the configuration rows: dq+ = dIntegrate chained with dt dv+ (and the position correction's Jacobian)
    const Eigen::VectorXd* dq_c = contact ? step_state_correction(state) : nullptr;
    if (dq_c != nullptr) fused_lcp_correction_jacobian(fused_, state, q_, *model0_, *data0_, CJ_);
    if (euclidean_) {
      for (int64_t i = 0; i < nv; ++i) {
        for (int64_t j = 0; j < ndx; ++j) FX(i, j) = FX(nv + i, j) * dt_;
        FX(i, i) += 1.0;
        for (int64_t a = 0; a < nu_; ++a) FU(i, a) = FU(nv + i, a) * dt_;
      }
      if (dq_c != nullptr) FX.topLeftCorner(nv, nv) += CJ_;
    } else {
      J0_.resize(nv, nv);
      J1_.resize(nv, nv);
      J0_.setZero();
      J1_.setZero();
      pinocchio::dIntegrate(*model_, q_, dq_, J0_, pinocchio::ARG0);
      pinocchio::dIntegrate(*model_, q_, dq_, J1_, pinocchio::ARG1);
      // J0, J1 are block diagonal (one block per joint): the products run block by block (a 1-dof joint's
      // rows are exactly numpy's, its block being a single entry; a free-flyer's 6 x 6 block sums in Eigen's order)
      if (dq_c != nullptr) {
        for (const auto& b : blocks_)
          J0_.block(b.first, 0, b.second, nv) += J1_.block(b.first, b.first, b.second, b.second) * CJ_.middleRows(b.first, b.second);
      }
      J1_ *= dt_;
      for (const auto& b : blocks_) {
        const int64_t i0 = b.first, n = b.second;
        if (n == 1) {
          const double s = J1_(i0, i0);
          for (int64_t j = 0; j < ndx; ++j) FX(i0, j) = s * FX(nv + i0, j);
          for (int64_t a = 0; a < nu_; ++a) FU(i0, a) = s * FU(nv + i0, a);
        } else {
          FX.middleRows(i0, n).noalias() = J1_.block(i0, i0, n, n) * FX.middleRows(nv + i0, n);
          FU.middleRows(i0, n).noalias() = J1_.block(i0, i0, n, n) * FU.middleRows(nv + i0, n);
        }
      }
      FX.topLeftCorner(nv, nv) += J0_;
    }
    if (!plan.is_none()) {  // Fp after Fx, Fu: ParameterPlan.compute's, without the round trip through Python
      Eigen::Map<RowMat> FP(Fp->data(), ndx, Fp->shape(1));
      // D: the state Jacobians' derivatives pass at this step (jac.rnead, or computeABADerivatives above)
      parameter_plan_into(plan, contact ? nb::handle(state) : nb::handle(nb::none()), q_, v_, tau_, v_next_, dt_, FP,
                          &D);
    }
    if (code == KEPT || code == SOLVED) return nb::make_tuple(code, state);
    return nb::make_tuple(code, nb::none());
  }

 private:
  // _check_x's acceptance, decided only where it is certain (else the Python check decides).
  bool inputs_ok(const double* x, size_t n) const {
    if (static_cast<int64_t>(n) != nq_ + nv_) return false;
    // within the bounds of every state a step may produce (beyond them Python refuses it: coal crashed at
    // |q| = 1e160), capped at FINITE_SAFE: one scan is also all_safe's (NaN fails both)
    const double qb = std::min(max_position_, FINITE_SAFE), vb = std::min(max_velocity_, FINITE_SAFE);
    for (int64_t i = 0; i < nq_; ++i)
      if (!(std::fabs(x[i]) <= qb)) return false;
    for (int64_t i = nq_; i < nq_ + nv_; ++i)
      if (!(std::fabs(x[i]) <= vb)) return false;
    for (const auto& b : units_) {
      double s = 0.0;
      for (int64_t i = 0; i < b.second; ++i) s += x[b.first + i] * x[b.first + i];
      // |norm - 1| well inside UNIT_TOL: accepted whatever the summation order; near it, Python decides
      if (!(std::fabs(std::sqrt(s) - 1.0) <= 0.5 * unit_tol_)) return false;
    }
    return true;
  }

  // One step from x (nx) under u (nu) into out (nx). The state of a SOLVED step into `state`.
  int one(pinocchio::Data& D, nb::handle data, nb::handle gdata, const double* x, const double* u,
          nb::handle previous, double* out, nb::object& state) {
    const int64_t nq = nq_, nv = nv_;
    Eigen::Map<const Eigen::VectorXd> q(x, nq), v(x + nq, nv);
    compute_tau(x, u);
    // _velocity: v_free = dt * ABA(q, v, tau) + v on the step's model
    q_ = q;  // a VectorXd: the instantiation pin.aba and pin.integrate run
    {
      const Eigen::Ref<const Eigen::VectorXd> qr(q_), vr(v), tr(tau_);
      PROF_SCOPE("one.aba");
      const Eigen::VectorXd& a = pinocchio::aba(*step_model_, D, qr, vr, tr, pinocchio::Convention::LOCAL);
      for (int64_t i = 0; i < nv; ++i) {
        const double adt = a[i] * dt_;
        v_free_[i] = adt + v[i];
      }
    }
    int code = NO_CONTACT;
    const Eigen::VectorXd* v_next = &v_free_;
    const Eigen::VectorXd* dq_c = nullptr;
    if (contact_model_) {
      bool near = touch_always_;
      for (size_t k = 0; !near && k < limits_.size(); ++k) {  // may_touch: near, or crossed by v_free
        const Limit& l = limits_[k];
        near = l.s * (q[l.iq] - l.ref) < margin_ || l.s * (q[l.iq] + dt_ * v_free_[l.iv] - l.ref) < 0.0;
      }
      if (!near) {
        code = NOT_NEAR;
      } else {
        // _solve_contacts: its errors (non-finite free velocity, a failing solve, non-finite v+) are Python's
        if (!all_safe(v_free_.data(), nv)) return FALLBACK;
        PROF_SCOPE("one.solve");
        try {
          if (!fused_lcp_solve(fused_, step_model_obj_, data, gdata, q_, v_free_, dt_, previous, v_solved_, state, &dq_c))
            return FALLBACK;
        } catch (const nb::python_error& e) {
          return FALLBACK;  // the Python path raises it again, wrapped as it wraps it
        } catch (const std::exception& e) {
          return FALLBACK;
        }
        if (!all_safe(v_solved_.data(), nv)) return FALLBACK;
        v_next = &v_solved_;
        code = SOLVED;
      }
    }
    if (!integrate_checked(q, *v_next, dq_c, out)) return FALLBACK;
    return code;
  }

  // _tau: B u, then tau - d * v (every dof, as numpy) and the springs' -k (q - q_ref), into tau_
  void compute_tau(const double* x, const double* u) {
    const int64_t nq = nq_, nv = nv_;
    Eigen::Map<const Eigen::VectorXd> q(x, nq), v(x + nq, nv);
    if (all_actuated_) {
      for (int64_t i = 0; i < nv; ++i) tau_[i] = u[i];
    } else {
      tau_.setZero();
      for (int64_t a = 0; a < nu_; ++a) tau_[actuated_[a]] = u[a];
    }
    if (passive_) {
      if (damped_)
        for (int64_t i = 0; i < nv; ++i) tau_[i] = tau_[i] - damping_[i] * v[i];
      for (int64_t a = 0; a < spring_dofs_.size(); ++a) {
        const double f = stiffness_[a] * (q[spring_q_[a]] - spring_ref_[a]);
        tau_[spring_dofs_[a]] = tau_[spring_dofs_[a]] - f;
      }
    }
  }

  // _integrate (q+ = q (+) (dt v+ + dq_c), the increment into dq_ on non-Euclidean models) and _check_next's
  // bounds: false when out is beyond them (Python raises).
  bool integrate_checked(const Eigen::Map<const Eigen::VectorXd>& q, const Eigen::VectorXd& vn,
                         const Eigen::VectorXd* dq_c, double* out) {
    const int64_t nq = nq_, nv = nv_;
    // _integrate: q+ = q (+) (dt v+ + dq_c)
    if (euclidean_) {
      for (int64_t i = 0; i < nq; ++i) {
        double s = vn[i] * dt_;
        s = s + q[i];
        if (dq_c != nullptr) s = s + (*dq_c)[i];
        out[i] = s;
      }
    } else {
      for (int64_t i = 0; i < nv; ++i) dq_[i] = vn[i] * dt_;
      if (dq_c != nullptr)
        for (int64_t i = 0; i < nv; ++i) dq_[i] = dq_[i] + (*dq_c)[i];
      pinocchio::integrate(*model_, q_, dq_, q_next_);
      for (int64_t i = 0; i < nq; ++i) out[i] = q_next_[i];
    }
    for (int64_t i = 0; i < nv; ++i) out[nq + i] = vn[i];
    // _check_next's bounds (NaN fails them too)
    for (int64_t i = 0; i < nv; ++i)
      if (!(std::fabs(out[nq + i]) <= max_velocity_)) return false;
    for (int64_t i = 0; i < nq; ++i)
      if (!(std::fabs(out[i]) <= max_position_)) return false;
    return true;
  }

  nb::object step_model_obj_, model_obj_;
  const pinocchio::Model* step_model_ = nullptr;
  const pinocchio::Model* model_ = nullptr;
  int64_t nq_ = 0, nv_ = 0, nu_ = 0;
  double dt_;
  VectorXl actuated_;
  bool all_actuated_, passive_;
  Eigen::VectorXd damping_;
  bool damped_;
  VectorXl spring_dofs_, spring_q_;
  Eigen::VectorXd stiffness_, spring_ref_;
  bool euclidean_;
  std::vector<std::pair<int64_t, int64_t>> units_;
  double unit_tol_;
  nb::object fused_;
  bool contact_model_, touch_always_;
  std::vector<Limit> limits_;
  double margin_, max_velocity_, max_position_;
  Eigen::VectorXd tau_, v_free_, v_solved_, dq_, q_, q_next_, v_, v_next_;
  nb::object model0_obj_;
  const pinocchio::Model* model0_ = nullptr;
  std::unique_ptr<pinocchio::Data> data0_;
  VectorXl damp_dofs_;
  std::vector<std::pair<int64_t, int64_t>> blocks_;  // (idx_v, nv) of each joint with nv > 0
  Eigen::MatrixXd J0_, J1_;
  RowMat CJ_;
};

}  // namespace

void bind_fused_step(nb::module_& m) {
  nb::class_<FusedStep>(m, "FusedStep",
                        "Simulator.step and rollout's loop for hard LCP contact (or none), one call (fused_step.cpp)")
      .def(nb::init<nb::object, nb::object, double, const VectorXl&, bool, bool, const Eigen::VectorXd&, bool,
                    const VectorXl&, const VectorXl&, const Eigen::VectorXd&, const Eigen::VectorXd&, bool,
                    std::vector<std::vector<int64_t>>, double, nb::object, bool, bool,
                    std::vector<std::vector<double>>, double, double, double, nb::object>(),
           nb::arg("step_model"), nb::arg("model"), nb::arg("dt"), nb::arg("actuated"), nb::arg("all_actuated"),
           nb::arg("passive"), nb::arg("damping"), nb::arg("damped"), nb::arg("spring_dofs"), nb::arg("spring_q"),
           nb::arg("stiffness"), nb::arg("spring_ref"), nb::arg("euclidean"), nb::arg("unit_blocks"),
           nb::arg("unit_tol"), nb::arg("fused").none(), nb::arg("contact_model"), nb::arg("touch_always"),
           nb::arg("limits"), nb::arg("margin"), nb::arg("max_velocity"), nb::arg("max_position"),
           nb::arg("model0").none())
      .def("step", &FusedStep::step, nb::arg("data"), nb::arg("gdata").none(), nb::arg("x"), nb::arg("u"),
           nb::arg("previous").none(), nb::arg("out"),
           "(code, state): x+ into out; code -1: run the step on the Python path, 0: no contact model, "
           "1: nothing near, 2: a contact solve ran (state: its StepState, or None without rows)")
      .def("rollout", &FusedStep::rollout, nb::arg("data"), nb::arg("gdata").none(), nb::arg("xs"), nb::arg("us"),
           nb::arg("t0"), nb::arg("previous").none(),
           "(t_stop, codes, states): steps t0.. into xs[t0 + 1:] until the end or a step for the Python path")
      .def("step_derivatives", &FusedStep::step_derivatives, nb::arg("data"), nb::arg("gdata").none(), nb::arg("x"),
           nb::arg("u"), nb::arg("previous").none(), nb::arg("kept_v").none(), nb::arg("kept_state").none(),
           nb::arg("out"), nb::arg("Fx"), nb::arg("Fu"), nb::arg("plan").none() = nb::none(),
           nb::arg("Fp").none() = nb::none(),
           "(code, state): x+ into out (nx,), Fx, Fu (Simulator._step_derivatives without adjoint); codes as step's, "
           "3: the kept solve (kept_v, kept_state) served; with a ParameterPlan ``plan`` also its Fp (ndx, npar) "
           "into ``Fp`` (ParameterPlan.compute without impulses) unless the code is -1");
}

}  // namespace contactraj
