// Dense linear-algebra helpers shared by the parts of the core (one implementation each): the
// row-major matrix type the Python arrays map to, the rank cutoff of the least-squares solves,
// numpy.linalg's lstsq and solve on Eigen, the zero-pivot test of an LU factor (LAPACK getrf's
// info > 0), and the export of a matrix to numpy without a copy.
#pragma once
#include <Eigen/Core>
#include <Eigen/Cholesky>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <cstdint>
#include <initializer_list>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace contactraj {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CRowRef = Eigen::Ref<const RowMat>;
using CVecRef = Eigen::Ref<const Eigen::VectorXd>;
using IdxVec = Eigen::Matrix<int64_t, Eigen::Dynamic, 1>;
using CIdxRef = Eigen::Ref<const IdxVec>;

//: Relative rank cutoff of the least-squares solves (contact/adapter.py and contact/lcp.py RANK_RTOL).
constexpr double RANK_RTOL = 1e-10;

// out (c, p) = R^T S for R (n, c) and S (n, p), R's zero entries skipped: row j of out is sum_i R(i, j) S.row(i),
// contiguous rows of S. For a symmetric S, out = (S R)^T. Where R is dtau/dq or dRNEA/dp, whose entries sit
// only on the dofs of one chain (a third to a half of them on a legged robot), and S is M^-1 (dense). (At 18
// dofs Eigen's dense product is as fast: measured on go1-hold's parameter columns, 15 us either way.)
void rt_times(const CRowRef& R, const CRowRef& S, RowMat& out);

// numpy.linalg.lstsq(A, B, rcond)[0]: the minimum-norm least-squares solution, singular values
// ``s <= rcond * s_max`` treated as zero (LAPACK gelsd's rule). Method (not gelsd's): where a
// column-pivoted QR (A P = Q R) certifies that every singular value passes the cutoff
// (1 / |R^-1|_F > 4 rcond |R|_F, bounds on s_min and s_max) the unique solution R^-1 Q^T B; otherwise
// Eigen's BDCSVD (one-sided Jacobi below 16 columns) with the cutoff applied as numpy does. Eigen's
// SVD of a 12 x 12 matrix takes ~60 us, the QR ~12 us. Same solution up to round-off (cond(A) eps).
RowMat lstsq(const CRowRef& A, const CRowRef& B, double rcond);

// lstsq in two parts, for one A and several B (a bounded LCP's reduced K serves the state and the parameter
// Jacobians, step.hpp ReducedFactor): the factor (method 1: the certified QR, 2: the SVD with its rank, 0: an empty
// A) and its solve, X = lstsq(A, B, rcond) bit for bit.
struct LstsqFactor {
  Eigen::Index rows = 0, cols = 0;
  int method = 0;
  Eigen::Index rank = 0;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr;
  Eigen::MatrixXd R;
  Eigen::BDCSVD<Eigen::MatrixXd> svd;
  bool has_pinv = false;  // lstsq_pinv: then lstsq_apply is one product with it
  RowMat pinv;
};
void lstsq_factor(const CRowRef& A, double rcond, LstsqFactor& f);
void lstsq_apply(const LstsqFactor& f, const CRowRef& B, RowMat& X);
// The solution operator A^+ (cols, rows) = lstsq_apply on the identity, kept in ``f``: for a factor that serves
// several right-hand sides wider than A's rows (equal to lstsq up to round-off, not bit for bit).
void lstsq_pinv(LstsqFactor& f);

// The pseudo-inverse of a symmetric positive semidefinite E (a Delassus block J_C M^-1 J_C^T, whose computed
// entries are symmetric up to round-off: E is read as (E + E^T) / 2) under lstsq's cutoff, as a factor:
// E^+ = F diag(sign) F^T, F (k, rank). Its singular values are its eigenvalues' magnitudes, so numpy's
// rule (drop s <= rcond s_max) reads the same on them; every method below either certifies that its rank
// is the one this rule gives (with a margin of 4 over its bounds) or hands over to the next:
//  1. Cholesky E = L L^T, certified full rank when 1 / |L^-1|_F^2 > 4 rcond |E|_F (lambda_min >= 1 / |L^-1|_F^2,
//     lambda_max <= |E|_F): E^+ = E^-1 (F = L^-T; SymFactor keeps L).
//  2. Cholesky with diagonal pivoting (LAPACK pstrf's rule: the largest remaining diagonal first), stopped at
//     rank r when the largest remaining diagonal is <= rcond max_i E_ii / 8: P^T E P = L L^T + S (L (k, r),
//     S the remaining Schur complement on the last k - r rows). With N = L^T L = U^T U, Weyl's inequality
//     bounds the k - r smallest eigenvalues' magnitudes by |S|_F and the r largest from below by
//     1 / |U^-1|_F^2 - |S|_F; certified when |S|_F (+ round-off) < rcond max_i E_ii / 4 <= cut / 4 and
//     1 / |U^-1|_F^2 - |S|_F > 4 rcond |E|_F >= 4 cut. Then E^+ is taken as (P L L^T P^T)^+ =
//     P L N^-2 L^T P^T, F = P L N^-1: the minimum-norm least-squares solution F F^T B of the matrix E with
//     its eigenvalues below the cutoff dropped (their eigenvectors span the same space up to O(|S| / gap),
//     |S| ~ eps |E|: the same solution as the eigendecomposition's up to round-off). A flat foot's 4 corners
//     (rank 6 of 12 rows) take this path: ~k^3 / 3 flops instead of an eigendecomposition's ~9 k^3.
//  3. otherwise the symmetric eigendecomposition E = V diag(lambda) V^T with numpy's cutoff: F =
//     V_k diag(1 / sqrt|lambda_k|), sign = sign(lambda_k).
// sym_factor(E, rcond, f) keeps the decision for applying it (f.method 1, 2 or 3 as above; 0 when E is empty):
// method 1 keeps the Cholesky factor (E^-1 B by its two triangular solves, as before the pivoted path existed:
// the same bits; F is left empty), methods 2 and 3 the factor F (k, rank) and sign (rank). One factor
// of a Delassus block serves several right-hand sides: a StepState keeps its K's (step.hpp ReducedFactor) for the
// state Jacobians (step.cpp, which also reads F for its rank-r products) and the parameter Jacobians (params.cpp).
struct SymFactor {
  Eigen::Index size = 0;  // E's rows
  int method = 0;
  Eigen::Index rank = 0;
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::MatrixXd F;
  Eigen::VectorXd sign;
};
void sym_factor(const CRowRef& E, double rcond, SymFactor& f);
// X (k, ncols) = E^+ B with a SymFactor of E (k = f.size): lstsq(E, B, rcond)'s minimum-norm solution. Throws
// std::invalid_argument unless B and X have E's rows and the same columns.
void sym_apply(const SymFactor& f, const CRowRef& B, Eigen::Ref<RowMat> X);

// lstsq(E, B, rcond) for a symmetric positive semidefinite E: sym_factor, then sym_apply.
// Same solution as lstsq up to round-off (cond(E) eps), at a fraction of the cost (no pivoted QR, no SVD).
void sym_lstsq(const CRowRef& E, const CRowRef& B, double rcond, Eigen::Ref<RowMat> X);

// numpy.linalg.solve(A, B): LU with partial pivoting (LAPACK gesv's method); throws
// std::domain_error when a pivot is exactly zero (gesv's "singular matrix").
RowMat solve(const CRowRef& A, const CRowRef& B);

// An LU factor (Eigen::PartialPivLU's matrixLU()) with an exactly zero pivot: LAPACK getrf's info > 0.
template <class Mat>
bool zero_pivot(const Mat& lu) {
  for (Eigen::Index i = 0; i < lu.rows(); ++i)
    if (lu(i, i) == 0.0) return true;
  return false;
}

// A matrix moved to the heap and shown to numpy with ``shape`` (its size, C order), owned by numpy.
inline nanobind::ndarray<nanobind::numpy, double> to_numpy(RowMat&& m, std::initializer_list<size_t> shape) {
  auto* p = new RowMat(std::move(m));
  nanobind::capsule owner(p, [](void* q) noexcept { delete static_cast<RowMat*>(q); });
  static double empty = 0.0;
  return nanobind::ndarray<nanobind::numpy, double>(p->size() ? p->data() : &empty, shape.size(), shape.begin(),
                                                    owner);
}

}  // namespace contactraj
