// Relaxed hard contact on its central path (the C++ twin of contact/relaxed.py): fade, rows_of, the barrier
// Newton with its path following, the coupled Newton at kappa, the warm start, and RelaxedAdapter.linearize.
//
// Same operations in the same order as the numba/Python reference. LAPACK through numba -> Eigen:
// np.linalg.solve (getrf/getrs) -> linalg.hpp solve (PartialPivLU, the same algorithm; an exactly zero pivot
// falls back to lstsq as numba's LinAlgError does), lstsq -> linalg.hpp lstsq; np.sum -> numpy's pairwise sum.
#pragma once
#include <Eigen/Core>
#include <cstdint>

#include "linalg.hpp"

namespace contactraj {
namespace relaxed {

using VectorXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, 1>;
constexpr std::int64_t NORMAL = 0, FRICTION = 1;
constexpr double TOLERANCE = 1e-12;
constexpr double WEIGHT_FLOOR = 1e-10;

// RelaxedProblem.
struct Problem {
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
  VectorXl kind, normal_of, block_start, block_size;
  Eigen::VectorXd mu, weight, dweight;
  double kappa = 0.0;
};

// RelaxedSolution (K over the rows ``keep``).
struct Solution {
  Eigen::VectorXd lam, c;
  int iterations = 0;
  double residual = 0.0;
  bool converged = false;
  Eigen::MatrixXd K;
  bool warm_start_hit = false;
  VectorXl keep;
};

// RelaxedAdapter.problem: rows of nc contacts of r rows then nlim limits, phi (nc + nlim,) their distances.
Problem make_problem(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, int64_t nc, int64_t r, int64_t nlim,
                     double friction, bool cone, const Eigen::VectorXd& phi, double kappa, double distance);

// solve_relaxed(p, guess) (guess: the previous impulses (m,) or null).
Solution solve(const Problem& p, const Eigen::VectorXd* guess, int max_iter = 100);

// RelaxedAdapter.linearize: E = K (regular), Fc (k, m), Fphi (k, m), unknowns = keep.
void linearization(const Problem& p, const Solution& s, RowMat& E, RowMat& Fc, RowMat& Fphi);

}  // namespace relaxed
}  // namespace contactraj

namespace contactraj {
namespace relaxed {
// One fused step's relaxed problem (step.cpp's StepState keeps it when its FusedLCP was made with kappa > 0).
struct State {
  Problem problem;
  Solution solution;
};
}  // namespace relaxed
}  // namespace contactraj
