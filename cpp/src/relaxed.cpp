// Relaxed contact (contact/relaxed.py) in C++: see relaxed.hpp. Each function names its Python twin.
#include "relaxed.hpp"
#include "numpy_twins.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/stl/optional.h>

namespace contactraj {
namespace relaxed {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
constexpr double INF = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

using np_twins::amax;
using np_twins::py_max;

// numpy's pairwise summation (np.sum of a contiguous float64 array)
double pairwise(const double* a, Eigen::Index n) {
  if (n < 8) {
    double res = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    Eigen::Index i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  Eigen::Index n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise(a, n2) + pairwise(a + n2, n - n2);
}
double np_sum(const VectorXd& v) { return pairwise(v.data(), v.size()); }
double norm2(const VectorXd& R) {
  VectorXd sq = R.cwiseProduct(R);
  return std::sqrt(np_sum(sq));
}

VectorXd velocity(const MatrixXd& A, const VectorXd& b, const VectorXd& lam) {
  VectorXd c = A * lam;
  c += b;
  return c;
}

// _lin_solve: M^-1 r, least squares where LU finds an exactly zero pivot (numba's LinAlgError)
VectorXd lin_solve(const MatrixXd& M, const VectorXd& r) {
  if (M.rows() == 0) return VectorXd(0);
  Eigen::PartialPivLU<MatrixXd> lu(M);
  if (!zero_pivot(lu.matrixLU())) return lu.solve(r);
  RowMat x = lstsq(M, r, 1e-12);
  return Eigen::Map<const VectorXd>(x.data(), x.rows());
}

struct Blocks {
  VectorXl bs, bn, bnorm;
  VectorXd bmu;
};

// friction_blocks
Blocks friction_blocks(const Problem& p) {
  std::vector<Eigen::Index> idx;
  for (Eigen::Index i = 0; i < p.b.size(); ++i)
    if (p.kind[i] == FRICTION && p.block_start[i] == i && p.mu[i] > 0) idx.push_back(i);
  const Eigen::Index n = static_cast<Eigen::Index>(idx.size());
  Blocks B{VectorXl(n), VectorXl(n), VectorXl(n), VectorXd(n)};
  for (Eigen::Index k = 0; k < n; ++k) {
    B.bs[k] = p.block_start[idx[k]];
    B.bn[k] = p.block_size[idx[k]];
    B.bnorm[k] = p.normal_of[idx[k]];
    B.bmu[k] = p.mu[idx[k]];
  }
  return B;
}

// _barrier
double barrier(const Problem& p, const Blocks& B, const VectorXd& s, double t, const VectorXd& lam) {
  const Eigen::Index m = p.b.size();
  double f = 0.0;
  for (Eigen::Index i = 0; i < m; ++i) {
    double ci = p.b[i];
    for (Eigen::Index k = 0; k < m; ++k) ci += 0.5 * p.A(i, k) * lam[k];
    f += lam[i] * ci;
    if (p.kind[i] == NORMAL) {
      if (lam[i] <= 0.0) return INF;
      f -= t * p.weight[i] * std::log(lam[i]);
    }
  }
  for (Eigen::Index k = 0; k < B.bs.size(); ++k) {
    if (s[k] <= 0.0) continue;
    double t2 = 0.0;
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) t2 += lam[i] * lam[i];
    if (t2 >= s[k] * s[k]) return INF;
    f -= t * std::log(s[k] * s[k] - t2);
  }
  return f;
}

// _barrier_newton
int barrier_newton(const Problem& p, const Blocks& B, const VectorXd& s, double t, VectorXd& lam, int max_iter,
                   double tol) {
  const Eigen::Index m = p.b.size(), nb = B.bs.size();
  std::vector<char> free(m, 0);
  for (Eigen::Index i = 0; i < m; ++i)
    if (p.kind[i] == NORMAL) free[i] = 1;
  for (Eigen::Index k = 0; k < nb; ++k)
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) {
      free[i] = s[k] > 0.0;
      if (s[k] <= 0.0) lam[i] = 0.0;
    }
  for (Eigen::Index k = 0; k < nb; ++k) {
    double t2 = 0.0;
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) t2 += lam[i] * lam[i];
    const double r = 0.99 * s[k];
    if (s[k] > 0.0 && t2 >= r * r) {
      const double shrink = 0.99 * s[k] / std::sqrt(t2);
      for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) lam[i] *= shrink;
    }
  }
  std::vector<Eigen::Index> idx;
  for (Eigen::Index i = 0; i < m; ++i)
    if (free[i]) idx.push_back(i);
  const Eigen::Index nf = static_cast<Eigen::Index>(idx.size());
  VectorXd g(m), gf(nf), step = VectorXd::Zero(m), trial(m);
  MatrixXd H(m, m), Hf(nf, nf);
  int it = 0;
  while (it < max_iter) {
    it += 1;
    const VectorXd c = velocity(p.A, p.b, lam);
    g = c;
    H = p.A;
    for (Eigen::Index i = 0; i < m; ++i)
      if (p.kind[i] == NORMAL) {
        g[i] -= t * p.weight[i] / lam[i];
        H(i, i) += t * p.weight[i] / (lam[i] * lam[i]);
      }
    for (Eigen::Index k = 0; k < nb; ++k) {
      if (s[k] <= 0.0) continue;
      double t2 = 0.0;
      for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) t2 += lam[i] * lam[i];
      const double D = s[k] * s[k] - t2;
      for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) {
        g[i] += 2.0 * t * lam[i] / D;
        H(i, i) += 2.0 * t / D;
        for (int64_t j = B.bs[k]; j < B.bs[k] + B.bn[k]; ++j) H(i, j) += 4.0 * t * lam[i] * lam[j] / (D * D);
      }
    }
    for (Eigen::Index a = 0; a < nf; ++a) {
      gf[a] = g[idx[a]];
      for (Eigen::Index a2 = 0; a2 < nf; ++a2) Hf(a, a2) = H(idx[a], idx[a2]);
    }
    const VectorXd d = lin_solve(Hf, -gf);
    const double dec = -gf.dot(d);
    if (!(dec >= tol * tol)) break;
    step.setZero();
    for (Eigen::Index a = 0; a < nf; ++a) step[idx[a]] = d[a];
    const double f0 = barrier(p, B, s, t, lam);
    if (!std::isfinite(f0)) break;
    double alpha = 1.0;
    bool accepted = false;
    for (int k = 0; k < 60; ++k) {
      trial = lam + alpha * step;
      const double f1 = barrier(p, B, s, t, trial);
      if (f1 <= f0 - 1e-4 * alpha * dec) {
        accepted = true;
        break;
      }
      alpha *= 0.5;
    }
    if (!accepted) break;
    lam = trial;
  }
  return it;
}

// _coupled
void coupled(const Problem& p, const Blocks& B, double t, const VectorXd& lam, VectorXd& R, MatrixXd& K) {
  const Eigen::Index m = p.b.size();
  const VectorXd c = velocity(p.A, p.b, lam);
  K.setZero(m, m);
  R.resize(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    if (p.kind[i] == NORMAL) {
      R[i] = c[i] - t * p.weight[i] / lam[i];
      K.row(i) = p.A.row(i);
      K(i, i) += t * p.weight[i] / (lam[i] * lam[i]);
    } else {
      R[i] = lam[i];
      K(i, i) = 1.0;
    }
  }
  for (Eigen::Index k = 0; k < B.bs.size(); ++k) {
    const int64_t n = B.bnorm[k];
    const double s = B.bmu[k] * lam[n];
    double t2 = 0.0;
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) t2 += lam[i] * lam[i];
    const double D = s * s - t2;
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) {
      R[i] = c[i] + 2.0 * t * lam[i] / D;
      K.row(i) = p.A.row(i);
      for (int64_t j = B.bs[k]; j < B.bs[k] + B.bn[k]; ++j) K(i, j) += 4.0 * t * lam[i] * lam[j] / (D * D);
      K(i, i) += 2.0 * t / D;
      K(i, n) -= 4.0 * t * lam[i] * s * B.bmu[k] / (D * D);
    }
  }
}

// _inside
bool inside(const Problem& p, const Blocks& B, const VectorXd& lam) {
  for (Eigen::Index i = 0; i < lam.size(); ++i)
    if (p.kind[i] == NORMAL && lam[i] <= 0.0) return false;
  for (Eigen::Index k = 0; k < B.bs.size(); ++k) {
    double t2 = 0.0;
    for (int64_t i = B.bs[k]; i < B.bs[k] + B.bn[k]; ++i) t2 += lam[i] * lam[i];
    const double r = B.bmu[k] * lam[B.bnorm[k]];
    if (t2 >= r * r) return false;
  }
  return true;
}

// _solve: (iterations, residual norm), lam in place
std::pair<int, double> solve_path(const Problem& p, const Blocks& B, VectorXd& lam, double t0, int max_iter,
                                  double tol) {
  const Eigen::Index m = p.b.size(), nb = B.bs.size();
  const double kappa = p.kappa;
  VectorXd s(nb);
  for (Eigen::Index k = 0; k < nb; ++k) s[k] = B.bmu[k] * lam[B.bnorm[k]];
  int total = 0;
  double t = t0;
  for (;;) {
    total += barrier_newton(p, B, s, t, lam, 50, 1e-7 * tol);
    for (Eigen::Index k = 0; k < nb; ++k) s[k] = B.bmu[k] * lam[B.bnorm[k]];
    if (t <= kappa) break;
    t = py_max(kappa, 0.1 * t);
  }
  VectorXd R(m), Rt(m), trial(m);
  MatrixXd K(m, m), Kt(m, m);
  double norm = INF;
  for (int it = 0; it < max_iter; ++it) {
    coupled(p, B, kappa, lam, R, K);
    norm = norm2(R);
    if (norm <= tol) return {total, norm};
    total += 1;
    const VectorXd d = lin_solve(K, -R);
    double alpha = 1.0;
    bool moved = false;
    for (int k = 0; k < 30; ++k) {
      trial = lam + alpha * d;
      if (inside(p, B, trial)) {
        coupled(p, B, kappa, trial, Rt, Kt);
        if (norm2(Rt) <= (1.0 - 1e-4 * alpha) * norm) {
          lam = trial;
          moved = true;
          break;
        }
      }
      alpha *= 0.5;
    }
    if (!moved) {
      for (Eigen::Index k = 0; k < nb; ++k) s[k] = B.bmu[k] * lam[B.bnorm[k]];
      total += barrier_newton(p, B, s, kappa, lam, 50, 1e-7 * tol);
    }
  }
  coupled(p, B, kappa, lam, R, K);
  return {total, norm2(R)};
}

// _start: (lam, t0)
std::pair<VectorXd, double> start(const Problem& p) {
  const Eigen::Index m = p.b.size();
  const double scale = 1e-3 * (1.0 + amax(p.b));
  VectorXd lam = VectorXd::Zero(m);
  double dmax = 0.0;  // np.abs(np.diag(A)).max()
  for (Eigen::Index i = 0; i < m; ++i) dmax = py_max(dmax, std::abs(p.A(i, i)));
  const double floor = 1e-12 * (1.0 + dmax);
  std::vector<double> prod, wn;
  for (Eigen::Index i = 0; i < m; ++i) {
    if (p.kind[i] != NORMAL) continue;
    const double diag = std::fmax(p.A(i, i), floor);  // np.maximum (no NaN here: A is finite)
    lam[i] = (std::fmax(-p.b[i], 0.0) + scale) / diag;
    const double c = std::fmax(p.b[i], scale);
    prod.push_back(lam[i] * c);
    wn.push_back(p.weight[i]);
  }
  double t0 = p.kappa;
  if (!prod.empty()) {
    const double num = pairwise(prod.data(), static_cast<Eigen::Index>(prod.size()));
    const double den = pairwise(wn.data(), static_cast<Eigen::Index>(wn.size()));
    t0 = py_max(p.kappa, num / den);
  }
  return {lam, t0};
}

// _active
VectorXl active(const Problem& p) {
  const Eigen::Index m = p.b.size();
  std::vector<char> on(m);
  for (Eigen::Index i = 0; i < m; ++i) on[i] = p.kind[i] != NORMAL || p.weight[i] > WEIGHT_FLOOR;
  std::vector<char> on2(m);
  for (Eigen::Index i = 0; i < m; ++i) on2[i] = on[i] && on[p.normal_of[i]];
  std::vector<int64_t> keep;
  for (Eigen::Index i = 0; i < m; ++i)
    if (on2[i]) keep.push_back(i);
  return Eigen::Map<const VectorXl>(keep.data(), static_cast<Eigen::Index>(keep.size()));
}

// _restrict
Problem restrict_to(const Problem& p, const VectorXl& keep) {
  const Eigen::Index m = p.b.size(), k = keep.size();
  VectorXl nw = VectorXl::Constant(m, -1);
  for (Eigen::Index a = 0; a < k; ++a) nw[keep[a]] = a;
  Problem q;
  q.A.resize(k, k);
  q.b.resize(k);
  q.kind.resize(k);
  q.normal_of.resize(k);
  q.block_start.resize(k);
  q.block_size.resize(k);
  q.mu.resize(k);
  q.weight.resize(k);
  q.dweight.resize(k);
  for (Eigen::Index a = 0; a < k; ++a) {
    const int64_t i = keep[a];
    for (Eigen::Index c = 0; c < k; ++c) q.A(a, c) = p.A(i, keep[c]);
    q.b[a] = p.b[i];
    q.kind[a] = p.kind[i];
    q.normal_of[a] = nw[p.normal_of[i]];
    q.block_start[a] = nw[p.block_start[i]];
    q.block_size[a] = p.block_size[i];
    q.mu[a] = p.mu[i];
    q.weight[a] = p.weight[i];
    q.dweight[a] = p.dweight[i];
  }
  q.kappa = p.kappa;
  return q;
}

}  // namespace

Problem make_problem(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, int64_t nc, int64_t r, int64_t nlim,
                     double friction, bool cone, const Eigen::VectorXd& phi, double kappa, double distance) {
  const int64_t m = nc * r + nlim;
  if (A.rows() != m || A.cols() != m || b.size() != m || phi.size() != nc + nlim)
    throw std::invalid_argument("relaxed problem: A (m, m), b (m,) and phi (nc + nlim,) must match the rows");
  Problem p;
  p.A = A;
  p.b = b;
  p.kappa = kappa;
  // rows_of
  p.kind = VectorXl::Constant(m, NORMAL);
  p.normal_of.resize(m);
  p.block_start.resize(m);
  p.block_size = VectorXl::Ones(m);
  p.mu = VectorXd::Zero(m);
  for (int64_t i = 0; i < m; ++i) p.normal_of[i] = p.block_start[i] = i;
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t n = c * r;
    for (int64_t t = 1; t < r; ++t) {
      p.kind[n + t] = FRICTION;
      p.normal_of[n + t] = n;
      p.mu[n + t] = friction;
      if (cone) {
        p.block_start[n + t] = n + 1;
        p.block_size[n + t] = r - 1;
      }
    }
  }
  // fade on the normal rows (contacts, then limits)
  p.weight = VectorXd::Zero(m);
  p.dweight = VectorXd::Zero(m);
  for (int64_t a = 0; a < nc + nlim; ++a) {
    const int64_t row = a < nc ? a * r : nc * r + (a - nc);
    const double ph = phi[a];
    double s = ph / distance;
    s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);  // np.clip
    const double o = 1.0 - s * s;
    p.weight[row] = o * o;
    p.dweight[row] = (ph > 0.0 && ph < distance) ? -4.0 * s * (1.0 - s * s) / distance : 0.0;
  }
  return p;
}

Solution solve(const Problem& full, const Eigen::VectorXd* guess, int max_iter) {
  if (!(full.kappa > 0.0))
    throw std::invalid_argument("the relaxed contact model needs kappa > 0, got " + std::to_string(full.kappa));
  const Eigen::Index m = full.b.size();
  if (!std::isfinite(full.A.sum() + full.b.sum()))
    throw std::invalid_argument("solve_relaxed: A or b contains non-finite values");
  Solution sol;
  sol.keep = active(full);
  const VectorXl& keep = sol.keep;
  const Eigen::Index n = keep.size();
  const Problem p = n < m ? restrict_to(full, keep) : full;
  sol.lam = VectorXd::Zero(m);
  if (n == 0) {
    sol.c = full.b;
    sol.converged = true;
    sol.K.resize(0, 0);
    return sol;
  }
  const Blocks B = friction_blocks(p);
  const double tol = TOLERANCE * (1.0 + amax(p.b));
  std::optional<std::tuple<VectorXd, int, double, bool>> best;
  if (guess != nullptr && guess->size() == m) {
    VectorXd lam(n);
    for (Eigen::Index a = 0; a < n; ++a) lam[a] = (*guess)[keep[a]];
    if (inside(p, B, lam)) {
      auto [its, norm] = solve_path(p, B, lam, p.kappa, 20, tol);
      best = std::make_tuple(lam, its, norm, true);
    }
  }
  if (!best || std::get<2>(*best) > tol) {
    auto [lam, t0] = start(p);
    auto [its, norm] = solve_path(p, B, lam, t0, max_iter, tol);
    if (!best || norm < std::get<2>(*best)) best = std::make_tuple(lam, its, norm, false);
  }
  const auto& [lam, its, norm, warm] = *best;
  VectorXd R(n);
  coupled(p, B, p.kappa, lam, R, sol.K);
  for (Eigen::Index a = 0; a < n; ++a) sol.lam[keep[a]] = lam[a];
  sol.c = velocity(full.A, full.b, sol.lam);
  sol.iterations = its;
  sol.residual = norm;
  sol.converged = norm <= 1e6 * tol;
  sol.warm_start_hit = warm && norm <= tol;
  return sol;
}

void linearization(const Problem& full, const Solution& s, RowMat& E, RowMat& Fc, RowMat& Fphi) {
  const VectorXl& keep = s.keep;
  const Eigen::Index m = full.b.size(), k = keep.size();
  const Problem q = k < m ? restrict_to(full, keep) : full;
  const Blocks B = friction_blocks(q);
  std::vector<char> in_block(k, 0);
  for (Eigen::Index a = 0; a < B.bs.size(); ++a)
    for (int64_t i = B.bs[a]; i < B.bs[a] + B.bn[a]; ++i) in_block[i] = 1;
  E = s.K;
  Fc = RowMat::Zero(k, m);
  Fphi = RowMat::Zero(k, m);
  for (Eigen::Index a = 0; a < k; ++a) {
    if (!(q.kind[a] == FRICTION && !in_block[a])) Fc(a, keep[a]) = 1.0;
    if (q.kind[a] == NORMAL) Fphi(a, keep[a]) = -q.kappa * q.dweight[a] / s.lam[keep[a]];
  }
}

}  // namespace relaxed

void bind_relaxed(nb::module_& m) {
  m.def(
      "relaxed_solve",
      [](const Eigen::MatrixXd& A, const Eigen::VectorXd& b, int64_t nc, int64_t r, int64_t nlim, double friction,
         bool cone, const Eigen::VectorXd& phi, double kappa, double distance, std::optional<Eigen::VectorXd> guess) {
        relaxed::Problem p = relaxed::make_problem(A, b, nc, r, nlim, friction, cone, phi, kappa, distance);
        relaxed::Solution s = relaxed::solve(p, guess ? &*guess : nullptr);
        return nb::make_tuple(s.lam, s.c, s.iterations, s.residual, s.converged, s.K, s.warm_start_hit, s.keep);
      },
      nb::arg("A"), nb::arg("b"), nb::arg("nc"), nb::arg("r"), nb::arg("nlim"), nb::arg("friction"), nb::arg("cone"),
      nb::arg("phi"), nb::arg("kappa"), nb::arg("distance"), nb::arg("guess").none(),
      "contact/relaxed.py RelaxedAdapter.problem + solve_relaxed: (lam, c, iterations, residual, converged, K, "
      "warm_start_hit, keep)");
}

}  // namespace contactraj
