// The boxed LCP of Nimble-style frictional contact (the C++ twin of contact/lcp.py).
//
// Same problem, same method, same operations in the same order as the Python reference
// (solve_lcp, _solve_masks, _reduced, _masks, _solve_small / _min_norm / _qr_solve, _evaluate,
// classify, _repair, _lemke with _ST, _candidate / _Best, _report, _solution; LCPAdapter's
// linearize and reclassify): see contact/lcp.py for the mathematics. Plain functions on Eigen
// types, no Python, so that a fused step can call them directly; lcp.cpp binds them thinly.
//
// Where the reference calls LAPACK (through scipy, OpenBLAS) this uses Eigen:
//   dgetrf / dgetrs       -> Eigen::PartialPivLU (same algorithm: LU with partial pivoting);
//   dgecon                -> rcond_1 below, a port of LAPACK's dgecon/dlacn2 (Hager-Higham 1-norm
//                            estimate, the same iteration and stopping rules) on the Eigen LU factors,
//                            so the LU / minimal-norm decision uses the same estimate;
//   dgeqp3 / dorgqr / dtrtrs -> Eigen::ColPivHouseholderQR (the same Businger-Golub pivoting with
//                            LAPACK's norm-downdating rule), R_11^T solve, Q applied to (u, 0);
//   dlange                -> the same sequential sums.
// Results agree to rounding (summation orders of the BLAS kernels differ), not bit for bit.
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <vector>

#include "linalg.hpp"

namespace contactraj {
namespace lcp {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using VectorXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, 1>;
using Mask = std::vector<char>;

// Mode of a row (contact.lcp.Mode).
enum Mode : std::int64_t { SEPARATING = 0, CLAMPING = 1, TIED = 2, BOUNDED = 3 };

// Tolerances of contact/lcp.py (same names without the underscore).
constexpr double RCOND_LU = 1e-8;
using ::contactraj::RANK_RTOL;  // linalg.hpp
constexpr double NOISE_RTOL = 1e3 * 2.220446049250313e-16;
constexpr double ROUNDING = 1e-12;
constexpr double CLASSIFY_TOL = 1e-8;
constexpr double PIV_RTOL = 1e-11;
constexpr double TIE_RTOL = 1e-11;
constexpr double Z0_RTOL = 1e-13;
constexpr int REPAIR_ROUNDS = 3;
constexpr double REGULARISATION[3] = {1e-10, 1e-7, 1e-4};

// One boxed LCP w = A x + b (BoxedLCP): normal_of[i] == -1 on normal/unilateral rows, else the
// normal row of friction row i; mu >= 0 (0 on unilateral rows). The constructor checks what
// BoxedLCP checks (std::invalid_argument naming the problem) and derives fric, k, carry, hi_pad,
// anorm (|A|_inf, dlange "I") and bnorm (|b|_inf).
struct Problem {
  MatrixXd A;
  VectorXd b;
  VectorXl normal_of;
  VectorXd mu;
  Mask fric, carry;
  VectorXl k;
  VectorXd hi_pad;
  double anorm = 0.0, bnorm = 0.0;

  Problem() = default;
  Problem(MatrixXd A, VectorXd b, VectorXl normal_of, VectorXd mu);
  // The same rows with new values (BoxedLCP.with_values).
  void set_values(const Eigen::Ref<const MatrixXd>& A, const Eigen::Ref<const VectorXd>& b);
  Eigen::Index n() const { return b.size(); }
};

// LCPSolution.
struct Solution {
  VectorXd x, w;
  VectorXl modes, signs;
  bool solved = true;  // "solved" / "inexact"
  double residual = 0.0;
  bool warm_start_hit = false;
  int iterations = 0;
};

// The reduced system of an active set (_reduced): clamping rows C, x = P x_C (only when
// `bounded`; otherwise x[C] = x_C), w_C = K x_C + b_C.
struct Reduced {
  VectorXl C;
  MatrixXd P;
  MatrixXd K;
  bool bounded = false;
};

// solve_lcp(lcp, guess=(modes, signs) or None, tol, max_iter) (max_iter < 0: 50 + 20 N).
Solution solve(const Problem& lcp, const VectorXl* guess_modes = nullptr, const VectorXl* guess_signs = nullptr,
               double tol = 1e-9, int max_iter = -1);

// Pieces, exposed for tests and the fused step.
void masks(const Problem& lcp, const VectorXl& modes, const VectorXl& signs, Mask& cm, Mask& bm);
Reduced reduced(const Problem& lcp, const Mask& cm, const Mask& bm, const VectorXl& signs);
VectorXd solve_masks(const Problem& lcp, const Mask& cm, const Mask& bm, const VectorXl& signs,
                     const VectorXd* x0 = nullptr);
VectorXd solve_active_set(const Problem& lcp, const VectorXl& modes, const VectorXl& signs);
void classify(const Problem& lcp, const VectorXd& x, const VectorXd& w, double tol, VectorXl& modes,
              VectorXl& signs);
VectorXd solve_small(const MatrixXd& K, const VectorXd& r);
VectorXd min_norm(const MatrixXd& K, const VectorXd& r);
// LAPACK dgecon's reciprocal 1-norm condition estimate of K from its LU factors.
double rcond_1(const MatrixXd& lu, double anorm);

// Stewart-Trinkle standard LCP (M, q) of the scaled boxed LCP (_ST).
struct StewartTrinkle {
  MatrixXd M;
  VectorXd q;
  Eigen::Index N = 0, c = 0, f = 0;
  std::vector<Eigen::Index> nidx, fidx, kk;
  double unscale = 1.0;
  explicit StewartTrinkle(const Problem& lcp);
  VectorXd to_x(const Problem& lcp, const VectorXd& z) const;
  void basis_modes(const Problem& lcp, const Mask& zbasic, VectorXl& modes, VectorXl& signs) const;
};

struct LemkeResult {
  VectorXd z;
  Mask zbasic;
  int pivots = 0;
  bool ok = false;
};
LemkeResult lemke(const MatrixXd& M, const VectorXd& q, int max_iter);

// LCPAdapter.linearize: the reduced system of the solution's active set.
Reduced linearize(const Problem& lcp, const VectorXl& modes, const VectorXl& signs);
// LCPAdapter.reclassify: nullopt when the complementarity-aware active set changes nothing.
std::optional<Reduced> reclassify(const Problem& lcp, const VectorXl& modes, const VectorXl& signs,
                                  const VectorXd& dl_dlam);

}  // namespace lcp
}  // namespace contactraj
