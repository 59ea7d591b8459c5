// The Coulomb-cone contact NCP (the C++ twin of contact/ncp.py): solve_ncp with its warm start, the
// pyramid-LCP cold start (lcp.cpp), the active-set repairs, the Gauss-Seidel rounds with the exact
// per-contact solve, the damped least-squares Newton with its polish step and the canonical vertex of an
// indeterminate sliding answer; and NCPAdapter.linearize (the mode equations' Jacobian at the answer).
//
// Same operations in the same order as the numba/Python reference, tolerances and iteration limits by the
// same names. Where the reference calls LAPACK through numpy/numba this uses Eigen:
//   lstsq (gelsd)          -> linalg.hpp lstsq (pivoted QR where it certifies full rank, else SVD; the same
//                             minimum-norm answer under the same cutoff);
//   det / solve (getrf)    -> Eigen::PartialPivLU (the same algorithm);
//   svd (gesdd)            -> Eigen::JacobiSVD (the null vector's sign is normalized by the caller, as there).
// Results agree to rounding, not bit for bit (the BLAS products' summation orders differ).
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <utility>

#include "linalg.hpp"

namespace contactraj {
namespace ncp {

using VectorXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, 1>;

// NCPMode.
enum Mode : std::int64_t { BREAKING = 0, STICKING = 1, SLIDING = 2, SATURATED = 3 };

// contact/ncp.py constants (same names).
constexpr int STALL_WINDOW = 8;
constexpr double POLISH = 1e-15;
constexpr double ACCEPT = 1e-8;
constexpr double INDETERMINATE_RTOL = 1e-10;
constexpr int REPAIRS = 4;

// NCPProblem: A (m, m), b (m,), groups start/size (1, 2 or 3 rows), mu one per group.
struct Problem {
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
  VectorXl start, size;
  Eigen::VectorXd mu;
};

// NCPSolution (dirs (ng, 2): the friction directions of SATURATED groups).
struct Solution {
  Eigen::VectorXd lam, c;
  VectorXl modes;
  bool solved = true;  // "solved" / "inexact"
  double residual = 0.0;
  bool warm_start_hit = false;
  int iterations = 0;
  RowMat dirs;
};

// NCPAdapter.problem's groups for nc contacts of r rows (friction mu) and nl limit rows.
void groups(int64_t nc, int64_t r, int64_t nl, double friction, Problem& p);

// solve_ncp(A, b, start, size, mu, guess=(modes, lam, dirs) or None, tol, max_sweeps). ``guess_dirs`` may be
// null (then SATURATED guess modes read as STICKING, as there). Throws std::invalid_argument on bad input.
Solution solve(const Problem& p, const VectorXl* guess_modes = nullptr, const Eigen::VectorXd* guess_lam = nullptr,
               const RowMat* guess_dirs = nullptr, double tol = 1e-10, int max_sweeps = 2000);

// _newton (for the tests): (iterations, converged), lam in place.
std::pair<int, bool> newton_public(const Problem& p, const VectorXl& modes, const RowMat& dirs, Eigen::VectorXd& lam,
                                   int max_iter, double tol);

// ncp_residual.
double residual(const Problem& p, const Eigen::VectorXd& lam);

// _linearization / NCPAdapter.linearize: E (na, na), Fc (na, m), act (na,).
void linearization(const Problem& p, const VectorXl& modes, const RowMat& dirs, const Eigen::VectorXd& lam, RowMat& E,
                   RowMat& Fc, IdxVec& act);

}  // namespace ncp
}  // namespace contactraj

namespace contactraj {
namespace ncp {
// One fused step's NCP (step.cpp's StepState keeps it when its FusedLCP was made with ncp=True).
struct State {
  Problem problem;
  Solution solution;
};
}  // namespace ncp
}  // namespace contactraj
