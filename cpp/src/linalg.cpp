// numpy.linalg's lstsq and solve on Eigen (see linalg.hpp).
#include "linalg.hpp"

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

void lstsq_factor(const CRowRef& A, double rcond, LstsqFactor& f) {
  const Eigen::Index k = A.rows(), z = A.cols();
  f.rows = k;
  f.cols = z;
  f.method = 0;
  f.rank = 0;
  if (k == 0 || z == 0) return;
  if (k >= z) {
    // Fast path, when A certainly has full column rank under the cutoff: A P = Q R, and
    // s_min(A) >= 1 / |R^-1|_F, s_max(A) <= |R|_F; if 1 / |R^-1|_F > 4 rcond |R|_F every singular
    // value passes the cutoff (a margin of 4 over the bounds' round-off), and the least-squares
    // solution is unique: R^-1 Q^T B, permuted. Otherwise (rank-deficient or near the cutoff) the SVD.
    f.qr.compute(A);
    f.R = f.qr.matrixQR().topLeftCorner(z, z).triangularView<Eigen::Upper>();
    if ((f.R.diagonal().array() != 0.0).all()) {
      Eigen::MatrixXd Rinv = Eigen::MatrixXd::Identity(z, z);
      f.R.triangularView<Eigen::Upper>().solveInPlace(Rinv);
      if (1.0 / Rinv.norm() > 4.0 * rcond * f.R.norm()) {
        f.method = 1;
        return;
      }
    }
  }
  f.method = 2;
  f.svd.compute(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::VectorXd& s = f.svd.singularValues();
  const double cut = rcond * s[0];  // singular values are sorted, largest first
  while (f.rank < s.size() && s[f.rank] > cut) ++f.rank;
}

void lstsq_pinv(LstsqFactor& f) {
  lstsq_apply(f, RowMat::Identity(f.rows, f.rows), f.pinv);  // has_pinv false: the factor's own solve
  f.has_pinv = true;
}

void lstsq_apply(const LstsqFactor& f, const CRowRef& B, RowMat& X) {
  if (B.rows() != f.rows)
    throw std::invalid_argument("lstsq: A has " + std::to_string(f.rows) + " rows and B " + std::to_string(B.rows()));
  const Eigen::Index z = f.cols;
  if (f.has_pinv) {
    X.noalias() = f.pinv * B;
    return;
  }
  X.setZero(z, B.cols());
  if (f.method == 1) {
    Eigen::MatrixXd c = B;
    c.applyOnTheLeft(f.qr.householderQ().adjoint());
    Eigen::MatrixXd y = c.topRows(z);
    f.R.triangularView<Eigen::Upper>().solveInPlace(y);
    X = f.qr.colsPermutation() * y;
  } else if (f.method == 2 && f.rank > 0) {
    // x = V_k diag(1/s_k) U_k^T B
    const Eigen::VectorXd& s = f.svd.singularValues();
    Eigen::MatrixXd UtB = f.svd.matrixU().leftCols(f.rank).transpose() * B;
    UtB = s.head(f.rank).cwiseInverse().asDiagonal() * UtB;
    X.noalias() = f.svd.matrixV().leftCols(f.rank) * UtB;
  }
}

RowMat lstsq(const CRowRef& A, const CRowRef& B, double rcond) {
  if (A.rows() != B.rows())
    throw std::invalid_argument("lstsq: A has " + std::to_string(A.rows()) + " rows and B " + std::to_string(B.rows()));
  LstsqFactor f;
  lstsq_factor(A, rcond, f);
  RowMat X;
  lstsq_apply(f, B, X);
  return X;
}

void sym_factor(const CRowRef& E, double rcond, SymFactor& f) {
  const Eigen::Index k = E.rows();
  if (E.cols() != k) throw std::invalid_argument("sym_factor: E is not square");
  f.size = k;
  f.method = 0;
  f.rank = 0;
  f.F.resize(k, 0);
  f.sign.resize(0);
  if (k == 0) return;
  Eigen::MatrixXd S(k, k);
  for (Eigen::Index i = 0; i < k; ++i)
    for (Eigen::Index j = 0; j < k; ++j) S(i, j) = 0.5 * (E(i, j) + E(j, i));
  const double enorm = S.norm();
  // 1. full rank, certified: E^-1 B by the Cholesky factor's two triangular solves
  f.llt.compute(S);
  // 1 / |L^-1|_F^2 <= min_i L_ii^2 (L^-1's diagonal is 1 / L_ii): when that already fails the test below, the
  // inverse is not formed (the same decision)
  if (f.llt.info() == Eigen::Success &&
      !(f.llt.matrixLLT().diagonal().cwiseAbs2().minCoeff() < 0.999 * 4.0 * rcond * enorm)) {
    Eigen::MatrixXd Linv = Eigen::MatrixXd::Identity(k, k);
    f.llt.matrixL().solveInPlace(Linv);
    const double fn = Linv.squaredNorm();  // |L^-1|_F^2
    if (std::isfinite(fn) && 1.0 / fn > 4.0 * rcond * enorm) {
      f.method = 1;
      f.rank = k;
      return;
    }
  }
  // 2. pivoted Cholesky, certified rank r (see linalg.hpp)
  const double dmax = S.diagonal().maxCoeff();  // <= lambda_max
  if (std::isfinite(enorm) && dmax > 0.0) {
    constexpr double eps = 2.220446049250313e-16;
    const double stop = rcond * dmax / 8.0;
    Eigen::MatrixXd A = S;
    std::vector<Eigen::Index> perm(k);
    for (Eigen::Index i = 0; i < k; ++i) perm[i] = i;
    Eigen::Index r = 0;
    for (; r < k; ++r) {
      Eigen::Index piv;
      const double d = A.diagonal().tail(k - r).maxCoeff(&piv);
      if (!(d > stop)) break;
      piv += r;
      if (piv != r) {
        A.row(piv).swap(A.row(r));
        A.col(piv).swap(A.col(r));
        std::swap(perm[piv], perm[r]);
      }
      const double ajj = std::sqrt(A(r, r));
      A(r, r) = ajj;
      const Eigen::Index n = k - r - 1;
      A.col(r).tail(n) /= ajj;
      A.bottomRightCorner(n, n).noalias() -= A.col(r).tail(n) * A.col(r).tail(n).transpose();
    }
    if (r > 0) {
      const double snorm = A.bottomRightCorner(k - r, k - r).norm() + double(k + 1) * double(k) * eps * dmax;
      if (snorm < rcond * dmax / 4.0) {
        Eigen::MatrixXd L = A.leftCols(r).triangularView<Eigen::Lower>();
        Eigen::MatrixXd N(r, r);
        N.noalias() = L.transpose() * L;
        Eigen::LLT<Eigen::MatrixXd> lltn(N);
        if (lltn.info() == Eigen::Success) {
          Eigen::MatrixXd Ninv = Eigen::MatrixXd::Identity(r, r);
          lltn.matrixL().solveInPlace(Ninv);  // L_N^-1, N = L_N L_N^T
          const double fN = Ninv.squaredNorm();  // |L_N^-1|_F^2
          if (std::isfinite(fN) && 1.0 / fN - snorm > 4.0 * rcond * enorm) {
            // F = P L N^-1 = P L L_N^-T L_N^-1
            Eigen::MatrixXd T = L * Ninv.transpose();
            Eigen::MatrixXd Fp(k, r);
            Fp.noalias() = T * Ninv;
            f.F.resize(k, r);
            for (Eigen::Index i = 0; i < k; ++i) f.F.row(perm[i]) = Fp.row(i);
            f.sign.setOnes(r);
            f.method = 2;
            f.rank = r;
            return;
          }
        }
      }
    }
  }
  // 3. the symmetric eigendecomposition with numpy's cutoff
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(S);
  const Eigen::VectorXd& lam = eig.eigenvalues();  // ascending
  double smax = 0.0;
  for (Eigen::Index i = 0; i < k; ++i) smax = std::max(smax, std::abs(lam[i]));
  const double cut = rcond * smax;
  std::vector<Eigen::Index> keep;
  for (Eigen::Index i = 0; i < k; ++i)
    if (std::abs(lam[i]) > cut) keep.push_back(i);
  const Eigen::Index r = static_cast<Eigen::Index>(keep.size());
  f.F.resize(k, r);
  f.sign.resize(r);
  for (Eigen::Index a = 0; a < r; ++a) {
    const double l = lam[keep[a]];
    f.F.col(a) = eig.eigenvectors().col(keep[a]) / std::sqrt(std::abs(l));
    f.sign[a] = l > 0.0 ? 1.0 : -1.0;
  }
  f.method = 3;
  f.rank = r;
}

void sym_apply(const SymFactor& f, const CRowRef& B, Eigen::Ref<RowMat> X) {
  if (B.rows() != f.size || X.rows() != f.size || X.cols() != B.cols())
    throw std::invalid_argument("sym_apply: B and X must have E's rows and the same columns");
  if (f.method == 1) {
    X = B;
    f.llt.solveInPlace(X);
    return;
  }
  if (f.rank == 0) {
    X.setZero();
    return;
  }
  Eigen::MatrixXd Y(f.rank, B.cols());
  Y.noalias() = f.F.transpose() * B;
  Y = f.sign.asDiagonal() * Y;
  X.noalias() = f.F * Y;
}

void sym_lstsq(const CRowRef& E, const CRowRef& B, double rcond, Eigen::Ref<RowMat> X) {
  const Eigen::Index k = E.rows();
  if (E.cols() != k) throw std::invalid_argument("sym_lstsq: E is not square");
  if (B.rows() != k || X.rows() != k || X.cols() != B.cols())
    throw std::invalid_argument("sym_lstsq: B and X must have E's rows and the same columns");
  if (k == 0) return;
  SymFactor f;
  sym_factor(E, rcond, f);
  sym_apply(f, B, X);
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

void rt_times(const CRowRef& R, const CRowRef& S, RowMat& out) {
  const int64_t n = S.rows(), c = R.cols();
  out.setZero(c, S.cols());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const double r = R(i, j);
      if (r != 0.0) out.row(j) += r * S.row(i);
    }
}

}  // namespace contactraj
