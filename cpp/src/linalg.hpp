// Dense linear-algebra helpers shared by the parts of the core (one implementation each): the
// row-major matrix type the Python arrays map to, the rank cutoff of the least-squares solves,
// numpy.linalg's lstsq and solve on Eigen, the zero-pivot test of an LU factor (LAPACK getrf's
// info > 0), and the export of a matrix to numpy without a copy.
#pragma once
#include <Eigen/Core>
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

// numpy.linalg.lstsq(A, B, rcond)[0]: the minimum-norm least-squares solution, singular values
// ``s <= rcond * s_max`` treated as zero (LAPACK gelsd's rule). Method (not gelsd's): where a
// column-pivoted QR (A P = Q R) certifies that every singular value passes the cutoff
// (1 / |R^-1|_F > 4 rcond |R|_F, bounds on s_min and s_max) the unique solution R^-1 Q^T B; otherwise
// Eigen's BDCSVD (one-sided Jacobi below 16 columns) with the cutoff applied as numpy does. Eigen's
// SVD of a 12 x 12 matrix takes ~60 us, the QR ~12 us. Same solution up to round-off (cond(A) eps).
RowMat lstsq(const CRowRef& A, const CRowRef& B, double rcond);

// lstsq(E, B, rcond) for a symmetric positive semidefinite E (a Delassus block J_C M^-1 J_C^T, whose
// computed entries are symmetric up to round-off: E is read as (E + E^T) / 2). Its singular values are
// its eigenvalues' magnitudes, so numpy's rule (drop s <= rcond s_max) reads the same on them. Method:
// a Cholesky factor E = L L^T, where it exists and certifies that every eigenvalue passes the cutoff
// (lambda_min >= 1 / |L^-1|_F^2, lambda_max <= |E|_F; certified when 1 / |L^-1|_F^2 > 4 rcond |E|_F): the
// unique solution E^-1 B; otherwise the symmetric eigendecomposition E = V diag(lambda) V^T with the
// cutoff: V_k diag(1 / lambda_k) V_k^T B. Same solution as lstsq up to round-off (cond(E) eps), at a
// fraction of the cost (no pivoted QR, no SVD).
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
