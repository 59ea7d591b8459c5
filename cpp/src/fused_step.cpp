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
#include <nanobind/eigen/dense.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace contactraj {
namespace {

using VectorXl = Eigen::Matrix<int64_t, Eigen::Dynamic, 1>;
using CVec = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using CMat = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutMat = nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Step outcomes (Simulator._step_fused reads them).
enum Code : int {
  FALLBACK = -1,  // run this step on the Python path (it raises, or the detector handed back)
  NO_CONTACT = 0,  // no contact model: SimData.contact untouched, nothing kept
  NOT_NEAR = 1,  // nothing may touch: SimData.contact = None, nothing kept
  SOLVED = 2,  // a contact solve ran: the state (None without rows) is SimData.contact and kept
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
            double max_velocity, double max_position)
      : step_model_obj_(std::move(step_model)), model_obj_(std::move(model)), dt_(dt), actuated_(actuated),
        all_actuated_(all_actuated), passive_(passive), damping_(damping), damped_(damped),
        spring_dofs_(spring_dofs), spring_q_(spring_q), stiffness_(stiffness), spring_ref_(spring_ref),
        euclidean_(euclidean), unit_tol_(unit_tol), fused_(std::move(fused)), contact_model_(contact_model),
        touch_always_(touch_always), margin_(margin), max_velocity_(max_velocity), max_position_(max_position) {
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
    tau_.resize(nv_);
    v_free_.resize(nv_);
    dq_.resize(nv_);
    q_.resize(nq_);
    q_next_.resize(nq_);
  }

  // Simulator.step (check) / _step: x+ into out (nx,), (code, state).
  nb::tuple step(nb::handle data, nb::handle gdata, nb::handle x, nb::handle u, nb::handle previous,
                 nb::DRef<Eigen::VectorXd> out) {
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

 private:
  // _check_x's acceptance, decided only where it is certain (else the Python check decides).
  bool inputs_ok(const double* x, size_t n) const {
    if (static_cast<int64_t>(n) != nq_ + nv_ || !all_safe(x, nq_ + nv_)) return false;
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
    // _tau: B u, then tau - d * v (every dof, as numpy) and the springs' -k (q - q_ref)
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
    // _velocity: v_free = dt * ABA(q, v, tau) + v on the step's model
    q_ = q;  // a VectorXd: the instantiation pin.aba and pin.integrate run
    {
      const Eigen::Ref<const Eigen::VectorXd> qr(q_), vr(v), tr(tau_);
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
    const Eigen::VectorXd& vn = *v_next;
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
      if (!(std::fabs(out[nq + i]) <= max_velocity_)) return FALLBACK;
    for (int64_t i = 0; i < nq; ++i)
      if (!(std::fabs(out[i]) <= max_position_)) return FALLBACK;
    return code;
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
  Eigen::VectorXd tau_, v_free_, v_solved_, dq_, q_, q_next_;
};

}  // namespace

void bind_fused_step(nb::module_& m) {
  nb::class_<FusedStep>(m, "FusedStep",
                        "Simulator.step and rollout's loop for hard LCP contact (or none), one call (fused_step.cpp)")
      .def(nb::init<nb::object, nb::object, double, const VectorXl&, bool, bool, const Eigen::VectorXd&, bool,
                    const VectorXl&, const VectorXl&, const Eigen::VectorXd&, const Eigen::VectorXd&, bool,
                    std::vector<std::vector<int64_t>>, double, nb::object, bool, bool,
                    std::vector<std::vector<double>>, double, double, double>(),
           nb::arg("step_model"), nb::arg("model"), nb::arg("dt"), nb::arg("actuated"), nb::arg("all_actuated"),
           nb::arg("passive"), nb::arg("damping"), nb::arg("damped"), nb::arg("spring_dofs"), nb::arg("spring_q"),
           nb::arg("stiffness"), nb::arg("spring_ref"), nb::arg("euclidean"), nb::arg("unit_blocks"),
           nb::arg("unit_tol"), nb::arg("fused").none(), nb::arg("contact_model"), nb::arg("touch_always"),
           nb::arg("limits"), nb::arg("margin"), nb::arg("max_velocity"), nb::arg("max_position"))
      .def("step", &FusedStep::step, nb::arg("data"), nb::arg("gdata").none(), nb::arg("x"), nb::arg("u"),
           nb::arg("previous").none(), nb::arg("out"),
           "(code, state): x+ into out; code -1: run the step on the Python path, 0: no contact model, "
           "1: nothing near, 2: a contact solve ran (state: its StepState, or None without rows)")
      .def("rollout", &FusedStep::rollout, nb::arg("data"), nb::arg("gdata").none(), nb::arg("xs"), nb::arg("us"),
           nb::arg("t0"), nb::arg("previous").none(),
           "(t_stop, codes, states): steps t0.. into xs[t0 + 1:] until the end or a step for the Python path");
}

}  // namespace contactraj
