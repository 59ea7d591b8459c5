// Contact kinematics and the implicit-derivative kernels (see kinematics.hpp), and their bindings.
#include "kinematics.hpp"
#include <nanobind/stl/optional.h>
#include <optional>

#include <Eigen/LU>
#include <Eigen/SVD>
#include <cmath>
#include <set>
#include <vector>
#include <stdexcept>
#include <string>

#include "basis.hpp"
#include "common.hpp"
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

namespace contactraj {
namespace {

inline void cross(double a0, double a1, double a2, double b0, double b1, double b2, double& x0, double& x1,
                  double& x2) {
  x0 = a1 * b2 - a2 * b1;
  x1 = a2 * b0 - a0 * b2;
  x2 = a0 * b1 - a1 * b0;
}

std::string shape_str(Eigen::Index r, Eigen::Index c) {
  return "(" + std::to_string(r) + ", " + std::to_string(c) + ")";
}

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string(fn) + ": " + what);
}
// The message is built only when the check fails (these run on every call).
#define expect(ok, fn, what) \
  do {                       \
    if (!(ok)) fail(fn, what); \
  } while (0)

void expect_shape(const char* fn, const char* name, Eigen::Index r, Eigen::Index c, Eigen::Index er,
                  Eigen::Index ec) {
  expect(r == er && c == ec, fn, std::string(name) + " has shape " + shape_str(r, c) + ", expected " +
                                     shape_str(er, ec));
}

// _kernels._body_jacobian: Jw with the columns of the dofs that do not support joint j zeroed.
template <class Out>
void body_jacobian(const Eigen::Ref<const Eigen::MatrixXd>& Jw, const CRowRef& support, int64_t j, Out&& out) {
  const Eigen::Index nv = Jw.cols();
  for (int r = 0; r < 6; ++r)
    for (Eigen::Index k = 0; k < nv; ++k) out(r, k) = Jw(r, k) * support(j, k);
}

// A (6, nv) block of joint Jacobian columns, copied column-major so that the 6-row sums below read
// contiguous memory (the sums themselves are the kernels', term by term in the same order).
using Mat6X = Eigen::Matrix<double, 6, Eigen::Dynamic>;

inline bool all_zero(const Mat6X& m) { return (m.array() == 0.0).all(); }

// _kernels._add_dJTw: out += sign * d(J6^T w)/dq at a fixed world wrench w = (f, m). Skipped when J6 is
// zero (a world body: every term is 0, the sum unchanged).
void add_dJTw(const Mat6X& J6, double f0, double f1, double f2, double m0, double m1, double m2, const CRowRef& mask,
              double sign, Eigen::Ref<RowMat> out, Mat6X& Pm) {
  if (all_zero(J6)) return;
  const Eigen::Index nv = J6.cols();
  // the columns of J6 with an entry (the body's supporting chain): every term of a zero column is 0, and
  // adding +-0 leaves out unchanged, so the sums below run over these only (the same bits)
  Eigen::Index cols[256];
  std::vector<Eigen::Index> cols_heap;
  Eigen::Index* nzc = cols;
  if (nv > 256) {
    cols_heap.resize(nv);
    nzc = cols_heap.data();
  }
  Eigen::Index n = 0;
  for (Eigen::Index i = 0; i < nv; ++i)
    if (!(J6.col(i).array() == 0.0).all()) nzc[n++] = i;
  for (Eigen::Index a = 0; a < n; ++a) {
    const Eigen::Index i = nzc[a];
    const double v0 = J6(0, i), v1 = J6(1, i), v2 = J6(2, i);
    const double w0 = J6(3, i), w1 = J6(4, i), w2 = J6(5, i);
    double a0, a1, a2, b0, b1, b2, c0, c1, c2;
    cross(w0, w1, w2, f0, f1, f2, a0, a1, a2);
    cross(w0, w1, w2, m0, m1, m2, b0, b1, b2);
    cross(v0, v1, v2, f0, f1, f2, c0, c1, c2);
    Pm(0, i) = a0; Pm(1, i) = a1; Pm(2, i) = a2;
    Pm(3, i) = b0 + c0; Pm(4, i) = b1 + c1; Pm(5, i) = b2 + c2;
  }
  for (Eigen::Index a = 0; a < n; ++a) {
    const Eigen::Index i = nzc[a];
    const double* p = Pm.col(i).data();
    for (Eigen::Index b = 0; b < n; ++b)
      if (const Eigen::Index k = nzc[b]; mask(i, k) != 0.0) {
        const double* j = J6.col(k).data();
        double s = 0.0;
        for (int r = 0; r < 6; ++r) s += p[r] * j[r];
        out(i, k) += sign * s;
      }
  }
}

// _kernels._dJv: out (6, nv) = d(J6 v)/dq at fixed v (zero when J6 is).
void dJv(const Mat6X& J6, const CVecRef& v, const CRowRef& mask, Mat6X& out) {
  const Eigen::Index nv = J6.cols();
  if (all_zero(J6)) {
    out.setZero();
    return;
  }
  for (Eigen::Index k = 0; k < nv; ++k) {
    double u[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (Eigen::Index i = 0; i < nv; ++i)
      if (mask(i, k) != 0.0 && v[i] != 0.0) {
        const double* j = J6.col(i).data();
        for (int rr = 0; rr < 6; ++rr) u[rr] += j[rr] * v[i];
      }
    const double sv0 = J6(0, k), sv1 = J6(1, k), sv2 = J6(2, k);
    const double sw0 = J6(3, k), sw1 = J6(4, k), sw2 = J6(5, k);
    double a0, a1, a2, b0, b1, b2, c0, c1, c2;
    cross(sw0, sw1, sw2, u[0], u[1], u[2], a0, a1, a2);
    cross(sv0, sv1, sv2, u[3], u[4], u[5], b0, b1, b2);
    cross(sw0, sw1, sw2, u[3], u[4], u[5], c0, c1, c2);
    out(0, k) = a0 + b0; out(1, k) = a1 + b1; out(2, k) = a2 + b2;
    out(3, k) = c0; out(4, k) = c1; out(5, k) = c2;
  }
}

}  // namespace

SupportMasks support_masks(const pinocchio::Model& model) {
  const int nv = model.nv;
  std::vector<int> joint_of(nv, 0);
  for (int j = 1; j < model.njoints; ++j) {
    const int iv = model.joints[j].idx_v(), jnv = model.joints[j].nv();
    for (int k = iv; k < iv + jnv; ++k) joint_of[k] = j;
  }
  SupportMasks s;
  s.support = RowMat::Zero(model.njoints, nv);
  for (int j = 1; j < model.njoints; ++j) {
    std::set<int> sup(model.supports[j].begin(), model.supports[j].end());
    for (int k = 0; k < nv; ++k) s.support(j, k) = sup.count(joint_of[k]) ? 1.0 : 0.0;
  }
  s.mask.resize(nv, nv);
  for (int i = 0; i < nv; ++i) s.mask.row(i) = s.support.row(joint_of[i]);
  return s;
}

ContactGeometry contact_geometry(const Eigen::Ref<const Eigen::MatrixXd>& Jw, const CRowRef& support,
                                 const CIdxRef& body_a, const CIdxRef& body_b, const CIdxRef& normal_body,
                                 const CIdxRef& point_body, const CRowRef& points, const CRowRef& normals,
                                 const CVecRef& radius, const CRowRef& axes, const CVecRef& gaps, const CRowRef& slides,
                                 bool planar) {
  ContactGeometry g;
  contact_geometry_into(g, Jw, support, body_a, body_b, normal_body, point_body, points, normals, radius, axes,
                        gaps, slides, planar);
  return g;
}

namespace {
// contact/_kernels.py centre_line: column k of the centre line's motion of two shapes' core points x_P and
// x_N = x_P - gap n (slide: their sliding unit axes a_P, a_N, zeros when fixed; a cylinder rim's point: its tangent
// times sqrt(R / rho), which the one-slide formulas are bilinear in; the two-slide system takes unit axes). With r = gap n,
// w = v_P(x_P) - v_N(x_N) and dr = w + s_P a_P - s_N a_N, a sliding point keeps r . a = 0 (both: a 2 x 2 system;
// parallel axes: P's alone). Out: dn = (I - n n^T) dr / gap and s_P a_P (the point body's core moves by v_P + s_P a_P).
template <class Row>
void centre_line(const RowMat& JP, const RowMat& JN, Eigen::Index k, double x0, double x1, double x2, double n0,
                 double n1, double n2, double gap, const Row& slide, double& d0, double& d1, double& d2, double& sl0,
                 double& sl1, double& sl2) {
  double q0, q1, q2, s0, s1, s2;
  cross(JP(3, k), JP(4, k), JP(5, k), x0, x1, x2, q0, q1, q2);
  cross(JN(3, k), JN(4, k), JN(5, k), x0 - gap * n0, x1 - gap * n1, x2 - gap * n2, s0, s1, s2);
  const double w0 = (JP(0, k) + q0) - (JN(0, k) + s0);
  const double w1 = (JP(1, k) + q1) - (JN(1, k) + s1);
  const double w2 = (JP(2, k) + q2) - (JN(2, k) + s2);
  const double ap0 = slide(0), ap1 = slide(1), ap2 = slide(2);
  const double an0 = slide(3), an1 = slide(4), an2 = slide(5);
  const bool slp = ap0 != 0.0 || ap1 != 0.0 || ap2 != 0.0, sln = an0 != 0.0 || an1 != 0.0 || an2 != 0.0;
  const double r0 = gap * n0, r1 = gap * n1, r2 = gap * n2;
  double bp = 0.0, bn = 0.0, sp = 0.0, sn = 0.0;
  if (slp) {
    double e0, e1, e2;
    cross(JP(3, k), JP(4, k), JP(5, k), ap0, ap1, ap2, e0, e1, e2);
    bp = -(w0 * ap0 + w1 * ap1 + w2 * ap2 + r0 * e0 + r1 * e1 + r2 * e2);
  }
  if (sln) {
    double e0, e1, e2;
    cross(JN(3, k), JN(4, k), JN(5, k), an0, an1, an2, e0, e1, e2);
    bn = -(w0 * an0 + w1 * an1 + w2 * an2 + r0 * e0 + r1 * e1 + r2 * e2);
  }
  if (slp && sln) {
    const double cc = ap0 * an0 + ap1 * an1 + ap2 * an2;
    if (1.0 - cc * cc > 1e-12) {  // the detector's test of crossing axes (round_cores)
      sn = (bn - cc * bp) / (cc * cc - 1.0);
      sp = bp + cc * sn;
    } else {  // parallel axes: sliding along them moves no normal
      sp = bp;
    }
  } else if (slp) {
    sp = bp;
  } else if (sln) {
    sn = -bn;
  }
  const double u0 = w0 + sp * ap0 - sn * an0, u1 = w1 + sp * ap1 - sn * an1, u2 = w2 + sp * ap2 - sn * an2;
  const double un = n0 * u0 + n1 * u1 + n2 * u2;
  d0 = (u0 - n0 * un) / gap; d1 = (u1 - n1 * un) / gap; d2 = (u2 - n2 * un) / gap;
  sl0 = sp * ap0; sl1 = sp * ap1; sl2 = sp * ap2;
}
}  // namespace

void contact_geometry_into(ContactGeometry& g, const Eigen::Ref<const Eigen::MatrixXd>& Jw, const CRowRef& support,
                           const CIdxRef& body_a, const CIdxRef& body_b, const CIdxRef& normal_body,
                           const CIdxRef& point_body, const CRowRef& points, const CRowRef& normals,
                           const CVecRef& radius, const CRowRef& axes, const CVecRef& gaps, const CRowRef& slides,
                           bool planar) {
  static const char* fn = "contact_geometry";
  const Eigen::Index nc = points.rows(), nv = Jw.cols();
  expect(Jw.rows() == 6, fn, "Jw has " + std::to_string(Jw.rows()) + " rows, expected 6 (data.J)");
  expect_shape(fn, "support", support.rows(), support.cols(), support.rows(), nv);
  expect(support.rows() >= 1, fn, "support has no rows (one per joint expected)");
  expect_shape(fn, "points", points.rows(), points.cols(), nc, 3);
  expect_shape(fn, "normals", normals.rows(), normals.cols(), nc, 3);
  expect_shape(fn, "axes", axes.rows(), axes.cols(), nc, 3);
  expect(radius.size() == nc, fn, "radius has " + std::to_string(radius.size()) + " entries, expected nc = " +
                                      std::to_string(nc));
  expect(gaps.size() == nc, fn, "gaps has " + std::to_string(gaps.size()) + " entries, expected nc = " +
                                    std::to_string(nc));
  expect_shape(fn, "slides", slides.rows(), slides.cols(), nc, 6);
  const CIdxRef* bodies[4] = {&body_a, &body_b, &normal_body, &point_body};
  const char* names[4] = {"body_a", "body_b", "normal_body", "point_body"};
  for (int b = 0; b < 4; ++b) {
    expect(bodies[b]->size() == nc, fn, std::string(names[b]) + " has " + std::to_string(bodies[b]->size()) +
                                            " entries, expected nc = " + std::to_string(nc));
    for (Eigen::Index c = 0; c < nc; ++c) {
      const int64_t j = (*bodies[b])[c];
      expect(j >= 0 && j < support.rows(), fn, std::string(names[b]) + "[" + std::to_string(c) + "] = " +
                                                   std::to_string(j) + " is not a joint index (0 .. " +
                                                   std::to_string(support.rows() - 1) + ")");
    }
  }
  const int r = planar ? 2 : 3;
  g.nc = static_cast<int>(nc);
  g.r = r;
  g.nv = static_cast<int>(nv);
  g.J.resize(nc * r, nv);
  g.D.resize(nc * 3, r);
  g.dD.resize(nc * r * 3, nv);
  g.dp.resize(nc * 3, nv);
  g.J6A.resize(nc * 6, nv);
  g.J6B.resize(nc * 6, nv);
  // scratch kept per thread (no allocation per call once sized)
  thread_local RowMat JN, JP, dn;
  thread_local std::vector<char> on;
  JN.resize(6, nv);
  JP.resize(6, nv);
  dn.resize(3, nv);
  on.resize(nv);
  double dDdn[3][3][3];
  for (Eigen::Index c = 0; c < nc; ++c) {
    auto J6A = g.J6A.middleRows(c * 6, 6);
    auto J6B = g.J6B.middleRows(c * 6, 6);
    body_jacobian(Jw, support, body_a[c], J6A);
    body_jacobian(Jw, support, body_b[c], J6B);
    body_jacobian(Jw, support, normal_body[c], JN);
    body_jacobian(Jw, support, point_body[c], JP);
    const double n0 = normals(c, 0), n1 = normals(c, 1), n2 = normals(c, 2);
    const double p0 = points(c, 0), p1 = points(c, 1), p2 = points(c, 2);
    const double ax0 = axes(c, 0), ax1 = axes(c, 1), ax2 = axes(c, 2);
    const bool cyl = ax0 != 0.0 || ax1 != 0.0 || ax2 != 0.0;
    double an = 0.0, ws = 1.0, ru0 = n0, ru1 = n1, ru2 = n2;
    if (cyl) {
      an = ax0 * n0 + ax1 * n1 + ax2 * n2;
      const double w0 = n0 - ax0 * an, w1 = n1 - ax1 * an, w2 = n2 - ax2 * an;
      ws = std::sqrt(w0 * w0 + w1 * w1 + w2 * w2);
      ru0 = w0 / ws; ru1 = w1 / ws; ru2 = w2 / ws;
    }
    // directions and their derivative with respect to n
    for (int a = 0; a < r; ++a)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) dDdn[a][i][j] = 0.0;
    auto D = [&](int i, int j) -> double& { return g.D(c * 3 + i, j); };
    D(0, 0) = n0; D(1, 0) = n1; D(2, 0) = n2;
    for (int i = 0; i < 3; ++i) dDdn[0][i][i] = 1.0;
    if (planar) {
      D(0, 1) = -n1; D(1, 1) = n0; D(2, 1) = 0.0;
      dDdn[1][0][1] = -1.0;  // t = z x n = (-n1, n0, 0)
      dDdn[1][1][0] = 1.0;
    } else {
      const TangentBasis b = tangent_basis(n0, n1, n2);
      const double t0 = b.t[0], t1 = b.t[1], t2 = b.t[2];
      const double e0 = b.e[0], e1 = b.e[1], e2 = b.e[2], un = b.norm;
      D(0, 1) = t0; D(1, 1) = t1; D(2, 1) = t2;
      D(0, 2) = b.s[0]; D(1, 2) = b.s[1]; D(2, 2) = b.s[2];
      // dt1/dn = (I - t1 t1^T) skew(e) / |u|
      const double Se[3][3] = {{0.0, -e2, e1}, {e2, 0.0, -e0}, {-e1, e0, 0.0}};
      const double tt[3] = {t0, t1, t2};
      double P[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) P[i][j] = (i == j ? 1.0 : 0.0) - tt[i] * tt[j];
      double dt1[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          double s = 0.0;
          for (int k = 0; k < 3; ++k) s += P[i][k] * Se[k][j];
          dt1[i][j] = s / un;
        }
      const double Sn[3][3] = {{0.0, -n2, n1}, {n2, 0.0, -n0}, {-n1, n0, 0.0}};
      const double St[3][3] = {{0.0, -t2, t1}, {t2, 0.0, -t0}, {-t1, t0, 0.0}};
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          double s = 0.0;
          for (int k = 0; k < 3; ++k) s += Sn[i][k] * dt1[k][j];
          dDdn[1][i][j] = dt1[i][j];
          dDdn[2][i][j] = s - St[i][j];
        }
    }
    // contact rows: D^T (Jv - skew(p) Jw) of A minus B
    const double rad = radius[c];
    // the columns none of the four bodies' supports reaches have zero J6A, J6B, JN, JP (body_jacobian): every
    // entry below is 0 there (written as +0; a legged robot's foot reaches 9 of 18 columns, a placement's F
    // columns 6 of 6 nF, ParameterPlan)
    for (Eigen::Index k = 0; k < nv; ++k)
      on[k] = support(body_a[c], k) != 0.0 || support(body_b[c], k) != 0.0 || support(normal_body[c], k) != 0.0 ||
               support(point_body[c], k) != 0.0;
    for (Eigen::Index k = 0; k < nv; ++k) {
      if (!on[k]) {
        for (int j = 0; j < r; ++j) g.J(c * r + j, k) = 0.0;
        dn(0, k) = 0.0; dn(1, k) = 0.0; dn(2, k) = 0.0;
        g.dp(c * 3 + 0, k) = 0.0; g.dp(c * 3 + 1, k) = 0.0; g.dp(c * 3 + 2, k) = 0.0;
        continue;
      }
      const double lv0 = J6A(0, k) - J6B(0, k), lv1 = J6A(1, k) - J6B(1, k), lv2 = J6A(2, k) - J6B(2, k);
      const double w0 = J6A(3, k) - J6B(3, k), w1 = J6A(4, k) - J6B(4, k), w2 = J6A(5, k) - J6B(5, k);
      // v(p) = v_o + w x p
      double x0, x1, x2;
      cross(w0, w1, w2, p0, p1, p2, x0, x1, x2);
      const double vp0 = lv0 + x0, vp1 = lv1 + x1, vp2 = lv2 + x2;
      for (int j = 0; j < r; ++j) g.J(c * r + j, k) = D(0, j) * vp0 + D(1, j) * vp1 + D(2, j) * vp2;
      // dn = w_N x n ; dp = v_P(centre) + radius dn
      double d0, d1, d2;
      const double gap = gaps[c];
      double sl0 = 0.0, sl1 = 0.0, sl2 = 0.0;
      if (gap != 0.0) {  // the cores' centre line: x_P = p - rad n
        centre_line(JP, JN, k, p0 - rad * n0, p1 - rad * n1, p2 - rad * n2, n0, n1, n2, gap, slides.row(c), d0, d1,
                    d2, sl0, sl1, sl2);
      } else {
        cross(JN(3, k), JN(4, k), JN(5, k), n0, n1, n2, d0, d1, d2);
      }
      dn(0, k) = d0; dn(1, k) = d1; dn(2, k) = d2;
      double c0, c1, c2, g0, g1, g2;
      if (cyl) {
        c0 = p0 - rad * ru0; c1 = p1 - rad * ru1; c2 = p2 - rad * ru2;
        double da0, da1, da2;
        cross(JP(3, k), JP(4, k), JP(5, k), ax0, ax1, ax2, da0, da1, da2);
        const double dan = da0 * n0 + da1 * n1 + da2 * n2 + ax0 * d0 + ax1 * d1 + ax2 * d2;
        const double dw0 = d0 - da0 * an - ax0 * dan;
        const double dw1 = d1 - da1 * an - ax1 * dan;
        const double dw2 = d2 - da2 * an - ax2 * dan;
        const double uw = ru0 * dw0 + ru1 * dw1 + ru2 * dw2;
        g0 = (dw0 - ru0 * uw) / ws; g1 = (dw1 - ru1 * uw) / ws; g2 = (dw2 - ru2 * uw) / ws;
      } else {
        c0 = p0 - rad * n0; c1 = p1 - rad * n1; c2 = p2 - rad * n2;
        g0 = d0; g1 = d1; g2 = d2;
      }
      double y0, y1, y2;
      cross(JP(3, k), JP(4, k), JP(5, k), c0, c1, c2, y0, y1, y2);
      g.dp(c * 3 + 0, k) = JP(0, k) + y0 + rad * g0 + sl0;
      g.dp(c * 3 + 1, k) = JP(1, k) + y1 + rad * g1 + sl1;
      g.dp(c * 3 + 2, k) = JP(2, k) + y2 + rad * g2 + sl2;
    }
    for (int j = 0; j < r; ++j)
      for (int i = 0; i < 3; ++i)
        for (Eigen::Index k = 0; k < nv; ++k)
          g.dD((c * r + j) * 3 + i, k) = dDdn[j][i][0] * dn(0, k) + dDdn[j][i][1] * dn(1, k) + dDdn[j][i][2] * dn(2, k);
  }
}

void check_geometry(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                    const CRowRef& dp, const CRowRef& points, const CRowRef& mask, const char* fn) {
  const Eigen::Index nc = points.rows(), nv = mask.rows(), r = D.cols();
  expect_shape(fn, "mask", mask.rows(), mask.cols(), nv, nv);
  expect_shape(fn, "points", points.rows(), points.cols(), nc, 3);
  expect_shape(fn, "J6A", J6A.rows(), J6A.cols(), nc * 6, nv);
  expect_shape(fn, "J6B", J6B.rows(), J6B.cols(), nc * 6, nv);
  expect_shape(fn, "D", D.rows(), D.cols(), nc * 3, r);
  expect(r == 2 || r == 3, fn, "D has " + std::to_string(r) + " direction columns, expected 2 or 3");
  expect_shape(fn, "dD", dD.rows(), dD.cols(), nc * r * 3, nv);
  expect_shape(fn, "dp", dp.rows(), dp.cols(), nc * 3, nv);
}

namespace {
// Contacts between the same two bodies have bitwise equal joint-Jacobian blocks (J6A, J6B rows c*6 ..):
// the index of the first contact of c's pair (a foot's corners share one group).
std::vector<Eigen::Index> pair_groups(const CRowRef& J6A, const CRowRef& J6B, Eigen::Index nc) {
  std::vector<Eigen::Index> first(nc);
  const Eigen::Index nv = J6A.cols();
  auto same = [&](const CRowRef& M, Eigen::Index a, Eigen::Index b) {
    for (int r = 0; r < 6; ++r)
      for (Eigen::Index k = 0; k < nv; ++k)
        if (M(a * 6 + r, k) != M(b * 6 + r, k)) return false;
    return true;
  };
  for (Eigen::Index c = 0; c < nc; ++c) {
    first[c] = c;
    for (Eigen::Index g = 0; g < c; ++g)
      if (first[g] == g && same(J6A, c, g) && same(J6B, c, g)) {
        first[c] = g;
        break;
      }
  }
  return first;
}
}  // namespace

void force_derivative(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                      const CRowRef& dp, const CRowRef& points, const CVecRef& lam, const CRowRef& mask,
                      Eigen::Ref<RowMat> out) {
  static const char* fn = "force_derivative";
  check_geometry(J6A, J6B, D, dD, dp, points, mask, fn);
  const Eigen::Index nc = points.rows(), nv = mask.rows(), r = D.cols();
  expect(lam.size() == nc * r, fn, "lam has " + std::to_string(lam.size()) + " entries, expected nc*r = " +
                                       std::to_string(nc * r));
  expect_shape(fn, "out", out.rows(), out.cols(), nv, nv);
  out.setZero();
  // Every term is linear in the contact's wrench (F, p x F) and its derivative dw: contacts between the
  // same two bodies (equal J6A, J6B) are summed first, and each body pair costs one O(nv^2) pass.
  const std::vector<Eigen::Index> group = pair_groups(J6A, J6B, nc);
  std::vector<double> wr(nc * 6, 0.0);
  std::vector<char> used(nc, 0);
  std::vector<Mat6X> dws(nc);
  for (Eigen::Index c = 0; c < nc; ++c) {
    bool nz = false;
    for (Eigen::Index j = 0; j < r; ++j)
      if (lam[c * r + j] != 0.0) nz = true;
    if (!nz) continue;
    const Eigen::Index g = group[c];
    if (!used[g]) {
      used[g] = 1;
      dws[g].setZero(6, nv);
    }
    const double p0 = points(c, 0), p1 = points(c, 1), p2 = points(c, 2);
    double F0 = 0.0, F1 = 0.0, F2 = 0.0;
    for (Eigen::Index j = 0; j < r; ++j) {
      const double lj = lam[c * r + j];
      F0 += D(c * 3 + 0, j) * lj;
      F1 += D(c * 3 + 1, j) * lj;
      F2 += D(c * 3 + 2, j) * lj;
    }
    double m0, m1, m2;
    cross(p0, p1, p2, F0, F1, F2, m0, m1, m2);
    double* w = &wr[g * 6];
    w[0] += F0; w[1] += F1; w[2] += F2; w[3] += m0; w[4] += m1; w[5] += m2;
    // the wrench moves: dw = (dF, dp x F + p x dF)
    Mat6X& dw = dws[g];
    for (Eigen::Index k = 0; k < nv; ++k) {
      // a column where dD and dp of this contact are zero adds +-0 to dw: skipped (the same bits)
      bool any = dp(c * 3 + 0, k) != 0.0 || dp(c * 3 + 1, k) != 0.0 || dp(c * 3 + 2, k) != 0.0;
      for (Eigen::Index a = 0; !any && a < 3 * r; ++a) any = dD(c * r * 3 + a, k) != 0.0;
      if (!any) continue;
      double g0 = 0.0, g1 = 0.0, g2 = 0.0;
      for (Eigen::Index j = 0; j < r; ++j) {
        const double lj = lam[c * r + j];
        g0 += lj * dD((c * r + j) * 3 + 0, k);
        g1 += lj * dD((c * r + j) * 3 + 1, k);
        g2 += lj * dD((c * r + j) * 3 + 2, k);
      }
      double h0, h1, h2, i0, i1, i2;
      cross(dp(c * 3 + 0, k), dp(c * 3 + 1, k), dp(c * 3 + 2, k), F0, F1, F2, h0, h1, h2);
      cross(p0, p1, p2, g0, g1, g2, i0, i1, i2);
      dw(0, k) += g0; dw(1, k) += g1; dw(2, k) += g2;
      dw(3, k) += h0 + i0; dw(4, k) += h1 + i1; dw(5, k) += h2 + i2;
    }
  }
  Mat6X A(6, nv), B(6, nv), Dm(6, nv), Pm(6, nv);
  std::vector<Eigen::Index> nzi, nzk;
  nzi.reserve(nv);
  nzk.reserve(nv);
  for (Eigen::Index g = 0; g < nc; ++g) {
    if (!used[g]) continue;
    const double* w = &wr[g * 6];
    A = J6A.middleRows(g * 6, 6);
    B = J6B.middleRows(g * 6, 6);
    add_dJTw(A, w[0], w[1], w[2], w[3], w[4], w[5], mask, 1.0, out, Pm);
    add_dJTw(B, w[0], w[1], w[2], w[3], w[4], w[5], mask, -1.0, out, Pm);
    Dm = A - B;
    const Mat6X& dw = dws[g];
    // only the nonzero columns of Dm (rows i) and dw (columns k): the other terms are 0 and leave out unchanged
    nzi.clear();
    nzk.clear();
    for (Eigen::Index i = 0; i < nv; ++i) {
      if (!(Dm.col(i).array() == 0.0).all()) nzi.push_back(i);
      if (!(dw.col(i).array() == 0.0).all()) nzk.push_back(i);
    }
    for (const Eigen::Index i : nzi) {
      const double* a = Dm.col(i).data();
      for (const Eigen::Index k : nzk) {
        const double* wk = dw.col(k).data();
        double s = 0.0;
        for (int rr = 0; rr < 6; ++rr) s += a[rr] * wk[rr];
        out(i, k) += s;
      }
    }
  }
}

void velocity_derivative(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                         const CRowRef& dp, const CRowRef& points, const CVecRef& v, const CRowRef& mask,
                         Eigen::Ref<RowMat> out) {
  static const char* fn = "velocity_derivative";
  check_geometry(J6A, J6B, D, dD, dp, points, mask, fn);
  const Eigen::Index nc = points.rows(), nv = mask.rows(), r = D.cols();
  expect(v.size() == nv, fn, "v has " + std::to_string(v.size()) + " entries, expected nv = " + std::to_string(nv));
  expect_shape(fn, "out", out.rows(), out.cols(), nc * r, nv);
  // d(J6 v)/dq of the two bodies (and the relative twist V) depend on the body pair only: computed once
  // per pair (the same values, reused), as for force_derivative.
  const std::vector<Eigen::Index> group = pair_groups(J6A, J6B, nc);
  Mat6X A(6, nv), B(6, nv), Dm(6, nv), dA(6, nv), dB(6, nv), dR(6, nv);
  std::vector<char> live(nv), chain(nv);
  double V[6];
  for (Eigen::Index c = 0; c < nc; ++c) {
    if (c == 0 || group[c] != group[c - 1]) {  // a new pair, or back to an earlier one
      const Eigen::Index g = group[c];
      A = J6A.middleRows(g * 6, 6);
      B = J6B.middleRows(g * 6, 6);
      dJv(A, v, mask, dA);
      dJv(B, v, mask, dB);
      dR = dA - dB;
      Dm = A - B;
      for (Eigen::Index k = 0; k < nv; ++k)
        chain[k] = !(A.col(k).array() == 0.0).all() || !(B.col(k).array() == 0.0).all() ||
                   !(dR.col(k).array() == 0.0).all();
      for (int rr = 0; rr < 6; ++rr) V[rr] = 0.0;
      for (int rr = 0; rr < 6; ++rr)
        for (Eigen::Index i = 0; i < nv; ++i) V[rr] += Dm(rr, i) * v[i];
    }
    // the columns where some factor of the sums below has an entry (the bodies' supporting chains)
    for (Eigen::Index k = 0; k < nv; ++k) {
      bool any = chain[k] != 0;
      for (Eigen::Index a = 0; !any && a < 3; ++a) any = dp(c * 3 + a, k) != 0.0;
      for (Eigen::Index a = 0; !any && a < 3 * r; ++a) any = dD(c * r * 3 + a, k) != 0.0;
      live[k] = any;
    }
    const double p0 = points(c, 0), p1 = points(c, 1), p2 = points(c, 2);
    double x0, x1, x2;
    cross(V[3], V[4], V[5], p0, p1, p2, x0, x1, x2);
    const double vr0 = V[0] + x0, vr1 = V[1] + x1, vr2 = V[2] + x2;
    for (Eigen::Index j = 0; j < r; ++j) {
      const double d0 = D(c * 3 + 0, j), d1 = D(c * 3 + 1, j), d2 = D(c * 3 + 2, j);
      double pd0, pd1, pd2, q0, q1, q2;
      cross(p0, p1, p2, d0, d1, d2, pd0, pd1, pd2);
      cross(d0, d1, d2, V[3], V[4], V[5], q0, q1, q2);
      const Eigen::Index row = (c * r + j) * 3;
      for (Eigen::Index k = 0; k < nv; ++k) {
        if (!live[k]) {  // dR, dD and dp all zero in this column: a zero entry
          out(c * r + j, k) = 0.0;
          continue;
        }
        double s = (d0 * dR(0, k) + d1 * dR(1, k) + d2 * dR(2, k) + pd0 * dR(3, k) + pd1 * dR(4, k) + pd2 * dR(5, k));
        s += vr0 * dD(row, k) + vr1 * dD(row + 1, k) + vr2 * dD(row + 2, k);
        s += q0 * dp(c * 3 + 0, k) + q1 * dp(c * 3 + 1, k) + q2 * dp(c * 3 + 2, k);
        out(c * r + j, k) = s;
      }
    }
  }
}

RowMat fixed_impulse_velocity_derivative(const CRowRef& J, const CRowRef& G, const CIdxRef& rows,
                                         const CVecRef& slope, const CRowRef& dJv) {
  static const char* fn = "fixed_impulse_velocity_derivative";
  const Eigen::Index m = J.rows(), nv = J.cols();
  expect(G.rows() == nv, fn, "G has " + std::to_string(G.rows()) + " rows, expected nv = " + std::to_string(nv) +
                                 " (J's columns)");
  expect(G.cols() >= nv, fn, "G has " + std::to_string(G.cols()) + " columns, expected at least nv = " +
                                 std::to_string(nv) + " (the q-columns first)");
  expect(slope.size() == rows.size(), fn, "slope has " + std::to_string(slope.size()) + " entries, rows " +
                                              std::to_string(rows.size()));
  expect(dJv.rows() <= m && (dJv.rows() == 0 || dJv.cols() == nv), fn,
         "dJv has shape " + shape_str(dJv.rows(), dJv.cols()) + ", expected (k <= " + std::to_string(m) + ", " +
             std::to_string(nv) + ")");
  for (Eigen::Index a = 0; a < rows.size(); ++a)
    expect(rows[a] >= 0 && rows[a] < m, fn, "rows[" + std::to_string(a) + "] = " + std::to_string(rows[a]) +
                                                " is not a row of J (0 .. " + std::to_string(m - 1) + ")");
  RowMat dc = J * G;
  for (Eigen::Index a = 0; a < rows.size(); ++a) {
    const Eigen::Index i = rows[a];
    for (Eigen::Index k = 0; k < nv; ++k) dc(i, k) += slope[a] * J(i, k);
  }
  for (Eigen::Index i = 0; i < dJv.rows(); ++i)
    for (Eigen::Index k = 0; k < nv; ++k) dc(i, k) += dJv(i, k);
  return dc;
}

namespace {
void check_reduced(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc, const CRowRef& dphi,
                   const char* fn) {
  const Eigen::Index k = E.rows(), m = Fc.cols();
  expect(Fc.rows() == k, fn, "Fc has " + std::to_string(Fc.rows()) + " rows, expected E's " + std::to_string(k));
  expect(dc.rows() == m, fn, "dc has " + std::to_string(dc.rows()) + " rows, expected Fc's columns m = " +
                                 std::to_string(m));
  if (Fphi.rows()) {
    expect_shape(fn, "Fphi", Fphi.rows(), Fphi.cols(), k, m);
    expect_shape(fn, "dphi", dphi.rows(), dphi.cols(), m, dc.cols());
  }
}
}  // namespace

RowMat solve_reduced(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                     const CRowRef& dphi, bool regular, bool symmetric) {
  check_reduced(E, Fc, Fphi, dc, dphi, "solve_reduced");
  RowMat rhs = Fc * dc;
  if (Fphi.rows()) rhs += Fphi * dphi;
  rhs = -rhs;
  if (regular) return solve(E, rhs);
  if (symmetric && E.rows() == E.cols()) {
    RowMat X(E.rows(), rhs.cols());
    sym_lstsq(E, rhs, RANK_RTOL, X);
    return X;
  }
  return lstsq(E, rhs, RANK_RTOL);
}

namespace {
void check_mapping(const CRowRef& E, const CRowRef& Fc, const CRowRef& P, const CIdxRef& unknowns, const char* fn) {
  const Eigen::Index z = E.cols(), m = Fc.cols();
  if (P.cols()) {
    expect_shape(fn, "P", P.rows(), P.cols(), m, z);
  } else {
    expect(unknowns.size() == z, fn, "unknowns has " + std::to_string(unknowns.size()) +
                                         " entries, expected E's columns z = " + std::to_string(z));
    for (Eigen::Index a = 0; a < z; ++a)
      expect(unknowns[a] >= 0 && unknowns[a] < m, fn, "unknowns[" + std::to_string(a) + "] = " +
                                                          std::to_string(unknowns[a]) + " is not a row (0 .. " +
                                                          std::to_string(m - 1) + ")");
  }
}
}  // namespace

RowMat implicit_velocity(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                         const CRowRef& dphi, bool regular, const CRowRef& P, const CIdxRef& unknowns,
                         const CRowRef& MJt, const CRowRef& G, bool symmetric) {
  static const char* fn = "implicit_velocity";
  check_mapping(E, Fc, P, unknowns, fn);
  expect_shape(fn, "MJt", MJt.rows(), MJt.cols(), G.rows(), Fc.cols());
  expect_shape(fn, "G", G.rows(), G.cols(), MJt.rows(), dc.cols());
  const RowMat dz = solve_reduced(E, Fc, Fphi, dc, dphi, regular, symmetric);
  RowMat W;
  if (P.cols()) {
    W = MJt * P;
  } else {
    W.resize(MJt.rows(), unknowns.size());
    for (Eigen::Index a = 0; a < unknowns.size(); ++a) W.col(a) = MJt.col(unknowns[a]);
  }
  RowMat out = G;
  out.noalias() += W * dz;
  return out;
}

RowMat lambda_jacobian(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                       const CRowRef& dphi, bool regular, const CRowRef& P, const CIdxRef& unknowns,
                       bool symmetric) {
  static const char* fn = "lambda_jacobian";
  check_mapping(E, Fc, P, unknowns, fn);
  RowMat out = RowMat::Zero(Fc.cols(), dc.cols());
  if (E.rows() == 0) return out;
  const RowMat dz = solve_reduced(E, Fc, Fphi, dc, dphi, regular, symmetric);
  if (P.cols()) return P * dz;
  for (Eigen::Index a = 0; a < unknowns.size(); ++a) out.row(unknowns[a]) = dz.row(a);
  return out;
}

Correction position_correction(const CRowRef& J, const CRowRef& MJt, const CIdxRef& rows, const CVecRef& phi_deep,
                               double erp, double slop) {
  static const char* fn = "position_correction";
  const Eigen::Index m = J.rows(), nv = J.cols(), k = rows.size();
  expect_shape(fn, "MJt", MJt.rows(), MJt.cols(), nv, m);
  expect(phi_deep.size() == k, fn, "phi_deep has " + std::to_string(phi_deep.size()) + " entries, rows " +
                                       std::to_string(k));
  for (Eigen::Index a = 0; a < k; ++a)
    expect(rows[a] >= 0 && rows[a] < m, fn, "rows[" + std::to_string(a) + "] = " + std::to_string(rows[a]) +
                                                " is not a row of J (0 .. " + std::to_string(m - 1) + ")");
  Correction c;
  const Eigen::VectorXd e_all = erp * (-phi_deep.array() - slop).matrix();
  c.keep.resize(k);
  for (Eigen::Index a = 0; a < k; ++a) c.keep[a] = a;
  for (;;) {
    const Eigen::Index n = c.keep.size();
    c.W.resize(nv, n);
    RowMat Jd(n, nv);
    Eigen::VectorXd e(n);
    for (Eigen::Index a = 0; a < n; ++a) {
      c.W.col(a) = MJt.col(rows[c.keep[a]]);
      Jd.row(a) = J.row(rows[c.keep[a]]);
      e[a] = e_all[c.keep[a]];
    }
    c.A = Jd * c.W;
    c.lam = lstsq(c.A, Eigen::Map<const RowMat>(e.data(), n, 1), RANK_RTOL);
    if (n == 0) break;
    Eigen::Index worst = 0;
    for (Eigen::Index a = 1; a < n; ++a)
      if (c.lam[a] < c.lam[worst]) worst = a;
    if (!(c.lam[worst] < -CORRECTION_PULL * c.lam.cwiseAbs().maxCoeff())) break;
    IdxVec next(n - 1);
    for (Eigen::Index a = 0, b = 0; a < n; ++a)
      if (a != worst) next[b++] = c.keep[a];
    c.keep = next;
  }
  c.dq = c.W * c.lam;
  return c;
}

RowMat correction_jacobian(const CRowRef& A, const CRowRef& W, const CRowRef& Jd, const CRowRef& K, const CRowRef& D,
                           double erp) {
  static const char* fn = "correction_jacobian";
  const Eigen::Index k = Jd.rows(), nv = Jd.cols();
  expect_shape(fn, "A", A.rows(), A.cols(), k, k);
  expect_shape(fn, "W", W.rows(), W.cols(), nv, k);
  expect_shape(fn, "K", K.rows(), K.cols(), k, nv);
  expect_shape(fn, "D", D.rows(), D.cols(), nv, nv);
  RowMat rhs = -erp * Jd;
  rhs -= K;
  rhs -= Jd * D;
  const RowMat dlam = lstsq(A, rhs, RANK_RTOL);
  RowMat out = D;
  out.noalias() += W * dlam;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Bindings: numpy arrays in (any C-contiguous float64/int64 array; others are converted), numpy
// arrays out, the 3-D/4-D ones with the Python code's shapes (views of the stacked matrices).
namespace {
using ArrD = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using ArrI = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Map = Eigen::Map<const RowMat>;
using IMap = Eigen::Map<const IdxVec>;

// A C-order array of shape (d0, ..., dn) as the row-major matrix (d0*...*d(n-1), dn); 1-D as a column;
// None (when allowed) as (0, 0). Checks the number of dimensions and the given sizes (-1: any).
Map rows_of(const ArrD& a, const char* fn, const char* name, std::initializer_list<int64_t> shape) {
  if (!a.is_valid()) return Map(nullptr, 0, 0);
  const size_t nd = shape.size();
  bool ok = a.ndim() == nd;
  size_t i = 0;
  for (int64_t s : shape) {
    if (ok && s >= 0 && static_cast<int64_t>(a.shape(i)) != s) ok = false;
    ++i;
  }
  if (!ok) {
    std::string want = "(";
    i = 0;
    for (int64_t s : shape) want += (i++ ? ", " : "") + (s < 0 ? std::string("*") : std::to_string(s));
    want += nd == 1 ? ",)" : ")";
    std::string got = "(";
    for (size_t k = 0; k < a.ndim(); ++k) got += (k ? ", " : "") + std::to_string(a.shape(k));
    got += a.ndim() == 1 ? ",)" : ")";
    throw std::invalid_argument(std::string(fn) + ": " + name + " has shape " + got + ", expected " + want);
  }
  if (nd == 1) return Map(a.data(), static_cast<Eigen::Index>(a.shape(0)), 1);
  int64_t lead = 1;
  for (size_t k = 0; k + 1 < nd; ++k) lead *= static_cast<int64_t>(a.shape(k));
  return Map(a.data(), lead, static_cast<Eigen::Index>(a.shape(nd - 1)));
}

IMap idx_of(const ArrI& a) { return IMap(a.is_valid() ? a.data() : nullptr, a.is_valid() ? a.shape(0) : 0); }

CVecRef vec(const Map& m) { return CVecRef(Eigen::Map<const Eigen::VectorXd>(m.data(), m.rows() * m.cols())); }
}  // namespace

void bind_kinematics(nb::module_& m) {
  m.def(
      "support_masks",
      [](nb::handle model) {
        SupportMasks s = support_masks(model_of(model));
        const size_t nj = s.support.rows(), nv = s.support.cols();
        return nb::make_tuple(to_numpy(std::move(s.mask), {nv, nv}), to_numpy(std::move(s.support), {nj, nv}));
      },
      nb::arg("model"), "(mask, support) of contact/kinematics.py support_masks");
  m.def(
      "contact_geometry",
      [](nb::handle data, const ArrD& support, const ArrI& body_a, const ArrI& body_b, const ArrI& normal_body,
         const ArrI& point_body, const ArrD& points, const ArrD& normals, const ArrD& radius, const ArrD& axes,
         bool planar, std::optional<ArrD> gaps, std::optional<ArrD> slides) {
        static const char* fn = "contact_geometry";
        const auto& Jw = data_of(data).J;
        Eigen::VectorXd none;  // zeros only where the caller gives none (ContactKinematics always does)
        RowMat none6;
        if (!gaps) none = Eigen::VectorXd::Zero(radius.shape(0));
        if (!slides) none6 = RowMat::Zero(radius.shape(0), 6);
        ContactGeometry g = contact_geometry(
            Jw, rows_of(support, fn, "support", {-1, -1}), idx_of(body_a), idx_of(body_b), idx_of(normal_body),
            idx_of(point_body), rows_of(points, fn, "points", {-1, 3}), rows_of(normals, fn, "normals", {-1, 3}),
            vec(rows_of(radius, fn, "radius", {-1})), rows_of(axes, fn, "axes", {-1, 3}),
            gaps ? vec(rows_of(*gaps, fn, "gaps", {-1})) : CVecRef(none),
            slides ? rows_of(*slides, fn, "slides", {-1, 6}) : CRowRef(none6), planar);
        const size_t nc = g.nc, r = g.r, nv = g.nv;
        return nb::make_tuple(to_numpy(std::move(g.J), {nc * r, nv}), to_numpy(std::move(g.D), {nc, 3, r}),
                              to_numpy(std::move(g.dD), {nc, r, 3, nv}), to_numpy(std::move(g.dp), {nc, 3, nv}),
                              to_numpy(std::move(g.J6A), {nc, 6, nv}), to_numpy(std::move(g.J6B), {nc, 6, nv}));
      },
      nb::arg("data"), nb::arg("support"), nb::arg("body_a"), nb::arg("body_b"), nb::arg("normal_body"),
      nb::arg("point_body"), nb::arg("points"), nb::arg("normals"), nb::arg("radius"), nb::arg("axes"),
      nb::arg("planar"), nb::arg("gaps") = nb::none(), nb::arg("slides") = nb::none(),
      "(J, D, dD, dp, J6A, J6B) of contact/_kernels.py contact_geometry, the joint Jacobians read from "
      "data.J (computeJointJacobians first); gaps (nc,), slides (nc, 6): Contacts.gap, .slide (None: zeros)");
  m.def(
      "force_derivative",
      [](const ArrD& J6A, const ArrD& J6B, const ArrD& D, const ArrD& dD, const ArrD& dp, const ArrD& points,
         const ArrD& lam, const ArrD& mask) {
        static const char* fn = "force_derivative";
        const Map M = rows_of(mask, fn, "mask", {-1, -1});
        RowMat out(M.rows(), M.rows());
        force_derivative(rows_of(J6A, fn, "J6A", {-1, 6, -1}), rows_of(J6B, fn, "J6B", {-1, 6, -1}),
                         rows_of(D, fn, "D", {-1, 3, -1}), rows_of(dD, fn, "dD", {-1, -1, 3, -1}),
                         rows_of(dp, fn, "dp", {-1, 3, -1}), rows_of(points, fn, "points", {-1, 3}),
                         vec(rows_of(lam, fn, "lam", {-1})), M, out);
        const size_t nv = out.rows();
        return to_numpy(std::move(out), {nv, nv});
      },
      nb::arg("J6A"), nb::arg("J6B"), nb::arg("D"), nb::arg("dD"), nb::arg("dp"), nb::arg("points"), nb::arg("lam"),
      nb::arg("mask"), "d(J(q)^T lam)/dq (nv, nv): contact/_kernels.py force_derivative");
  m.def(
      "velocity_derivative",
      [](const ArrD& J6A, const ArrD& J6B, const ArrD& D, const ArrD& dD, const ArrD& dp, const ArrD& points,
         const ArrD& v, const ArrD& mask) {
        static const char* fn = "velocity_derivative";
        const Map M = rows_of(mask, fn, "mask", {-1, -1});
        const Map Dm = rows_of(D, fn, "D", {-1, 3, -1});
        const Map P = rows_of(points, fn, "points", {-1, 3});
        RowMat out(P.rows() * Dm.cols(), M.rows());
        velocity_derivative(rows_of(J6A, fn, "J6A", {-1, 6, -1}), rows_of(J6B, fn, "J6B", {-1, 6, -1}), Dm,
                            rows_of(dD, fn, "dD", {-1, -1, 3, -1}), rows_of(dp, fn, "dp", {-1, 3, -1}), P,
                            vec(rows_of(v, fn, "v", {-1})), M, out);
        const size_t a = out.rows(), b = out.cols();
        return to_numpy(std::move(out), {a, b});
      },
      nb::arg("J6A"), nb::arg("J6B"), nb::arg("D"), nb::arg("dD"), nb::arg("dp"), nb::arg("points"), nb::arg("v"),
      nb::arg("mask"), "d(J(q) v)/dq (nc*r, nv): contact/_kernels.py velocity_derivative");
  m.def(
      "fixed_impulse_velocity_derivative",
      [](const ArrD& J, const ArrD& G, const ArrI& rows, const ArrD& slope, const ArrD& dJv) {
        static const char* fn = "fixed_impulse_velocity_derivative";
        RowMat dc = fixed_impulse_velocity_derivative(rows_of(J, fn, "J", {-1, -1}), rows_of(G, fn, "G", {-1, -1}),
                                                      idx_of(rows), vec(rows_of(slope, fn, "slope", {-1})),
                                                      rows_of(dJv, fn, "dJv", {-1, -1}));
        const size_t a = dc.rows(), b = dc.cols();
        return to_numpy(std::move(dc), {a, b});
      },
      nb::arg("J"), nb::arg("G"), nb::arg("rows"), nb::arg("slope"), nb::arg("dJv"),
      "contact/adapter.py fixed_impulse_velocity_derivative");
  m.def(
      "lstsq",
      [](const ArrD& A, const ArrD& B, double rcond) {
        static const char* fn = "lstsq";
        const bool vector = B.ndim() == 1;
        const Map Bm = vector ? rows_of(B, fn, "B", {-1}) : rows_of(B, fn, "B", {-1, -1});
        RowMat X = lstsq(rows_of(A, fn, "A", {-1, -1}), Bm, rcond);
        const size_t a = X.rows(), b = X.cols();
        return vector ? to_numpy(std::move(X), {a}) : to_numpy(std::move(X), {a, b});
      },
      nb::arg("A"), nb::arg("B"), nb::arg("rcond"),
      "numpy.linalg.lstsq(A, B, rcond)[0] (SVD; singular values s <= rcond * s_max dropped)");
  m.def(
      "position_correction",
      [](const ArrD& J, const ArrD& MJt, const ArrI& rows, const ArrD& phi_deep, double erp, double slop) {
        static const char* fn = "position_correction";
        Correction c = position_correction(rows_of(J, fn, "J", {-1, -1}), rows_of(MJt, fn, "MJt", {-1, -1}),
                                           idx_of(rows), vec(rows_of(phi_deep, fn, "phi_deep", {-1})), erp, slop);
        const size_t nv = c.W.rows(), k = c.W.cols();
        RowMat lam = c.lam, dq = c.dq;
        nb::list keep;
        for (Eigen::Index a = 0; a < c.keep.size(); ++a) keep.append(static_cast<int64_t>(c.keep[a]));
        return nb::make_tuple(to_numpy(std::move(dq), {nv}), to_numpy(std::move(lam), {k}),
                              to_numpy(std::move(c.W), {nv, k}), to_numpy(std::move(c.A), {k, k}), keep);
      },
      nb::arg("J"), nb::arg("MJt"), nb::arg("rows"), nb::arg("phi_deep"), nb::arg("erp"), nb::arg("slop"),
      "(dq, lam, W, A, keep) of dynamics/contact_step.py ContactModel._correction (keep: the rows kept)");
  m.def(
      "correction_jacobian",
      [](const ArrD& A, const ArrD& W, const ArrD& Jd, const ArrD& K, const ArrD& D, double erp) {
        static const char* fn = "correction_jacobian";
        RowMat out = correction_jacobian(rows_of(A, fn, "A", {-1, -1}), rows_of(W, fn, "W", {-1, -1}),
                                         rows_of(Jd, fn, "Jd", {-1, -1}), rows_of(K, fn, "K", {-1, -1}),
                                         rows_of(D, fn, "D", {-1, -1}), erp);
        const size_t a = out.rows(), b = out.cols();
        return to_numpy(std::move(out), {a, b});
      },
      nb::arg("A"), nb::arg("W"), nb::arg("Jd"), nb::arg("K"), nb::arg("D"), nb::arg("erp"),
      "D + W lstsq(A, -erp Jd - K - Jd D): the end of ContactModel.correction_jacobian");
  // The optional arrays of a Linearization (Fphi, dphi, P) may be None.
  m.def(
      "implicit_velocity",
      [](const ArrD& E, const ArrD& Fc, const ArrD& Fphi, const ArrD& dc, const ArrD& dphi, bool regular,
         const ArrD& P, const ArrI& unknowns, const ArrD& MJt, const ArrD& G, bool symmetric) {
        static const char* fn = "implicit_velocity";
        RowMat out = implicit_velocity(rows_of(E, fn, "E", {-1, -1}), rows_of(Fc, fn, "Fc", {-1, -1}),
                                       rows_of(Fphi, fn, "Fphi", {-1, -1}), rows_of(dc, fn, "dc", {-1, -1}),
                                       rows_of(dphi, fn, "dphi", {-1, -1}), regular, rows_of(P, fn, "P", {-1, -1}),
                                       idx_of(unknowns), rows_of(MJt, fn, "MJt", {-1, -1}),
                                       rows_of(G, fn, "G", {-1, -1}), symmetric);
        const size_t a = out.rows(), b = out.cols();
        return to_numpy(std::move(out), {a, b});
      },
      nb::arg("E"), nb::arg("Fc"), nb::arg("Fphi").none(), nb::arg("dc"), nb::arg("dphi").none(), nb::arg("regular"),
      nb::arg("P").none(), nb::arg("unknowns"), nb::arg("MJt"), nb::arg("G"), nb::arg("symmetric") = false,
      "G + MJt dlambda/dtheta: contact/adapter.py _implicit_velocity (Fphi/dphi/P may be None; symmetric: E is, "
      "the least squares may use sym_lstsq)");
  m.def(
      "lambda_jacobian",
      [](const ArrD& E, const ArrD& Fc, const ArrD& Fphi, const ArrD& dc, const ArrD& dphi, bool regular,
         const ArrD& P, const ArrI& unknowns, bool symmetric) {
        static const char* fn = "lambda_jacobian";
        RowMat out = lambda_jacobian(rows_of(E, fn, "E", {-1, -1}), rows_of(Fc, fn, "Fc", {-1, -1}),
                                     rows_of(Fphi, fn, "Fphi", {-1, -1}), rows_of(dc, fn, "dc", {-1, -1}),
                                     rows_of(dphi, fn, "dphi", {-1, -1}), regular, rows_of(P, fn, "P", {-1, -1}),
                                     idx_of(unknowns), symmetric);
        const size_t a = out.rows(), b = out.cols();
        return to_numpy(std::move(out), {a, b});
      },
      nb::arg("E"), nb::arg("Fc"), nb::arg("Fphi").none(), nb::arg("dc"), nb::arg("dphi").none(), nb::arg("regular"),
      nb::arg("P").none(), nb::arg("unknowns"), nb::arg("symmetric") = false,
      "dlambda/dtheta: contact/adapter.py lambda_jacobian (symmetric: E is, the least squares may use sym_lstsq)");
}

}  // namespace contactraj
