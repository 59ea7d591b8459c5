// Collision detection: the C++ twin of contact/detection.py's CollisionScene.detect.
//
// The static per-pair information (pairs, bodies, which pairs are a hull on the ground or a rod on a
// flat, the polyhedral vertices) is computed once in Python (CollisionScene.__init__) and handed to a
// Detector; Detector.detect(model, data, gdata, q) runs Pinocchio's computeCollisions and
// computeContactPatches and turns every hit pair into contacts exactly as the Python code does, in
// the same order and with the same floating-point operations in the same order (products of 3-vectors
// and 3x3 matrices are written out left to right, as numpy's loops sum them), so the two agree to
// round-off. The shapes are read from the GeometryModel's objects (coal::CollisionGeometry) at each
// call. Each helper below names the Python function it translates.
#include "basis.hpp"
#include "common.hpp"

#include <nanobind/eigen/dense.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

// numpy's C API makes the result arrays directly (nanobind's ndarray export goes through numpy.asarray and
// the buffer protocol, ~1 us per array: more than the whole detection of a few contacts).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <coal/collision.h>
#include <coal/contact_patch.h>
#include <coal/shape/geometric_shapes.h>
#include <pinocchio/algorithm/geometry.hpp>
#include <pinocchio/collision/collision.hpp>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

namespace contactraj {
namespace {

using Vec3 = Eigen::Vector3d;
using Mat3 = Eigen::Matrix3d;
using Points = Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor>;
static_assert(sizeof(npy_intp) == sizeof(int64_t), "contacts' integer arrays are 64-bit (np.intp)");

// a . b summed left to right (numpy's dot of two 3-vectors)
inline double dot3(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
// R^T d (numpy's ``R.T @ d``)
inline Vec3 rt_mul(const Mat3& R, const Vec3& d) {
  return Vec3(R(0, 0) * d[0] + R(1, 0) * d[1] + R(2, 0) * d[2], R(0, 1) * d[0] + R(1, 1) * d[1] + R(2, 1) * d[2],
              R(0, 2) * d[0] + R(1, 2) * d[1] + R(2, 2) * d[2]);
}
// R d (numpy's ``R @ d``)
inline Vec3 r_mul(const Mat3& R, const Vec3& d) {
  return Vec3(R(0, 0) * d[0] + R(0, 1) * d[1] + R(0, 2) * d[2], R(1, 0) * d[0] + R(1, 1) * d[1] + R(1, 2) * d[2],
              R(2, 0) * d[0] + R(2, 1) * d[1] + R(2, 2) * d[2]);
}
// R v + t for a local point v (numpy's ``V @ R.T + t``, one row)
inline Vec3 to_world(const Mat3& R, const Vec3& t, const Vec3& v) {
  return Vec3(R(0, 0) * v[0] + R(0, 1) * v[1] + R(0, 2) * v[2] + t[0],
              R(1, 0) * v[0] + R(1, 1) * v[1] + R(1, 2) * v[2] + t[1],
              R(2, 0) * v[0] + R(2, 1) * v[1] + R(2, 2) * v[2] + t[2]);
}
inline double sign_of(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : (x == 0.0 ? 0.0 : x)); }

enum class Kind { Other, Box, Sphere, Capsule, Cylinder, Halfspace, Plane, Convex };

struct Shape {
  const coal::CollisionGeometry* geometry = nullptr;
  Kind kind = Kind::Other;
  const coal::Box* box() const { return static_cast<const coal::Box*>(geometry); }
  const coal::ConvexBase* convex() const { return static_cast<const coal::ConvexBase*>(geometry); }
  bool flat() const { return kind == Kind::Halfspace || kind == Kind::Plane; }
  bool round() const { return kind == Kind::Sphere || kind == Kind::Capsule; }
  double radius() const {
    if (kind == Kind::Sphere) return static_cast<const coal::Sphere*>(geometry)->radius;
    if (kind == Kind::Capsule) return static_cast<const coal::Capsule*>(geometry)->radius;
    return static_cast<const coal::Cylinder*>(geometry)->radius;
  }
  double half_length() const {
    if (kind == Kind::Capsule) return static_cast<const coal::Capsule*>(geometry)->halfLength;
    return static_cast<const coal::Cylinder*>(geometry)->halfLength;
  }
  // the plane's normal and offset of a half-space or plane
  const Vec3& plane_n() const {
    if (kind == Kind::Halfspace) return static_cast<const coal::Halfspace*>(geometry)->n;
    return static_cast<const coal::Plane*>(geometry)->n;
  }
  double plane_d() const {
    if (kind == Kind::Halfspace) return static_cast<const coal::Halfspace*>(geometry)->d;
    return static_cast<const coal::Plane*>(geometry)->d;
  }
};

Shape shape_of(const coal::CollisionGeometry* g) {
  Shape s;
  s.geometry = g;
  if (dynamic_cast<const coal::Box*>(g)) s.kind = Kind::Box;
  else if (dynamic_cast<const coal::Sphere*>(g)) s.kind = Kind::Sphere;
  else if (dynamic_cast<const coal::Capsule*>(g)) s.kind = Kind::Capsule;
  else if (dynamic_cast<const coal::Cylinder*>(g)) s.kind = Kind::Cylinder;
  else if (dynamic_cast<const coal::Halfspace*>(g)) s.kind = Kind::Halfspace;
  else if (dynamic_cast<const coal::Plane*>(g)) s.kind = Kind::Plane;
  else if (dynamic_cast<const coal::ConvexBase*>(g)) s.kind = Kind::Convex;
  return s;
}

// A case the compiled detector does not handle: detect returns None and Python runs the reference.
struct HandBack {};

// The rows of one part of the result (one pair's contacts), appended in order.
struct Output {
  std::vector<double> points, normals, phi, radius, axis, gap, slide;
  std::vector<int64_t> body_a, body_b, normal_body, point_body, pair;
  void add(const Points& P, const Vec3& n, const std::vector<double>& ph, int64_t jA, int64_t jB, int64_t carrier,
           int64_t vertex_body, double rad, int64_t k, const Vec3* ax, double g = 0.0, const double* sl = nullptr) {
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      for (int c = 0; c < 3; ++c) {
        points.push_back(P(i, c));
        normals.push_back(n[c]);
        axis.push_back(ax ? (*ax)[c] : 0.0);
      }
      phi.push_back(ph[i]);
      body_a.push_back(jA);
      body_b.push_back(jB);
      normal_body.push_back(carrier);
      point_body.push_back(vertex_body);
      radius.push_back(rad);
      pair.push_back(k);
      gap.push_back(g);
      for (int c = 0; c < 6; ++c) slide.push_back(sl ? sl[c] : 0.0);
    }
  }
  // The 12 arrays as a tuple of new numpy arrays (float64 and intp), as Contacts takes them.
  nb::object arrays() const {
    const npy_intp m = static_cast<npy_intp>(phi.size());
    nb::object out = nb::steal(PyTuple_New(12));
    int slot = 0;
    auto put = [&](const auto& v, int cols, int type) {
      npy_intp dims[2] = {m, cols};
      PyObject* a = PyArray_SimpleNew(cols == 1 ? 1 : 2, dims, type);
      if (a == nullptr) throw nb::python_error();
      if (!v.empty()) std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(a)), v.data(), v.size() * 8);
      PyTuple_SET_ITEM(out.ptr(), slot++, a);
    };
    put(points, 3, NPY_DOUBLE);
    put(normals, 3, NPY_DOUBLE);
    put(phi, 1, NPY_DOUBLE);
    put(body_a, 1, NPY_INTP);
    put(body_b, 1, NPY_INTP);
    put(normal_body, 1, NPY_INTP);
    put(point_body, 1, NPY_INTP);
    put(radius, 1, NPY_DOUBLE);
    put(pair, 1, NPY_INTP);
    put(axis, 3, NPY_DOUBLE);
    put(gap, 1, NPY_DOUBLE);
    put(slide, 6, NPY_DOUBLE);
    return out;
  }
};

// _valid_normal: points, a finite unit normal and a sane depth
bool valid_normal(const coal::ContactPatch& patch) {
  if (patch.size() == 0) return false;
  const Vec3 n = patch.getNormal();
  const double depth = patch.penetration_depth;
  return std::isfinite(n[0]) && std::isfinite(n[1]) && std::isfinite(n[2]) && std::abs(dot3(n, n) - 1.0) < 1e-6 &&
         std::isfinite(depth) && std::abs(depth) < 1e3;
}

// _valid: also finite sane points
bool valid(const coal::ContactPatch& patch) {
  if (!valid_normal(patch)) return false;
  for (size_t i = 0; i < patch.size(); ++i) {
    const Vec3 p = patch.getPoint(i);
    for (int c = 0; c < 3; ++c)
      if (!(std::abs(p[c]) < 1e6)) return false;
  }
  return true;
}

// _merge_planar: drop points that repeat another's (x, y); z set to 0
Points merge_planar(const Points& P) {
  std::vector<Eigen::Index> keep;
  for (Eigen::Index i = 0; i < P.rows(); ++i) {
    bool repeated = false;
    for (Eigen::Index j : keep)
      if (std::abs(P(i, 0) - P(j, 0)) < 1e-9 && std::abs(P(i, 1) - P(j, 1)) < 1e-9) {
        repeated = true;
        break;
      }
    if (!repeated) keep.push_back(i);
  }
  Points out(static_cast<Eigen::Index>(keep.size()), 3);
  for (size_t r = 0; r < keep.size(); ++r) {
    out(r, 0) = P(keep[r], 0);
    out(r, 1) = P(keep[r], 1);
    out(r, 2) = 0.0;
  }
  return out;
}

// _on_cap: s is a cylinder and n (up to sign) its axis, the normal of its cap faces
bool on_cap(const Shape& s, const pinocchio::SE3& M, const Vec3& n) {
  if (s.kind != Kind::Cylinder) return false;
  return std::abs(dot3(Vec3(M.rotation().col(2)), n)) > 1.0 - 1e-6;
}

// _signed_axis: the local z axis of M (a cylinder's), turned to d's side: the outward normal of its cap there
Vec3 signed_axis(const pinocchio::SE3& M, const Vec3& d) {
  const Vec3 a = M.rotation().col(2);
  return dot3(a, d) > 0.0 ? a : Vec3(-a);
}

// _box_axis: the index of M's axis (a box's) most aligned with d, up to sign (np.argmax: the first largest)
int box_axis(const pinocchio::SE3& M, const Vec3& d) {
  const Vec3 c = rt_mul(M.rotation(), d);
  int k = 0;
  for (int i = 1; i < 3; ++i)
    if (std::abs(c[i]) > std::abs(c[k])) k = i;
  return k;
}

// _support: max over the shape of d . x, for the flat carriers, boxes, hulls and a cylinder along its axis; none
// otherwise
std::optional<double> support(const Shape& s, const pinocchio::SE3& M, const Vec3& d) {
  const Mat3& R = M.rotation();
  const Vec3& t = M.translation();
  if (s.flat()) {
    const Vec3 n = r_mul(R, s.plane_n());
    const double off = s.plane_d() + dot3(n, t);
    if (dot3(n, d) > 0.0) return off;
    return std::nullopt;
  }
  if (s.kind == Kind::Box) {
    const Vec3 c = rt_mul(R, d);
    const Vec3& h = s.box()->halfSide;
    return dot3(d, t) + (std::abs(c[0]) * h[0] + std::abs(c[1]) * h[1] + std::abs(c[2]) * h[2]);
  }
  if (s.kind == Kind::Convex) {
    const Vec3 dl = rt_mul(R, d);
    const auto& pts = *s.convex()->points;
    double best = -std::numeric_limits<double>::infinity();
    for (unsigned i = 0; i < s.convex()->num_points; ++i) {
      const double v = dot3(pts[i], dl);
      if (v > best || std::isnan(v)) best = v;  // np.max propagates NaN
      if (std::isnan(best)) break;
    }
    return dot3(d, t) + best;
  }
  if (on_cap(s, M, d)) {  // a cylinder along its axis: its cap face's plane (not off it: coal's noisy normal there)
    const Vec3 a = R.col(2);
    const double da = dot3(d, a);
    const Vec3 w(d[0] - da * a[0], d[1] - da * a[1], d[2] - da * a[2]);
    return dot3(d, t) + s.half_length() * std::abs(da) + s.radius() * std::sqrt(dot3(w, w));
  }
  return std::nullopt;
}

const std::vector<Vec3>& normals_of(const Shape& s) {
  const auto* c = s.convex();
  if (!c->normals || c->normals->size() < c->num_normals_and_offsets) throw HandBack{};
  return *c->normals;
}

// _aligned: n is (up to sign) the normal of one of the shape's faces
bool aligned(const Shape& s, const pinocchio::SE3& M, const Vec3& n) {
  if (s.kind == Kind::Box) {
    const Vec3 c = rt_mul(M.rotation(), n);
    return std::max(std::abs(c[0]), std::max(std::abs(c[1]), std::abs(c[2]))) > 1.0 - 1e-6;
  }
  if (s.kind == Kind::Convex) {
    const auto& N = normals_of(s);
    const Vec3 nl = rt_mul(M.rotation(), n);
    double best = -std::numeric_limits<double>::infinity();
    for (unsigned i = 0; i < s.convex()->num_normals_and_offsets; ++i) best = std::max(best, std::abs(dot3(N[i], nl)));
    return best > 1.0 - 1e-6;
  }
  return false;
}

// _face_normal: the exact outward normal of the shape's face closest to direction d
Vec3 face_normal(const Shape& s, const pinocchio::SE3& M, const Vec3& d, bool flip = false) {
  const Mat3& R = M.rotation();
  Vec3 out;
  if (s.flat()) {
    out = r_mul(R, s.plane_n());
  } else if (s.kind == Kind::Box) {
    const Vec3 c = rt_mul(R, d);
    int k = 0;  // np.argmax: the first largest
    for (int i = 1; i < 3; ++i)
      if (std::abs(c[i]) > std::abs(c[k])) k = i;
    const double sg = sign_of(c[k]);
    out = Vec3(R(0, k) * sg, R(1, k) * sg, R(2, k) * sg);
  } else if (s.kind == Kind::Convex) {
    const auto& N = normals_of(s);
    const Vec3 dl = rt_mul(R, d);
    unsigned k = 0;
    double best = -std::numeric_limits<double>::infinity();
    for (unsigned i = 0; i < s.convex()->num_normals_and_offsets; ++i) {
      const double v = dot3(N[i], dl);
      if (v > best) {
        best = v;
        k = i;
      }
    }
    out = r_mul(R, N[k]);
  } else if (on_cap(s, M, d)) {
    out = signed_axis(M, d);
  } else {
    out = d;
  }
  return flip ? Vec3(-out) : out;
}

struct PairInfo {
  int64_t jA, jB, iA, iB;
  bool hull_ground;
  double rod_sign;  // 0: not a rod on a flat; -1: the rod is A, the flat B; +1: the rod is B, the flat A
};

class Detector {
 public:
  Detector(nb::object geometry, std::vector<std::vector<int64_t>> pairs, std::vector<std::optional<Points>> vertices,
           double margin, double patch_depth, bool planar, double snap_tolerance, double flat_tolerance,
           double curved_slope, int64_t max_patch_points, Eigen::Matrix<double, 2, 4> directions4,
           Eigen::Matrix<double, 2, 3> directions3, Vec3 up, double face_slack, double normal_slack)
      : geometry_(std::move(geometry)), gm_(geometry_of(geometry_)), margin_(margin), patch_depth_(patch_depth),
        planar_(planar), up_(up), snap_tolerance_(snap_tolerance), flat_tolerance_(flat_tolerance),
        face_slack_(face_slack), normal_slack_(normal_slack), curved_slope_(curved_slope), max_patch_points_(max_patch_points), dir4_(directions4),
        dir3_(directions3) {
    const int64_t nobj = static_cast<int64_t>(gm_.geometryObjects.size());
    if (static_cast<int64_t>(vertices.size()) != nobj)
      throw nb::value_error("Detector: one vertices entry (array or None) per geometry object is needed");
    if (pairs.size() != gm_.collisionPairs.size())
      throw nb::value_error("Detector: one row of pair information per collision pair of the geometry is needed");
    for (size_t k = 0; k < pairs.size(); ++k) {
      const auto& r = pairs[k];
      if (r.size() != 6)
        throw nb::value_error("Detector: each pair row is (jA, jB, iA, iB, hull_ground, rod_sign)");
      PairInfo p{r[0], r[1], r[2], r[3], r[4] != 0, static_cast<double>(r[5])};
      if (p.iA < 0 || p.iA >= nobj || p.iB < 0 || p.iB >= nobj)
        throw nb::value_error("Detector: a pair names a geometry object that does not exist");
      if (static_cast<int64_t>(gm_.collisionPairs[k].first) != p.iB ||
          static_cast<int64_t>(gm_.collisionPairs[k].second) != p.iA)
        throw nb::value_error("Detector: pair rows must follow the geometry's collision pairs (first = B, second = A)");
      pairs_.push_back(p);
    }
    for (auto& v : vertices) vertices_.push_back(v ? *v : Points(0, 3));
  }

  // Speculative margins (CollisionScene(speculative=True)): each object's reach, the radius about its joint's
  // origin that holds it (0 for the world's objects); empty: one margin for every pair
  void set_reach(const std::vector<double>& reach) {
    if (!reach.empty() && reach.size() != gm_.geometryObjects.size())
      throw nb::value_error("Detector.set_reach: one reach per geometry object (or none)");
    reach_ = reach;
  }

  // contact/detection.py CollisionScene._margins: every pair's speculative margin, max(margin, d_A + d_B) with d a
  // bound on how far an object's points move along the step's path q + t v: dt s0 + 1.5 dt^2 W S (s0: its body's
  // twist at q with its reach; W: the angular rates of the joints carrying it; S: the sum over them of
  // |v_J| + |w_J| D, D bounding the distance from the joint's origin to the object's points over the step); the
  // margin itself without v
  std::vector<double> margins(const pinocchio::Model& M, pinocchio::Data& D, const Eigen::VectorXd& q,
                              const std::optional<Eigen::VectorXd>& v, double dt) const {
    const size_t npairs = gm_.collisionPairs.size();
    std::vector<double> out(npairs, margin_);
    if (!v || dt == 0.0) return out;
    if (v->size() != M.nv || !v->allFinite())
      throw nb::value_error(("v must be a finite velocity of shape (" + std::to_string(M.nv) + ",), got size " +
                             std::to_string(v->size())).c_str());
    if (!(std::isfinite(dt) && dt > 0.0)) throw nb::value_error("dt must be a finite time step > 0");
    pinocchio::forwardKinematics(M, D, q, *v);
    const int nj = M.njoints;
    std::vector<double> lin(nj, 0.0), ang(nj, 0.0), link(nj, 0.0);
    for (int m = 1; m < nj; ++m) {
      const pinocchio::Motion vJ = D.v[m] - D.liMi[m].actInv(D.v[M.parents[m]]);
      lin[m] = vJ.linear().norm(), ang[m] = vJ.angular().norm();
      link[m] = D.liMi[m].translation().norm() + dt * lin[m];
    }
    const size_t nobj = gm_.geometryObjects.size();
    std::vector<double> travel(nobj, 0.0);
    for (size_t i = 0; i < nobj; ++i) {
      const auto j = gm_.geometryObjects[i].parentJoint;
      if (j == 0) continue;
      double dist = reach_[i], S = 0.0, W = 0.0;
      for (auto m = j; m > 0; m = M.parents[m]) {
        S += lin[m] + ang[m] * dist;
        W += ang[m];
        dist += link[m];
      }
      const double s0 = D.v[j].linear().norm() + D.v[j].angular().norm() * reach_[i];
      travel[i] = dt * s0 + 1.5 * dt * dt * W * S;
    }
    for (size_t k = 0; k < npairs; ++k)
      out[k] = std::max(margin_, travel[gm_.collisionPairs[k].first] + travel[gm_.collisionPairs[k].second]);
    return out;
  }

  bool speculative() const { return !reach_.empty(); }

  // the margins into gd's collision requests (speculative scenes only)
  void set_margins(const pinocchio::Model& M, pinocchio::Data& D, pinocchio::GeometryData& gd, const Eigen::VectorXd& q,
                   const std::optional<Eigen::VectorXd>& v, double dt) const {
    if (reach_.empty()) return;
    const std::vector<double> m = margins(M, D, q, v, dt);
    for (size_t k = 0; k < m.size(); ++k) gd.collisionRequests[k].security_margin = m[k];
  }

  // CollisionScene.margins_grow: whether some pair's margin at the velocity bound v exceeds the one gd holds
  bool margins_grow(nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                    const Eigen::VectorXd& v, double dt) const {
    if (reach_.empty()) return false;
    auto& gd = geometry_data_of(gdata);
    const std::vector<double> m = margins(model_of(model), data_of(data), q, v, dt);
    for (size_t k = 0; k < m.size(); ++k)
      if (m[k] > gd.collisionRequests[k].security_margin) return true;
    return false;
  }

  // Contacts at q as arrays (points, normals, phi, body_a, body_b, normal_body, point_body, radius, pair, axis, gap,
  // slide),
  // or None for a case this port does not handle (the caller then runs the Python reference).
  nb::object detect(nb::handle model, nb::handle data, nb::handle gdata, const Eigen::VectorXd& q,
                    const std::optional<Eigen::VectorXd>& v = std::nullopt, double dt = 0.0) {
    auto& M = model_of(model);
    auto& D = data_of(data);
    auto& gd = geometry_data_of(gdata);
    if (q.size() != M.nq)
      throw nb::value_error(("q has size " + std::to_string(q.size()) + ", the model has nq = " +
                             std::to_string(M.nq)).c_str());
    if (gd.collisionResults.size() != gm_.collisionPairs.size() || gd.oMg.size() != gm_.geometryObjects.size())
      throw nb::value_error("gdata does not belong to this scene's geometry (make it with scene.create_data())");
    set_margins(M, D, gd, q, v, dt);
    Output out;
    if (!pinocchio::computeCollisions(M, D, gm_, gd, q, false)) return out.arrays();
    std::vector<size_t> hit;
    for (size_t k = 0; k < gd.collisionResults.size(); ++k)
      if (gd.collisionResults[k].isCollision()) hit.push_back(k);
    pinocchio::computeContactPatches(gm_, gd);
    try {
      for (size_t k : hit) pair_contacts(k, gd, out);
    } catch (const HandBack&) {
      return nb::none();
    }
    return out.arrays();
  }

 private:
  Shape shape(int64_t i) const { return shape_of(gm_.geometryObjects[static_cast<size_t>(i)].geometry.get()); }

  void pair_contacts(size_t k, pinocchio::GeometryData& gd, Output& out) {
    const PairInfo& p = pairs_[k];
    const Shape sA = shape(p.iA), sB = shape(p.iB);
    const pinocchio::SE3& M_A = gd.oMg[p.iA];
    const pinocchio::SE3& M_B = gd.oMg[p.iB];
    if (p.hull_ground) {
      hull_part(k, r_mul(M_B.rotation(), sB.plane_n()), gd, false, out);
      return;
    }
    if (p.rod_sign != 0.0) {
      rod_on_flat(k, gd, out);
      return;
    }
    const coal::ContactPatch* patch = &gd.contactPatchResults[k].getContactPatch(0);
    coal::ContactPatch again;
    if (reject_ >= 1 || !valid_normal(*patch)) {
      again = retry(k, gd);
      patch = &again;
    }
    coal::ContactPatch along;
    if (consistent(k, gd, *patch, along)) patch = &along;
    Vec3 n = patch->getNormal();
    if (sA.kind == Kind::Convex && sB.kind == Kind::Box && aligned(sB, M_B, n)) {
      // A hull on a box's face: the same vertex patch as on the ground, kept within the face.
      if (hull_part(k, face_normal(sB, M_B, n), gd, true, out)) return;
    }
    // _classify
    int64_t carrier, vertex_body;
    double radius;
    if (sA.round()) {
      carrier = p.jB, vertex_body = p.jA, radius = -sA.radius(), n = face_normal(sB, M_B, n);
    } else if (sB.round()) {
      carrier = p.jA, vertex_body = p.jB, radius = sB.radius(), n = face_normal(sA, M_A, Vec3(-n), true);
    } else if (sB.flat() || (!sA.flat() && aligned(sB, M_B, n))) {
      carrier = p.jB, vertex_body = p.jA, radius = 0.0, n = face_normal(sB, M_B, n);
    } else if (sA.flat() || aligned(sA, M_A, n)) {
      carrier = p.jA, vertex_body = p.jB, radius = 0.0, n = face_normal(sA, M_A, Vec3(-n), true);
    } else {
      carrier = p.jB, vertex_body = p.jA, radius = 0.0;
    }
    Vec3 xA, xB;
    double sl[6], rA, rB;
    Chord chord;
    if (line_cores(sA, M_A, sB, M_B, xA, xB, sl, rA, rB, chord)) {
      // the line of the cores' closest points (the point on P, the normal's N: _classify)
      const Vec3 d = xA - xB;
      const double L = d.norm();
      // not where they touch when another direction parts them more (a can sunk into a post's cap: no line)
      if (L > 0.0 && !separation_beyond(sA, M_A, sB, M_B, L - rA - rB, patch->getNormal())) {
        n = d / L;
        const bool P_is_A = vertex_body == p.jA;  // P = A: x_N = x_B = x_A - L n; else x_N = x_A = x_B + L n
        const Vec3& xP = P_is_A ? xA : xB;
        const double gap = P_is_A ? L : -L;
        radius = P_is_A ? -rA : rB;  // the point on P's surface
        double slPN[6];
        for (int i = 0; i < 3; ++i) {
          slPN[i] = P_is_A ? sl[i] : sl[3 + i];
          slPN[3 + i] = P_is_A ? sl[3 + i] : sl[i];
        }
        Points P(1, 3);
        for (int i = 0; i < 3; ++i) P(0, i) = xP[i] + radius * n[i];
        const std::vector<double> ph{L - rA - rB};
        out.add(P, n, ph, p.jA, p.jB, carrier, vertex_body, radius, static_cast<int64_t>(k), nullptr, gap, slPN);
        if (chord.has && ph[0] <= flat_tolerance_) chord_end(k, gd, chord, out);
        return;
      }  // concentric, or parted more along another direction: no line (coal's normal, carried by N)
    }
    const bool on_A = vertex_body == p.jA;
    if (rim_on_face(k, gd, patch->getNormal(), patch->penetration_depth, out)) return;
    if (capsule_on_face(k, gd, n, on_A, patch->penetration_depth, out)) return;
    Points P = witness_points(*patch, on_A);
    if (!finite_points(P)) {
      again = retry(k, gd);
      patch = &again;
      P = witness_points(*patch, on_A);
    }
    const int64_t iP = on_A ? p.iA : p.iB;
    const pinocchio::SE3& M_P = gd.oMg[iP];
    if ((on_A ? sA : sB).kind == Kind::Sphere) {
      const Vec3& c = M_P.translation();
      P.resize(1, 3);
      for (int i = 0; i < 3; ++i) P(0, i) = c[i] + radius * n[i];
    }
    const Points& V = vertices_[iP];
    if (V.rows() > 0) snap_to_vertices(M_P.rotation(), M_P.translation(), V, P, n, on_A ? -1.0 : 1.0);
    const Shape& sP = on_A ? sA : sB;
    const Vec3 toward = on_A ? Vec3(-n) : n;  // the point body's outward normal facing the carrier
    const bool polytope = sP.kind == Kind::Box || sP.kind == Kind::Convex;
    const Vec3 a = polytope ? face_normal(sP, M_P, toward) : toward;
    if (sP.kind == Kind::Box || (sP.kind == Kind::Convex && dot3(a, toward) > 1.0 - 1e-6)) {
      // face on face: coal's points moved along n onto the point body's face (off it by coal's normal's noise)
      const double h = *support(sP, M_P, a), na = dot3(n, a);
      for (Eigen::Index i = 0; i < P.rows(); ++i) {
        const double t = (h - (P(i, 0) * a[0] + P(i, 1) * a[1] + P(i, 2) * a[2])) / na;
        for (int c = 0; c < 3; ++c) P(i, c) += t * n[c];
      }
    }
    if (planar_) P = merge_planar(P);
    std::vector<double> phi(P.rows());
    const std::optional<double> level = on_A ? support(sB, M_B, n) : support(sA, M_A, Vec3(-n));
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      const double pn = P(i, 0) * n[0] + P(i, 1) * n[1] + P(i, 2) * n[2];
      if (!level) phi[i] = patch->penetration_depth;
      else phi[i] = on_A ? pn - *level : -*level - pn;
    }
    if (P.rows() > 1 && is_rod(sA) && is_rod(sB)) {
      // coal's patch of two rods off a centre line can hold a point far from the carrier (_detect_reference): only
      // the points within the margin of the carrier itself
      const Shape& carrier_shape = on_A ? sB : sA;
      const pinocchio::SE3& M_C = on_A ? M_B : M_A;
      std::vector<Eigen::Index> keep;
      Eigen::Index best = 0;
      double best_d = 0.0;
      for (Eigen::Index i = 0; i < P.rows(); ++i) {
        const double d = rod_distance(carrier_shape, M_C, Vec3(P(i, 0), P(i, 1), P(i, 2)));
        if (d <= gd.collisionRequests[k].security_margin) keep.push_back(i);
        if (i == 0 || d < best_d) best = i, best_d = d;
      }
      if (keep.empty()) keep.push_back(best);
      if (static_cast<Eigen::Index>(keep.size()) < P.rows()) {
        Points Pk(static_cast<Eigen::Index>(keep.size()), 3);
        std::vector<double> phik;
        for (size_t e = 0; e < keep.size(); ++e) {
          Pk.row(static_cast<Eigen::Index>(e)) = P.row(keep[e]);
          phik.push_back(phi[keep[e]]);
        }
        P = Pk;
        phi = phik;
      }
    }
    out.add(P, n, phi, p.jA, p.jB, carrier, vertex_body, radius, static_cast<int64_t>(k), nullptr);
  }

  static bool is_rod(const Shape& s) { return s.kind == Kind::Capsule || s.kind == Kind::Cylinder; }
  // contact/detection.py _rod_distance: the signed distance of x to a capsule or cylinder (negative inside)
  static double rod_distance(const Shape& s, const pinocchio::SE3& M, const Vec3& x) {
    const Vec3 a = M.rotation().col(2);
    const Vec3 d = x - M.translation();
    const double axial = a[0] * d[0] + a[1] * d[1] + a[2] * d[2];
    const double h = s.half_length(), r = s.radius();
    if (s.kind == Kind::Capsule) {
      const Vec3 w = d - clip(axial, -h, h) * a;
      return std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) - r;
    }
    const Vec3 w = d - axial * a;
    const double radial = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) - r, out = std::abs(axial) - h;
    if (radial <= 0.0 || out <= 0.0) return std::max(radial, out);
    return std::hypot(radial, out);
  }

  // contact/detection.py _rim_point: the rim circle's point (centre end, axis a, radius R) nearest a point whose part
  // normal to the axis is w (rho = |w| > 0), end + R u with u = w / rho, and its slide sqrt(R / rho) (a x u)
  static void rim_point(const Vec3& end, const Vec3& a, double R, const Vec3& w, double rho, Vec3& x_rim,
                        Vec3& slide) {
    const Vec3 u = w / rho;
    x_rim = end + R * u;
    slide = std::sqrt(R / rho) * a.cross(u);
  }

  // contact/detection.py _cylinder_feature: the cylinder's feature nearest a sphere's centre c (side, rim, face),
  // with axial = a . (c - centre), w the part of c - centre normal to the axis a, rho = |w|
  enum class Feature { Side, Rim, Face };
  static Feature cylinder_feature(const Vec3& c, const Shape& cyl, const pinocchio::SE3& M, double& axial, Vec3& w,
                                  double& rho) {
    const Vec3 a = M.rotation().col(2);
    const Vec3 d = c - M.translation();
    axial = a[0] * d[0] + a[1] * d[1] + a[2] * d[2];
    w = d - axial * a;
    rho = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);  // summed in order, as the Python twin
    if (std::abs(axial) < cyl.half_length()) return Feature::Side;
    return rho > cyl.radius() ? Feature::Rim : Feature::Face;
  }
  // _extent: max over a round shape or a cylinder of d . x (its centre's, plus the half length along its axis and the
  // radius across; a ball's and a capsule's across its whole length |d|)
  static double extent(const Shape& s, const pinocchio::SE3& M, const Vec3& d) {
    const Vec3& c = M.translation();
    if (s.kind == Kind::Sphere) return dot3(d, c) + s.radius() * std::sqrt(dot3(d, d));
    const Vec3 a = M.rotation().col(2);
    const double da = dot3(d, a);
    const Vec3 across = s.kind == Kind::Capsule ? d : Vec3(d[0] - da * a[0], d[1] - da * a[1], d[2] - da * a[2]);
    return dot3(d, c) + s.half_length() * std::abs(da) + s.radius() * std::sqrt(dot3(across, across));
  }

  // _separation_beyond: whether two round shapes or cylinders are parted by more than phi (to flat_tolerance_) along
  // coal's normal or a cylinder's axis (either way): then the line of their cores' closest points is not their contact
  bool separation_beyond(const Shape& sA, const pinocchio::SE3& MA, const Shape& sB, const pinocchio::SE3& MB,
                         double phi, const Vec3& n_coal) const {
    Vec3 dirs[3] = {n_coal, Vec3::Zero(), Vec3::Zero()};  // on the hot path: no allocation
    int nd = 1;
    if (sA.kind == Kind::Cylinder) dirs[nd++] = MA.rotation().col(2);
    if (sB.kind == Kind::Cylinder) dirs[nd++] = MB.rotation().col(2);
    for (int i = 0; i < nd; ++i)
      for (const double s : {1.0, -1.0}) {
        const Vec3 e = s * dirs[i];  // from B to A: min over A of e . x - max over B
        if (-extent(sA, MA, Vec3(-e)) - extent(sB, MB, e) > phi + flat_tolerance_) return true;
      }
    return false;
  }

  // contact/detection.py _line_cores: whether the contact lies on the line of the cores' closest points (two round
  // shapes; a cylinder's side where the other core's closest point on its axis is strictly inside; a ball on a
  // cylinder's rim, whose point slides along the rim's tangent a x u at R / rho of the relative tangential velocity:
  // the slide sqrt(R / rho) (a x u), the kernels' slide being bilinear in it), and then the points, their slides and
  // the radii the surfaces stand off them (a rim's: 0)
  // the other end of the chord along which a rod lies across a cylinder's end (rod_rim's x_other)
  struct Chord {
    bool has = false;
    Vec3 x_seg, x_end;
    bool rod_is_A = false;
  };

  static bool line_cores(const Shape& sA, const pinocchio::SE3& MA, const Shape& sB, const pinocchio::SE3& MB,
                         Vec3& xA, Vec3& xB, double* slide, double& rA, double& rB, Chord& chord) {
    chord.has = false;
    const Shape* s1[2] = {&sA, &sB};
    const Shape* s2[2] = {&sB, &sA};
    const pinocchio::SE3* M1[2] = {&MA, &MB};
    const pinocchio::SE3* M2[2] = {&MB, &MA};
    for (int i = 0; i < 2; ++i) {
      if (!(s1[i]->kind == Kind::Sphere && s2[i]->kind == Kind::Cylinder)) continue;
      const Vec3 c = M1[i]->translation();
      double axial, rho;
      Vec3 w;
      const Feature f = cylinder_feature(c, *s2[i], *M2[i], axial, w, rho);
      if (f == Feature::Face) return false;
      if (f == Feature::Side) {  // a capsule's side there
        round_cores(sA, MA, sB, MB, xA, xB, slide);
        rA = sA.radius(), rB = sB.radius();
        return true;
      }
      const Vec3 a = M2[i]->rotation().col(2);
      const Vec3 end = M2[i]->translation() + std::copysign(s2[i]->half_length(), axial) * a;
      Vec3 x_r, t;
      rim_point(end, a, s2[i]->radius(), w, rho, x_r, t);
      for (int e = 0; e < 3; ++e) {  // the rim's slide on the cylinder's side (B's slots when the sphere is A)
        slide[e] = i == 0 ? 0.0 : t[e];
        slide[3 + e] = i == 0 ? t[e] : 0.0;
      }
      xA = i == 0 ? c : x_r;
      xB = i == 0 ? x_r : c;
      rA = i == 0 ? s1[i]->radius() : 0.0;
      rB = i == 0 ? 0.0 : s1[i]->radius();
      return true;
    }
    const auto line = [](const Shape& s) { return s.round() || s.kind == Kind::Cylinder; };
    if (!line(sA) || !line(sB)) return false;
    round_cores(sA, MA, sB, MB, xA, xB, slide);
    const bool endA = sA.kind == Kind::Cylinder && slide[0] == 0.0 && slide[1] == 0.0 && slide[2] == 0.0;
    const bool endB = sB.kind == Kind::Cylinder && slide[3] == 0.0 && slide[4] == 0.0 && slide[5] == 0.0;
    // a cylinder's point at an end of its segment: its rim (or its cap face: coal's); with both at an end, either
    // cylinder's rim may meet the other's side
    const int ntry = endA && endB ? 2 : (endA || endB ? 1 : 0);
    for (int i = 0; i < ntry; ++i) {
      const bool rim_on_B = endA && endB ? i == 0 : endB;
      const Shape& rod = rim_on_B ? sA : sB;
      const Shape& cyl = rim_on_B ? sB : sA;
      Vec3 x_rod, x_rim, sl_rod, sl_rim, x_other;
      bool has_other;
      const Vec3 x_end = rim_on_B ? xB : xA;
      if (!rod_rim(rod, rim_on_B ? MA : MB, cyl, rim_on_B ? MB : MA, x_end, x_rod, x_rim, sl_rod, sl_rim, has_other,
                   x_other))
        continue;
      chord.has = has_other, chord.x_seg = x_other, chord.x_end = x_end, chord.rod_is_A = rim_on_B;
      for (int e = 0; e < 3; ++e) {
        slide[e] = rim_on_B ? sl_rod[e] : sl_rim[e];
        slide[3 + e] = rim_on_B ? sl_rim[e] : sl_rod[e];
      }
      xA = rim_on_B ? x_rod : x_rim;
      xB = rim_on_B ? x_rim : x_rod;
      rA = rim_on_B ? rod.radius() : 0.0;
      rB = rim_on_B ? 0.0 : rod.radius();
      return true;
    }
    if (endA || endB) return false;
    rA = sA.radius(), rB = sB.radius();
    return true;
  }

  // contact/detection.py _rod_rim: a rod (capsule, or a cylinder by its side) against a cylinder's rim at its end
  // x_end: the closest points of the rod's segment and the rim circle and their slides, or false where the contact
  // is not on the rim; the same samples, Newton steps and tests in the same order
  static bool rod_rim(const Shape& rod, const pinocchio::SE3& M_rod, const Shape& cyl, const pinocchio::SE3& M_cyl,
                      const Vec3& x_end, Vec3& x_rod, Vec3& x_rim, Vec3& sl_rod, Vec3& sl_rim, bool& has_other,
                      Vec3& x_other) {
    has_other = false;  // the segment's point over the chord's other end, where it crosses the end along a chord
    constexpr int kRimSamples = 32;  // RIM_SAMPLES
    const Vec3 p0 = M_rod.translation(), b = M_rod.rotation().col(2);
    const double h2 = rod.half_length();
    Vec3 a = M_cyl.rotation().col(2);
    const Vec3 o = M_cyl.translation();
    const Vec3 eo = x_end - o;
    if (!(dot3(a, eo) > 0.0)) a = -a;  // outward at this end
    const double R = cyl.radius();
    const double ab = dot3(a, b);
    const auto at = [&](double s, double& z, Vec3& w, double& rho) {
      const Vec3 d = (p0 + s * b) - x_end;
      z = dot3(a, d);
      w = d - z * a;
      rho = std::sqrt(dot3(w, w));
    };
    double z, rho;
    Vec3 w;
    double samples[kRimSamples + 1];
    for (int i = 0; i <= kRimSamples; ++i) {
      at(-h2 + 2.0 * h2 * i / kRimSamples, z, w, rho);
      samples[i] = z * z + (rho - R) * (rho - R);
    }
    double best = 0.0, gbest = std::numeric_limits<double>::infinity();
    for (int i = 0; i <= kRimSamples; ++i) {  // every sampled local minimum, refined (a rod across the end)
      if ((i > 0 && samples[i - 1] < samples[i]) || (i < kRimSamples && samples[i + 1] < samples[i])) continue;
      double s = -h2 + 2.0 * h2 * i / kRimSamples;
      const double lo = std::max(-h2, s - 2.0 * h2 / kRimSamples), hi = std::min(h2, s + 2.0 * h2 / kRimSamples);
      for (int it = 0; it < 40; ++it) {
        at(s, z, w, rho);
        if (rho == 0.0) return false;
        const double drho = dot3(w, b) / rho;
        const double g1 = 2.0 * (z * ab + (rho - R) * drho);
        const double g2 = 2.0 * (ab * ab + drho * drho + (rho - R) * ((1.0 - ab * ab) - drho * drho) / rho);
        const double step = g2 > 0.0 ? -g1 / g2 : (g1 > 0.0 ? -0.25 : 0.25) * (hi - lo);
        const double nxt = std::min(std::max(s + step, lo), hi);
        if (std::abs(nxt - s) <= 1e-15 * (1.0 + std::abs(s))) {
          s = nxt;
          break;
        }
        s = nxt;
      }
      at(s, z, w, rho);
      const double g = z * z + (rho - R) * (rho - R);
      if (g < gbest) best = s, gbest = g;
    }
    const double s = best;
    at(s, z, w, rho);
    if (!(z > 0.0 && rho > R)) return false;  // within the radius (the cap face) or behind the end plane
    const bool inside = std::abs(s) < h2 * (1.0 - 1e-9);
    if (rod.kind == Kind::Cylinder && !inside) return false;  // the rod-cylinder's own end: not its side
    // the cap face, where the segment passes over the disk (rho <= R): closer than the rim there?
    const Vec3 pe = p0 - x_end;
    const Vec3 w0 = pe - dot3(a, pe) * a;
    const Vec3 bp = b - ab * a;
    const double A2 = dot3(bp, bp), B2 = 2.0 * dot3(w0, bp), C2 = dot3(w0, w0) - R * R;
    const double rim_distance = std::sqrt(z * z + (rho - R) * (rho - R));
    if (A2 > 0.0) {
      const double disc = B2 * B2 - 4.0 * A2 * C2;
      if (disc > 0.0) {
        const double q1 = (-B2 - std::sqrt(disc)) / (2.0 * A2), q2 = (-B2 + std::sqrt(disc)) / (2.0 * A2);
        const double s1 = std::max(q1, -h2);
        const double s2 = std::min(q2, h2);
        if (s1 <= s2) {
          double z1, z2, r1, r2;
          Vec3 w1, w2;
          at(s1, z1, w1, r1);
          at(s2, z2, w2, r2);
          if (std::min(z1, z2) < rim_distance) return false;
        }
        if (-h2 <= q1 && q2 <= h2) {
          has_other = true;
          x_other = p0 + (std::abs(q2 - s) > std::abs(q1 - s) ? q2 : q1) * b;
        }
      }
    } else if (C2 <= 0.0) {
      return false;  // the whole segment over the disk
    }
    rim_point(x_end, a, R, w, rho, x_rim, sl_rim);
    x_rod = p0 + s * b;
    sl_rod = inside ? b : Vec3::Zero();
    return true;
  }
  // contact/detection.py _core and _round_cores: the closest points of two round shapes' cores (a sphere's centre,
  // a capsule's or a cylinder side's segment along its local z) and their slides (each core's unit axis where its
  // point lies inside its segment, else zeros), the same operations in the same order
  static void core(const Shape& s, const pinocchio::SE3& M, Vec3& o, Vec3& a, double& h) {
    o = M.translation();
    if (s.kind == Kind::Capsule || s.kind == Kind::Cylinder) {
      a = M.rotation().col(2);
      h = s.half_length();
    } else {
      a.setZero();
      h = 0.0;
    }
  }
  static double clip(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }
  static void round_cores(const Shape& sA, const pinocchio::SE3& MA, const Shape& sB, const pinocchio::SE3& MB,
                          Vec3& xA, Vec3& xB, double* slide) {
    Vec3 oA, aA, oB, aB;
    double hA, hB;
    core(sA, MA, oA, aA, hA);
    core(sB, MB, oB, aB, hB);
    const Vec3 w0 = oA - oB;
    const double b = aA[0] * aB[0] + aA[1] * aB[1] + aA[2] * aB[2];
    const double d = aA[0] * w0[0] + aA[1] * w0[1] + aA[2] * w0[2];
    const double e = aB[0] * w0[0] + aB[1] * w0[1] + aB[2] * w0[2];
    const double den = 1.0 - b * b;
    double s = 0.0, t = 0.0;
    if (hA > 0.0 && hB > 0.0 && den > 1e-12) {
      s = clip((b * e - d) / den, -hA, hA);
    } else if (hA > 0.0 && hB > 0.0) {  // parallel: the middle of the overlap
      const double lo = std::max(-hA, -d - hB), hi = std::min(hA, -d + hB);
      s = lo <= hi ? 0.5 * (lo + hi) : clip(-d, -hA, hA);
    } else {
      s = hA > 0.0 ? clip(-d, -hA, hA) : 0.0;
    }
    t = hB > 0.0 ? clip(b * s + e, -hB, hB) : 0.0;
    if (hA > 0.0) s = clip(b * t - d, -hA, hA);
    for (int i = 0; i < 6; ++i) slide[i] = 0.0;
    if (hA > 0.0 && std::abs(s) < hA * (1.0 - 1e-9))
      for (int i = 0; i < 3; ++i) slide[i] = aA[i];
    if (hB > 0.0 && std::abs(t) < hB * (1.0 - 1e-9))
      for (int i = 0; i < 3; ++i) slide[3 + i] = aB[i];
    xA = oA + s * aA;
    xB = oB + t * aB;
  }

  static Points witness_points(const coal::ContactPatch& patch, bool on_A) {
    Points P(static_cast<Eigen::Index>(patch.size()), 3);
    for (size_t i = 0; i < patch.size(); ++i) {
      const Vec3 w = on_A ? patch.getPointShape2(i) : patch.getPointShape1(i);
      P.row(static_cast<Eigen::Index>(i)) = w.transpose();
    }
    return P;
  }

  static bool finite_points(const Points& P) {
    for (Eigen::Index i = 0; i < P.size(); ++i)
      if (!(std::abs(P.data()[i]) < 1e6)) return false;
    return true;
  }

  // contact/_kernels.py snap_to_vertices (in place)
  void snap_to_vertices(const Mat3& R, const Vec3& t, const Points& local, Points& pts, const Vec3& n,
                        double toward) const {
    const Eigen::Index nv = local.rows();
    Points V(nv, 3);
    for (Eigen::Index k = 0; k < nv; ++k) {
      const double l0 = local(k, 0), l1 = local(k, 1), l2 = local(k, 2);
      for (int i = 0; i < 3; ++i) V(k, i) = R(i, 0) * l0 + R(i, 1) * l1 + R(i, 2) * l2 + t[i];
    }
    const double tol2 = snap_tolerance_ * snap_tolerance_;
    for (Eigen::Index j = 0; j < pts.rows(); ++j) {
      Eigen::Index best = -1;
      double best_along = -std::numeric_limits<double>::infinity();
      for (Eigen::Index k = 0; k < nv; ++k) {
        const double d0 = V(k, 0) - pts(j, 0), d1 = V(k, 1) - pts(j, 1), d2 = V(k, 2) - pts(j, 2);
        const double along = d0 * n[0] + d1 * n[1] + d2 * n[2];
        const double g0 = d0 - along * n[0], g1 = d1 - along * n[1];
        const double g2 = planar_ ? 0.0 : d2 - along * n[2];  // planar: the out-of-plane offset does not count
        if (g0 * g0 + g1 * g1 + g2 * g2 <= tol2 && toward * along > best_along) {
          best_along = toward * along;
          best = k;
        }
      }
      if (best >= 0)
        for (int i = 0; i < 3; ++i) pts(j, i) = V(best, i);
    }
  }

  // _full_support: max over a box, hull or cylinder of d . x, in every direction
  static double full_support(const Shape& s, const pinocchio::SE3& M, const Vec3& d) {
    return s.kind == Kind::Cylinder ? extent(s, M, d) : *support(s, M, d);
  }

  // _separation: how far two boxes, hulls or cylinders part along e (from B to A)
  static double separation(const Shape& sA, const pinocchio::SE3& MA, const Shape& sB, const pinocchio::SE3& MB,
                           const Vec3& e) {
    return -full_support(sA, MA, Vec3(-e)) - full_support(sB, MB, e);
  }

  // _consistent: coal's patch of pair k along a better normal, in out (true), where a direction of the separating
  // axis test parts the shapes by more than coal's normal does, by normal_slack_ (two shapes touching exactly: a
  // normal off by mrad or by 45 deg); the candidates are _separating_axes', in its order: the face normals of A, of
  // B (a hull's only where coal's normal parts them by less than coal's distance minus face_slack_), the crossings
  // of their edges; each direction, then its opposite
  bool consistent(size_t k, pinocchio::GeometryData& gd, const coal::ContactPatch& patch,
                  coal::ContactPatch& out) const {
    const PairInfo& p = pairs_[k];
    const Shape sA = shape(p.iA), sB = shape(p.iB);
    auto poly = [](const Shape& s) { return s.kind == Kind::Box || s.kind == Kind::Convex || s.kind == Kind::Cylinder; };
    if (!poly(sA) || !poly(sB)) return false;
    const pinocchio::SE3& MA = gd.oMg[p.iA];
    const pinocchio::SE3& MB = gd.oMg[p.iB];
    const double s_n = separation(sA, MA, sB, MB, patch.getNormal());
    const bool hulls = s_n < patch.penetration_depth - face_slack_;
    double best = s_n + normal_slack_;
    Vec3 e_best;
    bool found = false;
    auto consider = [&](const Vec3& d) {
      for (const double sg : {1.0, -1.0}) {
        const Vec3 e = sg * d;
        const double s = separation(sA, MA, sB, MB, e);
        if (s > best) best = s, e_best = e, found = true;
      }
    };
    auto faces = [&](const Shape& s, const pinocchio::SE3& M) {
      const Mat3& R = M.rotation();
      if (s.kind == Kind::Box) {
        for (int i = 0; i < 3; ++i) consider(Vec3(R.col(i)));
      } else if (s.kind == Kind::Convex) {
        if (!hulls) return;
        const auto& N = normals_of(s);
        for (unsigned i = 0; i < s.convex()->num_normals_and_offsets; ++i) consider(r_mul(R, N[i]));
      } else {
        consider(Vec3(R.col(2)));
      }
    };
    auto edges = [](const Shape& s, const pinocchio::SE3& M, Vec3* e) {
      const Mat3& R = M.rotation();
      if (s.kind == Kind::Box) {
        for (int i = 0; i < 3; ++i) e[i] = R.col(i);
        return 3;
      }
      if (s.kind == Kind::Cylinder) {
        e[0] = R.col(2);
        return 1;
      }
      return 0;
    };
    faces(sA, MA);
    faces(sB, MB);
    Vec3 ea[3], eb[3];
    const int na = edges(sA, MA, ea), nb = edges(sB, MB, eb);
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j) {
        const Vec3 c = ea[i].cross(eb[j]);
        const double norm = std::sqrt(dot3(c, c));
        if (norm > 1e-6) consider(Vec3(c / norm));
      }
    if (!found) return false;
    // the patch's plane: midway between the shapes along e, through coal's point across
    const Vec3 p0 = patch.getPoint(0);
    const double mid = 0.5 * (full_support(sB, MB, e_best) - full_support(sA, MA, Vec3(-e_best)));
    const Vec3 pos = p0 + (mid - dot3(e_best, p0)) * e_best;
    const coal::CollisionGeometry* gA = gm_.geometryObjects[p.iA].geometry.get();
    const coal::CollisionGeometry* gB = gm_.geometryObjects[p.iB].geometry.get();
    coal::CollisionResult res;
    res.addContact(coal::Contact(gB, gA, coal::Contact::NONE, coal::Contact::NONE, pos, e_best, best));
    const coal::ContactPatchRequest& preq = gd.contactPatchRequests[k];
    coal::ContactPatchResult pres(preq);
    coal::computeContactPatch(gB, pinocchio::toCoalTransform3s(MB), gA, pinocchio::toCoalTransform3s(MA), res, preq,
                              pres);
    const coal::ContactPatch& again = pres.getContactPatch(0);
    if (!valid(again)) return false;
    out = again;
    return true;
  }

  // _retry: pair k recomputed by coal directly with a tighter GJK tolerance
  coal::ContactPatch retry(size_t k, pinocchio::GeometryData& gd) const {
    const PairInfo& p = pairs_[k];
    const coal::CollisionGeometry* gA = gm_.geometryObjects[p.iA].geometry.get();
    const coal::CollisionGeometry* gB = gm_.geometryObjects[p.iB].geometry.get();
    const coal::Transform3s tB = pinocchio::toCoalTransform3s(gd.oMg[p.iB]);
    const coal::Transform3s tA = pinocchio::toCoalTransform3s(gd.oMg[p.iA]);
    for (double tol : {1e-10, 1e-12}) {
      coal::CollisionRequest req;
      req.enable_contact = true;
      req.security_margin = gd.collisionRequests[k].security_margin;  // the pair's (speculative) margin
      req.gjk_tolerance = tol;
      coal::CollisionResult res;
      coal::collide(gB, tB, gA, tA, req, res);
      if (!res.isCollision()) continue;
      coal::ContactPatchRequest preq;
      coal::ContactPatchResult pres(preq);
      coal::computeContactPatch(gB, tB, gA, tA, res, preq, pres);
      const coal::ContactPatch& patch = pres.getContactPatch(0);
      if (reject_ < 2 && valid(patch)) return patch;
    }
    throw std::runtime_error("collision detection failed between '" + gm_.geometryObjects[p.iB].name + "' and '" +
                             gm_.geometryObjects[p.iA].name +
                             "' (coal returned a non-finite contact even with a tight GJK tolerance)");
  }

  // _flat_distance: signed distances of points P of body A (sign < 0) or B to a flat carrier along n
  static std::vector<double> flat_distance(const Points& P, const Vec3& n, double sign, const Shape& flat,
                                           const pinocchio::SE3& M_flat) {
    const std::optional<double> level = sign < 0 ? support(flat, M_flat, n) : support(flat, M_flat, Vec3(-n));
    if (!level) throw HandBack{};  // Python fails there (None in arithmetic): never reached for the flat carriers
    std::vector<double> phi(P.rows());
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      const double pn = P(i, 0) * n[0] + P(i, 1) * n[1] + P(i, 2) * n[2];
      phi[i] = sign < 0 ? pn - *level : -*level - pn;
    }
    return phi;
  }

  // _facing_end: the centre of the cylinder's end facing a plane of normal n
  static Vec3 facing_end(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign) {
    const Vec3 a = M.rotation().col(2);
    return M.translation() + (sign * cyl.half_length() * (dot3(a, n) > 0.0 ? 1.0 : -1.0)) * a;
  }

  // _disk_points: four points fixed on the rim of the cylinder's end facing a plane of normal n, at quarter turns
  static Points disk_points(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign) {
    const Mat3& R = M.rotation();
    const Vec3 end = facing_end(cyl, M, n, sign);
    const double r = cyl.radius();
    Points P(4, 3);
    for (int i = 0; i < 3; ++i) {
      P(0, i) = end[i] + r * R(i, 0);
      P(1, i) = end[i] + r * R(i, 1);
      P(2, i) = end[i] - r * R(i, 0);
      P(3, i) = end[i] - r * R(i, 1);
    }
    return P;
  }

  // _disk_edge_points: where the rim of the cylinder's end facing the box's face of normal n crosses the planes of that
  // face's edges, within the face's other half side (the rim's point at angle t, end + r (cos t x + sin t y), on the
  // edge plane e . (p - c) = +-h: A cos t + B sin t = C)
  static Points disk_edge_points(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign,
                                 const Shape& box, const pinocchio::SE3& M_box) {
    const Mat3& R = M.rotation();
    const Vec3 x0 = R.col(0), y0 = R.col(1);
    const Vec3 end = facing_end(cyl, M, n, sign);
    const double r = cyl.radius();
    const Mat3& RB = M_box.rotation();
    const Vec3& tB = M_box.translation();
    const int k = box_axis(M_box, n);
    const Vec3& h = box.box()->halfSide;
    std::vector<Vec3> out;
    for (int i = 0; i < 3; ++i) {
      if (i == k) continue;
      const int j = 3 - i - k;
      const Vec3 e = RB.col(i), f = RB.col(j);
      const double A = r * dot3(x0, e), B = r * dot3(y0, e);
      const double L = std::hypot(A, B);
      const double base = dot3(Vec3(end - tB), e);
      for (const double side : {-1.0, 1.0}) {
        const double C = side * h[i] - base;
        if (!(std::abs(C) < L)) continue;
        const double t0 = std::atan2(B, A), dt = std::acos(C / L);
        for (const double t : {t0 - dt, t0 + dt}) {
          const Vec3 x = end + r * (std::cos(t) * x0 + std::sin(t) * y0);
          if (std::abs(dot3(Vec3(x - tB), f)) <= h[j]) out.push_back(x);
        }
      }
    }
    Points P(static_cast<Eigen::Index>(out.size()), 3);
    for (size_t e = 0; e < out.size(); ++e) P.row(static_cast<Eigen::Index>(e)) = out[e].transpose();
    return P;
  }

  // _border_under_disk: a cylinder tilted (less than 45 deg) on the rim of its end facing the box's face of normal n,
  // its lowest rim point beyond the face: the face's corners under its disk and the edges' points below the rim's
  // crossings of them (into P), and the disk's normal from B to A (into n_disk); false: on its side, or nothing under
  static bool border_under_disk(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign, const Shape& box,
                                const pinocchio::SE3& M_box, Points& P, Vec3& n_disk) {
    const Vec3 a = M.rotation().col(2);
    if (!(std::abs(dot3(a, n)) > std::sqrt(0.5))) return false;
    const Vec3 nf = -sign * n;  // the face's outward normal
    const Vec3 end = facing_end(cyl, M, n, sign);
    const double r = cyl.radius();
    std::vector<Vec3> corners, out;
    const Vec3 centre = face_corners(box, M_box, nf, corners);
    for (const Vec3& c : corners) {
      Vec3 w = c - end;
      const double wa = dot3(w, a);
      w = Vec3(w[0] - wa * a[0], w[1] - wa * a[1], w[2] - wa * a[2]);
      if (dot3(w, w) <= r * r) out.push_back(c);
    }
    const Points edge = disk_edge_points(cyl, M, n, sign, box, M_box);
    for (Eigen::Index e = 0; e < edge.rows(); ++e) {
      const Vec3 x = edge.row(e).transpose();
      out.push_back(x - dot3(Vec3(x - centre), nf) * nf);
    }
    if (out.empty()) return false;
    P.resize(static_cast<Eigen::Index>(out.size()), 3);
    for (size_t e = 0; e < out.size(); ++e) P.row(static_cast<Eigen::Index>(e)) = out[e].transpose();
    n_disk = sign * signed_axis(M, Vec3(-nf));
    return true;
  }

  // _clip_to_face: the part of the segment P0 P1 whose projection along nf lies on the box's face of outward normal
  // nf: its two ends on the segment (where it crosses the face's edges, or P0, P1 inside); false when none is over it
  static bool clip_to_face(const Shape& box, const pinocchio::SE3& M, const Vec3& nf, const Vec3& P0, const Vec3& P1,
                           Points& Q) {
    int k;
    const Vec3 centre = face_centre(box, M, nf, k);
    const Mat3& R = M.rotation();
    const Vec3& h = box.box()->halfSide;
    const Vec3 D = P1 - P0;
    double t0 = 0.0, t1 = 1.0;
    for (int i = 0; i < 3; ++i) {
      if (i == k) continue;
      const double p = dot3(D, Vec3(R.col(i))), q = dot3(Vec3(P0 - centre), Vec3(R.col(i)));  // -h <= q + t p <= h
      if (p == 0.0) {
        if (std::abs(q) > h[i]) return false;
        continue;
      }
      const double a = (-h[i] - q) / p, b = (h[i] - q) / p;
      t0 = std::max(t0, std::min(a, b));
      t1 = std::min(t1, std::max(a, b));
    }
    if (!(t0 < t1)) return false;
    Q.resize(2, 3);
    Q.row(0) = (P0 + t0 * D).transpose();
    Q.row(1) = (P0 + t1 * D).transpose();
    return true;
  }

  // _face_centre: the middle of the box's face of outward normal nf (returned) and the box's axis k normal to it
  static Vec3 face_centre(const Shape& box, const pinocchio::SE3& M, const Vec3& nf, int& k) {
    const Mat3& R = M.rotation();
    k = box_axis(M, nf);
    const Vec3& h = box.box()->halfSide;
    return M.translation() + (dot3(Vec3(R.col(k)), nf) > 0.0 ? h[k] : -h[k]) * R.col(k);
  }

  // _face_corners: the middle of the box's face of outward normal nf (returned) and its four corners (appended to
  // corners, sides (-, -), (-, +), (+, -), (+, +) along its two other axes)
  static Vec3 face_corners(const Shape& box, const pinocchio::SE3& M, const Vec3& nf, std::vector<Vec3>& corners) {
    const Mat3& R = M.rotation();
    int k;
    const Vec3 centre = face_centre(box, M, nf, k);
    const int i = k == 0 ? 1 : 0, j = k == 2 ? 1 : 2;
    const Vec3& h = box.box()->halfSide;
    for (const double si : {-1.0, 1.0})
      for (const double sj : {-1.0, 1.0}) corners.push_back(centre + (si * h[i]) * R.col(i) + (sj * h[j]) * R.col(j));
    return centre;
  }

  // _rim_toward: the point of the rim (centre end, axis a, radius r) in the direction of d projected normal to a;
  // false when d is along a
  static bool rim_toward(const Vec3& end, const Vec3& a, double r, const Vec3& d, Vec3& x) {
    const double da = dot3(d, a);
    const Vec3 w(d[0] - da * a[0], d[1] - da * a[1], d[2] - da * a[2]);
    const double s = std::sqrt(dot3(w, w));
    if (!(s > 1e-12)) return false;
    x = end + (r / s) * w;
    return true;
  }

  // _rim_toward_cap: the rim point of the cylinder's end facing the cylinder cap's cap of normal n toward that cap's
  // axis (the far end of the two disks' overlap on the disk's side); false when the axes meet the disk's plane at one
  // point (to 1e-9 of the radii)
  static bool rim_toward_cap(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign, const Shape& cap,
                             const pinocchio::SE3& M_cap, Vec3& x) {
    const Vec3 end = facing_end(cyl, M, n, sign);
    const Vec3 af = signed_axis(M_cap, Vec3(-sign * n));  // the cap's outward normal
    Vec3 d = end - M_cap.translation() - cap.half_length() * af;
    const double da = dot3(d, af);
    d = Vec3(d[0] - da * af[0], d[1] - da * af[1], d[2] - da * af[2]);
    if (!(std::sqrt(dot3(d, d)) > 1e-9 * std::max(cyl.radius(), cap.radius()))) return false;
    return rim_toward(end, M.rotation().col(2), cyl.radius(), Vec3(-d), x);
  }

  // _rim_toward_centre: the rim point of the cylinder's end facing a box's face of normal n toward the box's centre;
  // false when that centre is over the disk's (to 1e-9 of the radius)
  static bool rim_toward_centre(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign,
                                const pinocchio::SE3& M_box, Vec3& x) {
    const Vec3 end = facing_end(cyl, M, n, sign);
    Vec3 d = end - M_box.translation();
    const double dn = dot3(d, n);
    d = Vec3(d[0] - dn * n[0], d[1] - dn * n[1], d[2] - dn * n[2]);
    if (!(std::sqrt(dot3(d, d)) > 1e-9 * cyl.radius())) return false;
    return rim_toward(end, M.rotation().col(2), cyl.radius(), Vec3(-d), x);
  }

  // _onto_disk: the point of the disk's plane (through end, normal a) on the line through x along n
  static Vec3 onto_disk(const Vec3& x, const Vec3& end, const Vec3& a, const Vec3& n) {
    return x + (dot3(Vec3(end - x), a) / dot3(n, a)) * n;
  }

  // _disk_overhang_points: the corners of the overlap of a disk nearly flat on a face and that face, besides the
  // disk's fixed rim points over it: on a box's face the rim's crossings of its edges and the face's corners under
  // the disk; on a cylinder's cap the disk's rim point toward the cap's centre (when over the cap), the rim's
  // crossings of the cap's circle, and the cap's rim points under the disk (its quarter turns and the one toward
  // the disk's centre); the face's points carried onto the disk's plane along n (same order as the Python)
  static Points disk_overhang_points(const Shape& cyl, const pinocchio::SE3& M, const Vec3& n, double sign,
                                     const Shape& face, const pinocchio::SE3& M_face) {
    const Vec3 end = facing_end(cyl, M, n, sign);
    const Vec3 a = M.rotation().col(2);
    const double r = cyl.radius();
    const Mat3& RF = M_face.rotation();
    const Vec3& tF = M_face.translation();
    const Vec3 nf = -sign * n;  // the face's outward normal
    std::vector<Vec3> out, candidates;
    if (face.kind == Kind::Box) {
      const Points edge = disk_edge_points(cyl, M, n, sign, face, M_face);
      for (Eigen::Index e = 0; e < edge.rows(); ++e) out.push_back(edge.row(e).transpose());
      face_corners(face, M_face, nf, candidates);
    } else {
      const Vec3 af = signed_axis(M_face, nf);  // the cap's outward normal
      const Vec3 centre = tF + face.half_length() * af;
      const double R2 = face.radius();
      Vec3 d = end - centre;
      const double da = dot3(d, af);
      d = Vec3(d[0] - da * af[0], d[1] - da * af[1], d[2] - da * af[2]);
      const double dist = std::sqrt(dot3(d, d));
      candidates.push_back(centre + R2 * RF.col(0));
      candidates.push_back(centre + R2 * RF.col(1));
      candidates.push_back(centre - R2 * RF.col(0));
      candidates.push_back(centre - R2 * RF.col(1));
      Vec3 x;
      if (rim_toward_cap(cyl, M, n, sign, face, M_face, x) && over_face(face, M_face, n, x)) out.push_back(x);
      if (dist > 1e-9 * std::max(r, R2)) {
        const Vec3 u = d / dist;
        candidates.push_back(centre + R2 * u);
        if (std::abs(r - R2) < dist && dist < r + R2) {  // the two circles cross (in the cap's plane)
          const double along = (dist * dist + R2 * R2 - r * r) / (2.0 * dist);
          const double half = std::sqrt(std::max(R2 * R2 - along * along, 0.0));
          const Vec3 v(af[1] * u[2] - af[2] * u[1], af[2] * u[0] - af[0] * u[2], af[0] * u[1] - af[1] * u[0]);
          for (const double side : {-1.0, 1.0})
            if (rim_toward(end, a, r, Vec3(centre + along * u + (side * half) * v - end), x)) out.push_back(x);
        }
      }
    }
    for (const Vec3& c : candidates) {
      const Vec3 x = onto_disk(c, end, a, n);
      const Vec3 e = x - end;
      if (dot3(e, e) <= r * r) out.push_back(x);
    }
    Points P(static_cast<Eigen::Index>(out.size()), 3);
    for (size_t e = 0; e < out.size(); ++e) P.row(static_cast<Eigen::Index>(e)) = out[e].transpose();
    return P;
  }

  // _face_toward: the exact outward normal of the box's face most aligned with d, or of the cylinder's cap on d's side
  static Vec3 face_toward(const Shape& face, const pinocchio::SE3& M, const Vec3& d) {
    if (face.kind == Kind::Box) return face_normal(face, M, d);
    return signed_axis(M, d);
  }

  // _rod_points: the points of a capsule or cylinder nearest a plane of normal n, into P: at its two ends (true; a
  // capsule's hemisphere point, a cylinder's lowest rim point, sliding on its rim), or for a cylinder nearly flat on
  // its disk (standing on it, or tilted less than 45 deg with 2 r |n x a| <= depth, the scene's patch depth)
  // disk_points' (false: fixed on its rim)
  static bool rod_points(const Shape& rod, const pinocchio::SE3& M, const Vec3& n, double sign, double depth,
                         Points& P) {
    const Vec3 a = M.rotation().col(2);
    Vec3 u = n;
    if (rod.kind == Kind::Cylinder) {
      const double an = dot3(a, n);
      const Vec3 w(n[0] - an * a[0], n[1] - an * a[1], n[2] - an * a[2]);
      const double s = std::sqrt(dot3(w, w));
      if (s < 1e-6 || (2.0 * rod.radius() * s <= depth && s < std::abs(an))) {
        P = disk_points(rod, M, n, sign);
        return false;
      }
      u = Vec3(w[0] / s, w[1] / s, w[2] / s);
    }
    const Vec3& centre = M.translation();
    const double hl = rod.half_length(), sr = sign * rod.radius();
    P.resize(2, 3);
    for (int i = 0; i < 3; ++i) {
      P(0, i) = (centre[i] - hl * a[i]) + sr * u[i];
      P(1, i) = (centre[i] + hl * a[i]) + sr * u[i];
    }
    return true;
  }

  // _over_face: x projects onto the box's face of normal n (within its two other half sides), or onto the cylinder's
  // cap disk (within its radius of the axis)
  static bool over_face(const Shape& face, const pinocchio::SE3& M, const Vec3& n, const Vec3& x) {
    const Vec3 d = x - M.translation();
    if (face.kind == Kind::Box) {
      const Vec3 local = rt_mul(M.rotation(), d);
      const int k = box_axis(M, n);
      const Vec3& h = face.box()->halfSide;
      for (int i = 0; i < 3; ++i)
        if (i != k && !(std::abs(local[i]) <= h[i])) return false;
      return true;
    }
    const Vec3 a = M.rotation().col(2);
    const double da = dot3(a, d);
    const Vec3 w(d[0] - da * a[0], d[1] - da * a[1], d[2] - da * a[2]);
    return dot3(w, w) <= face.radius() * face.radius();
  }

  // _rim_on_face: a cylinder's rim on a box's face or another cylinder's cap face (the face most aligned with coal's
  // normal n_coal, or the cap on its side): its rim's lowest points, or nearly flat (rod_points) its disk's four
  // points (those over the face, and where some are not the other corners of the overlap: disk_overhang_points);
  // over the face wherever within the margin, else on a box, tilted less than 45 deg, the face's border under the disk
  // against the disk (border_under_disk); on a box also the face its axis faces (coal's normal at an exact touch of an
  // edge can be any); between two cylinders an exact part first, then the larger separation (within
  // flat_tolerance_: level); a part deeper than coal's signed distance d_coal by face_slack_ dropped; false: none
  bool rim_on_face(size_t k, pinocchio::GeometryData& gd, const Vec3& n_coal, double d_coal, Output& out) const {
    const PairInfo& p = pairs_[k];
    const double margin = gd.collisionRequests[k].security_margin;
    bool found = false;
    Points bestP;
    std::vector<double> bestphi;
    Vec3 bestn, besta;
    double best_min = 0.0, best_radius = 0.0;
    bool best_rim = false, best_exact = false;
    int64_t best_carrier = 0, best_vertex = 0;
    // (cylinder is A, a direction out of the face): coal's normal, and on a box the face its axis faces (at an exact
    // touch of an edge coal's normal can be any: a disk resting on it)
    std::vector<std::pair<bool, Vec3>> faces;  // (cylinder is A, the face's normal from B to A)
    for (const bool on_A : {true, false}) {  // the cylinder is A (on B's face) or B (on A's)
      const int64_t iP = on_A ? p.iA : p.iB, iN = on_A ? p.iB : p.iA;
      const Shape cyl = shape(iP), face = shape(iN);
      if (cyl.kind != Kind::Cylinder || (face.kind != Kind::Box && face.kind != Kind::Cylinder)) continue;
      const pinocchio::SE3& M_P = gd.oMg[iP];
      const pinocchio::SE3& M_N = gd.oMg[iN];
      const double sign = on_A ? -1.0 : 1.0;  // n points from B to A: out of the face when it is B
      const Vec3 n = -sign * face_toward(face, M_N, Vec3(-sign * n_coal));
      faces.emplace_back(on_A, n);
      if (face.kind == Kind::Box) {
        const Vec3 ax = M_P.rotation().col(2);
        const Vec3 d = M_P.translation() - M_N.translation();
        const Vec3 n_axis = -sign * face_toward(face, M_N, dot3(ax, d) > 0.0 ? ax : Vec3(-ax));
        if (n_axis != n) faces.emplace_back(on_A, n_axis);
      }
    }
    for (const auto& [on_A, n_face] : faces) {
      const int64_t iP = on_A ? p.iA : p.iB, iN = on_A ? p.iB : p.iA;
      const Shape cyl = shape(iP), face = shape(iN);
      const pinocchio::SE3& M_P = gd.oMg[iP];
      const pinocchio::SE3& M_N = gd.oMg[iN];
      double sign = on_A ? -1.0 : 1.0;
      Vec3 n = n_face;
      const Vec3 a = M_P.rotation().col(2);
      Points P;
      bool rim = rod_points(cyl, M_P, n, sign, patch_depth_, P);
      bool exact = true;  // every point fixed on the disk's rim or sliding on it as the Jacobians hold
      if (!rim) {  // a disk overhanging the face: its fixed points over it and the overlap's corners
        std::vector<Eigen::Index> over;
        for (Eigen::Index e = 0; e < P.rows(); ++e)
          if (over_face(face, M_N, n, Vec3(P.row(e).transpose()))) over.push_back(e);
        if (static_cast<Eigen::Index>(over.size()) < P.rows()) {
          const Points edge = disk_overhang_points(cyl, M_P, n, sign, face, M_N);
          Points Q(static_cast<Eigen::Index>(over.size()) + edge.rows(), 3);
          for (size_t e = 0; e < over.size(); ++e) Q.row(static_cast<Eigen::Index>(e)) = P.row(over[e]);
          for (Eigen::Index e = 0; e < edge.rows(); ++e) Q.row(static_cast<Eigen::Index>(over.size()) + e) = edge.row(e);
          P = Q;
          exact = false;
        } else if ((face.kind == Kind::Cylinder || face.kind == Kind::Box) && dot3(n, up_) * sign > 0.0) {
          // a larger cap or a box resting on this disk (its outward normal down): also the rim point toward its axis
          // or centre, where a can or a box off centre on a smaller post tips; it slides on the rim, taken as fixed
          // (ranked exact still)
          Vec3 x;
          if (face.kind == Kind::Cylinder ? rim_toward_cap(cyl, M_P, n, sign, face, M_N, x)
                                          : rim_toward_centre(cyl, M_P, n, sign, M_N, x) &&
                                                over_face(face, M_N, n, x)) {
            P.conservativeResize(P.rows() + 1, 3);
            P.row(P.rows() - 1) = x.transpose();
          }
        }
      }
      Eigen::Index np = P.rows();
      std::vector<double> phi = flat_distance(P, n, sign, face, M_N);
      std::vector<char> keep(np);
      bool any = false;
      double lowest = std::numeric_limits<double>::infinity();
      const auto measure = [&]() {  // keep, any, lowest of phi
        keep.assign(np, 0);
        any = false;
        lowest = std::numeric_limits<double>::infinity();
        for (Eigen::Index e = 0; e < np; ++e) {
          keep[e] = phi[e] <= margin;
          any = any || keep[e];
          lowest = std::min(lowest, phi[e]);
        }
      };
      measure();
      if (!any) continue;
      const Shape* flat = &face;  // flip: the disk carries the normal, the face's border the points
      const pinocchio::SE3* M_flat = &M_N;
      bool flip = false;
      bool over = true;  // standing on its disk: its points are over the face or on its border already
      if (rim) {
        Vec3 span[2] = {Vec3(P.row(0).transpose()), Vec3(P.row(1).transpose())};
        if (!(keep[0] && keep[1])) {  // from the kept end to where the lowest line leaves the margin (phi is linear)
          const int i = keep[0] ? 0 : 1;
          const double t = (margin - phi[i]) / (phi[1 - i] - phi[i]);
          span[0] = Vec3(P.row(i).transpose());
          span[1] = span[0] + t * (Vec3(P.row(1 - i).transpose()) - span[0]);
        }
        over = over_face(face, M_N, n, span[0]) && over_face(face, M_N, n, span[1]);
        if (!over && face.kind == Kind::Box && !(std::abs(dot3(a, n)) > std::sqrt(0.5))) {
          // on its side across a box's face (a log under a box): its lowest line where it is over the face
          Points Q;
          if (!clip_to_face(face, M_N, Vec3(-sign * n), Vec3(P.row(0).transpose()), Vec3(P.row(1).transpose()), Q))
            continue;
          P = Q;
          exact = false;
          np = P.rows();
          phi = flat_distance(P, n, sign, face, M_N);
          measure();
          if (!any) continue;
          over = true;
        }
      }
      if (!over) {  // a tilted disk whose lowest rim point is beyond a box's face: on the face's border under the disk
        Vec3 n_disk;
        if (!rim || face.kind != Kind::Box || !border_under_disk(cyl, M_P, n, sign, face, M_N, P, n_disk)) continue;
        n = n_disk;
        sign = -sign;
        flat = &cyl;
        M_flat = &M_P;
        flip = true;
        exact = false;
        rim = false;
        np = P.rows();
        phi = flat_distance(P, n, sign, *flat, *M_flat);
        measure();
        if (!any) continue;
      }
      // not where they touch when deeper than coal's signed distance by more than face_slack_ (a box on a log faced
      // its side by the log's axis: -0.237 m)
      if (lowest < d_coal - face_slack_) continue;
      // an exact part first (a small disk on a larger cap rather than the cap's points carried onto the larger
      // disk), then the larger separation; separations within flat_tolerance_ are level (the first order kept)
      if (found && (exact < best_exact || (exact == best_exact && lowest <= best_min + flat_tolerance_))) continue;
      Points kept(np, 3);
      std::vector<double> phik;
      for (Eigen::Index e = 0; e < np; ++e)
        if (keep[e]) {
          kept.row(static_cast<Eigen::Index>(phik.size())) = P.row(e);
          phik.push_back(phi[e]);
        }
      kept.conservativeResize(static_cast<Eigen::Index>(phik.size()), 3);
      if (planar_) {
        kept = merge_planar(kept);
        phik = flat_distance(kept, n, sign, *flat, *M_flat);
      }
      found = true;
      best_min = lowest;
      best_exact = exact;
      bestP = kept;
      bestphi = phik;
      bestn = n;
      best_rim = rim;
      besta = a;
      best_radius = rim ? sign * cyl.radius() : 0.0;  // the disk's points: body-fixed vertices
      best_carrier = on_A != flip ? p.jB : p.jA;
      best_vertex = on_A != flip ? p.jA : p.jB;
    }
    if (found)
      out.add(bestP, bestn, bestphi, p.jA, p.jB, best_carrier, best_vertex, best_radius, static_cast<int64_t>(k),
              best_rim ? &besta : nullptr);
    return found;
  }

  // _chord_end: the other end of the chord along which a rod lies across a cylinder's end, touching its rim at one
  // end: the rod's lowest point over it (fixed on the rod) against the cap's plane, within the margin
  void chord_end(size_t k, pinocchio::GeometryData& gd, const Chord& chord, Output& out) const {
    const PairInfo& p = pairs_[k];
    const int64_t iR = chord.rod_is_A ? p.iA : p.iB, iC = chord.rod_is_A ? p.iB : p.iA;
    const Shape rod = shape(iR);
    const Vec3 b = gd.oMg[iR].rotation().col(2);
    const Vec3 a = signed_axis(gd.oMg[iC], Vec3(chord.x_end - gd.oMg[iC].translation()));  // out of this end
    Vec3 u = a;
    if (rod.kind == Kind::Cylinder) {
      const double ab = dot3(a, b);
      u = Vec3(a[0] - ab * b[0], a[1] - ab * b[1], a[2] - ab * b[2]);
    }
    u = u / std::sqrt(dot3(u, u));
    const double r = rod.radius();
    const Vec3 x(chord.x_seg[0] - r * u[0], chord.x_seg[1] - r * u[1], chord.x_seg[2] - r * u[2]);
    const double phi = dot3(a, Vec3(x - chord.x_end));
    if (!(phi <= gd.collisionRequests[k].security_margin)) return;
    Points P(1, 3);
    for (int i = 0; i < 3; ++i) P(0, i) = x[i];
    const std::vector<double> ph{phi};
    const Vec3 n = chord.rod_is_A ? a : Vec3(-a);
    out.add(P, n, ph, p.jA, p.jB, chord.rod_is_A ? p.jB : p.jA, chord.rod_is_A ? p.jA : p.jB, 0.0,
            static_cast<int64_t>(k), nullptr);
  }

  // _capsule_on_face: a capsule (A when on_A) lying on a box's face or a cylinder's cap face of exact normal n, both
  // ends over it: each end's hemisphere point with its own distance, those within the margin (true: added to out)
  bool capsule_on_face(size_t k, pinocchio::GeometryData& gd, const Vec3& n, bool on_A, double d_coal,
                       Output& out) const {
    const PairInfo& p = pairs_[k];
    const int64_t iP = on_A ? p.iA : p.iB, iN = on_A ? p.iB : p.iA;
    const Shape cap = shape(iP), face = shape(iN);
    if (cap.kind != Kind::Capsule) return false;
    const pinocchio::SE3& M_P = gd.oMg[iP];
    const pinocchio::SE3& M_N = gd.oMg[iN];
    if (!((face.kind == Kind::Box && aligned(face, M_N, n)) || on_cap(face, M_N, n))) return false;
    const double sign = on_A ? -1.0 : 1.0;
    Points P;
    rod_points(cap, M_P, n, sign, patch_depth_, P);
    for (Eigen::Index e = 0; e < P.rows(); ++e)
      if (!over_face(face, M_N, n, Vec3(P.row(e).transpose()))) return false;
    const std::vector<double> phi = flat_distance(P, n, sign, face, M_N);
    if (*std::min_element(phi.begin(), phi.end()) < d_coal - face_slack_) return false;
    const std::vector<double> phik = within_margin(P, phi, gd.collisionRequests[k].security_margin, n, sign, face, M_N);
    if (phik.empty()) return false;
    const int64_t carrier = on_A ? p.jB : p.jA, point_body = on_A ? p.jA : p.jB;
    out.add(P, n, phik, p.jA, p.jB, carrier, point_body, sign * cap.radius(), static_cast<int64_t>(k), nullptr);
    return true;
  }

  // the rows of P within the margin (P keeps them) and their distances to the flat carrier along n, merged in a
  // planar scene (the distances then measured again)
  std::vector<double> within_margin(Points& P, const std::vector<double>& phi, double margin, const Vec3& n,
                                    double sign, const Shape& flat, const pinocchio::SE3& M_flat) const {
    Points kept(P.rows(), 3);
    std::vector<double> phik;
    for (Eigen::Index e = 0; e < P.rows(); ++e)
      if (phi[e] <= margin) {
        kept.row(static_cast<Eigen::Index>(phik.size())) = P.row(e);
        phik.push_back(phi[e]);
      }
    kept.conservativeResize(static_cast<Eigen::Index>(phik.size()), 3);
    P = kept;
    if (planar_ && P.rows() > 0) {
      P = merge_planar(P);
      phik = flat_distance(P, n, sign, flat, M_flat);
    }
    return phik;
  }

  // _rod_on_flat: a capsule or cylinder against a flat carrier
  void rod_on_flat(size_t k, pinocchio::GeometryData& gd, Output& out) const {
    const PairInfo& p = pairs_[k];
    const double sign = p.rod_sign;
    const int64_t i_rod = sign < 0 ? p.iA : p.iB, i_flat = sign < 0 ? p.iB : p.iA;
    const Shape rod = shape(i_rod), flat = shape(i_flat);
    const pinocchio::SE3& M_rod = gd.oMg[i_rod];
    const pinocchio::SE3& M_flat = gd.oMg[i_flat];
    Vec3 n = r_mul(M_flat.rotation(), flat.plane_n());
    if (sign > 0) n = -n;
    const double margin = gd.collisionRequests[k].security_margin;  // the pair's (speculative) margin
    Points P;
    const bool rim = rod_points(rod, M_rod, n, sign, patch_depth_, P);
    const Vec3 a = M_rod.rotation().col(2);
    const double radius = rim ? sign * rod.radius() : 0.0;
    const bool with_axis = rim && rod.kind == Kind::Cylinder;
    const std::vector<double> phik = within_margin(P, flat_distance(P, n, sign, flat, M_flat), margin, n, sign, flat,
                                                   M_flat);
    const int64_t jr = sign < 0 ? p.jA : p.jB, jf = sign < 0 ? p.jB : p.jA;
    if (P.rows() > 0)
      out.add(P, n, phik, p.jA, p.jB, jf, jr, radius, static_cast<int64_t>(k), with_axis ? &a : nullptr);
  }

  // _hull_part: false when no vertex is close
  bool hull_part(size_t k, const Vec3& n, pinocchio::GeometryData& gd, bool face, Output& out) const {
    const PairInfo& p = pairs_[k];
    const Shape sB = shape(p.iB);
    const pinocchio::SE3& M_B = gd.oMg[p.iB];
    Points P = ground_patch(p.iA, gd.oMg[p.iA], n, face ? &sB : nullptr, M_B);
    if (P.rows() == 0) return false;
    if (face) {
      // overhanging the face: also the face's corners under the hull, within the patch depth of the lowest point
      const Points under = corners_under_hull(shape(p.iA), gd.oMg[p.iA], sB, M_B, n);
      if (under.rows() > 0) {
        const std::vector<double> phi = flat_distance(P, n, -1.0, sB, M_B);
        const std::vector<double> phi_u = flat_distance(under, n, -1.0, sB, M_B);
        const double low = *std::min_element(phi.begin(), phi.end());
        const Eigen::Index own = P.rows();  // not one of the hull's own points (flush with the face's edge)
        Eigen::Index m = own;
        for (Eigen::Index e = 0; e < under.rows(); ++e) {
          if (!(phi_u[e] <= low + patch_depth_)) continue;
          bool near = false;
          for (Eigen::Index r = 0; r < own && !near; ++r) {
            const Vec3 d(under(e, 0) - P(r, 0), under(e, 1) - P(r, 1), under(e, 2) - P(r, 2));
            near = dot3(d, d) <= snap_tolerance_ * snap_tolerance_;
          }
          if (near) continue;
          P.conservativeResize(m + 1, 3);
          P.row(m++) = under.row(e);
        }
      }
    }
    if (planar_) P = merge_planar(P);
    out.add(P, n, flat_distance(P, n, -1.0, sB, M_B), p.jA, p.jB, p.jB, p.jA, 0.0, static_cast<int64_t>(k), nullptr);
    return true;
  }

  // _corners_under_hull: the hull's points right above the corners of the box's face of outward normal n, along n,
  // for those corners under the hull (the line through the corner meets every face plane N . x + d <= 0's half)
  static Points corners_under_hull(const Shape& hull, const pinocchio::SE3& M, const Shape& box,
                                   const pinocchio::SE3& M_box, const Vec3& n) {
    constexpr double kHullParallel = 1e-12;  // HULL_PARALLEL
    const Mat3& R = M.rotation();
    const Vec3& t = M.translation();
    const auto& N = normals_of(hull);
    const unsigned nf = hull.convex()->num_normals_and_offsets;
    if (!hull.convex()->offsets || hull.convex()->offsets->size() < nf) throw HandBack{};
    const auto& d = *hull.convex()->offsets;
    const Vec3 nl = rt_mul(R, n);
    std::vector<Vec3> corners;
    face_corners(box, M_box, n, corners);
    Points out(0, 3);
    for (const Vec3& c : corners) {
      const Vec3 cl = rt_mul(R, Vec3(c - t));
      double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
      bool meets = true;
      for (unsigned f = 0; f < nf; ++f) {
        const double b = N[f][0] * nl[0] + N[f][1] * nl[1] + N[f][2] * nl[2];
        const double a = N[f][0] * cl[0] + N[f][1] * cl[1] + N[f][2] * cl[2] + d[f];
        if (b > kHullParallel) hi = std::min(hi, -a / b);
        else if (b < -kHullParallel) lo = std::max(lo, -a / b);
        else if (a > kHullParallel) meets = false;  // a side face along n: the line within it or outside
      }
      if (meets && lo <= hi && lo > -std::numeric_limits<double>::infinity()) {
        out.conservativeResize(out.rows() + 1, 3);
        for (int i = 0; i < 3; ++i) out(out.rows() - 1, i) = c[i] + lo * n[i];
      }
    }
    return out;
  }

  // _extremes: indices (sorted, distinct) into the rows `idx` of C farthest along each direction
  template <int m>
  static std::vector<size_t> extremes(const std::vector<Vec3>& C, const std::vector<size_t>& rows, const double* t1,
                                      const double* t2, const Eigen::Matrix<double, 2, m>& dirs) {
    std::set<size_t> found;
    for (int j = 0; j < m; ++j) {
      const double w0 = t1[0] * dirs(0, j) + t2[0] * dirs(1, j);
      const double w1 = t1[1] * dirs(0, j) + t2[1] * dirs(1, j);
      const double w2 = t1[2] * dirs(0, j) + t2[2] * dirs(1, j);
      size_t best = 0;
      double best_v = 0.0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const Vec3& c = C[rows[r]];
        const double v = c[0] * w0 + c[1] * w1 + c[2] * w2;
        if (r == 0 || v > best_v) {
          best_v = v;
          best = r;
        }
      }
      found.insert(best);
    }
    return std::vector<size_t>(found.begin(), found.end());
  }

  // _ground_patch: world points of convex object i (pose M) touching a plane of normal n
  Points ground_patch(int64_t i, const pinocchio::SE3& M, const Vec3& n, const Shape* box, const pinocchio::SE3& MB) const {
    const Points& V = vertices_[i];
    const Mat3& R = M.rotation();
    const Vec3& t = M.translation();
    const Vec3 nl = rt_mul(R, n);
    const Eigen::Index nvtx = V.rows();
    std::vector<double> h(nvtx);
    double hmin = std::numeric_limits<double>::infinity();
    for (Eigen::Index r = 0; r < nvtx; ++r) {
      h[r] = V(r, 0) * nl[0] + V(r, 1) * nl[1] + V(r, 2) * nl[2];
      hmin = std::min(hmin, h[r]);
    }
    std::vector<size_t> cand;
    for (Eigen::Index r = 0; r < nvtx; ++r)
      if (h[r] <= hmin + patch_depth_) cand.push_back(static_cast<size_t>(r));
    if (box != nullptr) {
      const Mat3& RB = MB.rotation();
      const Vec3& tB = MB.translation();
      const Vec3 c = rt_mul(RB, n);
      int axis = 0;
      for (int a = 1; a < 3; ++a)
        if (std::abs(c[a]) > std::abs(c[axis])) axis = a;
      const Vec3& half = box->box()->halfSide;
      std::vector<size_t> inside;
      size_t low = 0;  // argmin of h over the candidates
      for (size_t r = 1; r < cand.size(); ++r)
        if (h[cand[r]] < h[cand[low]]) low = r;
      bool low_inside = false;
      for (size_t r = 0; r < cand.size(); ++r) {
        const Vec3 v(V(cand[r], 0), V(cand[r], 1), V(cand[r], 2));
        const Vec3 w = to_world(R, t, v);
        const Vec3 d(w[0] - tB[0], w[1] - tB[1], w[2] - tB[2]);
        const Vec3 local = rt_mul(RB, d).cwiseAbs();
        bool in = true;
        for (int a = 0; a < 3; ++a)
          if (a != axis && !(local[a] <= half[a] + margin_)) in = false;
        if (in) inside.push_back(cand[r]);
        if (r == low) low_inside = in;
      }
      if (!low_inside) return Points(0, 3);
      cand = inside;
    }
    if (static_cast<int64_t>(cand.size()) > max_patch_points_) {
      const TangentBasis b = tangent_basis(nl[0], nl[1], nl[2]);
      std::vector<Vec3> C(cand.size());
      std::vector<double> hc(cand.size());
      for (size_t r = 0; r < cand.size(); ++r) {
        C[r] = Vec3(V(cand[r], 0), V(cand[r], 1), V(cand[r], 2));
        hc[r] = h[cand[r]];
      }
      std::vector<size_t> all(cand.size());
      for (size_t r = 0; r < all.size(); ++r) all[r] = r;
      std::vector<size_t> keep = extremes(C, all, b.t, b.s, dir4_);
      size_t lowest = 0;
      for (size_t r = 1; r < hc.size(); ++r)
        if (hc[r] < hc[lowest]) lowest = r;
      double keep_min = std::numeric_limits<double>::infinity();
      for (size_t e : keep) keep_min = std::min(keep_min, hc[e]);
      if (hc[lowest] < keep_min - flat_tolerance_) {  // curved: the lowest, and 3 around it if flat there
        std::vector<size_t> L;
        for (size_t r = 0; r < hc.size(); ++r)
          if (hc[r] <= hc[lowest] + flat_tolerance_) L.push_back(r);
        if (L.size() > 1) {
          std::vector<size_t> sub = extremes(C, L, b.t, b.s, dir4_);
          std::vector<size_t> picked;
          for (size_t s : sub) picked.push_back(L[s]);
          L = picked;
        }
        std::set<size_t> chosen(L.begin(), L.end());
        for (size_t e : extremes(C, all, b.t, b.s, dir3_)) {
          const double d0 = C[e][0] - C[lowest][0], d1 = C[e][1] - C[lowest][1], d2 = C[e][2] - C[lowest][2];
          const double rise = hc[e] - hc[lowest];
          const double run = std::sqrt(std::max(d0 * d0 + d1 * d1 + d2 * d2 - rise * rise, 0.0));
          if (rise <= curved_slope_ * run) chosen.insert(e);
        }
        keep.assign(chosen.begin(), chosen.end());
      }
      std::vector<size_t> kept;
      for (size_t e : keep) kept.push_back(cand[e]);
      cand = kept;
    }
    Points out(static_cast<Eigen::Index>(cand.size()), 3);
    for (size_t r = 0; r < cand.size(); ++r) {
      const Vec3 w = to_world(R, t, Vec3(V(cand[r], 0), V(cand[r], 1), V(cand[r], 2)));
      out.row(static_cast<Eigen::Index>(r)) = w.transpose();
    }
    return out;
  }

  friend void contactraj::bind_detection(nb::module_&);
  int reject_ = 0;  // tests only: 1 rejects coal's first patch of every pair (the retry runs), 2 every patch

  nb::object geometry_;  // keeps the scene's GeometryModel alive
  pinocchio::GeometryModel& gm_;
  std::vector<PairInfo> pairs_;
  std::vector<Points> vertices_;
  double margin_, patch_depth_;
  std::vector<double> reach_;  // per geometry object (speculative margins), or empty
  bool planar_;
  Vec3 up_;  // the world's up axis (unit): which of two disks rests on the other
  double snap_tolerance_, flat_tolerance_, face_slack_, normal_slack_, curved_slope_;
  int64_t max_patch_points_;
  Eigen::Matrix<double, 2, 4> dir4_;
  Eigen::Matrix<double, 2, 3> dir3_;
};

}  // namespace

// For the fused step (step.cpp): Detector::detect of a Python Detector object.
nb::object detect_with(nb::handle detector, nb::handle model, nb::handle data, nb::handle gdata,
                       const Eigen::VectorXd& q, const Eigen::VectorXd& v, double dt) {
  return nb::inst_ptr<Detector>(detector)->detect(model, data, gdata, q, v, dt);
}

bool speculative_with(nb::handle detector) { return nb::inst_ptr<Detector>(detector)->speculative(); }

bool margins_grow_with(nb::handle detector, nb::handle model, nb::handle data, nb::handle gdata,
                       const Eigen::VectorXd& q, const Eigen::VectorXd& v, double dt) {
  return nb::inst_ptr<Detector>(detector)->margins_grow(model, data, gdata, q, v, dt);
}

void bind_detection(nb::module_& m) {
  if (_import_array() < 0) throw nb::python_error();
  nb::class_<Detector>(m, "Detector",
                       "The compiled twin of CollisionScene.detect (contact/detection.py), built once per scene")
      .def(nb::init<nb::object, std::vector<std::vector<int64_t>>, std::vector<std::optional<Points>>, double, double,
                    bool, double, double, double, int64_t, Eigen::Matrix<double, 2, 4>, Eigen::Matrix<double, 2, 3>,
                    Vec3, double, double>(),
           nb::arg("geometry"), nb::arg("pairs"), nb::arg("vertices"), nb::arg("margin"), nb::arg("patch_depth"),
           nb::arg("planar"), nb::arg("snap_tolerance"), nb::arg("flat_tolerance"), nb::arg("curved_slope"),
           nb::arg("max_patch_points"), nb::arg("directions4"), nb::arg("directions3"), nb::arg("up"),
           nb::arg("face_slack"), nb::arg("normal_slack"))
      .def_rw("test_reject", &Detector::reject_,
              "tests only: 1 treats coal's first patch of every pair as invalid (the retry with tighter "
              "GJK tolerances runs), 2 every patch (the retry fails with its error); 0 (default) neither")
      .def("set_reach", &Detector::set_reach, nb::arg("reach"),
           "speculative margins: each geometry object's reach about its joint's origin (empty: none)")
      .def("margins_grow", &Detector::margins_grow, nb::arg("model"), nb::arg("data"), nb::arg("gdata"),
           nb::arg("q"), nb::arg("v"), nb::arg("dt"),
           "whether some pair's speculative margin at the velocity bound v exceeds the one gdata holds")
      .def("detect", &Detector::detect, nb::arg("model"), nb::arg("data"), nb::arg("gdata"), nb::arg("q"),
           nb::arg("v") = nb::none(), nb::arg("dt") = 0.0,
           "Contacts at q as arrays (points, normals, phi, body_a, body_b, normal_body, point_body, radius, pair, "
           "axis, gap, slide), or None where the Python reference must run instead; with speculative margins "
           "(set_reach) each pair's margin covers dt times its objects' speeds at the velocity v");
}

}  // namespace contactraj
