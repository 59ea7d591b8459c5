// The contact frame's tangent basis, shared by detection and the contact kinematics
// (the C++ twin of contact/_kernels.py's tangent_basis: same operations, same bits).
#pragma once
#include <cmath>

namespace contactraj {

struct TangentBasis {
  double t[3], s[3], e[3];  // tangents t, s = n x t, and the axis e least aligned with n
  double norm;              // |e x n|
};

// ``t = e x n / |e x n|`` with ``e`` the axis least aligned with unit ``n``, and ``s = n x t``.
inline TangentBasis tangent_basis(double n0, double n1, double n2) {
  TangentBasis b{};
  const double a0 = std::abs(n0), a1 = std::abs(n1), a2 = std::abs(n2);
  double e0 = 0.0, e1 = 0.0, e2 = 0.0;
  if (a0 <= a1 && a0 <= a2)
    e0 = 1.0;
  else if (a1 <= a2)
    e1 = 1.0;
  else
    e2 = 1.0;
  const double u0 = e1 * n2 - e2 * n1, u1 = e2 * n0 - e0 * n2, u2 = e0 * n1 - e1 * n0;
  const double un = std::sqrt(u0 * u0 + u1 * u1 + u2 * u2);
  const double t0 = u0 / un, t1 = u1 / un, t2 = u2 / un;
  b.t[0] = t0; b.t[1] = t1; b.t[2] = t2;
  b.s[0] = n1 * t2 - n2 * t1; b.s[1] = n2 * t0 - n0 * t2; b.s[2] = n0 * t1 - n1 * t0;
  b.e[0] = e0; b.e[1] = e1; b.e[2] = e2;
  b.norm = un;
  return b;
}

}  // namespace contactraj
