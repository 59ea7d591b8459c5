// numpy.linalg's lstsq and solve on Eigen (see linalg.hpp).
#include "linalg.hpp"
#include "factor.hpp"

#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace contactraj {

RowMat lstsq(const CRowRef& A, const CRowRef& B, double rcond) {
  if (A.rows() != B.rows())
    throw std::invalid_argument("lstsq: A has " + std::to_string(A.rows()) + " rows and B " + std::to_string(B.rows()));
  const Eigen::Index k = A.rows(), z = A.cols();
  RowMat X = RowMat::Zero(z, B.cols());
  if (k == 0 || z == 0) return X;
  if (k >= z) {
    // Fast path, when A certainly has full column rank under the cutoff: A P = Q R, and
    // s_min(A) >= 1 / |R^-1|_F, s_max(A) <= |R|_F; if 1 / |R^-1|_F > 4 rcond |R|_F every singular
    // value passes the cutoff (a margin of 4 over the bounds' round-off), and the least-squares
    // solution is unique: R^-1 Q^T B, permuted. Otherwise (rank-deficient or near the cutoff) the SVD.
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
    const Eigen::MatrixXd R = qr.matrixQR().topLeftCorner(z, z).triangularView<Eigen::Upper>();
    if ((R.diagonal().array() != 0.0).all()) {
      Eigen::MatrixXd Rinv = Eigen::MatrixXd::Identity(z, z);
      R.triangularView<Eigen::Upper>().solveInPlace(Rinv);
      if (1.0 / Rinv.norm() > 4.0 * rcond * R.norm()) {
        Eigen::MatrixXd c = B;
        c.applyOnTheLeft(qr.householderQ().adjoint());
        Eigen::MatrixXd y = c.topRows(z);
        R.triangularView<Eigen::Upper>().solveInPlace(y);
        X = qr.colsPermutation() * y;
        return X;
      }
    }
  }
  Eigen::BDCSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::VectorXd& s = svd.singularValues();
  const double cut = rcond * s[0];  // singular values are sorted, largest first
  Eigen::Index rank = 0;
  while (rank < s.size() && s[rank] > cut) ++rank;
  if (rank == 0) return X;
  // x = V_k diag(1/s_k) U_k^T B
  Eigen::MatrixXd UtB = svd.matrixU().leftCols(rank).transpose() * B;
  UtB = s.head(rank).cwiseInverse().asDiagonal() * UtB;
  X.noalias() = svd.matrixV().leftCols(rank) * UtB;
  return X;
}

void SymLstsq::compute(const CRowRef& E, double rcond) {
  const Eigen::Index k = E.rows();
  if (E.cols() != k) throw std::invalid_argument("sym_lstsq: E is not square");
  k_ = k;
  chol_ = false;
  V_.resize(k, 0);
  lam_.resize(0);
  if (k == 0) return;
  Eigen::MatrixXd S(k, k);
  for (Eigen::Index i = 0; i < k; ++i)
    for (Eigen::Index j = 0; j < k; ++j) S(i, j) = 0.5 * (E(i, j) + E(j, i));
  llt_.compute(S);
  if (llt_.info() == Eigen::Success) {
    Eigen::MatrixXd Linv = Eigen::MatrixXd::Identity(k, k);
    llt_.matrixL().solveInPlace(Linv);
    const double f = Linv.squaredNorm();  // |L^-1|_F^2
    if (std::isfinite(f) && 1.0 / f > 4.0 * rcond * S.norm()) {
      chol_ = true;
      return;
    }
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(S);
  const Eigen::VectorXd& lam = eig.eigenvalues();  // ascending
  double smax = 0.0;
  for (Eigen::Index i = 0; i < k; ++i) smax = std::max(smax, std::abs(lam[i]));
  const double cut = rcond * smax;
  std::vector<Eigen::Index> keep;
  for (Eigen::Index i = 0; i < k; ++i)
    if (std::abs(lam[i]) > cut) keep.push_back(i);
  const Eigen::Index r = static_cast<Eigen::Index>(keep.size());
  V_.resize(k, r);
  lam_.resize(r);
  for (Eigen::Index a = 0; a < r; ++a) {
    V_.col(a) = eig.eigenvectors().col(keep[a]);
    lam_[a] = lam[keep[a]];
  }
}

void SymLstsq::solve(const CRowRef& B, Eigen::Ref<RowMat> X) const {
  if (B.rows() != k_ || X.rows() != k_ || X.cols() != B.cols())
    throw std::invalid_argument("sym_lstsq: B and X must have E's rows and the same columns");
  if (k_ == 0) return;
  if (chol_) {
    X = B;
    llt_.solveInPlace(X);
    return;
  }
  X.setZero();
  const Eigen::Index r = V_.cols();
  if (r == 0) return;
  Eigen::MatrixXd VtB = V_.transpose() * B;
  for (Eigen::Index a = 0; a < r; ++a) VtB.row(a) /= lam_[a];
  X.noalias() = V_ * VtB;
}

void sym_lstsq(const CRowRef& E, const CRowRef& B, double rcond, Eigen::Ref<RowMat> X) {
  const Eigen::Index k = E.rows();
  if (E.cols() != k) throw std::invalid_argument("sym_lstsq: E is not square");
  if (B.rows() != k || X.rows() != k || X.cols() != B.cols())
    throw std::invalid_argument("sym_lstsq: B and X must have E's rows and the same columns");
  SymLstsq f;
  f.compute(E, rcond);
  f.solve(B, X);
}

RowMat solve(const CRowRef& A, const CRowRef& B) {
  if (A.rows() != A.cols())
    throw std::invalid_argument("solve: A has shape (" + std::to_string(A.rows()) + ", " + std::to_string(A.cols()) +
                                "), expected square");
  if (A.rows() != B.rows())
    throw std::invalid_argument("solve: A has " + std::to_string(A.rows()) + " rows and B " + std::to_string(B.rows()));
  if (A.rows() == 0) return RowMat(0, B.cols());
  Eigen::PartialPivLU<Eigen::MatrixXd> lu(A);
  if (zero_pivot(lu.matrixLU())) throw std::domain_error("Matrix is singular to machine precision.");
  return lu.solve(B);
}

}  // namespace contactraj
