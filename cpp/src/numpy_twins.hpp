// Scalar helpers with Python's and numpy's semantics, shared by the translated solvers (lcp.cpp, ncp.cpp,
// relaxed.cpp) so that their comparisons and NaN handling follow the reference line by line.
#pragma once

#include <Eigen/Dense>

#include <cmath>
#include <limits>

namespace contactraj {
namespace np_twins {

// Python's builtin max(a, b): a unless b > a.
inline double py_max(double a, double b) { return b > a ? b : a; }

// np.abs(v).max() (NaN if any entry is NaN; v non-empty).
inline double amax(const Eigen::VectorXd& v) {
  double m = 0.0;
  for (Eigen::Index i = 0; i < v.size(); ++i) {
    const double a = std::abs(v[i]);
    if (std::isnan(a)) return std::numeric_limits<double>::quiet_NaN();
    if (a > m) m = a;
  }
  return m;
}

// np.all(np.isfinite(v)).
inline bool all_finite(const Eigen::VectorXd& v) {
  for (Eigen::Index i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

}  // namespace np_twins
}  // namespace contactraj
