// numpy.linalg's lstsq and solve on Eigen (see linalg.hpp).
#include "linalg.hpp"

#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <stdexcept>
#include <string>

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
