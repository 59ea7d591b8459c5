// sym_lstsq (linalg.hpp) in two parts, so that one factor of a Delassus block serves several right-hand
// sides: the state Jacobians' and the parameter Jacobians' (params.cpp) of one step. compute(E, rcond) then
// solve(B, X) are sym_lstsq(E, B, rcond, X), the same operations in the same order (sym_lstsq is them).
#pragma once
#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "linalg.hpp"

namespace contactraj {

class SymLstsq {
 public:
  void compute(const CRowRef& E, double rcond);
  // X (k, ncols) = the minimum-norm least-squares solution of E X = B.
  void solve(const CRowRef& B, Eigen::Ref<RowMat> X) const;
  Eigen::Index size() const { return k_; }

 private:
  Eigen::Index k_ = 0;
  bool chol_ = false;  // the certified Cholesky factor; else the kept eigenpairs (V_, lam_)
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::MatrixXd V_;
  Eigen::VectorXd lam_;
};

}  // namespace contactraj
