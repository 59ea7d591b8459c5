// The parameter Jacobian Fp = dx+/dp of one step (dynamics/parameters.py step_derivatives, whose module
// docstring has the mathematics) in one call, for a step without contact or with the fused step's LCP, NCP or
// relaxed contact state (a StepState): the same operations in the same order as the Python path, which stays the
// reference (and serves the other contact states: the Python path's, per-pair coefficients, restitution). The LCP's
// solve is below; the NCP's (its mode equations by ncp::linearization) and the relaxed model's (E = K) are
// ParameterPlan::model_columns.
//
//   tau_total = tau + J^T lambda / dt,  a = M^-1 (tau_total - nle(q, v))  (the step's model: pin.aba's a)
//   R = Y(q, v, a) dpi/dp (+ R_extra)                                       (regressor, one 10-block per column)
//   G = -dt M^-1 R,  dc = J G (+ dc_extra)                                  (M^-1 and J of the state)
//   e: friction's bounded rows, lambda_i / mu_i;  dc += A e
//   K dz = -dc[C] (lcp::linearize of the solution's modes: sym_lstsq, or lstsq when some row is bounded)
//   dlambda = e + P dz (or dz on the rows C),  dv = G + M^-1 J^T dlambda
//   Fp = (dIntegrate_ARG1(q, dq) (dt dv + dqp_extra), dv)                  (the identity when euclidean)
//
// R_extra / dc_extra / dqp_extra are the placement columns and the position correction's derivative, made
// here on the system's own model (see "The placement columns" below). The linearization
// and K's factor are the state Jacobians' (the StepState's ReducedFactor, step.hpp: lcp::linearize and
// sym_factor's SymFactor, or lstsq_factor's LstsqFactor for a bounded K, made once per state by the first Jacobian
// that asks).
#include "common.hpp"
#include "profile.hpp"
#include "kinematics.hpp"
#include "lcp.hpp"
#include "ncp.hpp"
#include "linalg.hpp"
#include "step.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/ndarray.h>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/spatial.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/regressor.hpp>
#include <optional>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CONTACTRAJ_AVX2_KERNEL 1
#endif
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace contactraj {
namespace {


// dynamics/parameters.py SLIP_TOL's threshold for the problem's b: a tangential velocity below it is no slip
double slip_tolerance(const Eigen::VectorXd& b) {
  return 1e-10 * std::max(1.0, b.size() ? b.cwiseAbs().maxCoeff() : 0.0);
}

std::string shape(int64_t r, int64_t c) { return "(" + std::to_string(r) + ", " + std::to_string(c) + ")"; }

// R (nv, npar) = Y(q, v, a) dpi/dp: column k is Y's 10 columns of joint body[k] times dpi[:, k] (0: the
// column is left as it is). Y is Pinocchio's joint torque regressor (nv, 10 (njoints - 1)).
void regressor_columns(const pinocchio::Model& M, pinocchio::Data& D, const Eigen::VectorXd& q,
                       const Eigen::VectorXd& v, const Eigen::VectorXd& a, const IdxVec& body, const CRowRef& dpi,
                       RowMat& R) {
  pinocchio::computeJointTorqueRegressor(M, D, q, v, a);
  const auto& Y = D.jointTorqueRegressor;
  const Eigen::Index nv = Y.rows();
  for (Eigen::Index k = 0; k < body.size(); ++k) {
    if (body[k] <= 0) continue;
    // dpi's column has one or two entries (a mass, a COM coordinate times the mass, an inertia entry): Y's
    // columns of the others are not read (a + 0 y where the dense product adds 0 y)
    R.col(k).setZero();
    for (int e = 0; e < 10; ++e) {
      const double w = dpi(e, k);
      if (w == 0.0) continue;
      const double* y = Y.col(10 * (body[k] - 1) + e).data();
      for (Eigen::Index i = 0; i < nv; ++i) R(i, k) += w * y[i];
    }
  }
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

// The placement columns, computed directly on the system's own model (no augmented model).
//
// The Python reference (dynamics/parameters.py _Augmented) inserts a free-flyer F in front of each placement
// joint j, at j's placement, and reads the derivatives w.r.t. F's configuration at identity (zero velocity and
// acceleration on F) off Pinocchio's computeRNEADerivatives / the contact kinematics of the augmented model.
// Only F's 6 columns and the original dofs' rows are read, and they follow from the forward quantities of the
// system itself, as Pinocchio's rnea-derivatives.hxx builds a column dtau/dq_k (its backward step of joint k):
//
//   world quantities at (q, v, a) of every joint i: oMi, ov_i, oa_gf_i = oa_i - g, oY_i = oMi.act(I_i),
//   oh_i = oY_i ov_i, of_i = oY_i oa_gf_i + ov_i x* oh_i, doY_i = oY_i.variation(ov_i) + forceCross(oh_i),
//   accumulated over subtrees (the composite Yc_i, dYc_i, fc_i of the backward pass); J_d the world column of
//   dof d (data.J).
//   F at j's placement: oMf = oMi[parent(j)] M_j, J_F = Ad(oMf) (the free-flyer's S is the identity, LOCAL),
//   ov_F = ov_p, oa_gf_F = oa_gf_p (p = parent(j); ov_0 = 0, oa_gf_0 = -g); F has no body, so F's composites
//   are j's: Yc_j, dYc_j, fc_j.
//   dVdq_F = ov_p x J_F,  dAdq_F = oa_gf_p x J_F + ov_p x dVdq_F            (motion cross, column-wise)
//   rows of the dofs d of a joint i in subtree(j) (F's descendants; F's step in Pinocchio):
//       dtau_d/ddelta = J_d^T (Yc_i dAdq_F + dYc_i dVdq_F)
//   rows of the dofs d of j's ancestors a (the support of p; their own steps read F's dFdq):
//       dtau_d/ddelta = J_d^T dFdq_F,  dFdq_F = dYc_j dVdq_F + Yc_j dAdq_F + J_F x* fc_j
//   every other row 0 (other branches do not move).
// The contact terms: a contact's body is moved by F iff it is in subtree(j), so the augmented geometry's F
// columns are contact_geometry on the 6 columns J_F with the support "body in subtree(j)"; the original columns
// are the state's geometry (step.hpp StepStateView::geo). force_() and velocity_() evaluate the terms of
// contact/_kernels.py force_derivative / velocity_derivative on the (original row, F column) entries they need,
// where the augmented mask is "dof i's joint in subtree(j)" (rows idx_v(j) .. + nvSubtree(j));
// dphi/ddelta = the F columns of J's normal rows.
// tests/test_core_params.py holds the result against the Python reference (the augmented model) to 1e-12.

// out = scale B^T S[rows, :] with B = R[rows, col0 .. col0 + G): a column block of R times S (row-major, ncol
// columns) on the block's nonzero rows only, stored as (G, ncol) with row stride ostride, or with ``T`` transposed,
// as (ncol, G) with row stride ostride (straight into dv+/dp's rows). A placement's or a body's columns are nonzero
// on a few rows (its chain, and the bodies its contacts touch), so this does nnz/nv of a dense product's work; its
// G x T accumulators stay in the 16 vector registers (SSE2: T = 4 columns for G <= 6, else 2), as a GEMM's
// micro-kernel keeps its tile. Measured (a 38-dof, 198-column, 15-row block pattern, g++ -O3): 15.9 us against
// Eigen's dense product 34.4 us and 27.7 us for the same loops left to the compiler's vectorizer.
#ifdef CONTACTRAJ_AVX2_KERNEL
// The AVX2/FMA tiles of block_product (4 columns per register; T = 8 columns for G <= 6, else 4), compiled for that
// target alone and called only when the CPU has it (avx2_kernel()): the rest of the core keeps the SSE2 ABI of the
// pin and coal wheels it links to (a whole-core -mavx2 build changes Eigen's alignment and crashed). Raw pointers
// only, no Eigen inside. Returns the columns done; block_product finishes the others.
template <int G, bool T>
__attribute__((target("avx2,fma"))) int64_t block_product_avx2(const double* Rd, int64_t rs, const int64_t* rows,
                                                               int64_t nr, const double* S, int64_t ncol,
                                                               double scale, double* out, int64_t ostride) {
  constexpr int P = G <= 6 ? 2 : 1;
  const __m256d sc = _mm256_set1_pd(scale);
  int64_t c = 0;
  for (; c + 4 * P <= ncol; c += 4 * P) {
    __m256d acc[G][P];
    for (int e = 0; e < G; ++e)
      for (int p = 0; p < P; ++p) acc[e][p] = _mm256_setzero_pd();
    for (int64_t a = 0; a < nr; ++a) {
      const double* sr = S + rows[a] * ncol + c;
      const double* rr = Rd + rows[a] * rs;
      __m256d sv[P];
      for (int p = 0; p < P; ++p) sv[p] = _mm256_loadu_pd(sr + 4 * p);
      for (int e = 0; e < G; ++e) {
        const __m256d r = _mm256_broadcast_sd(rr + e);
        for (int p = 0; p < P; ++p) acc[e][p] = _mm256_fmadd_pd(r, sv[p], acc[e][p]);
      }
    }
    for (int e = 0; e < G; ++e)
      for (int p = 0; p < P; ++p) {
        const __m256d v = _mm256_mul_pd(sc, acc[e][p]);
        if constexpr (T) {
          alignas(32) double t[4];
          _mm256_store_pd(t, v);
          for (int l = 0; l < 4; ++l) out[(c + 4 * p + l) * ostride + e] = t[l];
        } else {
          _mm256_storeu_pd(out + e * ostride + c + 4 * p, v);
        }
      }
  }
  return c;
}

// The CPU runs the AVX2/FMA tiles (checked once; CONTACTRAJ_CORE_NO_AVX2 set: never, the SSE2 tiles serve all)
bool avx2_kernel() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         std::getenv("CONTACTRAJ_CORE_NO_AVX2") == nullptr;
  return ok;
}
#endif

template <int G, bool T>
void block_product(const RowMat& R, int64_t col0, const int64_t* rows, int64_t nr, const RowMat& S, double scale,
                   double* out, int64_t ostride) {
  const int64_t ncol = S.cols(), rs = R.cols();
  const double* Rd = R.data() + col0;
  int64_t c = 0;
#ifdef CONTACTRAJ_AVX2_KERNEL
  if (avx2_kernel()) c = block_product_avx2<G, T>(Rd, rs, rows, nr, S.data(), ncol, scale, out, ostride);
#endif
#if defined(__SSE2__)
  constexpr int P = G <= 6 ? 2 : 1;  // SSE pairs of columns per tile
  const __m128d sc = _mm_set1_pd(scale);
  for (; c + 2 * P <= ncol; c += 2 * P) {
    __m128d acc[G][P];
    for (int e = 0; e < G; ++e)
      for (int p = 0; p < P; ++p) acc[e][p] = _mm_setzero_pd();
    for (int64_t a = 0; a < nr; ++a) {
      const double* sr = S.data() + rows[a] * ncol + c;
      const double* rr = Rd + rows[a] * rs;
      __m128d sv[P];
      for (int p = 0; p < P; ++p) sv[p] = _mm_loadu_pd(sr + 2 * p);
      for (int e = 0; e < G; ++e) {
        const __m128d r = _mm_set1_pd(rr[e]);
        for (int p = 0; p < P; ++p) acc[e][p] = _mm_add_pd(acc[e][p], _mm_mul_pd(r, sv[p]));
      }
    }
    for (int e = 0; e < G; ++e)
      for (int p = 0; p < P; ++p) {
        const __m128d v = _mm_mul_pd(sc, acc[e][p]);
        if constexpr (T) {
          _mm_storel_pd(out + (c + 2 * p) * ostride + e, v);
          _mm_storeh_pd(out + (c + 2 * p + 1) * ostride + e, v);
        } else {
          _mm_storeu_pd(out + e * ostride + c + 2 * p, v);
        }
      }
  }
#endif
  for (; c < ncol; ++c) {  // the last columns (every column without SSE2)
    double acc[G] = {};
    for (int64_t a = 0; a < nr; ++a) {
      const double sv = S.data()[rows[a] * ncol + c];
      const double* rr = Rd + rows[a] * rs;
      for (int e = 0; e < G; ++e) acc[e] += rr[e] * sv;
    }
    for (int e = 0; e < G; ++e) (T ? out[c * ostride + e] : out[e * ostride + c]) = scale * acc[e];
  }
}

// the widest column block (a body's inertial columns: mass, com, inertia)
constexpr int kMaxBlock = 10;

// Where columns_product writes R^T S (npar, ncol): ``p`` with row stride ``stride``, or transposed (ncol, npar)
struct Dest {
  double* p;
  int64_t stride;
  bool transposed;
};

template <int... Gs>
void block_product_n(int g, const RowMat& R, int64_t col0, const int64_t* rows, int64_t nr, const RowMat& S,
                     double scale, double* dst, int64_t stride, bool transposed, std::integer_sequence<int, Gs...>) {
  bool done = false;
  const auto one = [&](auto G) {
    if (transposed)
      block_product<G, true>(R, col0, rows, nr, S, scale, dst, stride);
    else
      block_product<G, false>(R, col0, rows, nr, S, scale, dst, stride);
  };
  ((g == Gs + 1 ? (one(std::integral_constant<int, Gs + 1>{}), done = true) : false), ...);
  if (!done) throw std::logic_error("block_product: a block of " + std::to_string(g) + " columns");
}

// block_product<g> for a run-time width g (1 .. kMaxBlock) on R's rows rows[0 .. nr): R's columns c0 .. c0 + g
// into out's columns dcol .. dcol + g (rows, when transposed)
void block_product(int g, const RowMat& R, int64_t c0, const int64_t* rows, int64_t nr, const RowMat& S,
                   double scale, const Dest& out, int64_t dcol) {
  double* dst = out.transposed ? out.p + dcol : out.p + dcol * out.stride;
  block_product_n(g, R, c0, rows, nr, S, scale, dst, out.stride, out.transposed,
                  std::make_integer_sequence<int, kMaxBlock>{});
}

// One parameter list's compiled Jacobian (ParameterPlan in Python): what does not change between calls
// (the models, the chain of the inertial columns, the placements' joints and subtree masks) is kept; compute()
// is dynamics/parameters.py _reference_jacobian for a step without contact or with a fused LCP, NCP or relaxed
// StepState.
class ParameterPlan {
 public:
  using Matrix6 = Eigen::Matrix<double, 6, 6>;

  ParameterPlan(nb::object step_model, nb::object model, nb::object data, nb::object model0, nb::object data0,
                const IdxVec& body, const RowMat& dpi, int64_t friction_col, bool euclidean, double erp,
                const IdxVec& pjoint, const IdxVec& poffset, bool planar)
      : objects_{step_model, model, data, model0, data0},
        M_(&model_of(step_model)), Mint_(&model_of(model)), D_(&data_of(data)), M0_(&model_of(model0)),
        D0_(&data_of(data0)), body_(body), dpi_(dpi), friction_(friction_col), euclidean_(euclidean), erp_(erp),
        planar_(planar) {
    const pinocchio::Model& M = *M_;
    const int64_t npar = body.size(), nv = M.nv, nj = M.njoints;
    check_chain(M, body_, dpi_, npar);
    if (Mint_->nq != M.nq || Mint_->nv != nv || M0_->nv != nv || M0_->njoints != nj)
      throw std::invalid_argument("ParameterPlan: the models differ");
    if (friction_col >= npar) throw std::invalid_argument("ParameterPlan: friction_col out of range");
    for (int64_t k = 0; k < npar; ++k) inertial_ = inertial_ || body_[k] > 0;
    if (pjoint.size() != poffset.size())
      throw std::invalid_argument("ParameterPlan: pjoint and poffset differ in size (" +
                                  std::to_string(pjoint.size()) + " and " + std::to_string(poffset.size()) + ")");
    const int64_t np = pjoint.size();
    for (int64_t b = 0; b < np; ++b) {
      if (pjoint[b] < 1 || pjoint[b] >= nj)
        throw std::invalid_argument("ParameterPlan: pjoint[" + std::to_string(b) + "] = " +
                                    std::to_string(pjoint[b]) + " is not a joint id (1 .. " +
                                    std::to_string(nj - 1) + ")");
      if (poffset[b] < 0 || poffset[b] + 6 > npar)
        throw std::invalid_argument("ParameterPlan: poffset[" + std::to_string(b) + "] = " +
                                    std::to_string(poffset[b]) + " leaves no 6 columns (npar " +
                                    std::to_string(npar) + ")");
      for (int e = 0; e < 6; ++e)
        if (body_[poffset[b] + e] > 0)
          throw std::invalid_argument("ParameterPlan: a column both inertial and a placement");
    }
    nF_ = 6 * np;
    // column blocks (block_product): runs of consecutive columns of one body (inertial), of one placement, or one
    // other column (its R column is 0: friction and the like), at most kMaxBlock wide
    {
      std::vector<int64_t> group(npar);
      for (int64_t k = 0; k < npar; ++k) group[k] = body_[k] > 0 ? body_[k] : -1 - k;  // others: their own
      for (int64_t b = 0; b < np; ++b)
        for (int e = 0; e < 6; ++e) group[poffset[b] + e] = -1 - npar - b;
      for (int64_t k = 0; k < npar;) {
        int64_t n = 1;
        while (k + n < npar && n < kMaxBlock && group[k + n] == group[k]) ++n;
        blocks_.push_back({k, n, body_[k] > 0});
        k += n;
      }
    }
    pj_.assign(pjoint.data(), pjoint.data() + np);
    for (int64_t b = 0; b < np; ++b)
      for (int e = 0; e < 6; ++e) pk_.push_back(poffset[b] + e);
    // subtree masks: joint i is in subtree(j) iff j supports i
    sub_.assign(np, std::vector<char>(nj, 0));
    for (int64_t b = 0; b < np; ++b)
      for (int64_t i = 1; i < nj; ++i)
        for (auto s : M.supports[i])
          if (int64_t(s) == pj_[b]) sub_[b][i] = 1;
    std::vector<int64_t> joint_of(nv, 0);
    for (int64_t i = 1; i < nj; ++i)
      for (int k = 0; k < M.joints[i].nv(); ++k) joint_of[M.joints[i].idx_v() + k] = i;
    supportF_.setZero(nj, nF_);
    for (int64_t b = 0; b < np; ++b)
      for (int e = 0; e < 6; ++e)
        for (int64_t i = 1; i < nj; ++i) supportF_(i, 6 * b + e) = sub_[b][i];
    // subtree(j)'s dofs are the contiguous range idx_v(j) .. + nvSubtree(j) (Pinocchio's depth-first order, which
    // its own derivative algorithms assume too); the ancestors are the support of j's parent
    const pinocchio::Data& D = *D_;
    for (int64_t b = 0; b < np; ++b) {
      const int64_t j = pj_[b], iv = M.joints[j].idx_v(), ns = D.nvSubtree[j];
      for (int64_t d = 0; d < nv; ++d)
        if ((d >= iv && d < iv + ns) != bool(sub_[b][joint_of[d]]))
          throw std::invalid_argument("ParameterPlan: the dofs of joint " + std::to_string(j) +
                                      "'s subtree are not contiguous (a model not in depth-first order)");
      sub_iv_.push_back(iv);
      sub_nv_.push_back(ns);
      std::vector<int64_t> anc;
      for (auto a : M.supports[M.parents[j]])
        if (a > 0) anc.push_back(a);
      anc_.push_back(anc);
    }
    supp_dofs_.assign(nj, {});
    for (int64_t i = 1; i < nj; ++i)
      for (auto a : M.supports[i])
        if (a > 0)
          for (int e = 0; e < M.joints[a].nv(); ++e) supp_dofs_[i].push_back(M.joints[a].idx_v() + e);
    // the inertial columns through their bodies (columns_product) when their supports are deep: that costs about 12
    // products per column against the support's size; measured (CPU us, all parameters, kept): talos standing
    // (mean support 10.7 dofs) 107 -> 91, but go1-hold (7.8) 16 -> 16 and ur5-box (3.9) 5.3 -> 6.7; against
    // block_product on the formed columns (wall us per call, all parameters, kept): talos 310 (bodies) vs 319
    {
      int64_t n = 0, sum = 0;
      for (int64_t k = 0; k < npar; ++k)
        if (body_[k] > 0) ++n, sum += supp_dofs_[body_[k]].size();
      zinert_ = n > 0 && sum > 9 * n;
    }
    Yc_.resize(nj);
    dYc_.resize(nj);
    fc_.resize(nj);
    ov_.assign(nj, pinocchio::Motion::Zero());
    oagf_.assign(nj, pinocchio::Motion::Zero());
    JF_.resize(6, nF_);
    YJ_.resize(6, nv);
    dYJ_.resize(6, nv);
  }

  // (Fp (ndx, npar), dlambda (m, npar) or None): compute_into on new arrays.
  nb::tuple compute(nb::handle state, const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                    const Eigen::VectorXd& v_next, double dt, bool impulses) {
    const int64_t nv = M_->nv, npar = body_.size();
    const bool contact = !state.is_none();
    RowMat F(2 * nv, npar);
    RowMat dlam;
    compute_into(state, q, v, tau, v_next, dt, impulses, F, dlam, nullptr);
    auto Fp = to_numpy(std::move(F), {size_t(2 * nv), size_t(npar)});
    if (!contact || !impulses) return nb::make_tuple(Fp, nb::none());
    const size_t m = dlam.rows();
    return nb::make_tuple(Fp, to_numpy(std::move(dlam), {m, size_t(npar)}));
  }

  // Fp (ndx, npar) into ``F`` and, with ``impulses``, dlambda (m, npar) into ``dlam_mat`` (m = 0 without contact);
  // see the header. ``ready``: a Data of the step's model on which Pinocchio's RNEA derivatives ran at (q, v, a) with
  // a the acceleration at tau + J^T lambda / dt (the state Jacobians' jac.rnead, step.cpp), or without contact its
  // ABA derivatives at (q, v, tau) (with Minv mirrored): its world quantities (oMi, J, ov, oa_gf and the subtree
  // composites oYcrb, doYcrb, of) are the kinematics this needs, which are then not computed again (nullptr: they
  // are, on the plan's own data).
  void compute_into(nb::handle state, const Eigen::VectorXd& q, const Eigen::VectorXd& v, const Eigen::VectorXd& tau,
                    const Eigen::VectorXd& v_next, double dt, bool impulses, Eigen::Ref<RowMat> F, RowMat& dlam_mat,
                    const pinocchio::Data* ready) {
    const pinocchio::Model& M = *M_;
    pinocchio::Data& D = *D_;
    const int64_t nv = M.nv, npar = body_.size();
    if (q.size() != M.nq || v.size() != nv || tau.size() != nv || v_next.size() != nv)
      throw std::invalid_argument("ParameterPlan.compute: q, v, tau or v_next has the wrong size");
    if (F.rows() != 2 * nv || F.cols() != npar)
      throw std::invalid_argument("ParameterPlan.compute: Fp must be " + shape(2 * nv, npar));
    Eigen::Ref<RowMat> dv = F.bottomRows(nv);  // dv+/dp, written in place (the integration reads it)
    const bool contact = !state.is_none();  // without contact a friction column is 0
    std::optional<StepStateView> view;
    if (contact) view.emplace(step_state_view(state));
    const StepStateView* st = contact ? &*view : nullptr;
    const int64_t m = contact ? st->J.rows() : 0;
    const int64_t mc = contact ? st->m_contact : 0;
    const bool placements = nF_ > 0;
    PROF_SCOPE("p");

    // the acceleration at tau + J^T lambda / dt
    tau_total_ = tau;
    // the impulses: the LCP's solution, the NCP's or the relaxed model's
    const Eigen::VectorXd* lam_all = !contact      ? nullptr
                                     : st->ncp     ? &st->ncp->solution.lam
                                     : st->relaxed ? &st->relaxed->solution.lam
                                                   : &st->solution.x;
    if (contact) tau_total_.noalias() += st->J.transpose() * *lam_all / dt;
    // R's columns are 0 unless inertial or a placement's (friction acts through the explicit term e only): without
    // them no acceleration, kinematics or M^-1 R is needed (and without contact Fp is 0)
    const bool rterms = inertial_ || placements;
    const bool world = ready != nullptr;  // the kinematics are ready's world quantities
    const pinocchio::Data& K = world ? *ready : D;
    if (!contact && rterms && world) {
      Minv_own_ = ready->Minv;
    } else if (!contact && rterms) {
      pinocchio::computeMinverse(M, D, q);
      Minv_own_ = D.Minv;
      Minv_own_.triangularView<Eigen::StrictlyLower>() = Minv_own_.transpose().triangularView<Eigen::StrictlyLower>();
    }
    const RowMat& Minv = contact ? st->Minv : Minv_own_;
    if (rterms && !world) {  // ABA's acceleration from the M^-1 at hand: M^-1 (tau_total - nle), half of aba's cost
      PROF_SCOPE("p.aba");
      pinocchio::nonLinearEffects(M, D, q, v);
      a_.noalias() = Minv * (tau_total_ - D.nle);
    }

    // Few columns in contact: solve on them directly, dz = -S(W^T Rn + x), dv = M^-1 Rn + Wd dz (per column nv^2 +
    // 2 nv k + k^2), rather than through the map of every dof (S on the nv + nX columns, then Sp = M^-1 - L^T Wd^T:
    // k^2 (nv + nX) + nv^2 k before the columns' own nv^2 each); nX: the columns with explicit terms, at most
    bool direct = false;
    if (contact && !st->ncp && !st->relaxed && st->factor.red.C.size() > 0) {
      const double fn = double(nv), fk = double(st->factor.red.C.size()), fp = double(npar);
      const double nX = double(mc > 0 ? nF_ : 0) + (friction_ >= 0 ? 1.0 : 0.0);
      direct = fp * (2 * fn * fk + fk * fk) < fk * fk * (fn + nX) + fn * fn * fk;
    }

    // R = dRNEA/dp - d(J^T lambda / dt)/dp
    R_.setZero(nv, npar);
    if (rterms && !world) { PROF_SCOPE("p.kin"); kinematics(M, D, q, v, a_); }
    // the inertial columns: formed on deep trees only (zinert_: columns_product reads them off the kinematics) unless
    // the direct path takes them
    if (inertial_ && (!zinert_ || direct)) { PROF_SCOPE("p.regressor"); regressor_world(M, K, world, R_); }
    const bool geo = placements && mc > 0;  // placements in contact: the contacts' F columns
    if (placements) {
      PROF_SCOPE("p.placements");
      { PROF_SCOPE("p.pl.kin"); kinematic_pass(M, K, world); }
      if (geo) {
        { PROF_SCOPE("p.pl.fgeo"); f_geometry(*st); }
        lam_c_ = lam_all->head(mc);
        { PROF_SCOPE("p.pl.force"); force_(lam_c_); }
      }
      { PROF_SCOPE("p.pl.rnea"); placement_rnea(M, K, geo ? 1.0 / dt : 0.0, R_); }
    }
    // Rn = -dt R, the free velocity's derivative is M^-1 Rn. With contact the solve is linear in dc[C] =
    // J_C M^-1 Rn + x = W^T Rn + x (W = MJt[:, C]; x: the explicit terms of a few columns), so with the solve's
    // map S (sym_apply, or lstsq when some row is bounded) and L = S(W^T):
    //   dz = -L Rn + S(-x),  dv = (M^-1 - Wd L) Rn + Wd S(-x) + MJt e   (Wd = MJt P when bounded, else W)
    // the product with every column (columns_product: on deep trees the inertial ones through their bodies'
    // 6-dimensional families, the others formed; Rn's -dt applied as they are multiplied), then the few columns with x.
    dlam_mat.resize(impulses ? m : 0, impulses ? npar : 0);  // (m, npar) only when asked: talos' is 135 kB
    auto& dlam = dlam_mat;
    if (!contact && !rterms) {
      dv.setZero();
    } else if (!contact) {
      PROF_SCOPE("p.minvR");
      columns_product(M, K, world, Minv, dt, into(dv));
    } else if (st->ncp || st->relaxed) {
      PROF_SCOPE("p.ncp_relaxed");
      if (impulses) dlam.setZero();
      model_columns(M, K, world, *st, Minv, v_next, dt, geo, impulses, dlam, dv);
    } else {
      PROF_SCOPE("p.contact");
      const lcp::Problem& prob = st->problem;
      const lcp::Solution& sol = st->solution;
      // friction: the bounded rows' explicit impulse derivative e (lambda_i = s_i mu lambda_n), c moves by A e
      dlam.setZero();
      e_.setZero(m);
      bool any_e = false;
      if (friction_ >= 0) {
        // frictionless contacts (mu = 0): from mu = 0+ a slipping friction row's impulse is -sign(slip) mu
        // lambda_n, e = -sign(w_i) lambda_n; a slip within SLIP_TOL (dynamics/parameters.py) of 0 is none
        const double slip_tol = slip_tolerance(prob.b);
        for (int64_t i = 0; i < m; ++i) {
          if (sol.modes[i] == 3 && prob.mu[i] > 0) {
            e_[i] = sol.x[i] / prob.mu[i];
          } else if (prob.mu[i] == 0 && prob.normal_of[i] >= 0 && std::abs(sol.w[i]) > slip_tol) {
            e_[i] = (sol.w[i] > 0 ? -1.0 : 1.0) * std::max(sol.x[prob.normal_of[i]], 0.0);
          }
          any_e = any_e || e_[i] != 0.0;
        }
      }
      const lcp::Reduced& red = st->factor.red;
      const int64_t k = red.C.size();
      if (k == 0) {
        columns_product(M, K, world, Minv, dt, into(dv));
      } else {
        const bool bounded = red.bounded;
        W_.resize(nv, k);
        for (int64_t a = 0; a < k; ++a) W_.col(a) = st->MJt.col(red.C[a]);
        const RowMat* Wd = &W_;
        if (bounded) {
          Wd_.noalias() = st->MJt * red.P;
          Wd = &Wd_;
        }
        auto solve = [&](const RowMat& B, RowMat& X) {  // X = S(B)
          if (bounded) {
            lstsq_apply(st->factor.ls, B, X);  // lstsq(K, B): the state Jacobians' factor
          } else {
            X.resize(k, B.cols());
            sym_apply(st->factor.sym, B, X);  // sym_lstsq(K, B): the state Jacobians' factor
          }
        };
        // the columns with explicit terms x in dc[C]: the placements' (J's and the distances' derivatives, in
        // contact) and friction's A e; made first, so that S is applied once to W^T and x together (one lstsq of K
        // when some row is bounded, not two)
        cols_.clear();
        if (geo)
          for (int64_t c = 0; c < nF_; ++c) cols_.push_back(pk_[c]);
        if (any_e) cols_.push_back(friction_);
        const int64_t nX = cols_.size();
        xcols_.clear();
        if (nX > 0) {
          PROF_SCOPE("p.c.explicit");
          x_.setZero(k, nX);
          if (geo) {  // _add_placement_contact_terms on the rows C (x's column c: placement column c)
            PROF_SCOPE("p.c.x.vel");
            velocity_(v_next);
            posC_.assign(m, -1);
            for (int64_t a = 0; a < k; ++a) posC_[red.C[a]] = a;
            const auto same = [](int64_t c) { return c; };
            for (int64_t a = 0; a < k; ++a)
              if (red.C[a] < mc) add_velocity_row(x_, a, red.C[a], 1.0, same);
            for (int64_t a = 0; a < st->normal_rows.size(); ++a) {
              const int64_t row = st->normal_rows[a];
              if (row < mc && posC_[row] >= 0) add_distance_row(x_, posC_[row], row, st->bias_slope[a] / dt, same);
            }
          }
          if (any_e)
            for (int64_t a = 0; a < k; ++a) x_(a, nX - 1) += prob.A.row(red.C[a]).dot(e_);
          // only the columns with some x: a placement whose subtree holds none of the contacts' bodies has none
          // (talos standing: 79 of 199)
          xabs_.setZero(nX);  // the columns' |x| sums, row by row (x_ is row-major; no branch, vectorized)
          for (int64_t a = 0; a < k; ++a) xabs_ += x_.row(a).cwiseAbs().transpose();
          for (int64_t c = 0; c < nX; ++c)
            if (xabs_[c] != 0.0) xcols_.push_back(c);
        }
        const int64_t nK = xcols_.size();
        if (direct) {
          PROF_SCOPE("p.c.direct");
          R_ *= -dt;  // Rn (every column: formed for the direct path)
          Gd_.noalias() = Minv * R_;
          Bd_.noalias() = W_.transpose() * R_;
          for (int64_t c = 0; c < nK; ++c) Bd_.col(cols_[xcols_[c]]) += x_.col(xcols_[c]);
          Bd_ = -Bd_;
          solve(Bd_, dz_);
          dv = Gd_;
          dv.noalias() += *Wd * dz_;
        } else {
          PROF_SCOPE("p.c.map");
          WT_.resize(k, nv + nK);  // [W^T, -x[:, xcols]]
          WT_.leftCols(nv) = W_.transpose();
          for (int64_t c = 0; c < nK; ++c) WT_.col(nv + c) = -x_.col(xcols_[c]);
          solve(WT_, LX_);  // [L, S(-x)]
          {
            PROF_SCOPE("p.c.columns");
            map_columns(M, K, world, Minv, *Wd, dt, impulses, dv);
          }
          if (nK > 0) {  // dz += S(-x), dv += Wd S(-x) on the columns with x
            dvx_.resize(nv, nK);  // Wd S(-x) = (S(-x)^T Wd^T)^T, through the tiles
            tn_product(LX_, nv, nK, WdT_, 1.0, Dest{dvx_.data(), nK, true});
            for (int64_t c = 0; c < nK; ++c) {
              const int64_t col = cols_[xcols_[c]];
              if (impulses) dz_.col(col) += LX_.col(nv + c);
              dv.col(col) += dvx_.col(c);
            }
          }
        }
        if (impulses && bounded) {  // dlambda = P dz, or dz on the rows C
          dlam.noalias() += red.P * dz_;
        } else if (impulses) {
          for (int64_t i = 0; i < k; ++i) dlam.row(red.C[i]) += dz_.row(i);
        }
      }
      if (any_e) {
        if (impulses) dlam.col(friction_) += e_;
        dv.col(friction_).noalias() += st->MJt * e_;
      }
    }

    // dq+/dp = dIntegrate_ARG1 (dt dv + dqc) row block by row block, read off F's bottom rows (dv) in one pass
    PROF_SCOPE("p.integrate");
    dq_ = v_next * dt;
    const bool corrected = contact && st->correction;
    if (corrected) {
      PROF_SCOPE("p.i.correction");
      correction_derivative(*st, q, geo);
      dq_ += st->correction->dq;
    }
    if (euclidean_) {
      F.topRows(nv) = dt * dv;
      if (corrected) F.topRows(nv) += dqc_;
    } else {
      J1_.setZero(nv, nv);  // dIntegrate writes the joints' diagonal blocks only
      pinocchio::dIntegrate(*Mint_, q, dq_, J1_, pinocchio::ARG1);
      for (int64_t i = 1; i < Mint_->njoints; ++i) {  // J1 is block diagonal: each joint's own block
        const int iv = Mint_->joints[i].idx_v(), n = Mint_->joints[i].nv();
        if (n == 1 && !corrected) {  // a scalar times a row of dv (no product call, no copy)
          F.row(iv) = J1_(iv, iv) * (dt * dv.row(iv));
          continue;
        }
        blk_ = dt * dv.middleRows(iv, n);  // dt dv + dqc on the joint's rows
        if (corrected) blk_ += dqc_.middleRows(iv, n);
        // J1's block times blk_ through block_product's tiles: F's rows = B^T blk_ with B = the block's transpose
        J1bT_ = J1_.block(iv, iv, n, n).transpose();
        tn_product(J1bT_, 0, n, blk_, 1.0, Dest{F.data() + iv * F.outerStride(), F.outerStride(), false});
      }
    }
  }

 private:
  // The kinematics the regressor and the placements read at (q, v, a) on ``M`` (the step's model or its
  // gravity-free copy): data.J (world columns), oMi, the local v and a (as RNEA's forward pass).
  static void kinematics(const pinocchio::Model& M, pinocchio::Data& D, const Eigen::VectorXd& q,
                         const Eigen::VectorXd& v, const Eigen::VectorXd& a) {
    pinocchio::computeJointJacobians(M, D, q);
    pinocchio::forwardKinematics(M, D, q, v, a);
  }

  // Body i's regressor in the world frame after kinematics(): oMi's dual action times pinocchio::bodyRegressor at
  // i's local velocity and acceleration with gravity (6 x 10; regressor_world and columns_product). ``world``: D
  // holds a derivatives pass's world ov, oa_gf instead (compute_into's ``ready``), brought to i's frame.
  static void world_body_regressor(const pinocchio::Model& M, const pinocchio::Data& D, bool world, int64_t i,
                                   Eigen::Matrix<double, 6, 10>& Yw) {
    if (world) {
      Yw.noalias() = D.oMi[i].toDualActionMatrix() *
                     pinocchio::bodyRegressor(D.oMi[i].actInv(D.ov[i]), D.oMi[i].actInv(D.oa_gf[i]));
      return;
    }
    const pinocchio::Motion agf = D.a[i] - D.oMi[i].actInv(M.gravity);
    Yw.noalias() = D.oMi[i].toDualActionMatrix() * pinocchio::bodyRegressor(D.v[i], agf);
  }

  // R's inertial columns (body_[k] > 0) after kinematics(): Pinocchio's joint torque regressor times dpi, in the
  // world frame and on the columns' own rows. Column k of body i is J_d^T oMi.act(Y_i(v_i, a_i - g_i) dpi[:, k])
  // on the dofs d of i's support (Y_i: pinocchio::bodyRegressor, 6 x 10, at i's local velocity and acceleration
  // with gravity, as computeJointTorqueRegressor's forward pass has them), 0 elsewhere (R is zeroed before):
  // one 6 x 10 regressor and one 6-vector per column, no regressor of every joint propagated to its ancestors.
  void regressor_world(const pinocchio::Model& M, const pinocchio::Data& D, bool world, RowMat& R) {
    const int64_t npar = body_.size();
    Eigen::Matrix<double, 6, 10> Yw;
    int64_t prev = -1;
    for (int64_t k = 0; k < npar; ++k) {
      const int64_t i = body_[k];
      if (i <= 0) continue;
      if (i != prev) {  // the columns of one body are consecutive (a block): its regressor once
        world_body_regressor(M, D, world, i, Yw);
        prev = i;
      }
      Vector6 f = Vector6::Zero();
      for (int e = 0; e < 10; ++e)
        if (dpi_(e, k) != 0.0) f += dpi_(e, k) * Yw.col(e);
      for (int64_t d : supp_dofs_[i]) R(d, k) = D.J.col(d).dot(f);
    }
  }

  // outT (npar, S.cols()) = Rn^T S, Rn = -dt R: R_'s columns (scaled by -dt as they are multiplied) block by block
  // on their nonzero rows (block_product), and on deep trees (zinert_) the inertial ones without forming them. Body i's columns are
  // J_s^T Yw_i dpi[:, k] over the dofs s of i's support (regressor_world), a 6-dimensional family: their rows of
  // R^T S are C^T Z_i with C = -dt Yw_i dpi[:, block] (6 x n) and Z_i = sum_s J_s S[s, :] (6 x S.cols()),
  // accumulated from the root down (Z_i = Z_parent + J_i S[dofs of i, :]). Per body one 6 x n x cols product
  // instead of n columns times the support's rows (talos standing: 330 columns on 38 dofs; through C rather than
  // Yw^T Z_i then dpi's rows: 310 -> 296 us per call, all parameters, kept).
  void columns_product(const pinocchio::Model& M, const pinocchio::Data& D, bool world, const RowMat& S, double dt,
                       RowMat& outT) {
    outT.resize(body_.size(), S.cols());
    columns_product(M, D, world, S, dt, Dest{outT.data(), S.cols(), false});
  }

  // The same into ``out`` (transposed: straight into the rows of dv+/dp, or of a matrix shaped like it)
  void columns_product(const pinocchio::Model& M, const pinocchio::Data& D, bool world, const RowMat& S, double dt,
                       const Dest& out) {
    const int64_t nv = M.nv, ncol = S.cols(), npar = body_.size();
    {
      PROF_SCOPE("p.cols.other");  // R_'s columns (on deep trees all but the inertial ones) block by block
      for (const Block& b : blocks_) {
        if (b.inertial && zinert_) continue;
        brows_.clear();
        for (int64_t d = 0; d < nv; ++d) {
          const double* r = R_.data() + d * npar + b.col0;
          double sum = 0.0;  // |r| summed without a branch per entry (NaN counts as nonzero)
          for (int64_t e = 0; e < b.n; ++e) sum += std::abs(r[e]);
          if (sum != 0.0) brows_.push_back(d);
        }
        block_product(int(b.n), R_, b.col0, brows_.data(), brows_.size(), S, -dt, out, b.col0);
      }
    }
    if (!inertial_ || !zinert_) return;
    const int nj = M.njoints;
    PROF_SCOPE("p.cols.inertial");
    ZT_.resize(nj);
    for (int i = 1; i < nj; ++i) {  // parents come before their children
      const int p = M.parents[i], iv = M.joints[i].idx_v(), n = M.joints[i].nv();
      if (p > 0)
        ZT_[i] = ZT_[p];
      else
        ZT_[i].setZero(6, ncol);
      for (int e = 0; e < n; ++e)  // a rank-one update per dof: six rows of S's row
        for (int r = 0; r < 6; ++r) ZT_[i].row(r) += D.J(r, iv + e) * S.row(iv + e);
    }
    // a body's block of columns: its rows of R^T S are C^T Z_i with C = -dt Yw_i dpi[:, block] (6 x n)
    Eigen::Matrix<double, 6, 10> Yw;
    for (const Block& b : blocks_) {
      if (!b.inertial) continue;
      const int64_t i = body_[b.col0];
      world_body_regressor(M, D, world, i, Yw);
      Cb_.noalias() = (-dt * Yw) * dpi_.middleCols(b.col0, b.n);
      block_product(int(b.n), Cb_, 0, all_rows(6), 6, ZT_[i], 1.0, out, b.col0);
    }
  }

  // out = scale B[:, c0 .. c0 + n)^T S (n, S.cols()) over every row of B, by block_product's tiles (kMaxBlock
  // columns of B at a time; out transposed: (S.cols(), n))
  void tn_product(const RowMat& B, int64_t c0, int64_t n, const RowMat& S, double scale, const Dest& out) {
    const int64_t* rows = all_rows(B.rows());
    for (int64_t c = 0; c < n; c += kMaxBlock)
      block_product(int(std::min<int64_t>(kMaxBlock, n - c)), B, c0 + c, rows, B.rows(), S, scale, out, c);
  }

  // 0 .. n - 1: block_product's rows when a product takes every row (iota_ only grows)
  const int64_t* all_rows(int64_t n) {
    for (int64_t a = iota_.size(); a < n; ++a) iota_.push_back(a);
    return iota_.data();
  }

  // dv (and, with impulses, dz_) through the map of every dof, the LCP's and model_columns' map paths: the
  // transposed operator Sp = [M^-1 - L^T Wd^T, -L^T] with L = LX_'s first nv columns (kz, nv), then its product
  // with every column (columns_product); leaves WdT_ = Wd^T (kz, nv) for the explicit columns. dz's columns only
  // when the impulses are asked.
  void map_columns(const pinocchio::Model& M, const pinocchio::Data& D, bool world, const RowMat& Minv,
                   const RowMat& Wd, double dt, bool impulses, Eigen::Ref<RowMat> dv) {
    const int64_t nv = M.nv, kz = LX_.rows();
    Sp_.resize(nv, nv + (impulses ? kz : 0));
    WdT_ = Wd.transpose();  // row-major: the tiles' right factor
    tn_product(LX_, 0, nv, WdT_, -1.0, Dest{Sp_.data(), Sp_.cols(), false});  // -L^T Wd^T
    Sp_.leftCols(nv) += Minv;
    if (impulses) {  // dv's and dz's columns together
      Sp_.rightCols(kz) = -LX_.leftCols(nv).transpose();
      columns_product(M, D, world, Sp_, dt, outT_);
      dv = outT_.leftCols(nv).transpose();
      dz_ = outT_.rightCols(kz).transpose();
    } else {
      columns_product(M, D, world, Sp_, dt, into(dv));
    }
  }

  // dv+/dp's rows (nv, npar), or a matrix shaped like them, as columns_product's destination, transposed
  static Dest into(Eigen::Ref<RowMat> dv) { return Dest{dv.data(), dv.outerStride(), true}; }

  // out(out_row, col(c)) += scale * dJv_(row, c) over the F columns c (after velocity_: d(J w)/ddelta's row ``row``)
  // of the placements active for its contact (the others' entries are 0)
  template <class Col>
  void add_velocity_row(RowMat& out, int64_t out_row, int64_t row, double scale, Col col) const {
    for (int64_t b : act_[group_[row / geo_->r]])
      for (int64_t c = 6 * b; c < 6 * b + 6; ++c) out(out_row, col(c)) += scale * dJv_(row, c);
  }

  // out(out_row, col(c)) += scale * J's F column c of the contact row ``row`` (dphi/ddelta on a normal row): the
  // columns of the placements active for its contact (fg_), the others' are 0
  template <class Col>
  void add_distance_row(RowMat& out, int64_t out_row, int64_t row, double scale, Col col) const {
    const int64_t r = geo_->r, c = row / r, j = row % r;
    const auto& act = act_[group_[c]];
    for (size_t a = 0; a < act.size(); ++a)
      for (int e = 0; e < 6; ++e) out(out_row, col(6 * act[a] + e)) += scale * fg_[c].J(j, 6 * a + e);
  }

  // scale(a) * dphi/ddelta on the contact normal rows (normal_rows[a] < mc) into out's columns col(c)
  template <class Scale, class Col>
  void add_normal_rows(RowMat& out, const StepStateView& st, Scale scale, Col col) const {
    for (int64_t a = 0; a < st.normal_rows.size(); ++a)
      if (st.normal_rows[a] < st.m_contact) add_distance_row(out, st.normal_rows[a], st.normal_rows[a], scale(a), col);
  }

  // The placements' fixed-impulse terms of dc (_add_placement_contact_terms, after velocity_): d(J v+)/ddelta on the
  // contact rows and slope / dt dphi/ddelta on the normal rows, into out's columns col(c)
  template <class Col>
  void add_fixed_impulse_rows(RowMat& out, const StepStateView& st, double dt, Col col) const {
    for (int64_t row = 0; row < st.m_contact; ++row) add_velocity_row(out, row, row, 1.0, col);
    add_normal_rows(out, st, [&](int64_t a) { return st.bias_slope[a] / dt; }, col);
  }

  // The NCP's friction term (one coefficient: the plan's column): a sliding group's tangential residual moves by
  // lambda_n c_t / |c_t| per unit mu (none when it does not slip: within the slip tolerance of _friction_terms),
  // a saturated one's by -lambda_n dir; into dF (m,), false when there is none.
  bool ncp_friction(const StepStateView& st, Eigen::VectorXd& dF) const {
    const ncp::Problem& prob = st.ncp->problem;
    const ncp::Solution& sol = st.ncp->solution;
    const int64_t m = st.J.rows(), mc = st.m_contact;
    dF.setZero(m);
    if (friction_ < 0) return false;
    bool any_f = false;
    const Eigen::VectorXd c = prob.A * sol.lam + prob.b;
    const double slip_tol = slip_tolerance(prob.b);
    for (int64_t g = 0; g < prob.start.size(); ++g) {
      const int64_t s0 = prob.start[g], n = prob.size[g], md = sol.modes[g];
      if (n < 2 || (md != ncp::SLIDING && md != ncp::SATURATED) || s0 >= mc) continue;
      const double ln = sol.lam[s0];
      if (md == ncp::SLIDING) {
        const double nrm = c.segment(s0 + 1, n - 1).norm();
        if (nrm <= slip_tol) continue;
        for (int64_t i = 1; i < n; ++i) dF[s0 + i] = ln * c[s0 + i] / nrm;
      } else {
        for (int64_t i = 1; i < n; ++i) dF[s0 + i] = -ln * sol.dirs(g, i - 1);
      }
      any_f = true;
    }
    return any_f;
  }

  // The relaxed model's friction term: d(residual)/dmu on each friction block's rows (_friction_terms' relaxed
  // form, -4 kappa lam_t s lam_n / D^2 with s = mu lam_n, D = s^2 - |lam_t|^2) into dF (m,); false when none.
  bool relaxed_friction(const StepStateView& st, Eigen::VectorXd& dF) const {
    const relaxed::Problem& prob = st.relaxed->problem;
    const relaxed::Solution& sol = st.relaxed->solution;
    const int64_t m = st.J.rows(), mc = st.m_contact;
    dF.setZero(m);
    if (friction_ < 0) return false;
    const int64_t nrows = prob.b.size();
    for (int64_t i = 0; i < nrows; ++i) {  // friction_blocks: a block's first row, with friction
      if (prob.kind[i] != relaxed::FRICTION || prob.block_start[i] != i || !(prob.mu[i] > 0)) continue;
      const int64_t s0 = prob.block_start[i], sz = prob.block_size[i], n = prob.normal_of[i];
      if (n >= mc || !(sol.lam[n] > 0.0)) continue;
      const double s = prob.mu[i] * sol.lam[n];
      const double D2 = s * s - sol.lam.segment(s0, sz).squaredNorm();
      for (int64_t j = 0; j < sz; ++j) dF[s0 + j] = -4.0 * prob.kappa * sol.lam[s0 + j] * s * sol.lam[n] / (D2 * D2);
    }
    return true;
  }

  // An NCP or relaxed state's columns (dynamics/parameters.py _reference_jacobian with NCPAdapter.linearize /
  // RelaxedAdapter.linearize). The model's equations at its solution, E dz = -(Fc dc + X_e) on the unknowns (the
  // NCP's act, least squares with the state's NcpFactor; the relaxed model's keep, E regular, its RelaxedFactor),
  // with dc = J M^-1 Rn + X_c: X_c the placements' fixed-impulse terms on the contact rows, X_e the model's explicit
  // terms on the rows of dz: friction (ncp_friction, relaxed_friction) and, relaxed, the placements' F_phi dphi (its
  // residual reads the distances). Then dv = G + W dz (W = MJt[:, unknowns]) and, when asked, dlambda[unknowns] = dz
  // (dlam zeroed before).
  // Few columns: solved column by column. More columns than the dofs and the explicit columns: through the map of
  // every dof, as the LCP's map path: with S = E^+ and L = S Fc J M^-1 = S Fc MJt^T (k, nv),
  //   dz = -L Rn + S(-(Fc X_c + X_e)),  dv = (M^-1 - W L) Rn + W S(-(Fc X_c + X_e))
  // per column nv^2 (through columns_product), the explicit terms solved on their own columns only.
  void model_columns(const pinocchio::Model& M, const pinocchio::Data& D, bool world, const StepStateView& st,
                     const RowMat& Minv, const Eigen::VectorXd& v_next, double dt, bool geo, bool impulses,
                     RowMat& dlam, Eigen::Ref<RowMat> dv) {
    const int64_t nv = M.nv, npar = body_.size(), m = st.J.rows();
    const bool ncp = st.ncp != nullptr;
    const int64_t k = ncp ? st.ncp_factor->E.rows() : (st.relaxed_factor ? st.relaxed_factor->E.rows() : 0);
    if (k == 0) {  // no unknowns: the free velocity's columns
      columns_product(M, D, world, Minv, dt, into(dv));
      return;
    }
    const RowMat& Fc = ncp ? st.ncp_factor->Fc : st.relaxed_factor->Fc;
    const IdxVec& unknowns = ncp ? st.ncp_factor->act : st.relaxed->solution.keep;
    const bool map = npar > nv + (geo ? nF_ : 0) + (friction_ >= 0 ? 1 : 0);
    const auto S = [&](const RowMat& B, RowMat& X) {  // X = E^+ B
      if (ncp)
        lstsq_apply(st.ncp_factor->ls, B, X);
      else if (map)
        X.noalias() = st.relaxed_factor->inverse() * B;
      else
        X = solve(st.relaxed_factor->E, B);
    };
    const auto same = [](int64_t c) { return c; };
    // the explicit columns (the placements' in contact, then friction's) and X_e on them
    const bool any_f = ncp ? ncp_friction(st, e_) : relaxed_friction(st, e_);
    cols_.clear();
    if (geo)
      for (int64_t c = 0; c < nF_; ++c) cols_.push_back(pk_[c]);
    if (any_f) cols_.push_back(friction_);
    const int64_t nX = cols_.size();
    xe_.setZero(k, nX);
    if (!ncp && geo) {  // F_phi dphi: the placements' distance rows (unscaled: the model's own phi term)
      Xc_.setZero(m, nF_);
      add_normal_rows(Xc_, st, [](int64_t) { return 1.0; }, same);
      xe_.leftCols(nF_).noalias() = st.relaxed_factor->Fphi * Xc_;
    }
    if (any_f)
      for (int64_t a = 0; a < k; ++a) xe_(a, nX - 1) = e_[unknowns[a]];
    W_.resize(nv, k);
    for (int64_t a = 0; a < k; ++a) W_.col(a) = st.MJt.col(unknowns[a]);
    if (geo) velocity_(v_next);
    if (!map) {  // column by column: dc = J G + X_c on every column, rhs = -(Fc dc + X_e)
      Gd_.resize(nv, npar);
      columns_product(M, D, world, Minv, dt, into(Gd_));
      Bd_.noalias() = st.J * Gd_;
      if (geo) add_fixed_impulse_rows(Bd_, st, dt, [this](int64_t c) { return pk_[c]; });
      rhs_.noalias() = Fc * Bd_;
      for (int64_t c = 0; c < nX; ++c) rhs_.col(cols_[c]) += xe_.col(c);
      rhs_ = -rhs_;
      S(rhs_, dz_);
      dv = Gd_;
      dv.noalias() += W_ * dz_;
    } else {
      x_.setZero(k, nX);  // Fc X_c + X_e on the explicit columns
      if (geo) {
        Xc_.setZero(m, nF_);
        add_fixed_impulse_rows(Xc_, st, dt, same);
        x_.leftCols(nF_).noalias() = Fc * Xc_;
      }
      x_ += xe_;
      // L = S Fc MJt^T, the transposed operator Sp = [M^-1 - L^T W^T, -L^T] and its columns
      FJ_.noalias() = Fc * st.MJt.transpose();
      S(FJ_, LX_);
      map_columns(M, D, world, Minv, W_, dt, impulses, dv);
      if (nX > 0) {  // dz += S(-x), dv += W S(-x) on the explicit columns
        x_ = -x_;
        S(x_, dvx_);
        Wz_.resize(nv, nX);  // W S(-x) = (S(-x)^T W^T)^T, through the tiles
        tn_product(dvx_, 0, nX, WdT_, 1.0, Dest{Wz_.data(), nX, true});
        for (int64_t c = 0; c < nX; ++c) {
          dv.col(cols_[c]) += Wz_.col(c);
          if (impulses) dz_.col(cols_[c]) += dvx_.col(c);
        }
      }
    }
    if (impulses)
      for (int64_t a = 0; a < k; ++a) dlam.row(unknowns[a]) += dz_.row(a);
  }

  // The world quantities of the header comment after kinematics() on ``M``, their subtree composites, and J_F
  // of every placement (JF_, 6 x nF).
  void kinematic_pass(const pinocchio::Model& M, const pinocchio::Data& D, bool world) {
    const int nj = M.njoints;
    if (world) {  // a derivatives pass's (compute_into's ``ready``): the same quantities, the composites summed
      for (int i = 1; i < nj; ++i) {
        ov_[i] = D.ov[i];
        oagf_[i] = D.oa_gf[i];
        Yc_[i] = D.oYcrb[i];
        dYc_[i] = D.doYcrb[i];
        fc_[i] = D.of[i];
      }
    }
    for (int i = 1; i < nj && !world; ++i) {
      ov_[i] = D.oMi[i].act(D.v[i]);
      oagf_[i] = D.oMi[i].act(D.a[i]) - M.gravity;
      Yc_[i] = D.oMi[i].act(M.inertias[i]);
      const pinocchio::Force oh = Yc_[i] * ov_[i];
      fc_[i] = Yc_[i] * oagf_[i] + ov_[i].cross(oh);
      dYc_[i] = Yc_[i].variation(ov_[i]);
      pinocchio::addSkew(-oh.linear(), dYc_[i].block<3, 3>(0, 3));
      pinocchio::addSkew(-oh.linear(), dYc_[i].block<3, 3>(3, 0));
      pinocchio::addSkew(-oh.angular(), dYc_[i].block<3, 3>(3, 3));
    }
    for (int i = nj - 1; i > 0 && !world; --i) {
      const int p = M.parents[i];
      if (p > 0) {
        Yc_[p] += Yc_[i];
        dYc_[p] += dYc_[i];
        fc_[p] += fc_[i];
      }
    }
    for (size_t b = 0; b < pj_.size(); ++b) {
      const pinocchio::SE3 oMf = D.oMi[M.parents[pj_[b]]] * M.jointPlacements[pj_[b]];
      JF_.middleCols<6>(6 * b) = oMf.toActionMatrix();
    }
  }

  // The placement columns of R = dRNEA/ddelta - fd_ * fscale (fscale 0: no contact force term), after
  // kinematic_pass on the same model and data (header comment). YJ_ = Yc_i J_d and dYJ_ = dYc_i^T J_d per dof d
  // of joint i (Pinocchio's dFda and dYtJ), so that a subtree's rows are two products.
  void placement_rnea(const pinocchio::Model& M, const pinocchio::Data& D, double fscale, RowMat& R) {
    for (int64_t i = 1; i < M.njoints; ++i) {
      const int iv = M.joints[i].idx_v(), n = M.joints[i].nv();
      YJ_.middleCols(iv, n).noalias() = Yc_[i].matrix() * D.J.middleCols(iv, n);
      dYJ_.middleCols(iv, n).noalias() = dYc_[i].transpose() * D.J.middleCols(iv, n);
    }
    Matrix6 dV, dA, dF, adV;
    for (size_t b = 0; b < pj_.size(); ++b) {
      const int64_t j = pj_[b], p = M.parents[j], col = pk_[6 * b];
      const Matrix6 JF = JF_.middleCols<6>(6 * b);
      const pinocchio::Motion ag = p > 0 ? oagf_[p] : pinocchio::Motion(-M.gravity);
      if (p > 0) {
        adV = ov_[p].toActionMatrix();
        dV.noalias() = adV * JF;
        dA.noalias() = ag.toActionMatrix() * JF;
        dA.noalias() += adV * dV;
      } else {
        dV.setZero();
        dA.noalias() = ag.toActionMatrix() * JF;
      }
      // the subtree's rows: J_d^T (Yc_i dA + dYc_i dV)
      auto rows = R.block(sub_iv_[b], col, sub_nv_[b], 6);
      rows.noalias() = YJ_.middleCols(sub_iv_[b], sub_nv_[b]).transpose().lazyProduct(dA);
      rows.noalias() += dYJ_.middleCols(sub_iv_[b], sub_nv_[b]).transpose().lazyProduct(dV);
      if (p > 0) {  // the ancestors' rows: J_a^T dFdq_F
        dF.noalias() = dYc_[j] * dV;
        dF.noalias() += Yc_[j].matrix() * dA;
        for (int c = 0; c < 6; ++c)
          dF.col(c) += pinocchio::Motion(JF.col(c)).cross(fc_[j]).toVector();
        for (auto a : anc_[b]) {
          const int iv = M.joints[a].idx_v(), n = M.joints[a].nv();
          R.block(iv, col, n, 6).noalias() = D.J.middleCols(iv, n).transpose() * dF;
        }
      }
      if (fscale != 0.0) R.middleCols(col, 6) -= fscale * fd_.middleCols(6 * b, 6);
    }
  }

  // The F columns of the contacts' geometry (fg_[c]: contact_geometry of contact c on the J_F of the placements
  // active for it, act_[group_[c]], with the support "body in subtree(j)"), the state's own geometry (geo_), and
  // the contacts' groups by body pair (same J6A, J6B).
  void f_geometry(const StepStateView& st) {
    const int64_t nc = st.nc;
    if (st.geo == nullptr) throw std::logic_error("ParameterPlan: a contact state without its geometry");
    if (st.arrays == nullptr) throw std::logic_error("ParameterPlan: a contact state without its arrays");
    const ContactArrays& c = *st.arrays;
    auto idx = [&](const int64_t* p) { return Eigen::Map<const IdxVec>(p, nc); };
    points_ = c.points;
    nc_ = nc;
    using M3 = Eigen::Map<const RowMat>;
    const auto ba = idx(c.body_a), bb = idx(c.body_b);
    geo_ = st.geo;
    group_.resize(nc);
    for (int64_t k = 0; k < nc; ++k) {
      group_[k] = k;
      for (int64_t g = 0; g < k; ++g)
        if (group_[g] == g && ba[g] == ba[k] && bb[g] == bb[k]) {
          group_[k] = g;
          break;
        }
    }
    // each group's placements whose subtree holds one of its contacts' bodies: the only F columns its force and
    // velocity terms have entries in (contact_geometry zeroes the others: support "body in subtree(j)")
    const auto nb_ = idx(c.normal_body), pb = idx(c.point_body);
    const int64_t np = pj_.size();
    act_.resize(nc);  // cleared, not reallocated (their buffers are reused per call)
    for (auto& a : act_) a.clear();
    auto& on = on_;
    on.assign(nc * np, 0);
    for (int64_t k = 0; k < nc; ++k)
      for (int64_t b = 0; b < np; ++b)
        if (supportF_(ba[k], 6 * b) != 0.0 || supportF_(bb[k], 6 * b) != 0.0 || supportF_(nb_[k], 6 * b) != 0.0 ||
            supportF_(pb[k], 6 * b) != 0.0)
          on[group_[k] * np + b] = 1;
    for (int64_t g = 0; g < nc; ++g)
      for (int64_t b = 0; b < np; ++b)
        if (on[g * np + b]) act_[g].push_back(b);
    // each contact's geometry on its group's placements only (column 6 a + e: placement act_[g][a]; the other
    // placements' columns are 0): a go1 foot is under 4 of the 13 placement joints, a talos foot under 7 of 33
    fg_.resize(nc);
    const M3 P(points_, nc, 3), N(c.normals, nc, 3), A(c.axes, nc, 3), S(c.slide, nc, 6);
    const Eigen::Map<const Eigen::VectorXd> rad(c.radius, nc), gap(c.gap, nc);
    for (int64_t k = 0; k < nc; ++k) {
      const auto& act = act_[group_[k]];
      const int64_t n = act.size();
      if (n == 0) {  // nothing reads it (every reader loops over act_): emptied, not left from an earlier call
        fg_[k] = ContactGeometry{};
        continue;
      }
      if (k == 0 || group_[k] != group_[k - 1]) {  // the group's J_F and support columns (a foot's corners: once)
        JFc_.resize(6, 6 * n);
        supportFc_.resize(supportF_.rows(), 6 * n);
        for (int64_t i = 0; i < n; ++i) {
          JFc_.middleCols<6>(6 * i) = JF_.middleCols<6>(6 * act[i]);
          supportFc_.middleCols(6 * i, 6) = supportF_.middleCols(6 * act[i], 6);
        }
      }
      contact_geometry_into(fg_[k], JFc_, supportFc_, ba.segment(k, 1), bb.segment(k, 1), nb_.segment(k, 1),
                            pb.segment(k, 1), P.middleRows(k, 1), N.middleRows(k, 1), rad.segment(k, 1),
                            A.middleRows(k, 1), gap.segment(k, 1), S.middleRows(k, 1), planar_);
    }
  }
  Eigen::Map<const RowMat> points() const { return Eigen::Map<const RowMat>(points_, nc_, 3); }

  // fd_ (nv, nF) = d(J^T lam)/ddelta, the original dofs' rows (contact/_kernels.py force_derivative's terms on the
  // F columns): per body pair, the wrench w = sum (F, p x F) and its derivative dw = (dF, dp x F + p x dF) summed;
  // out = mask o (P_A^T J6A_F - P_B^T J6B_F) + (J6A - J6B)^T dw, P the columns (w_i x F, w_i x m + v_i x F) of
  // _add_dJTw, the mask "dof in subtree(j)" (block b's rows sub_iv .. + sub_nv).
  void force_(const Eigen::VectorXd& lam) {
    const ContactGeometry& g = *geo_;
    const int64_t nv = M_->nv, r = g.r, nc = nc_;
    const auto P = points();
    fd_.setZero(nv, nF_);
    wsum_.setZero(6, nc);
    dwsum_.resize(nc);
    auto& used = used_;
    used.assign(nc, 0);
    Eigen::Matrix<double, 3, 6> dFc;
    for (int64_t c = 0; c < nc; ++c) {
      bool nz = false;
      for (int64_t j = 0; j < r; ++j) nz = nz || lam[c * r + j] != 0.0;
      if (!nz) continue;
      const int64_t gi = group_[c];
      if (!used[gi]) {
        used[gi] = 1;
        dwsum_[gi].setZero(6, nF_);
      }
      const Eigen::Vector3d p = P.row(c).transpose();
      Eigen::Vector3d F = Eigen::Vector3d::Zero();
      for (int64_t j = 0; j < r; ++j) F += g.D.block(c * 3, j, 3, 1) * lam[c * r + j];
      wsum_.col(gi).head<3>() += F;
      wsum_.col(gi).tail<3>() += p.cross(F);
      auto& dw = dwsum_[gi];
      const Eigen::Matrix3d sF = skew3(F), sp = skew3(p);
      const auto& act = act_[gi];
      for (size_t a = 0; a < act.size(); ++a) {  // the other placements' columns are 0
        const int64_t b = act[a];
        dFc.setZero();
        for (int64_t j = 0; j < r; ++j) dFc += lam[c * r + j] * fg_[c].dD.block(j * 3, 6 * a, 3, 6);
        dw.block<3, 6>(0, 6 * b) += dFc;
        dw.block<3, 6>(3, 6 * b).noalias() -= sF * fg_[c].dp.block(0, 6 * a, 3, 6);
        dw.block<3, 6>(3, 6 * b).noalias() += sp * dFc;
      }
    }
    auto &PA = PA_, &PB = PB_, &AB = AB_;
    PA.resize(6, nv);
    PB.resize(6, nv);
    AB.resize(6, nv);
    for (int64_t gi = 0; gi < nc; ++gi) {
      if (!used[gi]) continue;
      const Eigen::Vector3d F = wsum_.col(gi).head<3>(), m = wsum_.col(gi).tail<3>();
      const auto A = g.J6A.middleRows(gi * 6, 6), B = g.J6B.middleRows(gi * 6, 6);
      const RowMat &AF = fg_[gi].J6A, &BF = fg_[gi].J6B;  // (6, 6 n): the group's placements
      const Eigen::Matrix3d sF = skew3(F), sm = skew3(m);
      // 3 x 3 times 3 x nv: coefficient-based (lazyProduct), not through Eigen's GEMM with its packing per call
      PA.topRows<3>().noalias() = (-sF).lazyProduct(A.bottomRows<3>());
      PA.bottomRows<3>().noalias() = (-sm).lazyProduct(A.bottomRows<3>());
      PA.bottomRows<3>().noalias() -= sF.lazyProduct(A.topRows<3>());
      PB.topRows<3>().noalias() = (-sF).lazyProduct(B.bottomRows<3>());
      PB.bottomRows<3>().noalias() = (-sm).lazyProduct(B.bottomRows<3>());
      PB.bottomRows<3>().noalias() -= sF.lazyProduct(B.topRows<3>());
      // (J6A - J6B)^T dw on the dofs the two bodies move (J6's nonzero columns) and the active placements only
      AB = A - B;
      rows_.clear();
      for (int64_t i = 0; i < nv; ++i)
        if (AB.col(i).cwiseAbs().maxCoeff() != 0.0) rows_.push_back(i);
      const auto& act = act_[gi];
      for (size_t a = 0; a < act.size(); ++a) {
        const int64_t b = act[a];
        auto out = fd_.block(sub_iv_[b], 6 * b, sub_nv_[b], 6);
        out.noalias() += PA.middleCols(sub_iv_[b], sub_nv_[b]).transpose().lazyProduct(AF.middleCols(6 * a, 6));
        out.noalias() -= PB.middleCols(sub_iv_[b], sub_nv_[b]).transpose().lazyProduct(BF.middleCols(6 * a, 6));
        const auto dwb = dwsum_[gi].middleCols<6>(6 * b);
        for (int64_t i : rows_) fd_.block<1, 6>(i, 6 * b).noalias() += AB.col(i).transpose() * dwb;
      }
    }
  }

  // dJv_ (nc r, nF) = d(J w)/ddelta at the system's velocity w (contact/_kernels.py velocity_derivative's terms
  // on the F columns): dA_k = S_k x U with S_k = J6A_F's column k and U = sum over the subtree's dofs of J6A_i w_i
  // (_dJv; the same U for a placement's 6 columns), likewise B; then d.(dA - dB)_lin + (p x d).(dA - dB)_ang +
  // vr.dD_k + (d x V_ang).dp_k per direction d, V = (J6A - J6B) w, vr = V_lin + V_ang x p.
  void velocity_(const Eigen::VectorXd& w) {
    const ContactGeometry& g = *geo_;
    const int64_t r = g.r, nc = nc_;
    const auto P = points();
    dJv_.setZero(nc * r, nF_);  // the placements not in act_ have no entries (f_geometry)
    dR_.resize(6, nF_);
    for (int64_t c = 0; c < nc; ++c) {
      const auto A = g.J6A.middleRows(c * 6, 6), B = g.J6B.middleRows(c * 6, 6);
      const RowMat &AF = fg_[c].J6A, &BF = fg_[c].J6B;  // (6, 6 n): the group's placements
      const auto& act = act_[group_[c]];
      if (c == 0 || group_[c] != group_[c - 1]) {
        for (size_t a = 0; a < act.size(); ++a) {
          const int64_t b = act[a];
          const auto ws = w.segment(sub_iv_[b], sub_nv_[b]);
          const Vector6 uA = A.middleCols(sub_iv_[b], sub_nv_[b]).lazyProduct(ws);
          const Vector6 uB = B.middleCols(sub_iv_[b], sub_nv_[b]).lazyProduct(ws);
          for (int64_t k = 6 * b; k < 6 * int64_t(b) + 6; ++k) {
            double o[6];
            const int64_t kc = 6 * a + k - 6 * b;  // fg_[c]'s column
            cross6(AF(0, kc), AF(1, kc), AF(2, kc), AF(3, kc), AF(4, kc), AF(5, kc), uA, o);
            for (int rr = 0; rr < 6; ++rr) dR_(rr, k) = o[rr];
            cross6(BF(0, kc), BF(1, kc), BF(2, kc), BF(3, kc), BF(4, kc), BF(5, kc), uB, o);
            for (int rr = 0; rr < 6; ++rr) dR_(rr, k) -= o[rr];
          }
        }
      }
      const Vector6 V = (A - B).lazyProduct(w);
      const Eigen::Vector3d p = P.row(c).transpose(), Vw = V.tail<3>();
      const Eigen::Vector3d vr = V.head<3>() + Vw.cross(p);
      if (act.empty()) continue;  // no entries (and no fg_[c])
      const double* dp0 = &fg_[c].dp(0, 0);
      const double* dp1 = &fg_[c].dp(1, 0);
      const double* dp2 = &fg_[c].dp(2, 0);
      for (int64_t j = 0; j < r; ++j) {
        const Eigen::Vector3d d = g.D.block(c * 3, j, 3, 1);
        const Eigen::Vector3d pd = p.cross(d), qd = d.cross(Vw);
        const double* d0 = &fg_[c].dD(j * 3 + 0, 0);
        const double* d1 = &fg_[c].dD(j * 3 + 1, 0);
        const double* d2 = &fg_[c].dD(j * 3 + 2, 0);
        double* out = &dJv_(c * r + j, 0);
        for (size_t a = 0; a < act.size(); ++a)
          for (int64_t k = 6 * act[a], kc = 6 * a; k < 6 * act[a] + 6; ++k, ++kc) {
            const double* R6 = dR_.col(k).data();
            out[k] = d[0] * R6[0] + d[1] * R6[1] + d[2] * R6[2] + pd[0] * R6[3] + pd[1] * R6[4] + pd[2] * R6[5] +
                     vr[0] * d0[kc] + vr[1] * d1[kc] + vr[2] * d2[kc] + qd[0] * dp0[kc] + qd[1] * dp1[kc] +
                     qd[2] * dp2[kc];
          }
      }
    }
  }

  using Vector6 = Eigen::Matrix<double, 6, 1>;
  static Eigen::Matrix3d skew3(const Eigen::Vector3d& a) {
    Eigen::Matrix3d S;
    S << 0.0, -a[2], a[1], a[2], 0.0, -a[0], -a[1], a[0], 0.0;
    return S;
  }
  // the motion cross product s x u = (s_ang x u_lin + s_lin x u_ang, s_ang x u_ang) into o
  static void cross6(double sv0, double sv1, double sv2, double sw0, double sw1, double sw2, const Vector6& u,
                     double* o) {
    o[0] = sw1 * u[2] - sw2 * u[1] + sv1 * u[5] - sv2 * u[4];
    o[1] = sw2 * u[0] - sw0 * u[2] + sv2 * u[3] - sv0 * u[5];
    o[2] = sw0 * u[1] - sw1 * u[0] + sv0 * u[4] - sv1 * u[3];
    o[3] = sw1 * u[5] - sw2 * u[4];
    o[4] = sw2 * u[3] - sw0 * u[5];
    o[5] = sw0 * u[4] - sw1 * u[3];
  }

  // _correction_derivative: d dq_c/dp (nv, npar) into dqc_
  void correction_derivative(const StepStateView& st, const Eigen::VectorXd& q, bool geo) {
    const Correction& c = *st.correction;
    const int64_t nv = M_->nv, npar = body_.size(), mc = st.m_contact, k = st.deep_rows.size();
    Jd_.resize(k, nv);
    for (int64_t a = 0; a < k; ++a) Jd_.row(a) = st.J.row(st.deep_rows[a]);
    R_.setZero(nv, npar);
    zero_ = Eigen::VectorXd::Zero(nv);
    if (inertial_ || nF_ > 0) kinematics(*M0_, *D0_, q, zero_, c.dq);
    if (inertial_) regressor_world(*M0_, *D0_, false, R_);
    if (nF_ > 0) {
      if (geo) {
        lam_c_ = Eigen::VectorXd::Zero(mc);
        for (int64_t a = 0; a < k; ++a)
          if (st.deep_rows[a] < mc) lam_c_[st.deep_rows[a]] = c.lam[a];
        force_(lam_c_);
      }
      kinematic_pass(*M0_, *D0_, false);
      placement_rnea(*M0_, *D0_, geo ? 1.0 : 0.0, R_);
    }
    Dc_.noalias() = st.Minv * R_;
    Dc_ = -Dc_;
    rhs_.noalias() = Jd_ * Dc_;
    rhs_ = -rhs_;
    if (geo) {
      velocity_(c.dq);
      const auto col = [this](int64_t c) { return pk_[c]; };
      for (int64_t a = 0; a < k; ++a) {
        const int64_t row = st.deep_rows[a];
        if (row >= mc) continue;
        add_velocity_row(rhs_, a, row, -1.0, col);
        add_distance_row(rhs_, a, row, -erp_, col);
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
  IdxVec body_;
  RowMat dpi_;
  int64_t friction_;
  bool euclidean_;
  double erp_;
  bool planar_;
  bool inertial_ = false;
  bool zinert_ = false;  // columns_product's inertial rows without forming R's inertial columns
  // the placements: joints, Fp column of each F column (6 per joint), subtree masks
  int64_t nF_ = 0;
  std::vector<int64_t> pj_, pk_;
  std::vector<std::vector<char>> sub_;
  RowMat supportF_;
  std::vector<int64_t> sub_iv_, sub_nv_;   // each placement's subtree dofs: idx_v(j) .. + nvSubtree(j)
  std::vector<std::vector<int64_t>> anc_;  // and its ancestor joints (the support of j's parent, 0 left out)
  std::vector<std::vector<int64_t>> supp_dofs_;  // per joint: the dofs of its support (the regressor's rows)
  // per call
  std::vector<pinocchio::Inertia> Yc_;
  std::vector<Matrix6> dYc_;
  std::vector<pinocchio::Force> fc_;
  std::vector<pinocchio::Motion> ov_, oagf_;
  Eigen::MatrixXd JF_;
  Eigen::VectorXd tau_total_, a_, lam_c_, zero_, dq_;
  RowMat Minv_own_, R_, rhs_, dz_, blk_, fd_, dJv_, Jd_, Dc_, dqc_;
  RowMat outT_, W_, Wd_, WT_, LX_, Sp_, x_, dvx_;  // compute()'s solve map and columns
  RowMat Gd_, Bd_;  // the direct path's M^-1 Rn and right-hand sides
  RowMat Xc_, FJ_, xe_;  // model_columns' placement rows, Fc MJt^T and explicit terms X_e
  Eigen::VectorXd e_;
  std::vector<int64_t> cols_, posC_, xcols_;
  struct Block {
    int64_t col0, n;
    bool inertial;
  };
  std::vector<Block> blocks_;  // columns_product's column blocks (constructor)
  std::vector<int64_t> brows_;  // a block's nonzero rows of R_
  std::vector<int64_t> iota_;   // 0, 1, 2, ... (all_rows)
  RowMat WdT_, Wz_, J1bT_;  // Wd^T (the map paths' tiles), model_columns' W S(-x)
  std::vector<RowMat> ZT_;  // Z_i (6, ncol) per joint (columns_product)
  RowMat Cb_;  // a body block's C (6, n)
  Eigen::Matrix<double, 6, Eigen::Dynamic> YJ_, dYJ_, wsum_, dR_;
  std::vector<Eigen::Matrix<double, 6, Eigen::Dynamic>> dwsum_;
  const ContactGeometry* geo_ = nullptr;
  std::vector<int64_t> group_;
  std::vector<std::vector<int64_t>> act_;  // per contact group: the placements whose subtree holds its bodies
  std::vector<int64_t> rows_;
  Eigen::MatrixXd J1_;
  std::vector<ContactGeometry> fg_;  // per contact: its group's placements' columns (f_geometry)
  Eigen::MatrixXd JFc_;
  RowMat supportFc_;
  std::vector<char> on_, used_;  // f_geometry's and force_'s flags
  Eigen::VectorXd xabs_;  // the explicit columns' |x| sums
  Eigen::Matrix<double, 6, Eigen::Dynamic> PA_, PB_, AB_;  // force_'s per-group products
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

bool is_parameter_plan(nb::handle plan) { return nb::isinstance<ParameterPlan>(plan); }

void parameter_plan_into(nb::handle plan, nb::handle state, const Eigen::VectorXd& q, const Eigen::VectorXd& v,
                         const Eigen::VectorXd& tau, const Eigen::VectorXd& v_next, double dt, Eigen::Ref<RowMat> Fp,
                         const pinocchio::Data* ready) {
  RowMat none;
  nb::cast<ParameterPlan&>(plan).compute_into(state, q, v, tau, v_next, dt, false, Fp, none, ready);
}

void bind_params(nb::module_& m) {
  // the contact states ParameterPlan.compute takes (dynamics/parameters.py reads it: a core built before NCP and
  // relaxed states were compiled has no such attribute and gets the fused LCP's only)
  m.attr("parameter_plan_states") = nb::make_tuple("lcp", "ncp", "relaxed");
  // FusedStep.step_derivatives takes a ParameterPlan and writes its Fp in the same call (fused_step.cpp)
  m.attr("fused_step_parameters") = true;
  // which tiles block_product runs here: "avx2" (AVX2/FMA, chosen at run time) or "sse2"
  m.def("parameter_tiles", [] {
#ifdef CONTACTRAJ_AVX2_KERNEL
    if (avx2_kernel()) return "avx2";
#endif
    return "sse2";
  });
  nb::class_<ParameterPlan>(m, "ParameterPlan",
                            "One parameter list's compiled Jacobian (dynamics/parameters.py): models, chain and "
                            "the placements' joints kept; compute() per step")
      .def(nb::init<nb::object, nb::object, nb::object, nb::object, nb::object, const IdxVec&, const RowMat&, int64_t,
                    bool, double, const IdxVec&, const IdxVec&, bool>(),
           nb::arg("step_model"), nb::arg("model"), nb::arg("data"), nb::arg("model0"), nb::arg("data0"),
           nb::arg("body"), nb::arg("dpi"), nb::arg("friction_col"), nb::arg("euclidean"), nb::arg("erp"),
           nb::arg("pjoint"), nb::arg("poffset"), nb::arg("planar"))
      .def("compute", &ParameterPlan::compute, nb::arg("state").none(), nb::arg("q"), nb::arg("v"), nb::arg("tau"),
           nb::arg("v_next"), nb::arg("dt"), nb::arg("impulses") = true,
           "(Fp (ndx, npar), dlambda (m, npar) or None without contact or with impulses=False): "
           "dynamics/parameters.py step_derivatives for a step without contact (state None) or with a fused LCP, "
           "NCP or relaxed StepState");
  m.def("parameter_regressor", &parameter_regressor, nb::arg("model"), nb::arg("data"), nb::arg("q"), nb::arg("v"),
        nb::arg("a"), nb::arg("body"), nb::arg("dpi"),
        "Y(q, v, a) dpi/dp (nv, npar): the inertial columns of dRNEA/dp (zero where body[k] = 0)");
}

}  // namespace contactraj
