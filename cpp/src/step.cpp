// The fused hard-contact (LCP) step: ContactModel.solve and Simulator._contact_velocity_jacobian of
// dynamics/contact_step.py / dynamics/simulator.py for contact="lcp" without smoothing, in one call
// each, with no Python between the pieces (detection, contact kinematics, Delassus operator, the
// boxed LCP with its warm start, v+, the position correction; ABA derivatives, G, the LCP
// linearization and the implicit velocity Jacobian). Same operations in the same order as the
// Python path (which stays the reference, tests/test_core_fused.py), calling the same C++ pieces
// (detection.cpp, kinematics.cpp, lcp.cpp); only the dense products (numpy's BLAS there, Eigen
// here) differ, at round-off.
#include "common.hpp"
#include "kinematics.hpp"
#include "lcp.hpp"
#include "ncp.hpp"
#include "relaxed.hpp"
#include "step.hpp"
#include "profile.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/optional.h>
#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace contactraj {

nb::object detect_with(nb::handle detector, nb::handle model, nb::handle data, nb::handle gdata,
                       const Eigen::VectorXd& q, const Eigen::VectorXd& v, double dt);
bool margins_grow_with(nb::handle detector, nb::handle model, nb::handle data, nb::handle gdata,
                       const Eigen::VectorXd& q, const Eigen::VectorXd& v, double dt);
bool speculative_with(nb::handle detector);
// dynamics/contact_step.py SPECULATIVE_ROUNDS: solves again with the margins the solve's velocities need
constexpr int kSpeculativeRounds = 2;

namespace {

using VectorXl = lcp::VectorXl;

// One step's contact solve: what ContactState holds (dynamics/contact_step.py), in C++.
struct StepState {
  int64_t nc = 0, nlim = 0, r = 0;
  nb::object contacts;  // the detector's 12 arrays (Contacts), or None without contacts
  ContactArrays arrays;  // their data (solve_rows reads them once)
  ContactGeometry geo;
  RowMat J, Minv, MJt;
  VectorXl normal_rows;
  Eigen::VectorXd phi, bias_slope;
  std::vector<int64_t> key;  // nc, the pairs, -1, the limit keys: equal iff Python's key tuples are
  lcp::Problem problem;
  lcp::Solution solution;
  bool guessed = false;
  bool has_correction = false;
  int64_t held = 0;  // the last `held` correction rows hold joints on their limits (e = 0)
  VectorXl deep_rows;
  Correction correction;
  mutable std::shared_ptr<const ReducedFactor> factor;  // reduced_factor(): made on the first Jacobian
  mutable std::shared_ptr<const NcpFactor> ncp_factor;  // ncp_factor(): likewise, for an NCP state
  mutable std::shared_ptr<const RelaxedFactor> relaxed_factor;  // relaxed_factor(): for a relaxed state
  std::shared_ptr<const ncp::State> ncp;  // NCP contact (FusedLCP ncp=True): its problem and solution (ncp.cpp)
  std::shared_ptr<const relaxed::State> relaxed;  // relaxed contact (FusedLCP kappa > 0): relaxed.cpp
  int64_t m_contact() const { return nc * r; }
};

// The NCP state's NcpFactor (st.ncp set), made and kept on the first call.
const NcpFactor& ncp_factor(const StepState& st) {
  if (!st.ncp_factor) {
    auto f = std::make_shared<NcpFactor>();
    const ncp::State& s = *st.ncp;
    ncp::linearization(s.problem, s.solution.modes, s.solution.dirs, s.solution.lam, f->E, f->Fc, f->act);
    if (f->E.rows()) {
      lstsq_factor(f->E, RANK_RTOL, f->ls);
      lstsq_pinv(f->ls);
    }
    st.ncp_factor = std::move(f);
  }
  return *st.ncp_factor;
}

// The relaxed state's RelaxedFactor (st.relaxed set), made and kept on the first call.
const RelaxedFactor& relaxed_factor(const StepState& st) {
  if (!st.relaxed_factor) {
    auto f = std::make_shared<RelaxedFactor>();
    relaxed::linearization(st.relaxed->problem, st.relaxed->solution, f->E, f->Fc, f->Fphi);
    st.relaxed_factor = std::move(f);
  }
  return *st.relaxed_factor;
}

// The state's ReducedFactor, made and kept on the first call.
const ReducedFactor& reduced_factor(const StepState& st) {
  if (!st.factor) {
    auto f = std::make_shared<ReducedFactor>();
    f->red = lcp::linearize(st.problem, st.solution.modes, st.solution.signs);
    if (!f->red.bounded && f->red.C.size()) sym_factor(f->red.K, RANK_RTOL, f->sym);
    if (f->red.bounded) {  // its A^+ (k' x k): the state and parameter Jacobians' solves are one product each
      lstsq_factor(f->red.K, RANK_RTOL, f->ls);
      lstsq_pinv(f->ls);
    }
    st.factor = std::move(f);
  }
  return *st.factor;
}

struct Limit {
  int64_t iq, iv;
  double s, ref;
};

// The data of a C-contiguous array of T, not converted (a cast error otherwise): the pointer outlives the cast
// (StepState's ContactArrays keep it), so it must be the array's own buffer, never a temporary copy.
template <class T>
const T* arr_data(nb::handle a) {
  return static_cast<const T*>(nb::cast<nb::ndarray<const T, nb::c_contig, nb::device::cpu>>(a, false).data());
}

template <class Mat>
void symmetrize_upper(Mat& M) {
  M.template triangularView<Eigen::StrictlyLower>() = M.transpose().template triangularView<Eigen::StrictlyLower>();
}

class FusedLCP {
 public:
  FusedLCP(nb::object detector, const RowMat& support, const RowMat& mask, int64_t r, bool planar, double friction,
           double margin, double slop, double erp, bool velocity_recovery, std::vector<std::vector<double>> limits,
           bool ncp = false, double kappa = 0.0, double distance = 0.05, bool cone = false)
      : detector_(std::move(detector)), support_(support), mask_(mask), r_(r), planar_(planar), friction_(friction),
        margin_(margin), slop_(slop), erp_(erp), velocity_recovery_(velocity_recovery), ncp_(ncp), kappa_(kappa),
        distance_(distance), cone_(cone) {
    if (ncp_ && kappa_ > 0.0) throw std::invalid_argument("FusedLCP: ncp and kappa > 0 (relaxed) exclude each other");
    for (const auto& l : limits) {
      if (l.size() != 4) throw std::invalid_argument("FusedLCP: each limit is (iq, iv, sign, reference)");
      limits_.push_back({static_cast<int64_t>(l[0]), static_cast<int64_t>(l[1]), l[2], l[3]});
    }
  }

  // ContactModel.solve: (v+, state), (v_free, None) without rows, or None when the detector hands back.
  nb::object solve(nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                   const Eigen::VectorXd& v_free, double dt, nb::handle previous) {
    Eigen::VectorXd v_next;
    nb::object state;
    if (!solve_into(model, data, gdata, q, v_free, dt, previous, v_next, state)) return nb::none();
    return nb::make_tuple(std::move(v_next), state);
  }

  // solve's body (also the fused whole step's, fused_step.cpp): v+ into v_next and the StepState (None
  // without rows) into state; false when the detector hands back to Python.
  bool solve_into(nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                  const Eigen::VectorXd& v_free, double dt, nb::handle previous, Eigen::VectorXd& v_next,
                  nb::object& state) {
    auto& M = model_of(model);
    const int64_t nv = M.nv;
    if (q.size() != M.nq || v_free.size() != nv) throw std::invalid_argument("FusedLCP.solve: q or v_free has the wrong size");
    // previous: a StepState, None, or (key, modes, signs) of a state from the Python path
    const StepState* prev = nullptr;
    std::vector<int64_t> other_key;
    VectorXl other_modes, other_signs;
    bool other = false;
    if (nb::isinstance<StepState>(previous)) {
      prev = nb::inst_ptr<StepState>(previous);
    } else if (!previous.is_none() && kappa_ > 0.0) {  // (key, lam) of a relaxed state of the Python path
      auto t = nb::cast<std::tuple<std::vector<int64_t>, Eigen::VectorXd>>(previous);
      other_key = std::get<0>(t);
      other_ncp_lam_ = std::get<1>(t);
      other = true;
    } else if (!previous.is_none() && ncp_) {  // (key, modes, lam, dirs) of an NCP state of the Python path
      auto t = nb::cast<std::tuple<std::vector<int64_t>, VectorXl, Eigen::VectorXd, RowMat>>(previous);
      other_key = std::get<0>(t);
      other_modes = std::get<1>(t);
      other_ncp_lam_ = std::get<2>(t);
      other_ncp_dirs_ = std::get<3>(t);
      other = true;
    } else if (!previous.is_none()) {
      auto t = nb::cast<std::tuple<std::vector<int64_t>, VectorXl, VectorXl>>(previous);
      other_key = std::get<0>(t);
      other_modes = std::get<1>(t);
      other_signs = std::get<2>(t);
      other = true;
    }
    int64_t nc = 0;
    nb::object arrays;
    const bool detects = detector_.is_valid() && !detector_.is_none();
    const bool speculative = detects && speculative_with(detector_);
    Eigen::VectorXd bound;  // the velocity the speculative margins cover (ContactModel._reference_solve)
    if (speculative) bound = v_free;
    if (detects) {
      PROF_SCOPE("solve.detect");
      arrays = detect_with(detector_, model, data, gdata, q, v_free, dt);
      if (arrays.is_none()) return false;
      nc = static_cast<int64_t>(nb::len(nb::object(arrays[2])));
    }
    // ContactModel._reference_solve: the limits near q, then (outer check) those v+ carries across, re-solved
    std::vector<char> active(limits_.size(), 0);
    for (size_t k = 0; k < limits_.size(); ++k) active[k] = limits_[k].s * (q[limits_[k].iq] - limits_[k].ref) < margin_;
    for (int round = 0;; ++round) {
      for (;;) {
        handback_ = false;
        solve_rows(model, data, q, v_free, dt, prev, other, other_key, other_modes, other_signs, nc, arrays, active,
                   v_next, state);
        if (handback_) return false;  // the relaxed solve found no central point: Python falls back to hard contact
        bool added = false;
        for (size_t k = 0; k < limits_.size(); ++k) {
          const Limit& l = limits_[k];
          if (!active[k] && l.s * (q[l.iq] + dt * v_next[l.iv] - l.ref) < 0.0) {
            active[k] = 1;
            added = true;
          }
        }
        if (!added) break;
      }
      // speculative margins: the impulses changed the velocities; the larger of both, and solve again when some
      // pair's margin grew (at most kSpeculativeRounds times)
      if (!speculative || round == kSpeculativeRounds) return true;
      bound = bound.cwiseAbs().cwiseMax(v_next.cwiseAbs());
      if (!margins_grow_with(detector_, model, data, gdata, q, bound, dt)) return true;
      nb::object grown = detect_with(detector_, model, data, gdata, q, bound, dt);
      if (grown.is_none()) return false;
      const int64_t ng = static_cast<int64_t>(nb::len(nb::object(grown[2])));
      if (ng == nc && (nc == 0 || same_pairs(arrays, grown, nc))) return true;  // no contact joined: the same problem
      arrays = grown;
      nc = ng;
    }
  }

  // whether two detections' nc contacts are of the same pairs, in order (Contacts.pair: the 9th array)
  static bool same_pairs(const nb::object& a, const nb::object& b, int64_t nc) {
    const int64_t* pa = arr_data<int64_t>(a[8]);
    const int64_t* pb = arr_data<int64_t>(b[8]);
    return std::equal(pa, pa + nc, pb);
  }

  // ContactModel._solve_rows: one solve with the detected contacts (arrays, nc) and the active limits.
  void solve_rows(nb::handle model, nb::handle data, const Eigen::VectorXd& q, const Eigen::VectorXd& v_free,
                  double dt, const StepState* prev, bool other, const std::vector<int64_t>& other_key,
                  const VectorXl& other_modes, const VectorXl& other_signs, int64_t nc, const nb::object& arrays,
                  const std::vector<char>& active, Eigen::VectorXd& v_next, nb::object& state) {
    auto& M = model_of(model);
    auto& D = data_of(data);
    const int64_t nv = M.nv;
    std::vector<const Limit*> lim;
    for (size_t k = 0; k < limits_.size(); ++k)
      if (active[k]) lim.push_back(&limits_[k]);
    const int64_t nl = static_cast<int64_t>(lim.size()), r = r_;
    if (nc == 0 && nl == 0) {
      v_next = v_free;
      state = nb::none();
      return;
    }
    PROF_SCOPE("solve.rows");
    auto st = std::make_unique<StepState>();
    st->r = r_;
    if (nc) st->contacts = arrays;
    st->nc = nc;
    st->nlim = nl;
    const int64_t m = nc * r + nl;
    st->J = RowMat::Zero(m, nv);
    st->phi.resize(nc + nl);
    st->normal_rows.resize(nc + nl);
    const int64_t* pair = nullptr;
    if (nc) {
      PROF_SCOPE("solve.rows.jac+geo");
      pinocchio::computeJointJacobians(M, D);  // at q: detection ran the kinematics
      nb::handle a = st->contacts;
      ContactArrays& c = st->arrays;
      c.points = arr_data<double>(a[0]);
      c.normals = arr_data<double>(a[1]);
      c.phi = arr_data<double>(a[2]);
      c.body_a = arr_data<int64_t>(a[3]);
      c.body_b = arr_data<int64_t>(a[4]);
      c.normal_body = arr_data<int64_t>(a[5]);
      c.point_body = arr_data<int64_t>(a[6]);
      c.radius = arr_data<double>(a[7]);
      c.pair = arr_data<int64_t>(a[8]);
      c.axes = arr_data<double>(a[9]);
      c.gap = arr_data<double>(a[10]);
      c.slide = arr_data<double>(a[11]);
      auto idx = [&](const int64_t* p) { return Eigen::Map<const IdxVec>(p, nc); };
      auto mat3 = [&](const double* p) { return Eigen::Map<const RowMat>(p, nc, 3); };
      auto vec = [&](const double* p) { return Eigen::Map<const Eigen::VectorXd>(p, nc); };
      st->geo = contact_geometry(D.J, support_, idx(c.body_a), idx(c.body_b), idx(c.normal_body),
                                 idx(c.point_body), mat3(c.points), mat3(c.normals), vec(c.radius), mat3(c.axes),
                                 vec(c.gap), Eigen::Map<const RowMat>(c.slide, nc, 6), planar_);
      st->J.topRows(nc * r) = st->geo.J;
      for (int64_t k = 0; k < nc; ++k) st->phi[k] = c.phi[k];
      pair = c.pair;
    }
    for (int64_t c = 0; c < nc; ++c) st->normal_rows[c] = c * r;
    for (int64_t k = 0; k < nl; ++k) {
      const int64_t row = nc * r + k;
      st->J(row, lim[k]->iv) = lim[k]->s;
      st->phi[nc + k] = lim[k]->s * (q[lim[k]->iq] - lim[k]->ref);
      st->normal_rows[nc + k] = row;
    }
    const int64_t np = nc + nl;
    Eigen::VectorXd bias(np);
    st->bias_slope.resize(np);
    std::vector<int64_t> deep;
    for (int64_t i = 0; i < np; ++i) {
      const double ph = st->phi[i];
      const bool d = ph < -slop_;
      if (d) deep.push_back(i);
      if (velocity_recovery_) {
        st->bias_slope[i] = d ? erp_ : 1.0;
        bias[i] = d ? -slop_ + erp_ * (ph + slop_) : ph;
      } else {
        st->bias_slope[i] = d ? 0.0 : 1.0;
        bias[i] = d ? -slop_ : ph;
      }
    }
    Eigen::MatrixXd A;
    {
    PROF_SCOPE("solve.rows.minv+A");
    pinocchio::computeMinverse(M, D, q);
    symmetrize_upper(D.Minv);
    st->Minv = D.Minv;
    st->MJt = st->Minv * st->J.transpose();
    A = st->J * st->MJt;
    }
    Eigen::VectorXd b = st->J * v_free;
    for (int64_t i = 0; i < np; ++i) b[st->normal_rows[i]] += bias[i] / dt;
    st->key.reserve(nc + nl + 2);
    st->key.push_back(nc);
    for (int64_t c = 0; c < nc; ++c) st->key.push_back(pair[c]);
    st->key.push_back(-1);
    for (const Limit* l : lim) st->key.push_back(l->iq * 2 + (l->s > 0));
    const bool same = prev != nullptr ? prev->key == st->key : other && other_key == st->key;
    if (kappa_ > 0.0) {
      if (!solve_relaxed(*st, prev, same, std::move(A), std::move(b), nc, nl)) {
        handback_ = true;
        return;
      }
    } else if (ncp_) {
      solve_ncp(*st, prev, same, other_modes, std::move(A), std::move(b), nc, nl);
    } else if (same && prev != nullptr) {
      st->problem = prev->problem;
      st->problem.set_values(A, b);
    } else {
      VectorXl normal_of = VectorXl::Constant(m, -1);
      Eigen::VectorXd mu = Eigen::VectorXd::Zero(m);
      for (int64_t c = 0; c < nc; ++c)
        for (int64_t t = 1; t < r; ++t) {
          normal_of[c * r + t] = c * r;
          mu[c * r + t] = friction_;
        }
      st->problem = lcp::Problem(A, b, normal_of, mu);
    }
    if (!ncp_ && !(kappa_ > 0.0)) {
      st->guessed = same;
      const VectorXl* gm = same ? (prev ? &prev->solution.modes : &other_modes) : nullptr;
      const VectorXl* gs = same ? (prev ? &prev->solution.signs : &other_signs) : nullptr;
      PROF_SCOPE("solve.rows.lcp");
      if (gm != nullptr && gm->size() == m && gs->size() == m)
        st->solution = lcp::solve(st->problem, gm, gs, 1e-9, -1);
      else
        st->solution = lcp::solve(st->problem, nullptr, nullptr, 1e-9, -1);
    }
    v_next = v_free + st->MJt * st->solution.x;
    if (!velocity_recovery_ && !deep.empty()) {
      // the deep rows, then the limit rows held on their limits (ContactModel._held_limit_rows: not deep,
      // phi + dt s v+ <= slop) with e = 0 (phi = -slop)
      std::vector<int64_t> held;
      for (int64_t k = 0; k < nl; ++k) {
        const double ph = st->phi[nc + k];
        if (!(ph < -slop_) && ph + dt * (lim[k]->s * v_next[lim[k]->iv]) <= slop_) held.push_back(nc * r + k);
      }
      const int64_t k = static_cast<int64_t>(deep.size()), h = static_cast<int64_t>(held.size());
      st->deep_rows.resize(k + h);
      Eigen::VectorXd phi_deep(k + h);
      for (int64_t a = 0; a < k; ++a) {
        st->deep_rows[a] = st->normal_rows[deep[a]];
        phi_deep[a] = st->phi[deep[a]];
      }
      for (int64_t a = 0; a < h; ++a) {
        st->deep_rows[k + a] = held[a];
        phi_deep[k + a] = -slop_;
      }
      st->correction = position_correction(st->J, st->MJt, st->deep_rows, phi_deep, erp_, slop_);
      // the rows that pull left the correction: keep the others (held limit rows stay last)
      const IdxVec& keep = st->correction.keep;
      VectorXl kept(keep.size());
      int64_t held_kept = 0;
      for (Eigen::Index a = 0; a < keep.size(); ++a) {
        kept[a] = st->deep_rows[keep[a]];
        if (keep[a] >= k) ++held_kept;
      }
      st->deep_rows = kept;
      st->held = held_kept;
      st->has_correction = true;
    }
    state = nb::cast(st.release(), nb::rv_policy::take_ownership);
  }

  // Simulator._contact_velocity_jacobian (adjoint None): dv+/dx (nv, 2 nv) and dv+/du (nv, nu) written
  // into the caller's arrays.
  void jacobian(nb::handle model, nb::handle data, const StepState& st, const Eigen::VectorXd& q,
                const Eigen::VectorXd& v, const Eigen::VectorXd& tau, const Eigen::VectorXd& v_next, double dt,
                const VectorXl& actuated, const VectorXl& spring_dofs, const Eigen::VectorXd& stiffness,
                const VectorXl& damp_dofs, const Eigen::VectorXd& damping,
                nb::DRef<RowMat> dv_dx, nb::DRef<RowMat> dv_du) {
    jacobian_into(model_of(model), data_of(data), st, q, v, tau, v_next, dt, actuated, spring_dofs, stiffness,
                  damp_dofs, damping, dv_dx, dv_du);
  }

  // jacobian's body (also the fused whole step's step_derivatives, fused_step.cpp).
  void jacobian_into(const pinocchio::Model& M, pinocchio::Data& D, const StepState& st, const Eigen::VectorXd& q,
                     const Eigen::VectorXd& v, const Eigen::VectorXd& tau, const Eigen::VectorXd& v_next, double dt,
                     const VectorXl& actuated, const VectorXl& spring_dofs, const Eigen::VectorXd& stiffness,
                     const VectorXl& damp_dofs, const Eigen::VectorXd& damping,
                     nb::DRef<RowMat> dv_dx, nb::DRef<RowMat> dv_du) {
    const int64_t nv = M.nv, nu = actuated.size();
    if (dv_dx.rows() != nv || dv_dx.cols() != 2 * nv || dv_du.rows() != nv || dv_du.cols() != nu)
      throw std::invalid_argument("FusedLCP.jacobian: dv_dx must be (nv, 2 nv) and dv_du (nv, nu)");
    if (q.size() != M.nq || v.size() != nv || tau.size() != nv || v_next.size() != nv)
      throw std::invalid_argument("FusedLCP.jacobian: q, v, tau or v_next has the wrong size");
    const Eigen::VectorXd& lam = st.solution.x;
    PROF_SCOPE("jac");
    // ABA's derivatives at tau_total = tau + J^T lambda / dt from RNEA's at its acceleration and the solve's
    // M^-1 (pin.computeABADerivatives would compute M^-1 again): ddq/dq = -M^-1 dtau/dq, ddq/dv = -M^-1 dtau/dv
    // (Pinocchio's own identity), so dv_free/dq + M^-1 d(J^T lambda)/dq = M^-1 (fd - dt dtau/dq), one product
    const RowMat& minv = st.Minv;
    RowMat& G = G_;
    G.resize(nv, 2 * nv + nu);
    {
    PROF_SCOPE("jac.rnead");
    tau_total_ = tau + st.J.transpose() * lam / dt;
    pinocchio::nonLinearEffects(M, D, q, v);
    a_total_.noalias() = minv * (tau_total_ - D.nle);
    pinocchio::computeRNEADerivatives(M, D, q, v, a_total_);
    }
    const int64_t mc = st.m_contact();
    {
    PROF_SCOPE("jac.force_deriv");
    Rq_ = D.dtau_dq * (-dt);
    if (nc_geo(st)) {
      fd_.resize(nv, nv);
      force_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), lam.head(mc), mask_, fd_);
      Rq_ += fd_;
    }
    }
    {
    PROF_SCOPE("jac.minv_products");
    rt_times(Rq_, minv, GT_);
    G.leftCols(nv) = GT_.transpose();
    Rq_ = D.dtau_dv * (-dt);
    rt_times(Rq_, minv, GT_);
    G.middleCols(nv, nv) = GT_.transpose();
    G.middleCols(nv, nv) += RowMat::Identity(nv, nv);
    }
    for (int64_t a = 0; a < nu; ++a) G.col(2 * nv + a) = dt * minv.col(actuated[a]);
    for (int64_t a = 0; a < spring_dofs.size(); ++a) {
      const int64_t i = spring_dofs[a];
      G.col(i) -= (dt * minv.col(i)) * stiffness[a];
    }
    for (int64_t a = 0; a < damp_dofs.size(); ++a) {
      const int64_t i = damp_dofs[a];
      G.col(nv + i) -= (dt * minv.col(i)) * damping[i];
    }
    if (st.ncp) {
      ncp_velocity_jacobian(st, G, v_next, dt, nv, nu, dv_dx, dv_du);
      return;
    }
    if (st.relaxed) {
      relaxed_velocity_jacobian(st, G, v_next, dt, nv, nu, dv_dx, dv_du);
      return;
    }
    // ContactModel.velocity_jacobian: the LCP's linearization keeps the clamping rows C (Fc = I[C]) and
    // solves K dz = -dc[C] (K = A[C, C], or A[C, :] P when some friction row is bounded), dlambda = P dz or
    // dlambda[C] = dz; dv+ = G + MJt dlambda.
    const ReducedFactor* factorp;
    {
    PROF_SCOPE("jac.factor");
    factorp = &reduced_factor(st);
    }
    const ReducedFactor& factor = *factorp;
    const lcp::Reduced& red = factor.red;
    const int64_t k = red.C.size(), ncols = G.cols();
    if (k == 0) {
      dv_dx = G.leftCols(2 * nv);
      dv_du = G.rightCols(nu);
      return;
    }
    {
    PROF_SCOPE("jac.vel_deriv");
    dJv_.resize(mc, nv);
    if (mc) velocity_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), v_next, mask_, dJv_);
    }
    PROF_SCOPE("jac.products");
    JC_.resize(k, nv);
    for (int64_t a = 0; a < k; ++a) JC_.row(a) = st.J.row(red.C[a]);
    pos_.assign(st.J.rows(), -1);
    for (int64_t a = 0; a < k; ++a) pos_[red.C[a]] = a;
    // K = J_C M^-1 J_C^T, symmetric positive semidefinite: its SymFactor is the state's (reduced_factor)
    const SymFactor& sym = factor.sym;
    // X[:, :nv] += the fixed-impulse terms of dc[C] on the q-columns: slope J_C on the normal rows, dJv on the
    // contact rows (element by element, in this order)
    auto add_fixed_terms = [&](RowMat& X) {
      for (int64_t a = 0; a < st.normal_rows.size(); ++a) {
        const int64_t row = pos_[st.normal_rows[a]];
        if (row < 0) continue;
        const double s = st.bias_slope[a] / dt;
        for (int64_t j = 0; j < nv; ++j) X(row, j) += s * JC_(row, j);
      }
      for (int64_t i = 0; i < mc; ++i)
        if (pos_[i] >= 0)
          for (int64_t j = 0; j < nv; ++j) X(pos_[i], j) += dJv_(i, j);
    };
    if (red.bounded || sym.method == 1) {
      // rhs = -dc[C], dc = fixed_impulse_velocity_derivative(J, G, normal_rows, slope, dJv) on the rows C only
      // (the same operations, element by element: the bits of the Python path's compiled pieces)
      RowMat& rhs = rhs_;
      rhs.resize(k, ncols);
      rhs.noalias() = JC_ * G;
      add_fixed_terms(rhs);
      rhs = -rhs;
      dz_.resize(k, ncols);
      if (red.bounded) {
        lstsq_apply(factor.ls, rhs, dz_);
        W_.noalias() = st.MJt * red.P;
      } else {  // full rank, certified: the Cholesky factor's solve
        sym_apply(sym, rhs, dz_);
        W_.resize(nv, k);
        for (int64_t a = 0; a < k; ++a) W_.col(a) = st.MJt.col(red.C[a]);
      }
      dv_dx = G.leftCols(2 * nv);
      dv_dx.noalias() += W_ * dz_.leftCols(2 * nv);
      dv_du = G.rightCols(nu);
      dv_du.noalias() += W_ * dz_.rightCols(nu);
      return;
    }
    // rank-deficient (a flat foot's corners): rhs = -(J_C G + E), E (k, nv) on the q-columns: slope J_C on the
    // normal rows, dJv on the contact rows
    E_.setZero(k, nv);
    add_fixed_terms(E_);
    // the columns of J_C with an entry (a contact moves the dofs of its bodies' chains only): J_C G sums over them
    nz_.clear();
    for (int64_t j = 0; j < nv; ++j)
      if (JC_.col(j).cwiseAbs().maxCoeff() != 0.0) nz_.push_back(j);
    const int64_t nnz = static_cast<int64_t>(nz_.size());
    // of G's columns only the state's (2 nv) enter J_C G: the control columns' J_C dt M^-1 B is dt (W^T)[:, B],
    // read off W F below
    Gnz_.resize(nnz, 2 * nv);
    for (int64_t a = 0; a < nnz; ++a) Gnz_.row(a) = G.row(nz_[a]).head(2 * nv);
    // the columns of E with an entry (the contact bodies' chains): F^T E sums over them
    nzE_.clear();
    for (int64_t j = 0; j < nv; ++j)
      if (E_.col(j).cwiseAbs().maxCoeff() != 0.0) nzE_.push_back(j);
    const int64_t nE = static_cast<int64_t>(nzE_.size());
    // K = J_C M^-1 J_C^T, symmetric positive semidefinite: dz = K^+ rhs with K^+ = F diag(sign) F^T
    // (sym_factor: the rank under lstsq's cutoff; the minimum-norm solution where K is rank-deficient), and
    // dv+ = G + W dz = G + (W F) Y, W = MJt[:, C], Y = diag(sign) F^T rhs = -diag(sign) ((F^T J_C) G + F^T E):
    // the products through the rank-r factor (r <= k; a flat foot's 4 corners: r = 6 of 12 rows) and J_C's
    // nonzero columns only. The same solution as lstsq(K, rhs) W up to round-off.
    const int64_t rk = sym.rank;
    const Eigen::MatrixXd& F_ = sym.F;
    const Eigen::VectorXd& sign_ = sym.sign;
    dv_dx = G.leftCols(2 * nv);
    dv_du = G.rightCols(nu);
    if (rk == 0) {  // dz = 0: G + W 0 (-0 entries become +0, as the product's sum)
      dv_dx.array() += 0.0;
      dv_du.array() += 0.0;
      return;
    }
    FJ_.resize(rk, nnz);
    for (int64_t a = 0; a < nnz; ++a) FJ_.col(a).noalias() = F_.transpose() * JC_.col(nz_[a]);
    W_.resize(nv, k);
    for (int64_t a = 0; a < k; ++a) W_.col(a) = st.MJt.col(red.C[a]);
    WF_.resize(nv, rk);
    WF_.noalias() = W_ * F_;
    Y_.resize(rk, ncols);
    Y_.leftCols(2 * nv).noalias() = -FJ_ * Gnz_;
    if (nE) {
      EnzT_.resize(nE, k);  // E[:, nzE]^T
      for (int64_t a = 0; a < nE; ++a) EnzT_.row(a) = E_.col(nzE_[a]).transpose();
      FE_.resize(nE, rk);
      FE_.noalias() = EnzT_ * F_;  // (F^T E[:, nzE])^T
      for (int64_t a = 0; a < nE; ++a) Y_.col(nzE_[a]) -= FE_.row(a).transpose();
    }
    // the control columns: F^T J_C (dt M^-1 B) = dt (W F)^T B (M^-1 symmetric, W = M^-1 J_C^T)
    for (int64_t b = 0; b < nu; ++b) Y_.col(2 * nv + b) = -dt * WF_.row(actuated[b]).transpose();
    for (int64_t a = 0; a < rk; ++a)
      if (sign_[a] < 0.0) Y_.row(a) = -Y_.row(a);
    dv_dx.noalias() += WF_ * Y_.leftCols(2 * nv);
    dv_du.noalias() += WF_ * Y_.rightCols(nu);
  }

  // ContactModel.correction_jacobian (dynamics/contact_step.py) for a state with a position correction:
  // d dq_c/dq (nv, nv) into out, the same operations in the same order (numpy's products there, Eigen's
  // here: round-off). ``model0``/``data0``: the gravity-free copy of the step's model (ContactModel._model0)
  // and a workspace of it.
  void correction_jacobian_into(const StepState& st, const Eigen::VectorXd& q, const pinocchio::Model& model0,
                                pinocchio::Data& data0, RowMat& out) {
    const Correction& c = st.correction;
    const int64_t nv = model0.nv, k = st.deep_rows.size();
    Jd_.resize(k, nv);
    for (int64_t a = 0; a < k; ++a) Jd_.row(a) = st.J.row(st.deep_rows[a]);
    tau_total_ = Jd_.transpose() * c.lam;
    zero_v_ = Eigen::VectorXd::Zero(nv);
    pinocchio::computeABADerivatives(model0, data0, q, zero_v_, tau_total_);
    RowMat& Dm = corr_D_;
    Dm = data0.ddq_dq;
    RowMat& K = corr_K_;
    K = RowMat::Zero(k, nv);
    // held limit rows have e = 0: -erp J_d folded into K (their rows of J are constant)
    if (st.held) K.bottomRows(st.held) = -erp_ * Jd_.bottomRows(st.held);
    const int64_t mc = st.m_contact();
    if (mc) {
      Eigen::VectorXd lam_full = Eigen::VectorXd::Zero(mc);
      for (int64_t a = 0; a < k; ++a)
        if (st.deep_rows[a] < mc) lam_full[st.deep_rows[a]] = c.lam[a];
      fd_.resize(nv, nv);
      force_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), lam_full, mask_, fd_);
      Dm.noalias() += st.Minv * fd_;
      dJv_.resize(mc, nv);
      velocity_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), c.dq, mask_, dJv_);
      for (int64_t a = 0; a < k; ++a)
        if (st.deep_rows[a] < mc) K.row(a) = dJv_.row(st.deep_rows[a]);
    }
    out = correction_jacobian(c.A, c.W, Jd_, K, Dm, erp_);
  }

  // The NCP part of solve_rows (ContactModel._solve_rows with NCPAdapter): the groups of the rows, the warm start
  // (the previous solve's modes, impulses and friction directions, when its rows are the same), ncp::solve.
  void solve_ncp(StepState& st, const StepState* prev, bool same, const VectorXl& other_modes, Eigen::MatrixXd A,
                 Eigen::VectorXd b, int64_t nc, int64_t nl) {
    auto s = std::make_shared<ncp::State>();
    s->problem.A = std::move(A);
    s->problem.b = std::move(b);
    ncp::groups(nc, r_, nl, friction_, s->problem);
    const bool warm = same && (prev == nullptr || prev->ncp);
    if (warm && prev != nullptr)
      s->solution = ncp::solve(s->problem, &prev->ncp->solution.modes, &prev->ncp->solution.lam,
                               &prev->ncp->solution.dirs);
    else if (warm)
      s->solution = ncp::solve(s->problem, &other_modes, &other_ncp_lam_, &other_ncp_dirs_);
    else
      s->solution = ncp::solve(s->problem);
    st.guessed = warm;
    st.solution.x = s->solution.lam;
    st.solution.w = s->solution.c;
    st.solution.modes = s->solution.modes;
    st.solution.solved = s->solution.solved;
    st.solution.residual = s->solution.residual;
    st.solution.warm_start_hit = s->solution.warm_start_hit;
    st.solution.iterations = s->solution.iterations;
    st.ncp = std::move(s);
  }

  // The relaxed part of solve_rows (ContactModel._solve_rows with RelaxedAdapter): its problem from the rows and
  // the distances, the previous impulses as the warm start when the rows are the same, relaxed::solve. False
  // when it does not converge (CentralPathError there: the caller hands the step back to Python).
  bool solve_relaxed(StepState& st, const StepState* prev, bool same, Eigen::MatrixXd A, Eigen::VectorXd b, int64_t nc,
                     int64_t nl) {
    auto s = std::make_shared<relaxed::State>();
    s->problem = relaxed::make_problem(A, b, nc, r_, nl, friction_, cone_, st.phi, kappa_, distance_);
    const bool warm = same && (prev == nullptr || prev->relaxed);
    const Eigen::VectorXd* guess = warm ? (prev != nullptr ? &prev->relaxed->solution.lam : &other_ncp_lam_) : nullptr;
    s->solution = relaxed::solve(s->problem, guess);
    if (!s->solution.converged) return false;
    st.guessed = warm;
    st.solution.x = s->solution.lam;
    st.solution.w = s->solution.c;
    st.solution.solved = true;
    st.solution.residual = s->solution.residual;
    st.solution.warm_start_hit = s->solution.warm_start_hit;
    st.solution.iterations = s->solution.iterations;
    st.relaxed = std::move(s);
    return true;
  }

  // ContactModel.velocity_jacobian with RelaxedAdapter.linearize: dc as for the NCP, dphi = J_n on the q-columns of
  // the normal rows, E = K (regular: a plain solve), Fc, Fphi, unknowns = keep; implicit_velocity.
  void relaxed_velocity_jacobian(const StepState& st, const RowMat& G, const Eigen::VectorXd& v_next, double dt,
                                 int64_t nv, int64_t nu, nb::DRef<RowMat>& dv_dx, nb::DRef<RowMat>& dv_du) {
    const relaxed::State& s = *st.relaxed;
    if (s.solution.keep.size() == 0) {
      dv_dx = G.leftCols(2 * nv);
      dv_du = G.rightCols(nu);
      return;
    }
    const RelaxedFactor& f = relaxed_factor(st);  // the linearization, kept for the parameter Jacobians
    const RowMat &E = f.E, &Fc = f.Fc, &Fphi = f.Fphi;
    const int64_t mc = st.m_contact(), m = st.J.rows();
    dJv_.resize(mc, nv);
    if (mc) velocity_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), v_next, mask_, dJv_);
    Eigen::VectorXd slope = st.bias_slope / dt;
    const RowMat dc = fixed_impulse_velocity_derivative(st.J, G, st.normal_rows, slope, dJv_);
    RowMat dphi = RowMat::Zero(m, G.cols());
    for (int64_t a = 0; a < st.normal_rows.size(); ++a) dphi.row(st.normal_rows[a]).head(nv) = st.J.row(st.normal_rows[a]);
    const RowMat out = implicit_velocity(E, Fc, Fphi, dc, dphi, true, RowMat(0, 0), s.solution.keep, st.MJt, G, false);
    dv_dx = out.leftCols(2 * nv);
    dv_du = out.rightCols(nu);
  }

  // ContactModel.velocity_jacobian with NCPAdapter.linearize: dc = fixed_impulse_velocity_derivative(J, G, normal
  // rows, bias_slope / dt, dJv), the mode equations' (E, Fc, act) at the solution, G + MJt[:, act] dz by
  // implicit_velocity (least squares with RANK_RTOL): the same compiled pieces the Python path calls.
  void ncp_velocity_jacobian(const StepState& st, const RowMat& G, const Eigen::VectorXd& v_next, double dt,
                             int64_t nv, int64_t nu, nb::DRef<RowMat>& dv_dx, nb::DRef<RowMat>& dv_du) {
    const NcpFactor& f = ncp_factor(st);
    if (f.E.rows() == 0) {
      dv_dx = G.leftCols(2 * nv);
      dv_du = G.rightCols(nu);
      return;
    }
    const int64_t mc = st.m_contact(), m = st.J.rows();
    dJv_.resize(mc, nv);
    if (mc) velocity_derivative(st.geo.J6A, st.geo.J6B, st.geo.D, st.geo.dD, st.geo.dp, points(st), v_next, mask_, dJv_);
    Eigen::VectorXd slope = st.bias_slope / dt;
    const RowMat dc = fixed_impulse_velocity_derivative(st.J, G, st.normal_rows, slope, dJv_);
    // implicit_velocity's solve and mapping with the state's factor: dz = lstsq(E, -Fc dc), G + MJt[:, act] dz
    RowMat rhs = f.Fc * dc;
    rhs = -rhs;
    RowMat dz;
    lstsq_apply(f.ls, rhs, dz);
    W_.resize(nv, f.act.size());
    for (Eigen::Index a = 0; a < f.act.size(); ++a) W_.col(a) = st.MJt.col(f.act[a]);
    RowMat out = G;
    out.noalias() += W_ * dz;
    dv_dx = out.leftCols(2 * nv);
    dv_du = out.rightCols(nu);
  }

 private:
  static bool nc_geo(const StepState& st) { return st.nc > 0; }
  static Eigen::Map<const RowMat> points(const StepState& st) {
    return Eigen::Map<const RowMat>(st.arrays.points, st.nc, 3);
  }

  nb::object detector_;
  RowMat support_, mask_;
  int64_t r_;
  bool planar_;
  double friction_, margin_, slop_, erp_;
  bool velocity_recovery_;
  std::vector<Limit> limits_;
  bool ncp_ = false;  // the Coulomb-cone NCP (ncp.cpp) instead of the boxed LCP
  double kappa_ = 0.0, distance_ = 0.05;  // kappa > 0: relaxed contact (relaxed.cpp), its fade distance
  bool cone_ = false;  // relaxed friction by the cone (else the pyramid)
  bool handback_ = false;  // solve_rows: the relaxed solve did not converge
  Eigen::VectorXd other_ncp_lam_;  // the impulses and friction directions of a Python-path NCP previous state
  RowMat other_ncp_dirs_;
  // workspaces of jacobian() (kept between calls: no allocation per step once the sizes repeat)
  Eigen::VectorXd tau_total_, a_total_;
  RowMat Rq_, GT_, G_, fd_, dJv_, JC_, rhs_, dz_, W_, Jd_, corr_D_, corr_K_, E_, Gnz_, FJ_, Y_, WF_;
  Eigen::VectorXd zero_v_;
  RowMat EnzT_, FE_;
  std::vector<int64_t> pos_, nz_, nzE_;
};

}  // namespace

bool fused_lcp_solve(nb::handle fused, nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                     const Eigen::VectorXd& v_free, double dt, nb::handle previous, Eigen::VectorXd& v_next,
                     nb::object& state, const Eigen::VectorXd** dq_c) {
  if (!nb::cast<FusedLCP&>(fused).solve_into(model, data, gdata, q, v_free, dt, previous, v_next, state)) return false;
  *dq_c = nullptr;
  if (!state.is_none()) {
    const StepState& st = *nb::inst_ptr<StepState>(state);
    if (st.has_correction) *dq_c = &st.correction.dq;
  }
  return true;
}

bool is_step_state(nb::handle state) { return nb::isinstance<StepState>(state); }

StepStateView step_state_view(nb::handle state) {
  const StepState& st = nb::cast<const StepState&>(state);
  static const ReducedFactor none;  // an NCP or relaxed state's: it has no LCP
  return {st.J,         st.Minv,        st.MJt,
          st.problem,   st.solution,    st.m_contact(),
          st.ncp || st.relaxed ? none : reduced_factor(st), st.nc ? &st.arrays : nullptr, st.nc,
          st.r,         st.normal_rows, st.bias_slope,
          st.has_correction ? &st.correction : nullptr, st.deep_rows,
          st.nc ? &st.geo : nullptr, st.ncp.get(), st.relaxed.get(), st.ncp ? &ncp_factor(st) : nullptr,
          st.relaxed && st.relaxed->solution.keep.size() ? &relaxed_factor(st) : nullptr};
}

const Eigen::VectorXd* step_state_correction(nb::handle state) {
  if (state.is_none()) return nullptr;
  const StepState& st = nb::cast<const StepState&>(state);
  return st.has_correction ? &st.correction.dq : nullptr;
}

void fused_lcp_jacobian(nb::handle fused, const pinocchio::Model& M, pinocchio::Data& D, nb::handle state,
                        const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                        const Eigen::VectorXd& v_next, double dt, const IdxVec& actuated, const IdxVec& spring_dofs,
                        const Eigen::VectorXd& stiffness, const IdxVec& damp_dofs, const Eigen::VectorXd& damping,
                        nb::DRef<RowMat> dv_dx, nb::DRef<RowMat> dv_du) {
  nb::cast<FusedLCP&>(fused).jacobian_into(M, D, nb::cast<const StepState&>(state), q, v, tau, v_next, dt, actuated,
                                           spring_dofs, stiffness, damp_dofs, damping, dv_dx, dv_du);
}

void fused_lcp_correction_jacobian(nb::handle fused, nb::handle state, const Eigen::VectorXd& q,
                                   const pinocchio::Model& model0, pinocchio::Data& data0, RowMat& out) {
  nb::cast<FusedLCP&>(fused).correction_jacobian_into(nb::cast<const StepState&>(state), q, model0, data0, out);
}

void bind_step(nb::module_& m) {
#ifdef CONTACTRAJ_PROFILE
  m.def("_profile", [](bool reset) {
    nb::dict d;
    for (const auto& [k, v] : prof::table()) d[k.c_str()] = nb::make_tuple(v.first, v.second);
    if (reset) prof::table().clear();
    return d;
  }, nb::arg("reset") = true);
#endif
  auto ro = nb::rv_policy::reference_internal;
  nb::class_<StepState>(m, "StepState", "One fused LCP step's contact solve (ContactState's data, in C++)")
      .def_ro("nc", &StepState::nc)
      .def_ro("nlim", &StepState::nlim)
      .def_ro("r", &StepState::r)
      .def_ro("contacts", &StepState::contacts)
      .def_ro("guessed", &StepState::guessed)
      .def_ro("has_correction", &StepState::has_correction)
      .def_prop_ro("warm_hit", [](const StepState& s) { return s.solution.warm_start_hit; })
      .def_prop_ro("key", [](const StepState& s) { return s.key; })
      .def_prop_ro("J", [](const StepState& s) -> const RowMat& { return s.J; }, ro)
      .def_prop_ro("Minv", [](const StepState& s) -> const RowMat& { return s.Minv; }, ro)
      .def_prop_ro("MJt", [](const StepState& s) -> const RowMat& { return s.MJt; }, ro)
      .def_prop_ro("normal_rows", [](const StepState& s) -> const VectorXl& { return s.normal_rows; }, ro)
      .def_prop_ro("bias_slope", [](const StepState& s) -> const Eigen::VectorXd& { return s.bias_slope; }, ro)
      .def_prop_ro("phi", [](const StepState& s) -> const Eigen::VectorXd& { return s.phi; }, ro)
      .def_prop_ro("geometry",
                   [](const StepState& s) {
                     return nb::make_tuple(s.geo.J, s.geo.D, s.geo.dD, s.geo.dp, s.geo.J6A, s.geo.J6B);
                   })
      .def_prop_ro("problem",
                   [](const StepState& s) {
                     return nb::make_tuple(s.problem.A, s.problem.b, s.problem.normal_of, s.problem.mu);
                   })
      .def_prop_ro("solution",
                   [](const StepState& s) {
                     const auto& x = s.solution;
                     return nb::make_tuple(x.x, x.w, x.modes, x.signs, x.solved, x.residual, x.warm_start_hit,
                                           x.iterations);
                   })
      .def_prop_ro("ncp",
                   [](const StepState& s) -> nb::object {  // NCP contact: (A, b, start, size, mu), else None
                     if (!s.ncp) return nb::none();
                     const auto& p = s.ncp->problem;
                     return nb::make_tuple(p.A, p.b, p.start, p.size, p.mu);
                   })
      .def_prop_ro("ncp_solution",
                   [](const StepState& s) -> nb::object {  // (lam, c, modes, solved, residual, hit, its, dirs)
                     if (!s.ncp) return nb::none();
                     const auto& x = s.ncp->solution;
                     return nb::make_tuple(x.lam, x.c, x.modes, x.solved, x.residual, x.warm_start_hit, x.iterations,
                                           x.dirs);
                   })
      .def_prop_ro("relaxed",
                   [](const StepState& s) -> nb::object {  // relaxed contact: its problem's arrays, else None
                     if (!s.relaxed) return nb::none();
                     const auto& p = s.relaxed->problem;
                     return nb::make_tuple(p.A, p.b, p.kind, p.normal_of, p.block_start, p.block_size, p.mu, p.weight,
                                           p.dweight, p.kappa);
                   })
      .def_prop_ro("relaxed_solution",
                   [](const StepState& s) -> nb::object {  // (lam, c, its, residual, converged, K, hit, keep)
                     if (!s.relaxed) return nb::none();
                     const auto& x = s.relaxed->solution;
                     return nb::make_tuple(x.lam, x.c, x.iterations, x.residual, x.converged, x.K, x.warm_start_hit,
                                           x.keep);
                   })
      .def_prop_ro("correction", [](const StepState& s) -> nb::object {
        if (!s.has_correction) return nb::none();
        const auto& c = s.correction;
        return nb::make_tuple(s.deep_rows, c.dq, c.lam, c.W, c.A, s.held);
      });
  nb::class_<FusedLCP>(m, "FusedLCP",
                       "ContactModel.solve and Simulator._contact_velocity_jacobian for hard LCP contact, fused")
      .def(nb::init<nb::object, const RowMat&, const RowMat&, int64_t, bool, double, double, double, double, bool,
                    std::vector<std::vector<double>>, bool, double, double, bool>(),
           nb::arg("detector").none(), nb::arg("support"), nb::arg("mask"), nb::arg("rows"), nb::arg("planar"),
           nb::arg("friction"), nb::arg("margin"), nb::arg("slop"), nb::arg("erp"), nb::arg("velocity_recovery"),
           nb::arg("limits"), nb::arg("ncp") = false, nb::arg("kappa") = 0.0, nb::arg("distance") = 0.05,
           nb::arg("cone") = false)
      .def("solve", &FusedLCP::solve, nb::arg("model"), nb::arg("data"), nb::arg("gdata").none(), nb::arg("q"),
           nb::arg("v_free"), nb::arg("dt"), nb::arg("previous").none(),
           "(v+, StepState), (v_free, None) without rows, or None where the detector hands back to Python")
      .def("jacobian", &FusedLCP::jacobian, nb::arg("model"), nb::arg("data"), nb::arg("state"), nb::arg("q"),
           nb::arg("v"), nb::arg("tau"), nb::arg("v_next"), nb::arg("dt"), nb::arg("actuated"), nb::arg("spring_dofs"),
           nb::arg("stiffness"), nb::arg("damp_dofs"), nb::arg("damping"), nb::arg("dv_dx"), nb::arg("dv_du"));
}

}  // namespace contactraj
