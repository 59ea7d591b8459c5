// The boxed LCP (contact/lcp.py) in C++: see lcp.hpp. Each function names its Python twin.
#include "lcp.hpp"
#include "numpy_twins.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace contactraj {
namespace lcp {
namespace {

constexpr double INF = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

// numpy's elementwise maximum / minimum (a NaN in either argument gives NaN).
inline double np_max(double a, double b) { return (a >= b || std::isnan(a)) ? a : b; }
inline double np_min(double a, double b) { return (a <= b || std::isnan(a)) ? a : b; }
using np_twins::all_finite;
using np_twins::amax;
using np_twins::py_max;

std::string rows_str(const std::vector<Eigen::Index>& rows) {
  std::string s = "[";
  for (size_t i = 0; i < rows.size(); ++i) s += (i ? ", " : "") + std::to_string(rows[i]);
  return s + "]";
}

// w = A x + b (matrix-vector product first, as numpy's ``A @ x + b``).
VectorXd velocity(const Problem& lcp, const VectorXd& x) {
  VectorXd w = lcp.A * x;
  w += lcp.b;
  return w;
}

// _evaluate: (w, residual, |x|_inf, accepted); tol < 0 stands for None.
struct Eval {
  VectorXd w;
  double res, xs;
  bool ok;
};

Eval evaluate(const Problem& lcp, const VectorXd& x, double tol) {
  const Eigen::Index n = lcp.n();
  Eval e{velocity(lcp, x), 0.0, 0.0, false};
  const VectorXd& w = e.w;
  VectorXd a(n), hi(n), z(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    a[i] = std::abs(lcp.mu[i] * x[lcp.k[i]]);
    hi[i] = a[i] + lcp.hi_pad[i];
    z[i] = np_min(np_max(x[i] - w[i], -a[i]), hi[i]) - x[i];
  }
  e.res = amax(z);
  e.xs = amax(x);
  if (!(e.res < INF && e.xs < INF)) {
    e.res = e.xs = INF;
    return e;
  }
  if (tol < 0) return e;
  const double tx = tol * e.xs;
  const double tw = tol * lcp.bnorm + ROUNDING * lcp.anorm * e.xs;
  if (e.res <= std::min(tx, tw)) {
    e.ok = true;
    return e;
  }
  if (e.res > tx + tw) return e;
  bool ok = true;
  for (Eigen::Index i = 0; i < n && ok; ++i) {
    const double lo = a[i] + x[i];  // distance above the lower bound
    const double up = hi[i] - x[i];  // distance below the upper bound
    ok = (lo >= -tx) && (up >= -tx) && ((lo <= tx) || (w[i] <= tw)) && ((up <= tx) || (w[i] >= -tw));
  }
  e.ok = ok;
  return e;
}

// _Best and the candidates' items.
struct Item {
  VectorXd x, w;
  double res = INF, xs = INF;
  Mask cm, bm;
  VectorXl signs;
};

struct Best {
  double rel = INF;
  bool has = false;
  Item item;
};

// _candidate: evaluates x (solved on masks cm, bm); returns true when accepted (then `out` holds it).
bool candidate(const Problem& lcp, double tol, Best& best, const Mask& cm, const Mask& bm, const VectorXl& signs,
               const VectorXd& x, Item& out, VectorXd* w_out = nullptr) {
  Eval e = evaluate(lcp, x, tol);
  if (w_out) *w_out = e.w;
  if (e.res < best.rel) {
    best.rel = e.res;
    best.has = true;
    best.item = Item{x, e.w, e.res, e.xs, cm, bm, signs};
  }
  if (!e.ok) return false;
  out = Item{x, std::move(e.w), e.res, e.xs, cm, bm, signs};
  return true;
}

// _report: (modes, signs) in normal form for the masks x was solved on.
void report(const Problem& lcp, const Item& it, VectorXl& modes, VectorXl& sg) {
  const Eigen::Index n = lcp.n();
  modes.setZero(n);
  sg.setZero(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const bool tied = it.cm[i] && !lcp.fric[i] && it.x[i] <= CLASSIFY_TOL * it.xs;
    modes[i] = (it.cm[i] ? 1 : 0) + (tied ? 1 : 0);
    if (it.bm[i]) {
      modes[i] = BOUNDED;
      sg[i] = (it.signs[i] > 0) - (it.signs[i] < 0);
    }
  }
}

// _solution
Solution solution(const Problem& lcp, const Item& it, bool solved, bool hit, int its) {
  Solution s;
  s.x = it.x;
  s.w = it.w;
  report(lcp, it, s.modes, s.signs);
  s.solved = solved;
  s.residual = it.res;
  s.warm_start_hit = hit;
  s.iterations = its;
  return s;
}

// _repair: one active-set correction; false if nothing changes.
bool repair(const Problem& lcp, const VectorXl& modes, const VectorXl& signs, const VectorXd& x, const VectorXd& w,
            VectorXl& m, VectorXl& s) {
  const Eigen::Index n = lcp.n();
  const double xs = amax(x);
  const double tx = CLASSIFY_TOL * xs;
  const double tw = CLASSIFY_TOL * py_max(lcp.bnorm, lcp.anorm * xs);
  VectorXl m0(n);
  for (Eigen::Index i = 0; i < n; ++i) m0[i] = modes[i] == TIED ? CLAMPING : modes[i];
  m = m0;
  s = signs;
  Mask cl(n);
  for (Eigen::Index i = 0; i < n; ++i) cl[i] = m[i] == CLAMPING;
  for (Eigen::Index i = 0; i < n; ++i)
    if (!lcp.fric[i] && cl[i] && x[i] < -tx) m[i] = SEPARATING;
  for (Eigen::Index i = 0; i < n; ++i)
    if (!lcp.fric[i] && m[i] == SEPARATING && w[i] < -tw) m[i] = CLAMPING;
  Mask over(n), under(n), fix(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double a = lcp.mu[i] * x[lcp.k[i]];
    over[i] = lcp.fric[i] && cl[i] && x[i] > a + tx;
    under[i] = lcp.fric[i] && cl[i] && x[i] < -a - tx;
    const bool wrong = lcp.fric[i] && m[i] == BOUNDED && ((s[i] > 0 && w[i] > tw) || (s[i] < 0 && w[i] < -tw));
    const bool idle = lcp.fric[i] && m[i] == SEPARATING && lcp.carry[i];
    fix[i] = wrong || idle;
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    if (over[i] || under[i]) m[i] = BOUNDED;
    if (over[i]) s[i] = 1;
    if (under[i]) s[i] = -1;
    if (fix[i]) {
      m[i] = CLAMPING;
      s[i] = 0;
    }
  }
  return !(m == m0 && s == signs);
}

// One column-pivoted QR solve (_qr_solve): Q_1 R_11^-T (Pi^T r)_{1..k}; false on non-finite.
bool qr_solve(const Eigen::ColPivHouseholderQR<MatrixXd>& qr, const VectorXd& r, Eigen::Index k, VectorXd& y) {
  const Eigen::Index n = r.size();
  const auto& perm = qr.colsPermutation().indices();
  VectorXd u(k);
  for (Eigen::Index i = 0; i < k; ++i) u[i] = r[perm[i]];
  qr.matrixQR().topLeftCorner(k, k).triangularView<Eigen::Upper>().transpose().solveInPlace(u);
  VectorXd t = VectorXd::Zero(qr.matrixQR().rows());
  t.head(k) = u;
  y = qr.householderQ().setLength(k) * t;
  (void)n;
  return all_finite(y);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// the problem
// ------------------------------------------------------------------------------------------

Problem::Problem(MatrixXd A_, VectorXd b_, VectorXl normal_of_, VectorXd mu_)
    : A(std::move(A_)), b(std::move(b_)), normal_of(std::move(normal_of_)), mu(std::move(mu_)) {
  using std::to_string;
  if (A.rows() != A.cols())
    throw std::invalid_argument("BoxedLCP: A must be a square (n, n) matrix, got shape (" + to_string(A.rows()) +
                                ", " + to_string(A.cols()) + ")");
  const Eigen::Index n = A.rows();
  if (b.size() != n) throw std::invalid_argument("BoxedLCP: b must have shape (" + to_string(n) + ",) to match A");
  if (mu.size() != n) throw std::invalid_argument("BoxedLCP: mu must have shape (" + to_string(n) + ",)");
  if (normal_of.size() != n)
    throw std::invalid_argument("BoxedLCP: normal_of must have shape (" + to_string(n) + ",)");
  if (!A.allFinite()) throw std::invalid_argument("BoxedLCP: A contains non-finite values (nan or inf)");
  if (!b.allFinite()) throw std::invalid_argument("BoxedLCP: b contains non-finite values (nan or inf)");
  if (!mu.allFinite()) throw std::invalid_argument("BoxedLCP: mu contains non-finite values (nan or inf)");
  std::vector<Eigen::Index> bad;
  for (Eigen::Index i = 0; i < n; ++i)
    if (normal_of[i] < -1 || normal_of[i] >= n) bad.push_back(i);
  if (!bad.empty())
    throw std::invalid_argument("BoxedLCP: normal_of must be -1 or a row index in [0, " + to_string(n) +
                                "); bad rows " + rows_str(bad));
  fric.assign(n, 0);
  carry.assign(n, 0);
  k.resize(n);
  hi_pad.resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    fric[i] = normal_of[i] >= 0;
    k[i] = fric[i] ? normal_of[i] : i;
  }
  for (Eigen::Index i = 0; i < n; ++i)
    if (fric[i] && fric[k[i]]) bad.push_back(i);
  if (!bad.empty())
    throw std::invalid_argument("BoxedLCP: friction rows must point at a normal row (normal_of == -1); bad rows " +
                                rows_str(bad));
  for (Eigen::Index i = 0; i < n; ++i)
    if (mu[i] < 0) bad.push_back(i);
  if (!bad.empty()) throw std::invalid_argument("BoxedLCP: mu must be >= 0; bad rows " + rows_str(bad));
  for (Eigen::Index i = 0; i < n; ++i)
    if (mu[i] > 0 && !fric[i]) bad.push_back(i);
  if (!bad.empty())
    throw std::invalid_argument("BoxedLCP: mu must be 0 on unilateral rows (normal_of == -1); bad rows " +
                                rows_str(bad));
  for (Eigen::Index i = 0; i < n; ++i) {
    carry[i] = mu[i] > 0 || !fric[i];
    hi_pad[i] = fric[i] ? 0.0 : INF;
  }
  set_values(A, b);
}

void Problem::set_values(const Eigen::Ref<const MatrixXd>& A_, const Eigen::Ref<const VectorXd>& b_) {
  const Eigen::Index n = b.size();
  if (A_.rows() != n || A_.cols() != n || b_.size() != n)
    throw std::invalid_argument("BoxedLCP.with_values: A and b do not match " + std::to_string(n) + " rows");
  if (A_.data() != A.data()) A = A_;
  if (b_.data() != b.data()) b = b_;
  // dlange("I", A): row sums accumulated column by column, then the largest (NaN wins)
  anorm = 0.0;
  bnorm = 0.0;
  if (n == 0) return;
  VectorXd work = VectorXd::Zero(n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < n; ++i) work[i] += std::abs(A(i, j));
  for (Eigen::Index i = 0; i < n; ++i)
    if (anorm < work[i] || std::isnan(work[i])) anorm = work[i];
  bnorm = amax(b);
}

// ------------------------------------------------------------------------------------------
// classification, masks, reduced system
// ------------------------------------------------------------------------------------------

void classify(const Problem& lcp, const VectorXd& x, const VectorXd& w, double tol, VectorXl& modes,
              VectorXl& signs) {
  const Eigen::Index n = lcp.n();
  if (x.size() != n || w.size() != n)
    throw std::invalid_argument("classify: x and w must have shape (" + std::to_string(n) + ",)");
  modes.setZero(n);
  signs.setZero(n);
  if (n == 0) return;
  const double xs = amax(x);
  const double tx = tol * xs;
  const double tw = tol * py_max(lcp.bnorm, lcp.anorm * xs);
  VectorXl nm(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const bool wneg = w[i] < -tw, wpos = w[i] > tw;
    nm[i] = (x[i] > tx || wneg) ? CLAMPING : (wpos ? SEPARATING : TIED);
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!lcp.fric[i]) {
      modes[i] = nm[i];
      continue;
    }
    const bool wneg = w[i] < -tw, wpos = w[i] > tw;
    const double a = lcp.mu[i] * x[lcp.k[i]];
    const bool active = nm[lcp.k[i]] != SEPARATING && lcp.carry[i];
    const bool up = active && wneg && x[i] >= a - tx;
    const bool dn = active && wpos && x[i] <= -a + tx && !up;
    modes[i] = (up || dn) ? BOUNDED : (active ? CLAMPING : SEPARATING);
    signs[i] = static_cast<std::int64_t>(up) - static_cast<std::int64_t>(dn);
  }
}

void masks(const Problem& lcp, const VectorXl& modes, const VectorXl& signs, Mask& act, Mask& bm) {
  const Eigen::Index n = modes.size();
  Mask cl(n);
  for (Eigen::Index i = 0; i < n; ++i) cl[i] = modes[i] == CLAMPING || modes[i] == TIED;
  act.assign(n, 0);
  bm.assign(n, 0);
  for (Eigen::Index i = 0; i < n; ++i) {
    const bool a = cl[lcp.k[i]] && lcp.carry[i];
    bm[i] = a && modes[i] == BOUNDED && signs[i] != 0;
    act[i] = a && cl[i];
  }
}

Reduced reduced(const Problem& lcp, const Mask& cm, const Mask& bm, const VectorXl& signs) {
  const Eigen::Index n = lcp.n();
  Reduced red;
  Eigen::Index nc = 0;
  for (Eigen::Index i = 0; i < n; ++i) nc += cm[i] ? 1 : 0;
  red.C.resize(nc);
  for (Eigen::Index i = 0, a = 0; i < n; ++i)
    if (cm[i]) red.C[a++] = i;
  for (Eigen::Index i = 0; i < n; ++i)
    if (bm[i]) red.bounded = true;
  if (!red.bounded) {
    red.K.resize(nc, nc);
    for (Eigen::Index a = 0; a < nc; ++a)
      for (Eigen::Index c = 0; c < nc; ++c) red.K(a, c) = lcp.A(red.C[a], red.C[c]);
    return red;
  }
  MatrixXd AC(nc, n);
  for (Eigen::Index a = 0; a < nc; ++a) AC.row(a) = lcp.A.row(red.C[a]);
  std::vector<Eigen::Index> pos(n, 0);
  red.P.setZero(n, nc);
  for (Eigen::Index a = 0; a < nc; ++a) {
    pos[red.C[a]] = a;
    red.P(red.C[a], a) = 1.0;
  }
  for (Eigen::Index i = 0; i < n; ++i)
    if (bm[i]) red.P(i, pos[lcp.k[i]]) = static_cast<double>((signs[i] > 0) - (signs[i] < 0)) * lcp.mu[i];
  red.K.noalias() = AC * red.P;
  return red;
}

// ------------------------------------------------------------------------------------------
// small dense solves (LAPACK's dgetrf/dgecon/dgetrs and dgeqp3 in the reference)
// ------------------------------------------------------------------------------------------

double rcond_1(const MatrixXd& lu, double anorm) {
  // dgecon("1") with dlacn2's estimate of |inv(A)|_1 (A = L U: the row permutation does not change the 1-norm).
  const Eigen::Index n = lu.rows();
  if (n == 0) return 1.0;
  if (std::isnan(anorm)) return anorm;
  if (anorm == 0.0) return 0.0;
  if (anorm == INF) return 0.0;
  auto inv = [&](VectorXd& x) {  // x <- inv(U) inv(L) x
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = j + 1; i < n; ++i) x[i] -= x[j] * lu(i, j);
    for (Eigen::Index j = n - 1; j >= 0; --j) {
      x[j] /= lu(j, j);
      for (Eigen::Index i = 0; i < j; ++i) x[i] -= x[j] * lu(i, j);
    }
  };
  auto inv_t = [&](VectorXd& x) {  // x <- inv(L^T) inv(U^T) x
    for (Eigen::Index j = 0; j < n; ++j) {
      double t = x[j];
      for (Eigen::Index i = 0; i < j; ++i) t -= lu(i, j) * x[i];
      x[j] = t / lu(j, j);
    }
    for (Eigen::Index j = n - 1; j >= 0; --j) {
      double t = x[j];
      for (Eigen::Index i = j + 1; i < n; ++i) t -= lu(i, j) * x[i];
      x[j] = t;
    }
  };
  auto asum = [&](const VectorXd& x) {
    double s = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) s += std::abs(x[i]);
    return s;
  };
  auto iamax = [&](const VectorXd& x) {
    Eigen::Index j = 0;
    double m = std::abs(x[0]);
    for (Eigen::Index i = 1; i < n; ++i)
      if (std::abs(x[i]) > m) {
        m = std::abs(x[i]);
        j = i;
      }
    return j;
  };
  auto sgn = [](double v) { return v >= 0.0 ? 1.0 : -1.0; };
  // dlacn2 (Higham's modification of Hager's method), reverse communication unrolled
  VectorXd x = VectorXd::Constant(n, 1.0 / static_cast<double>(n));
  std::vector<int> isgn(n);
  double est;
  inv(x);
  if (n == 1) {
    est = std::abs(x[0]);
  } else {
    est = asum(x);
    for (Eigen::Index i = 0; i < n; ++i) {
      x[i] = sgn(x[i]);
      isgn[i] = static_cast<int>(x[i]);
    }
    inv_t(x);
    Eigen::Index j = iamax(x);
    int iter = 2;
    while (true) {
      x.setZero();
      x[j] = 1.0;
      inv(x);
      const double estold = est;
      est = asum(x);
      bool repeated = true;
      for (Eigen::Index i = 0; i < n; ++i)
        if (static_cast<int>(sgn(x[i])) != isgn[i]) {
          repeated = false;
          break;
        }
      if (repeated || est <= estold) break;
      for (Eigen::Index i = 0; i < n; ++i) {
        x[i] = sgn(x[i]);
        isgn[i] = static_cast<int>(x[i]);
      }
      inv_t(x);
      const Eigen::Index jlast = j;
      j = iamax(x);
      if (x[jlast] != std::abs(x[j]) && iter < 5) {
        ++iter;
        continue;
      }
      break;
    }
    double altsgn = 1.0;
    for (Eigen::Index i = 0; i < n; ++i) {
      x[i] = altsgn * (1.0 + static_cast<double>(i) / static_cast<double>(n - 1));
      altsgn = -altsgn;
    }
    inv(x);
    const double temp = 2.0 * (asum(x) / static_cast<double>(3 * n));
    if (temp > est) est = temp;
  }
  // dgecon's triangular solves (dlatrs) rescale to avoid overflow; these do not, so an overflowing
  // estimate (|inv(A)|_1 beyond ~1e308, i.e. rcond ~0 for dgecon too) reads as 0.
  if (est != 0.0 && std::isfinite(est)) return (1.0 / est) / anorm;
  return 0.0;
}

VectorXd min_norm(const MatrixXd& K, const VectorXd& r) {
  Eigen::ColPivHouseholderQR<MatrixXd> qr(K.transpose());
  const auto& R = qr.matrixQR();
  const Eigen::Index nd = std::min(R.rows(), R.cols());
  VectorXd d(nd);
  for (Eigen::Index i = 0; i < nd; ++i) d[i] = std::abs(R(i, i));
  if (nd == 0 || !(d[0] > 0)) return VectorXd::Zero(r.size());
  Eigen::Index k = 0, k2 = 0;
  for (Eigen::Index i = 0; i < nd; ++i) {
    k += d[i] > RANK_RTOL * d[0];
    k2 += d[i] > NOISE_RTOL * d[0];
  }
  VectorXd y;
  bool have = qr_solve(qr, r, k, y);
  if (have && k2 > k) {
    // Directions between noise level and the cutoff were dropped: right only if the data does not use them.
    const double e = amax(VectorXd(K * y - r));
    if (!(e <= ROUNDING * (amax(r) + d[0] * amax(y)))) {
      VectorXd y2;
      if (qr_solve(qr, r, k2, y2) && amax(VectorXd(K * y2 - r)) < e) y = y2;
    }
  }
  if (have) return y;
  // the reference's lstsq fallback (an SVD with the same relative cutoff)
  Eigen::JacobiSVD<MatrixXd> svd(K, Eigen::ComputeThinU | Eigen::ComputeThinV);
  svd.setThreshold(RANK_RTOL);
  y = svd.solve(r);
  return all_finite(y) ? y : VectorXd::Zero(r.size());
}

VectorXd solve_small(const MatrixXd& K, const VectorXd& r) {
  Eigen::PartialPivLU<MatrixXd> lu(K);
  const MatrixXd& f = lu.matrixLU();
  if (!zero_pivot(f)) {  // dgetrf's info > 0: an exactly zero pivot
    double anorm1 = 0.0;  // dlange("1", K)
    for (Eigen::Index j = 0; j < K.cols(); ++j) {
      double s = 0.0;
      for (Eigen::Index i = 0; i < K.rows(); ++i) s += std::abs(K(i, j));
      if (anorm1 < s || std::isnan(s)) anorm1 = s;
    }
    const double rc = rcond_1(f, anorm1);
    if (rc > RCOND_LU) {
      VectorXd y = lu.solve(r);
      if (all_finite(y)) return y;
    }
  }
  return min_norm(K, r);
}

VectorXd solve_masks(const Problem& lcp, const Mask& cm, const Mask& bm, const VectorXl& signs, const VectorXd* x0) {
  const Eigen::Index n = lcp.n();
  VectorXd x = VectorXd::Zero(n);
  if (std::none_of(cm.begin(), cm.end(), [](char c) { return c != 0; })) return x;
  Reduced red = reduced(lcp, cm, bm, signs);
  const Eigen::Index nc = red.C.size();
  VectorXd r(nc);
  for (Eigen::Index a = 0; a < nc; ++a) r[a] = -lcp.b[red.C[a]];
  VectorXd xc;
  if (x0 == nullptr) {
    xc = solve_small(red.K, r);
  } else {
    VectorXd x0c(nc);
    for (Eigen::Index a = 0; a < nc; ++a) x0c[a] = (*x0)[red.C[a]];
    VectorXd rr = red.K * x0c;
    rr = r - rr;
    xc = x0c + solve_small(red.K, rr);
  }
  if (!red.bounded) {
    for (Eigen::Index a = 0; a < nc; ++a) x[red.C[a]] = xc[a];
    return x;
  }
  return red.P * xc;
}

VectorXd solve_active_set(const Problem& lcp, const VectorXl& modes, const VectorXl& signs) {
  if (modes.size() != lcp.n() || signs.size() != lcp.n())
    throw std::invalid_argument("solve_active_set: modes and signs must have shape (" + std::to_string(lcp.n()) +
                                ",)");
  Mask cm, bm;
  masks(lcp, modes, signs, cm, bm);
  return solve_masks(lcp, cm, bm, signs);
}

// ------------------------------------------------------------------------------------------
// Lemke on the Stewart-Trinkle reformulation
// ------------------------------------------------------------------------------------------

StewartTrinkle::StewartTrinkle(const Problem& lcp) {
  const Eigen::Index n = lcp.n();
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!lcp.fric[i]) nidx.push_back(i);
    if (lcp.fric[i] && lcp.mu[i] > 0) fidx.push_back(i);
  }
  c = static_cast<Eigen::Index>(nidx.size());
  f = static_cast<Eigen::Index>(fidx.size());
  std::vector<Eigen::Index> posn(n, -1);
  for (Eigen::Index a = 0; a < c; ++a) posn[nidx[a]] = a;
  kk.resize(f);
  for (Eigen::Index j = 0; j < f; ++j) kk[j] = posn[lcp.normal_of[fidx[j]]];
  double sa = 0.0;
  for (Eigen::Index i = 0; i < n; ++i) sa = np_max(sa, std::abs(lcp.A(i, i)));
  if (!(sa > 0)) {
    sa = 0.0;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) sa = np_max(sa, std::abs(lcp.A(i, j)));
    if (sa == 0.0) sa = 1.0;
  }
  const double sb = lcp.bnorm != 0.0 ? lcp.bnorm : 1.0;
  std::vector<Eigen::Index> S;
  std::vector<double> sg;
  for (auto i : nidx) S.push_back(i), sg.push_back(1.0);
  for (auto i : fidx) S.push_back(i), sg.push_back(1.0);
  for (auto i : fidx) S.push_back(i), sg.push_back(-1.0);
  N = c + 3 * f;
  const Eigen::Index u = c + 2 * f;
  M.setZero(N, N);
  const double isa = 1.0 / sa;
  for (Eigen::Index a = 0; a < u; ++a)
    for (Eigen::Index b2 = 0; b2 < u; ++b2) M(a, b2) = lcp.A(S[a], S[b2]) * (sg[a] * sg[b2]) * isa;
  for (Eigen::Index j = 0; j < f; ++j) {
    M(c + j, u + j) = 1.0;
    M(c + f + j, u + j) = 1.0;
    M(u + j, kk[j]) = lcp.mu[fidx[j]];
    M(u + j, c + j) = -1.0;
    M(u + j, c + f + j) = -1.0;
  }
  q.setZero(N);
  const double isb = 1.0 / sb;
  for (Eigen::Index a = 0; a < u; ++a) q[a] = sg[a] * lcp.b[S[a]] * isb;
  unscale = sb / sa;
}

VectorXd StewartTrinkle::to_x(const Problem& lcp, const VectorXd& z) const {
  VectorXd x = VectorXd::Zero(lcp.n());
  for (Eigen::Index a = 0; a < c; ++a) x[nidx[a]] = z[a];
  for (Eigen::Index j = 0; j < f; ++j) x[fidx[j]] = z[c + j] - z[c + f + j];
  return x * unscale;
}

void StewartTrinkle::basis_modes(const Problem& lcp, const Mask& zbasic, VectorXl& modes, VectorXl& signs) const {
  modes = VectorXl::Constant(lcp.n(), SEPARATING);
  signs.setZero(lcp.n());
  for (Eigen::Index a = 0; a < c; ++a) modes[nidx[a]] = zbasic[a] ? CLAMPING : SEPARATING;
  for (Eigen::Index j = 0; j < f; ++j) {
    const bool bp = zbasic[c + j], bmn = zbasic[c + f + j], lam = zbasic[c + 2 * f + j];
    const bool act = zbasic[kk[j]] && (bp || bmn);
    const bool up = act && lam && bp && !bmn;
    const bool dn = act && lam && bmn && !bp;
    modes[fidx[j]] = (up || dn) ? BOUNDED : (act ? CLAMPING : SEPARATING);
    signs[fidx[j]] = static_cast<std::int64_t>(up) - static_cast<std::int64_t>(dn);
  }
}

LemkeResult lemke(const MatrixXd& M, const VectorXd& q, int max_iter) {
  const Eigen::Index N = q.size();
  LemkeResult out;
  double qmin = INF;
  for (Eigen::Index i = 0; i < N; ++i) qmin = np_min(qmin, q[i]);
  if (N == 0 || qmin >= 0.0) {
    out.z = VectorXd::Zero(N);
    out.zbasic.assign(N, 0);
    out.ok = true;
    return out;
  }
  // tableau [B^-1 | -B^-1 M | -B^-1 e | B^-1 q]; columns: w (0..N-1), z (N..2N-1), z0, rhs
  const Eigen::Index Z0 = 2 * N, W = 2 * N + 2, RHS = 2 * N + 1;
  RowMat T = RowMat::Zero(N, W);
  for (Eigen::Index i = 0; i < N; ++i) {
    T(i, i) = 1.0;
    for (Eigen::Index j = 0; j < N; ++j) T(i, N + j) = -M(i, j);
    T(i, Z0) = -1.0;
    T(i, RHS) = q[i];
  }
  std::vector<Eigen::Index> basis(N);
  for (Eigen::Index i = 0; i < N; ++i) basis[i] = i;
  // first pivot: most negative q; among ties the largest index keeps rows lex-positive
  Eigen::Index r = 0;
  for (Eigen::Index i = 0; i < N; ++i)
    if (q[i] <= qmin + TIE_RTOL * std::abs(qmin)) r = i;
  const Eigen::Index z0row = r;
  Eigen::Index e = Z0;
  int it = 0;
  bool ok = false;
  VectorXd col(N), rhs(N);
  std::vector<Eigen::Index> ties;
  std::vector<double> V, rat;
  auto absmax = [&](const VectorXd& v) { return amax(v); };
  while (true) {
    col = T.col(e);
    const double inv = 1.0 / col[r];
    T.row(r) *= inv;
    col[r] = 0.0;
    for (Eigen::Index i = 0; i < N; ++i) {
      const double ci = col[i];
      for (Eigen::Index j = 0; j < W; ++j) T(i, j) -= ci * T(r, j);
    }
    T.col(e).setZero();
    T(r, e) = 1.0;
    const Eigen::Index leaving = basis[r];
    basis[r] = e;
    ++it;
    if (leaving == Z0) {
      ok = true;
      break;
    }
    rhs = T.col(RHS);
    e = leaving < N ? leaving + N : leaving - N;  // the complement enters next
    col = T.col(e);
    if (rhs[z0row] <= Z0_RTOL * py_max(1.0, absmax(rhs))) {
      // z0 is numerically zero: the current point solves the LCP; pivot z0 out on its own row when possible
      ok = true;
      if (std::abs(col[z0row]) > PIV_RTOL * py_max(1.0, absmax(col))) {
        r = z0row;
        continue;
      }
      break;
    }
    if (it >= max_iter) break;
    const double piv = PIV_RTOL * py_max(1.0, absmax(col));
    ties.clear();
    rat.clear();
    for (Eigen::Index i = 0; i < N; ++i)
      if (col[i] > piv) {
        ties.push_back(i);
        rat.push_back(rhs[i] / col[i]);
      }
    if (ties.empty()) break;  // ray termination
    double m = rat[0];
    for (double v : rat) m = np_min(m, v);
    {
      const double lim = m + TIE_RTOL * py_max(1.0, std::abs(m));
      size_t w = 0;
      for (size_t t = 0; t < ties.size(); ++t)
        if (rat[t] <= lim) ties[w++] = ties[t];
      ties.resize(w);
    }
    if (ties.empty()) break;  // NaN ratios (the reference would fail here); unreachable on finite data
    if (ties.size() > 1) {
      if (std::find(ties.begin(), ties.end(), z0row) != ties.end()) {
        ties.assign(1, z0row);
      } else {
        // lexicographic minimum of the rows of B^-1 divided by the pivot column
        size_t nt = ties.size();
        V.resize(nt * N);
        for (size_t t = 0; t < nt; ++t)
          for (Eigen::Index j = 0; j < N; ++j) V[t * N + j] = T(ties[t], j) / col[ties[t]];
        while (nt > 1) {
          Eigen::Index first = -1;
          for (Eigen::Index j = 0; j < N && first < 0; ++j) {
            double vmin = V[j];
            for (size_t t = 1; t < nt; ++t) vmin = np_min(vmin, V[t * N + j]);
            const double lim = vmin + TIE_RTOL * np_max(1.0, std::abs(vmin));
            for (size_t t = 0; t < nt; ++t)
              if (V[t * N + j] > lim) {
                first = j;
                break;
              }
          }
          if (first < 0) break;
          double vmin = V[first];
          for (size_t t = 1; t < nt; ++t) vmin = np_min(vmin, V[t * N + first]);
          const double lim = vmin + TIE_RTOL * np_max(1.0, std::abs(vmin));
          size_t w = 0;
          for (size_t t = 0; t < nt; ++t)
            if (!(V[t * N + first] > lim)) {
              ties[w] = ties[t];
              if (w != t)
                for (Eigen::Index j = 0; j < N; ++j) V[w * N + j] = V[t * N + j];
              ++w;
            }
          nt = w;
          ties.resize(nt);
        }
      }
    }
    r = ties[0];
  }
  VectorXd vals = VectorXd::Zero(2 * N + 1);
  Mask zb(2 * N + 1, 0);
  for (Eigen::Index i = 0; i < N; ++i) {
    vals[basis[i]] = np_max(T(i, RHS), 0.0);
    zb[basis[i]] = 1;
  }
  out.z = vals.segment(N, N);
  out.zbasic.assign(zb.begin() + N, zb.begin() + Z0);
  out.pivots = it;
  out.ok = ok;
  return out;
}

// ------------------------------------------------------------------------------------------
// driver
// ------------------------------------------------------------------------------------------

Solution solve(const Problem& lcp, const VectorXl* gm, const VectorXl* gs, double tol, int max_iter) {
  const Eigen::Index n = lcp.n();
  if (n == 0) return Solution{};
  Best best;
  Item item;

  // (1) warm start: exact re-solve on the previous active set
  if (gm != nullptr && gs != nullptr && gm->size() == n && gs->size() == n) {
    Mask cm, bm;
    masks(lcp, *gm, *gs, cm, bm);
    if (candidate(lcp, tol, best, cm, bm, *gs, solve_masks(lcp, cm, bm, *gs), item))
      return solution(lcp, item, true, true, 0);
  }

  // all rows separating: x = 0 solves it iff every normal row has b >= 0
  bool sep = true;
  for (Eigen::Index i = 0; i < n; ++i)
    if (!(lcp.b[i] >= 0 || lcp.fric[i])) sep = false;
  if (sep) {
    Mask no(n, 0);
    return solution(lcp, Item{VectorXd::Zero(n), lcp.b, 0.0, 0.0, no, no, VectorXl::Zero(n)}, true, false, 0);
  }

  // (2) Lemke on the Stewart-Trinkle LCP, (3) minimal-norm re-solve on its active set
  const StewartTrinkle st(lcp);
  if (max_iter < 0) max_iter = 50 + 20 * static_cast<int>(st.N);
  int iterations = 0;
  std::vector<std::pair<VectorXl, VectorXl>> tried;

  // attempt(m, s, x0): 0 = already tried (x is None), 1 = solved but rejected, 2 = accepted (in `item`)
  VectorXd x, w;
  auto attempt = [&](const VectorXl& m, const VectorXl& s, const VectorXd* x0) -> int {
    if (x0 == nullptr) {
      for (const auto& t : tried)
        if (t.first == m && t.second == s) return 0;
      tried.emplace_back(m, s);
    }
    Mask cm, bm;
    masks(lcp, m, s, cm, bm);
    x = solve_masks(lcp, cm, bm, s, x0);
    return candidate(lcp, tol, best, cm, bm, s, x, item, &w) ? 2 : 1;
  };

  const double deltas[4] = {0.0, REGULARISATION[0], REGULARISATION[1], REGULARISATION[2]};
  for (double delta : deltas) {
    LemkeResult lk;
    if (delta == 0.0) {
      lk = lemke(st.M, st.q, max_iter);
    } else {
      MatrixXd Md = st.M;
      for (Eigen::Index i = 0; i < st.N; ++i) Md(i, i) += delta;  // M + delta * I
      lk = lemke(Md, st.q, max_iter);
    }
    iterations += lk.pivots;
    if (!all_finite(lk.z)) continue;
    const VectorXd x_raw = st.to_x(lcp, lk.z);
    const VectorXd w_raw = velocity(lcp, x_raw);
    // (a) maximal clamping set (TIED rows clamp) -> minimal-norm impulses, with repairs
    VectorXl m, s, cls_m, cls_s;
    classify(lcp, x_raw, w_raw, CLASSIFY_TOL, m, s);
    cls_m = m;
    cls_s = s;
    for (int round = 0; round < REPAIR_ROUNDS + 1; ++round) {
      const int got = attempt(m, s, nullptr);
      if (got == 2) return solution(lcp, item, true, false, iterations);
      if (got == 0 || !all_finite(x)) break;
      VectorXl m2, s2;
      if (!repair(lcp, m, s, x, w, m2, s2)) break;
      m = std::move(m2);
      s = std::move(s2);
    }
    // (b) the pivoting basis itself
    VectorXl bm_, bs_;
    st.basis_modes(lcp, lk.zbasic, bm_, bs_);
    if (attempt(bm_, bs_, nullptr) == 2) return solution(lcp, item, true, false, iterations);
    // (c) TIED rows read as separating
    bool any_tied = false;
    for (Eigen::Index i = 0; i < n; ++i) any_tied |= cls_m[i] == TIED;
    if (any_tied) {
      VectorXl mt = cls_m;
      for (Eigen::Index i = 0; i < n; ++i)
        if (mt[i] == TIED) mt[i] = SEPARATING;
      if (attempt(mt, cls_s, nullptr) == 2) return solution(lcp, item, true, false, iterations);
    }
    // (d) the pivoting point refined on its basis, then as is
    if (attempt(bm_, bs_, &x_raw) == 2) return solution(lcp, item, true, false, iterations);
    Mask cm, bmask;
    masks(lcp, bm_, bs_, cm, bmask);
    if (candidate(lcp, tol, best, cm, bmask, bs_, x_raw, item)) return solution(lcp, item, true, false, iterations);
  }

  if (!best.has) {  // every candidate is finite by construction
    const VectorXd z = VectorXd::Zero(n);
    Eval e = evaluate(lcp, z, -1.0);
    Mask no(n, 0);
    best.item = Item{z, e.w, e.res, e.xs, no, no, VectorXl::Zero(n)};
  }
  return solution(lcp, best.item, false, false, iterations);
}

// ------------------------------------------------------------------------------------------
// linearization (LCPAdapter)
// ------------------------------------------------------------------------------------------

Reduced linearize(const Problem& lcp, const VectorXl& modes, const VectorXl& signs) {
  if (modes.size() != lcp.n() || signs.size() != lcp.n())
    throw std::invalid_argument("linearize: modes and signs must have shape (" + std::to_string(lcp.n()) + ",)");
  Mask cm, bm;
  masks(lcp, modes, signs, cm, bm);
  return reduced(lcp, cm, bm, signs);
}

std::optional<Reduced> reclassify(const Problem& lcp, const VectorXl& modes, const VectorXl& signs,
                                  const VectorXd& dl_dlam) {
  const Eigen::Index n = lcp.n();
  if (modes.size() != n || signs.size() != n || dl_dlam.size() != n)
    throw std::invalid_argument("reclassify: modes, signs and dl_dlam must have shape (" + std::to_string(n) + ",)");
  Mask cm, bm;
  masks(lcp, modes, signs, cm, bm);
  Mask flip(n, 0);
  bool any = false;
  for (Eigen::Index i = 0; i < n; ++i)
    if (lcp.normal_of[i] < 0 && (dl_dlam[i] > 0) != static_cast<bool>(cm[i])) flip[i] = any = true;
  if (!any) return std::nullopt;
  for (Eigen::Index i = 0; i < n; ++i)
    if (flip[i]) cm[i] = !cm[i];
  VectorXl s = signs;
  for (Eigen::Index i = 0; i < n; ++i) {
    const std::int64_t k = lcp.normal_of[i];
    if (k >= 0 && flip[k]) {  // their friction rows follow them
      cm[i] = cm[k];
      bm[i] = 0;
      s[i] = 0;
    }
  }
  return reduced(lcp, cm, bm, s);
}

}  // namespace lcp
}  // namespace contactraj

// ------------------------------------------------------------------------------------------
// Python bindings (thin: arrays in, arrays out; contact/lcp.py builds its objects from them)
// ------------------------------------------------------------------------------------------
// (only nanobind here, not common.hpp's Pinocchio: this file compiles in seconds; bind_lcp is declared there)
#include <nanobind/nanobind.h>
#include <nanobind/eigen/dense.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

namespace contactraj {
namespace nb = nanobind;
void bind_lcp(nb::module_& m);
namespace {
using lcp::VectorXl;
template <class T>
using In = nb::DRef<const T>;

lcp::Problem problem_of(In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu) {
  return lcp::Problem(Eigen::MatrixXd(A), Eigen::VectorXd(b), VectorXl(normal_of), Eigen::VectorXd(mu));
}

// Writes a reduced system into `buf` (row-major, one after the other: K (nc, nc), Fc (nc, n), then P (n, nc)
// when bounded) and its rows into `C`; returns (nc, bounded). The caller allocates (3 n^2, and n): numpy
// arrays made here would cost ~1 us each (nanobind hands them over through DLPack).
nb::tuple write_reduced(const lcp::Reduced& red, Eigen::Index n, nb::DRef<Eigen::VectorXd> buf, nb::DRef<VectorXl> C) {
  const Eigen::Index nc = red.C.size();
  if (buf.size() < 3 * n * n || C.size() < n)
    throw nb::value_error("lcp: the output buffers must hold 3 n^2 floats and n integers");
  double* out = buf.data();
  for (Eigen::Index a = 0; a < nc; ++a)
    for (Eigen::Index c = 0; c < nc; ++c) *out++ = red.K(a, c);
  std::fill(out, out + nc * n, 0.0);
  for (Eigen::Index a = 0; a < nc; ++a) out[a * n + red.C[a]] = 1.0;
  out += nc * n;
  if (red.bounded)
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index c = 0; c < nc; ++c) *out++ = red.P(i, c);
  C.head(nc) = red.C;
  return nb::make_tuple(nc, red.bounded);
}
}  // namespace

void bind_lcp(nb::module_& m) {
  m.def(
      "lcp_solve",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu,
         std::optional<VectorXl> guess_modes, std::optional<VectorXl> guess_signs, double tol, int max_iter,
         nb::DRef<RowMat> xw, nb::DRef<Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> ms) {
        const lcp::Problem p = problem_of(A, b, normal_of, mu);
        if (xw.rows() != 2 || xw.cols() != p.n() || ms.rows() != 2 || ms.cols() != p.n())
          throw nb::value_error("lcp_solve: the outputs must have shape (2, n)");
        const bool g = guess_modes && guess_signs;
        lcp::Solution s = lcp::solve(p, g ? &*guess_modes : nullptr, g ? &*guess_signs : nullptr, tol, max_iter);
        xw.row(0) = s.x.transpose();
        xw.row(1) = s.w.transpose();
        ms.row(0) = s.modes.transpose();
        ms.row(1) = s.signs.transpose();
        return nb::make_tuple(s.solved, s.residual, s.warm_start_hit, s.iterations);
      },
      nb::arg("A"), nb::arg("b"), nb::arg("normal_of"), nb::arg("mu"), nb::arg("guess_modes").none(),
      nb::arg("guess_signs").none(), nb::arg("tol"), nb::arg("max_iter"), nb::arg("xw"), nb::arg("ms"),
      "contact.lcp.solve_lcp: writes (x, w) into xw (2, n) and (modes, signs) into ms (2, n, int64); returns "
      "(solved, residual, warm_start_hit, iterations). max_iter < 0: 50 + 20 N; a guess whose size is not n is ignored");
  m.def(
      "lcp_linearize",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu, In<VectorXl> modes,
         In<VectorXl> signs, nb::DRef<Eigen::VectorXd> buf, nb::DRef<VectorXl> C) {
        const lcp::Problem p = problem_of(A, b, normal_of, mu);
        return write_reduced(lcp::linearize(p, VectorXl(modes), VectorXl(signs)), p.n(), buf, C);
      },
      "LCPAdapter.linearize: writes E = K, Fc, P into buf (3 n^2) and the unknowns into C (n); returns (nc, bounded)");
  m.def(
      "lcp_reclassify",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu, In<VectorXl> modes,
         In<VectorXl> signs, In<Eigen::VectorXd> dl_dlam, nb::DRef<Eigen::VectorXd> buf,
         nb::DRef<VectorXl> C) -> nb::object {
        const lcp::Problem p = problem_of(A, b, normal_of, mu);
        auto red = lcp::reclassify(p, VectorXl(modes), VectorXl(signs), Eigen::VectorXd(dl_dlam));
        if (!red) return nb::none();
        return write_reduced(*red, p.n(), buf, C);
      },
      "LCPAdapter.reclassify: as lcp_linearize, or None when nothing changes");
  // pieces, for the tests against the reference
  m.def(
      "lcp_norms",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu) {
        const lcp::Problem p = problem_of(A, b, normal_of, mu);
        return nb::make_tuple(p.anorm, p.bnorm);
      },
      "(|A|_inf, |b|_inf) as BoxedLCP computes them (and its validation)");
  m.def(
      "lcp_solve_active_set",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu, In<VectorXl> modes,
         In<VectorXl> signs) {
        return lcp::solve_active_set(problem_of(A, b, normal_of, mu), VectorXl(modes), VectorXl(signs));
      },
      "contact.lcp.solve_active_set");
  m.def(
      "lcp_classify",
      [](In<RowMat> A, In<Eigen::VectorXd> b, In<VectorXl> normal_of, In<Eigen::VectorXd> mu,
         In<Eigen::VectorXd> x, In<Eigen::VectorXd> w, double tol) {
        VectorXl modes, signs;
        lcp::classify(problem_of(A, b, normal_of, mu), Eigen::VectorXd(x), Eigen::VectorXd(w), tol, modes, signs);
        return nb::make_tuple(std::move(modes), std::move(signs));
      },
      "contact.lcp.classify");
  m.def(
      "lcp_solve_small", [](In<RowMat> K, In<Eigen::VectorXd> r) { return lcp::solve_small(K, r); },
      "contact.lcp._solve_small (LU when well conditioned, else minimal norm)");
  m.def(
      "lcp_min_norm", [](In<RowMat> K, In<Eigen::VectorXd> r) { return lcp::min_norm(K, r); },
      "contact.lcp._min_norm (column-pivoted QR of K^T)");
  m.def(
      "lcp_rcond",
      [](In<RowMat> K) {
        Eigen::MatrixXd Kc = K;
        Eigen::PartialPivLU<Eigen::MatrixXd> lu(Kc);
        double a = 0.0;
        for (Eigen::Index j = 0; j < Kc.cols(); ++j) a = std::max(a, Kc.col(j).cwiseAbs().sum());
        return lcp::rcond_1(lu.matrixLU(), a);
      },
      "LAPACK dgecon's 1-norm reciprocal condition estimate, on Eigen's LU");
  m.def(
      "lcp_lemke",
      [](In<RowMat> M, In<Eigen::VectorXd> q, int max_iter) {
        lcp::LemkeResult r = lcp::lemke(Eigen::MatrixXd(M), Eigen::VectorXd(q), max_iter);
        Eigen::Matrix<bool, Eigen::Dynamic, 1> zb(r.zbasic.size());
        for (size_t i = 0; i < r.zbasic.size(); ++i) zb[i] = r.zbasic[i];
        return nb::make_tuple(std::move(r.z), std::move(zb), r.pivots, r.ok);
      },
      "contact.lcp._lemke: (z, zbasic, pivots, ok)");
}
}  // namespace contactraj
