// The Coulomb-cone contact NCP (contact/ncp.py) in C++: see ncp.hpp. Each function names its Python twin.
#include "ncp.hpp"
#include "numpy_twins.hpp"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "lcp.hpp"
#include <nanobind/eigen/dense.h>
#include <nanobind/stl/optional.h>

namespace contactraj {
namespace ncp {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
constexpr double INF = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();
constexpr double PI = 3.141592653589793;

using np_twins::all_finite;
using np_twins::amax;
using np_twins::py_max;

// c = A lam + b
VectorXd velocity(const MatrixXd& A, const VectorXd& b, const VectorXd& lam) {
  VectorXd c = A * lam;
  c += b;
  return c;
}

// _project_cone
void project_cone(const double* lam, double mu, int64_t size, double* out) {
  const double ln = lam[0];
  if (size == 1) {
    out[0] = py_max(ln, 0.0);
    return;
  }
  double tn = 0.0;
  for (int64_t k = 1; k < size; ++k) tn += lam[k] * lam[k];
  tn = std::sqrt(tn);
  if (ln >= 0.0 && tn <= mu * ln) {
    for (int64_t k = 0; k < size; ++k) out[k] = lam[k];
  } else if (mu * tn <= -ln || tn == 0.0) {
    for (int64_t k = 0; k < size; ++k) out[k] = 0.0;
  } else {
    const double a = (ln + mu * tn) / (1.0 + mu * mu);
    out[0] = a;
    for (int64_t k = 1; k < size; ++k) out[k] = mu * a * lam[k] / tn;
  }
}

// _natural_map
void natural_map(const Problem& p, const VectorXd& lam, VectorXd& R) {
  const VectorXd c = velocity(p.A, p.b, lam);
  double tmp[3], out[3];
  for (Eigen::Index g = 0; g < p.start.size(); ++g) {
    const int64_t s = p.start[g], n = p.size[g];
    const double rho = 1.0 / py_max(p.A(s, s), 1e-300);
    double ct = 0.0;
    for (int64_t k = 1; k < n; ++k) ct += c[s + k] * c[s + k];
    ct = std::sqrt(ct);
    for (int64_t k = 0; k < n; ++k) tmp[k] = lam[s + k] - rho * c[s + k];
    tmp[0] -= rho * p.mu[g] * ct;
    project_cone(tmp, p.mu[g], n, out);
    for (int64_t k = 0; k < n; ++k) R[s + k] = lam[s + k] - out[k];
  }
}

// _residual
double residual_of(const Problem& p, const VectorXd& lam) {
  VectorXd R = VectorXd::Zero(p.b.size());
  natural_map(p, lam, R);
  double worst = 0.0;
  for (Eigen::Index i = 0; i < R.size(); ++i) worst = py_max(worst, std::abs(R[i]));
  return worst;
}

// _slide_f: (f, ok)
std::pair<double, bool> slide_f(const double Ag[3][3], const double* bt, double mu, double th) {
  const double u0 = std::cos(th), u1 = std::sin(th);
  const double den = Ag[0][0] - mu * (Ag[0][1] * u0 + Ag[0][2] * u1);
  if (den <= 0) return {0.0, false};
  const double ln = -bt[0] / den;
  const double c1 = ln * (Ag[1][0] - mu * (Ag[1][1] * u0 + Ag[1][2] * u1)) + bt[1];
  const double c2 = ln * (Ag[2][0] - mu * (Ag[2][1] * u0 + Ag[2][2] * u1)) + bt[2];
  return {c1 * u1 - c2 * u0, (ln > 0 && c1 * u0 + c2 * u1 > 0)};
}

// _local_solve
void local_solve(const double Ag[3][3], const double* bt, double mu, int64_t n, double* out) {
  if (n == 1) {
    out[0] = Ag[0][0] > 0 ? py_max(0.0, -bt[0] / Ag[0][0]) : 0.0;
    return;
  }
  if (bt[0] >= 0.0) {
    for (int64_t k = 0; k < n; ++k) out[k] = 0.0;
    return;
  }
  if (mu == 0.0) {
    out[0] = Ag[0][0] > 0 ? -bt[0] / Ag[0][0] : 0.0;
    for (int64_t k = 1; k < n; ++k) out[k] = 0.0;
    return;
  }
  // sticking: np.linalg.det and np.linalg.solve (LU with partial pivoting, as LAPACK getrf/gesv)
  {
    MatrixXd G(n, n);
    VectorXd rhs(n);
    for (int64_t i = 0; i < n; ++i) {
      rhs[i] = -bt[i];
      for (int64_t j = 0; j < n; ++j) G(i, j) = Ag[i][j];
    }
    Eigen::PartialPivLU<MatrixXd> lu(G);
    const MatrixXd& f = lu.matrixLU();
    double det = lu.permutationP().determinant();
    for (int64_t i = 0; i < n; ++i) det *= f(i, i);
    if (std::abs(det) > 1e-14 * std::pow(py_max(1.0, std::abs(Ag[0][0])), static_cast<double>(n))) {
      const VectorXd lam = lu.solve(rhs);
      double tn = 0.0;
      for (int64_t k = 1; k < n; ++k) tn += lam[k] * lam[k];
      if (lam[0] >= 0.0 && std::sqrt(tn) <= mu * lam[0]) {
        for (int64_t k = 0; k < n; ++k) out[k] = lam[k];
        return;
      }
    }
  }
  // sliding: lambda = ln (1, -mu u), |u| = 1, with c_n = 0 and c_T parallel to u
  if (n == 2) {
    for (double s : {1.0, -1.0}) {
      const double den = Ag[0][0] - mu * Ag[0][1] * s;
      if (den <= 0) continue;
      const double ln = -bt[0] / den;
      const double ctt = ln * (Ag[1][0] - mu * Ag[1][1] * s) + bt[1];
      if (ln >= 0 && ctt * s > 0) {
        out[0] = ln;
        out[1] = -mu * ln * s;
        return;
      }
    }
  } else {
    double best_th = 0.0;
    bool found = false;
    const int nscan = 64;
    double fprev = 0.0, thprev = 0.0;
    bool okprev = false;
    for (int i = 0; i <= nscan; ++i) {
      const double th = 2.0 * PI * i / nscan;
      auto [f, ok] = slide_f(Ag, bt, mu, th);
      if (i > 0 && ok && okprev && f * fprev <= 0.0) {
        double lo = thprev, hi = th, flo = fprev;
        for (int it = 0; it < 60; ++it) {
          const double mid = 0.5 * (lo + hi);
          const double fm = slide_f(Ag, bt, mu, mid).first;
          if ((fm <= 0.0) == (flo <= 0.0)) {
            lo = mid;
            flo = fm;
          } else {
            hi = mid;
          }
        }
        best_th = 0.5 * (lo + hi);
        found = true;
        break;
      }
      fprev = f;
      thprev = th;
      okprev = ok;
    }
    if (found) {
      const double u0 = std::cos(best_th), u1 = std::sin(best_th);
      const double den = Ag[0][0] - mu * (Ag[0][1] * u0 + Ag[0][2] * u1);
      const double ln = -bt[0] / den;
      out[0] = ln;
      out[1] = -mu * ln * u0;
      out[2] = -mu * ln * u1;
      return;
    }
  }
  // fallback: one projected step
  double tmp[3];
  for (int64_t k = 0; k < n; ++k) {
    double ck = bt[k];
    for (int64_t j = 0; j < n; ++j) ck += Ag[k][j] * out[j];
    tmp[k] = out[k] - ck / Ag[0][0];
  }
  project_cone(tmp, mu, n, out);
}

// _pgs: sweeps run, lam in place
int pgs(const Problem& p, VectorXd& lam, int max_sweeps, double tol) {
  const Eigen::Index ng = p.start.size(), m = p.b.size();
  double Ag[3][3], bt[3], nw[3];
  const double scale = 1.0 + amax(p.b);
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    double change = 0.0;
    for (Eigen::Index g = 0; g < ng; ++g) {
      const int64_t s = p.start[g], n = p.size[g];
      for (int64_t i = 0; i < n; ++i) {
        double acc = p.b[s + i];
        for (Eigen::Index j = 0; j < m; ++j) acc += p.A(s + i, j) * lam[j];
        for (int64_t k = 0; k < n; ++k) {
          acc -= p.A(s + i, s + k) * lam[s + k];
          Ag[i][k] = p.A(s + i, s + k);
        }
        bt[i] = acc;
      }
      for (int64_t k = 0; k < n; ++k) nw[k] = lam[s + k];
      local_solve(Ag, bt, p.mu[g], n, nw);
      for (int64_t k = 0; k < n; ++k) {
        change = py_max(change, std::abs(nw[k] - lam[s + k]) * py_max(p.A(s + k, s + k), 1e-300));
        lam[s + k] = nw[k];
      }
    }
    if (change <= tol * scale) return sweep + 1;
  }
  return max_sweeps;
}

// _modes
VectorXl modes_of(const Problem& p, const VectorXd& lam, double tol_c, double tol_l) {
  const VectorXd c = velocity(p.A, p.b, lam);
  VectorXl modes = VectorXl::Zero(p.start.size());
  for (Eigen::Index g = 0; g < p.start.size(); ++g) {
    const int64_t s = p.start[g], n = p.size[g];
    if (lam[s] <= tol_l) {
      modes[g] = 0;
      continue;
    }
    double ct = 0.0;
    for (int64_t k = 1; k < n; ++k) ct += c[s + k] * c[s + k];
    if (n == 1)
      modes[g] = 1;
    else if (p.mu[g] == 0.0)
      modes[g] = 2;
    else if (std::sqrt(ct) <= tol_c)
      modes[g] = 1;
    else
      modes[g] = 2;
  }
  return modes;
}

// _mode_equations (jac: Fl and Fc too)
void mode_equations(const Problem& p, const VectorXl& modes, const RowMat& dirs, const VectorXd& lam, VectorXd& F,
                    RowMat* Fl, RowMat* Fc) {
  const VectorXd c = velocity(p.A, p.b, lam);
  const bool jac = Fl != nullptr;
  if (jac) {
    Fl->setZero();
    Fc->setZero();
  }
  for (Eigen::Index g = 0; g < p.start.size(); ++g) {
    const int64_t s = p.start[g], n = p.size[g], md = modes[g];
    const double mu = p.mu[g];
    if (md == 0) {
      for (int64_t k = 0; k < n; ++k) {
        F[s + k] = lam[s + k];
        if (jac) (*Fl)(s + k, s + k) = 1.0;
      }
    } else if (md == 3) {
      F[s] = c[s];
      if (jac) (*Fc)(s, s) = 1.0;
      for (int64_t k = 1; k < n; ++k) {
        F[s + k] = lam[s + k] - mu * lam[s] * dirs(g, k - 1);
        if (jac) {
          (*Fl)(s + k, s + k) = 1.0;
          (*Fl)(s + k, s) = -mu * dirs(g, k - 1);
        }
      }
    } else if (md == 1 || (md == 2 && mu == 0.0)) {
      const int64_t rows = md == 1 ? n : 1;
      for (int64_t k = 0; k < rows; ++k) {
        F[s + k] = c[s + k];
        if (jac) (*Fc)(s + k, s + k) = 1.0;
      }
      for (int64_t k = rows; k < n; ++k) {
        F[s + k] = lam[s + k];
        if (jac) (*Fl)(s + k, s + k) = 1.0;
      }
    } else {
      F[s] = c[s];
      if (jac) (*Fc)(s, s) = 1.0;
      double ct = 0.0;
      for (int64_t k = 1; k < n; ++k) ct += c[s + k] * c[s + k];
      ct = py_max(std::sqrt(ct), 1e-300);
      const double ln = lam[s];
      for (int64_t k = 1; k < n; ++k) {
        const double uk = c[s + k] / ct;
        F[s + k] = lam[s + k] + mu * ln * uk;
        if (jac) {
          (*Fl)(s + k, s + k) = 1.0;
          (*Fl)(s + k, s) = mu * uk;
          for (int64_t kk = 1; kk < n; ++kk)
            (*Fc)(s + k, s + kk) = mu * ln * ((kk == k ? 1.0 : 0.0) - uk * c[s + kk] / ct) / ct;
        }
      }
    }
  }
}

// _equations: F and JF = Fl + Fc A
void equations(const Problem& p, const VectorXl& modes, const RowMat& dirs, const VectorXd& lam, VectorXd& F,
               RowMat& JF, RowMat& Fl, RowMat& Fc) {
  const Eigen::Index m = p.b.size();
  Fl.resize(m, m);
  Fc.resize(m, m);
  mode_equations(p, modes, dirs, lam, F, &Fl, &Fc);
  JF.noalias() = Fc * p.A;
  JF += Fl;
}

// _newton_core: (iterations, converged), lam in place
std::pair<int, bool> newton_core(const Problem& p, const VectorXl& modes, const RowMat& dirs, VectorXd& lam,
                                 int max_iter, double tol, double scale) {
  const Eigen::Index m = p.b.size();
  VectorXd F(m), Ft(m), trial(m);
  RowMat JF(m, m), Fl, Fc;
  std::vector<double> hist(max_iter + 1);
  int stalls = 0;
  for (int it = 0; it < max_iter; ++it) {
    equations(p, modes, dirs, lam, F, JF, Fl, Fc);
    const double f0 = amax(F);
    hist[it] = f0;
    if (f0 <= tol * scale) {
      if (f0 > POLISH * scale) {
        const RowMat step = lstsq(JF, -F, 1e-12);
        for (Eigen::Index i = 0; i < m; ++i) trial[i] = lam[i] + step(i, 0);
        mode_equations(p, modes, dirs, trial, Ft, nullptr, nullptr);
        if (amax(Ft) < f0) lam = trial;
      }
      return {it, true};
    }
    if (it >= STALL_WINDOW && f0 > 0.5 * hist[it - STALL_WINDOW]) return {it, false};
    const RowMat step = lstsq(JF, -F, 1e-12);
    double alpha = 1.0;
    bool accepted = false;
    for (int k = 0; k < 30; ++k) {
      for (Eigen::Index i = 0; i < m; ++i) trial[i] = lam[i] + alpha * step(i, 0);
      mode_equations(p, modes, dirs, trial, Ft, nullptr, nullptr);
      if (amax(Ft) < (1.0 - 1e-4 * alpha) * f0) {
        accepted = true;
        break;
      }
      alpha *= 0.5;
    }
    if (accepted) {
      stalls = 0;
      lam = trial;
    } else {
      stalls += 1;
      if (stalls > 3) return {it, false};
      for (Eigen::Index i = 0; i < m; ++i) lam[i] += step(i, 0);
    }
  }
  mode_equations(p, modes, dirs, lam, F, nullptr, nullptr);
  return {max_iter, amax(F) <= tol * scale};
}

// _newton: breaking groups set to zero, Newton on the other groups' rows
std::pair<int, bool> newton(const Problem& p, const VectorXl& modes, const RowMat& dirs, VectorXd& lam, int max_iter,
                            double tol) {
  const double scale = 1.0 + amax(p.b);
  const Eigen::Index ng = p.start.size();
  int64_t na = 0, nga = 0;
  for (Eigen::Index g = 0; g < ng; ++g) {
    if (modes[g] != 0) {
      na += p.size[g];
      nga += 1;
    } else {
      for (int64_t k = 0; k < p.size[g]; ++k) lam[p.start[g] + k] = 0.0;
    }
  }
  if (na == 0) return {0, true};
  IdxVec act(na);
  Problem a;
  a.start.resize(nga);
  a.size.resize(nga);
  a.mu.resize(nga);
  VectorXl modes_a(nga);
  RowMat dirs_a(nga, 2);
  int64_t i = 0, ga = 0;
  for (Eigen::Index g = 0; g < ng; ++g) {
    if (modes[g] == 0) continue;
    a.start[ga] = i;
    a.size[ga] = p.size[g];
    a.mu[ga] = p.mu[g];
    modes_a[ga] = modes[g];
    dirs_a(ga, 0) = dirs(g, 0);
    dirs_a(ga, 1) = dirs(g, 1);
    for (int64_t k = 0; k < p.size[g]; ++k) act[i++] = p.start[g] + k;
    ga += 1;
  }
  a.A.resize(na, na);
  a.b.resize(na);
  VectorXd la(na);
  for (int64_t e = 0; e < na; ++e) {
    a.b[e] = p.b[act[e]];
    la[e] = lam[act[e]];
    for (int64_t f = 0; f < na; ++f) a.A(e, f) = p.A(act[e], act[f]);
  }
  auto r = newton_core(a, modes_a, dirs_a, la, max_iter, tol, scale);
  for (int64_t e = 0; e < na; ++e) lam[act[e]] = la[e];
  return r;
}

// _valid
bool valid(const Problem& p, const VectorXl& modes, const RowMat& dirs, const VectorXd& lam, double tol_c,
           double tol_l) {
  const VectorXd c = velocity(p.A, p.b, lam);
  for (Eigen::Index g = 0; g < p.start.size(); ++g) {
    const int64_t s = p.start[g], n = p.size[g], md = modes[g];
    if (md == 0) {
      if (c[s] < -tol_c) return false;
    } else {
      if (lam[s] < -tol_l) return false;
      if (n > 1 && md == 1) {
        double tn = 0.0;
        for (int64_t k = 1; k < n; ++k) tn += lam[s + k] * lam[s + k];
        if (std::sqrt(tn) > p.mu[g] * lam[s] + tol_l) return false;
      }
      if (md == 2 && p.mu[g] > 0.0) {
        double ct = 0.0;
        for (int64_t k = 1; k < n; ++k) ct += c[s + k] * c[s + k];
        if (std::sqrt(ct) <= tol_c) return false;
      }
      if (md == 3) {
        double along = 0.0;
        for (int64_t k = 1; k < n; ++k) along += c[s + k] * dirs(g, k - 1);
        if (along > tol_c) return false;
        for (int64_t k = 1; k < n; ++k)
          if (std::abs(c[s + k] - along * dirs(g, k - 1)) > tol_c) return false;
      }
    }
  }
  return true;
}

// _repair (writes dirs of groups turned SATURATED)
VectorXl repair(const Problem& p, const VectorXl& modes, RowMat& dirs, const VectorXd& lam, double tol_c,
                double tol_l) {
  const VectorXd c = velocity(p.A, p.b, lam);
  VectorXl nw = modes;
  for (Eigen::Index g = 0; g < p.start.size(); ++g) {
    const int64_t s = p.start[g], n = p.size[g], md = modes[g];
    const double mu = p.mu[g];
    if (md == 0) {
      if (c[s] < -tol_c) nw[g] = (n == 1 || mu > 0.0) ? 1 : 2;
    } else if (lam[s] < -tol_l) {
      nw[g] = 0;
    } else if (md == 1 && n > 1) {
      double tn = 0.0;
      for (int64_t k = 1; k < n; ++k) tn += lam[s + k] * lam[s + k];
      if (std::sqrt(tn) > mu * lam[s] + tol_l) nw[g] = 2;
    } else if (md == 2 && mu > 0.0) {
      double ct = 0.0;
      for (int64_t k = 1; k < n; ++k) ct += c[s + k] * c[s + k];
      if (std::sqrt(ct) <= tol_c) {
        double tn = 0.0;
        for (int64_t k = 1; k < n; ++k) tn += lam[s + k] * lam[s + k];
        tn = std::sqrt(tn);
        if (tn > 0.0) {
          nw[g] = 3;
          for (int64_t k = 1; k < n; ++k) dirs(g, k - 1) = lam[s + k] / tn;
        } else {
          nw[g] = 1;
        }
      }
    } else if (md == 3) {
      double along = 0.0;
      for (int64_t k = 1; k < n; ++k) along += c[s + k] * dirs(g, k - 1);
      if (along > tol_c) {
        nw[g] = 1;
      } else {
        for (int64_t k = 1; k < n; ++k)
          if (std::abs(c[s + k] - along * dirs(g, k - 1)) > tol_c) nw[g] = 2;
      }
    }
  }
  return nw;
}

// _accept
bool accept(const Problem& p, const VectorXl& modes, const RowMat& dirs, const VectorXd& lam, bool converged,
            double tol_c, double tol_l) {
  if (!all_finite(lam) || !valid(p, modes, dirs, lam, tol_c, tol_l)) return false;
  if (converged) return true;
  const Eigen::Index m = p.b.size();
  VectorXd F(m);
  RowMat JF(m, m), Fl, Fc;
  equations(p, modes, dirs, lam, F, JF, Fl, Fc);
  return amax(F) <= ACCEPT * (1.0 + amax(p.b));
}

Solution result(const Problem& p, const VectorXd& lam, const VectorXl& modes, const RowMat& dirs, bool solved,
                bool hit, int its) {
  Solution s;
  s.lam = lam;
  s.c = velocity(p.A, p.b, lam);
  s.modes = modes;
  s.solved = solved;
  s.residual = residual_of(p, lam);
  s.warm_start_hit = hit;
  s.iterations = its;
  s.dirs = dirs;
  return s;
}

bool equal(const VectorXl& a, const VectorXl& b) { return a.size() == b.size() && (a.array() == b.array()).all(); }

// _repaired: (lam, modes, dirs, iterations) or nullopt
struct Repaired {
  VectorXd lam;
  VectorXl modes;
  RowMat dirs;
  int its;
};
std::optional<Repaired> repaired(const Problem& p, VectorXl modes, const RowMat& dirs0, VectorXd lam, double tol,
                                 double tol_c, int repairs) {
  int total = 0;
  RowMat dirs = dirs0;
  for (int r = 0; r < repairs; ++r) {
    if (!all_finite(lam)) return std::nullopt;
    double tol_l = 1e-9 * (1.0 + amax(lam));
    VectorXl nw = repair(p, modes, dirs, lam, tol_c, tol_l);
    if (equal(nw, modes)) return std::nullopt;
    modes = nw;
    auto [its, ok] = newton(p, modes, dirs, lam, 50, tol);
    total += its;
    tol_l = 1e-9 * (1.0 + amax(lam));
    if (accept(p, modes, dirs, lam, ok, tol_c, tol_l)) return Repaired{lam, modes, dirs, total};
  }
  return std::nullopt;
}

// _from_pyramid_lcp: (lam, modes, iterations)
void from_pyramid_lcp(const Problem& p, VectorXd& lam, VectorXl& modes, int& its) {
  const Eigen::Index m = p.b.size(), ng = p.start.size();
  lcp::VectorXl normal_of = lcp::VectorXl::Constant(m, -1);
  VectorXd mu_rows = VectorXd::Zero(m);
  for (Eigen::Index g = 0; g < ng; ++g) {
    const int64_t s0 = p.start[g], n = p.size[g];
    for (int64_t k = 1; k < n; ++k) {
      normal_of[s0 + k] = s0;
      mu_rows[s0 + k] = p.mu[g] / std::sqrt(n - 1.0);
    }
  }
  const lcp::Solution sol = lcp::solve(lcp::Problem(p.A, p.b, normal_of, mu_rows), nullptr, nullptr, 1e-9, -1);
  lam.resize(m);
  for (Eigen::Index i = 0; i < m; ++i) lam[i] = std::isfinite(sol.x[i]) ? sol.x[i] : 0.0;
  modes = VectorXl::Zero(ng);
  const VectorXd c = velocity(p.A, p.b, lam);
  const double tol_c = 1e-8 * (1.0 + amax(p.b));
  for (Eigen::Index g = 0; g < ng; ++g) {
    const int64_t s0 = p.start[g], n = p.size[g];
    if (sol.modes[s0] == lcp::SEPARATING || lam[s0] <= 0.0) {
      modes[g] = BREAKING;
    } else if (n == 1) {
      modes[g] = STICKING;
    } else {
      double ct = 0.0;  // np.linalg.norm of the tangential velocity
      for (int64_t k = 1; k < n; ++k) ct += c[s0 + k] * c[s0 + k];
      modes[g] = (p.mu[g] == 0.0 || std::sqrt(ct) > tol_c) ? SLIDING : STICKING;
    }
  }
  its = sol.iterations;
}

// _solve_ncp
Solution solve_raw(const Problem& p, const VectorXl* gm, const VectorXd* gl, const RowMat* gd, double tol,
                   int max_sweeps) {
  const Eigen::Index m = p.b.size(), ng = p.start.size();
  const double scale_b = 1.0 + amax(p.b);
  const double tol_c = 1e-8 * scale_b;
  RowMat dirs = RowMat::Zero(ng, 2);
  if (gm != nullptr && gl != nullptr) {
    VectorXd lam = *gl;
    VectorXl modes = *gm;
    if (gd != nullptr && gd->rows() == ng && gd->cols() == 2) {
      dirs = *gd;
    } else {
      for (Eigen::Index g = 0; g < modes.size(); ++g)
        if (modes[g] == SATURATED) modes[g] = STICKING;
    }
    if (lam.size() == m && modes.size() == ng) {
      auto [its, ok] = newton(p, modes, dirs, lam, 50, tol);
      const double tol_l = 1e-10 * (1.0 + amax(lam));
      if (accept(p, modes, dirs, lam, ok, tol_c, tol_l)) return result(p, lam, modes, dirs, true, true, its);
    }
  }
  VectorXd lam;
  VectorXl modes;
  int its0 = 0;
  from_pyramid_lcp(p, lam, modes, its0);
  int total = its0;
  for (int r = 0; r < 10; ++r) {
    VectorXd trial = lam;
    auto [its, ok] = newton(p, modes, dirs, trial, 50, tol);
    total += its;
    const double tol_l = 1e-9 * (1.0 + amax(trial));
    if (accept(p, modes, dirs, trial, ok, tol_c, tol_l)) return result(p, trial, modes, dirs, true, false, total);
    if (!all_finite(trial)) break;
    VectorXl nw = repair(p, modes, dirs, trial, tol_c, tol_l);
    if (equal(nw, modes)) break;
    modes = nw;
    for (Eigen::Index i = 0; i < m; ++i)
      if (std::isfinite(trial[i])) lam[i] = trial[i];
  }
  // the Newton answer nearest a solution (contact/ncp.py), for an inexact end
  double closest_r = std::numeric_limits<double>::infinity();
  VectorXd closest_lam;
  VectorXl closest_modes;
  for (int sweeps : {50, 500, max_sweeps}) {
    total += pgs(p, lam, sweeps, tol);
    const double tol_l = 1e-9 * (1.0 + amax(lam));
    modes = modes_of(p, lam, tol_c, tol_l);
    VectorXd trial = lam;
    auto [its, ok] = newton(p, modes, dirs, trial, 50, tol);
    total += its;
    // the law's tolerance on the answer's own scale (contact/ncp.py: the iterate's can be far larger)
    if (accept(p, modes, dirs, trial, ok, tol_c, 1e-9 * (1.0 + amax(trial))))
      return result(p, trial, modes, dirs, true, false, total);
    if (all_finite(trial)) {
      const double r = residual_of(p, trial);
      if (r < closest_r) { closest_r = r; closest_lam = trial; closest_modes = modes; }
    }
    auto sol = repaired(p, modes, dirs, trial, tol, tol_c, REPAIRS);
    if (sol) return result(p, sol->lam, sol->modes, sol->dirs, true, false, total + sol->its);
  }
  modes = modes_of(p, lam, tol_c, 1e-9 * (1.0 + amax(lam)));
  if (closest_lam.size() && closest_r < residual_of(p, lam))
    return result(p, closest_lam, closest_modes, dirs, false, false, total);
  return result(p, lam, modes, dirs, false, false, total);
}

// _canonical_vertex: the vertex, or nullopt
std::optional<Solution> canonical_vertex(const Problem& p, const Solution& sol, double tol) {
  const Eigen::Index m = p.b.size(), ng = p.start.size();
  const VectorXd& lam = sol.lam;
  const VectorXl& modes = sol.modes;
  const RowMat dirs = sol.dirs.rows() == ng ? sol.dirs : RowMat::Zero(ng, 2);
  RowMat E, Fca;
  IdxVec act;
  linearization(p, modes, dirs, lam, E, Fca, act);
  if (E.rows() == 0) return std::nullopt;
  Eigen::JacobiSVD<MatrixXd> svd(MatrixXd(E), Eigen::ComputeFullV);
  const VectorXd& s = svd.singularValues();
  if (s[s.size() - 1] > INDETERMINATE_RTOL * s[0]) return std::nullopt;
  VectorXd n = VectorXd::Zero(m);
  const Eigen::Index last = svd.matrixV().cols() - 1;
  for (Eigen::Index a = 0; a < act.size(); ++a) n[act[a]] = svd.matrixV()(a, last);
  Eigen::Index first = -1;
  for (Eigen::Index g = 0; g < ng; ++g)
    if (modes[g] != BREAKING && std::abs(n[p.start[g]]) > 1e-8) {
      first = p.start[g];
      break;
    }
  if (first < 0) return std::nullopt;
  if (n[first] > 0.0) n = -n;
  const double tol_c = 1e-8 * (1.0 + amax(p.b));
  for (int sign : {1, -1}) {
    const VectorXd d = sign * n;
    double t = INF;
    Eigen::Index hit = -1;
    for (Eigen::Index g = 0; g < ng; ++g) {
      const int64_t s0 = p.start[g];
      if (modes[g] != BREAKING && d[s0] < -1e-8) {
        const double tg = lam[s0] / -d[s0];
        if (tg < t) {
          t = tg;
          hit = g;
        }
      }
    }
    if (hit < 0 || !std::isfinite(t)) continue;
    VectorXd trial = lam + t * d;
    VectorXl m2 = modes;
    m2[hit] = BREAKING;
    for (int64_t k = 0; k < p.size[hit]; ++k) trial[p.start[hit] + k] = 0.0;
    const bool ok = newton(p, m2, dirs, trial, 50, tol).second;
    const double tol_l = 1e-9 * (1.0 + amax(trial));
    if (accept(p, m2, dirs, trial, ok, tol_c, tol_l))
      return result(p, trial, m2, dirs, true, sol.warm_start_hit, sol.iterations);
  }
  return std::nullopt;
}

void check(const Problem& p) {
  const Eigen::Index m = p.b.size(), ng = p.start.size();
  if (p.A.rows() != m || p.A.cols() != m)
    throw std::invalid_argument("solve_ncp: A has shape (" + std::to_string(p.A.rows()) + ", " +
                                std::to_string(p.A.cols()) + "), expected (" + std::to_string(m) + ", " +
                                std::to_string(m) + ")");
  if (p.size.size() != ng || p.mu.size() != ng)
    throw std::invalid_argument("solve_ncp: start, size and mu must have one entry per group");
  for (Eigen::Index g = 0; g < ng; ++g)
    if (p.size[g] < 1 || p.size[g] > 3 || p.start[g] < 0 || p.start[g] + p.size[g] > m)
      throw std::invalid_argument("solve_ncp: group " + std::to_string(g) + " (start " + std::to_string(p.start[g]) +
                                  ", size " + std::to_string(p.size[g]) + ") is not 1-3 rows inside the " +
                                  std::to_string(m) + " rows");
}

}  // namespace

std::pair<int, bool> newton_public(const Problem& p, const VectorXl& modes, const RowMat& dirs, Eigen::VectorXd& lam,
                                   int max_iter, double tol) {
  check(p);
  return newton(p, modes, dirs, lam, max_iter, tol);
}

void groups(int64_t nc, int64_t r, int64_t nl, double friction, Problem& p) {
  p.start.resize(nc + nl);
  p.size.resize(nc + nl);
  p.mu.resize(nc + nl);
  for (int64_t c = 0; c < nc; ++c) {
    p.start[c] = c * r;
    p.size[c] = r;
    p.mu[c] = friction;
  }
  for (int64_t k = 0; k < nl; ++k) {
    p.start[nc + k] = nc * r + k;
    p.size[nc + k] = 1;
    p.mu[nc + k] = 0.0;
  }
}

double residual(const Problem& p, const Eigen::VectorXd& lam) {
  if (p.b.size() == 0) return 0.0;
  return residual_of(p, lam);
}

void linearization(const Problem& p, const VectorXl& modes, const RowMat& dirs, const Eigen::VectorXd& lam, RowMat& E,
                   RowMat& Fca, IdxVec& act) {
  const Eigen::Index m = p.b.size(), ng = p.start.size();
  VectorXd F(m);
  RowMat Fl(m, m), Fc(m, m);
  mode_equations(p, modes, dirs, lam, F, &Fl, &Fc);
  int64_t na = 0;
  for (Eigen::Index g = 0; g < ng; ++g)
    if (modes[g] != 0) na += p.size[g];
  act.resize(na);
  int64_t a = 0;
  for (Eigen::Index g = 0; g < ng; ++g)
    if (modes[g] != 0)
      for (int64_t k = 0; k < p.size[g]; ++k) act[a++] = p.start[g] + k;
  Fca.resize(na, m);
  for (int64_t e = 0; e < na; ++e) Fca.row(e) = Fc.row(act[e]);
  const RowMat JF = Fca * p.A;
  E.resize(na, na);
  for (int64_t e = 0; e < na; ++e)
    for (int64_t f = 0; f < na; ++f) E(e, f) = Fl(act[e], act[f]) + JF(e, act[f]);
}

Solution solve(const Problem& p, const VectorXl* gm, const Eigen::VectorXd* gl, const RowMat* gd, double tol,
               int max_sweeps) {
  check(p);
  const Eigen::Index m = p.b.size();
  if (!std::isfinite(p.A.sum() + p.b.sum())) throw std::invalid_argument("solve_ncp: A or b contains non-finite values");
  if (m == 0) {
    Solution s;
    s.lam.resize(0);
    s.c.resize(0);
    s.modes.resize(0);
    s.dirs.resize(0, 2);
    return s;
  }
  Solution sol = solve_raw(p, gm, gl, gd, tol, max_sweeps);
  if (sol.solved && (sol.modes.array() == SLIDING).any()) {
    auto vertex = canonical_vertex(p, sol, tol);
    if (vertex) return *vertex;
  }
  return sol;
}

}  // namespace ncp

namespace {
using ncp::VectorXl;

ncp::Problem problem_of(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const VectorXl& start, const VectorXl& size,
                        const Eigen::VectorXd& mu) {
  ncp::Problem p{A, b, start, size, mu};
  return p;
}

nb::tuple solution_tuple(const ncp::Solution& s) {
  return nb::make_tuple(s.lam, s.c, s.modes, s.solved, s.residual, s.warm_start_hit, s.iterations, s.dirs);
}
}  // namespace

void bind_ncp(nb::module_& m) {
  m.def(
      "ncp_newton",
      [](const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const VectorXl& start, const VectorXl& size,
         const Eigen::VectorXd& mu, const VectorXl& modes, const RowMat& dirs, Eigen::VectorXd lam, int max_iter,
         double tol) {
        ncp::Problem p = problem_of(A, b, start, size, mu);
        if (modes.size() != start.size() || dirs.rows() != start.size() || dirs.cols() != 2 || lam.size() != b.size())
          throw std::invalid_argument("ncp_newton: modes (ng,), dirs (ng, 2) and lam (m,) must match the groups");
        auto r = ncp::newton_public(p, modes, dirs, lam, max_iter, tol);
        return nb::make_tuple(r.first, r.second, lam);
      },
      nb::arg("A"), nb::arg("b"), nb::arg("start"), nb::arg("size"), nb::arg("mu"), nb::arg("modes"), nb::arg("dirs"),
      nb::arg("lam"), nb::arg("max_iter") = 50, nb::arg("tol") = 1e-10,
      "contact/ncp.py _newton: (iterations, converged, lam)");
  m.def(
      "ncp_solve",
      [](const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const VectorXl& start, const VectorXl& size,
         const Eigen::VectorXd& mu, std::optional<VectorXl> gm, std::optional<Eigen::VectorXd> gl,
         std::optional<RowMat> gd, double tol, int max_sweeps) {
        ncp::Problem p = problem_of(A, b, start, size, mu);
        const bool guess = gm.has_value() && gl.has_value();
        return solution_tuple(ncp::solve(p, guess ? &*gm : nullptr, guess ? &*gl : nullptr,
                                         guess && gd.has_value() ? &*gd : nullptr, tol, max_sweeps));
      },
      nb::arg("A"), nb::arg("b"), nb::arg("start"), nb::arg("size"), nb::arg("mu"), nb::arg("guess_modes").none(),
      nb::arg("guess_lam").none(), nb::arg("guess_dirs").none(), nb::arg("tol") = 1e-10, nb::arg("max_sweeps") = 2000,
      "contact/ncp.py solve_ncp: (lam, c, modes, solved, residual, warm_start_hit, iterations, dirs)");
  m.def(
      "ncp_linearize",
      [](const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const VectorXl& start, const VectorXl& size,
         const Eigen::VectorXd& mu, const VectorXl& modes, const RowMat& dirs, const Eigen::VectorXd& lam) {
        ncp::Problem p = problem_of(A, b, start, size, mu);
        if (modes.size() != start.size() || dirs.rows() != start.size() || dirs.cols() != 2 || lam.size() != b.size())
          throw std::invalid_argument("ncp_linearize: modes (ng,), dirs (ng, 2) and lam (m,) must match the groups");
        RowMat E, Fc;
        IdxVec act;
        ncp::linearization(p, modes, dirs, lam, E, Fc, act);
        return nb::make_tuple(E, Fc, act);
      },
      nb::arg("A"), nb::arg("b"), nb::arg("start"), nb::arg("size"), nb::arg("mu"), nb::arg("modes"), nb::arg("dirs"),
      nb::arg("lam"), "contact/ncp.py NCPAdapter.linearize: (E, Fc, act)");
}

}  // namespace contactraj
