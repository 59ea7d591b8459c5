// Contact kinematics and the implicit-derivative kernels of one step, on Eigen types: the C++
// twins of contact/_kernels.py (contact_geometry, force_derivative, velocity_derivative),
// contact/adapter.py (fixed_impulse_velocity_derivative, _solve_reduced, _implicit_velocity)
// and the least squares of dynamics/contact_step.py's position correction. Same operations in
// the same order as the Python/numba code (see there for the maths), so results agree to
// round-off. Plain functions: kinematics.cpp binds them thinly, and a fused step can call them
// directly. Bad input throws std::invalid_argument (ValueError in Python) naming what is wrong.
//
// Layout: the arrays the Python code keeps as 3-D/4-D C-order arrays are row-major matrices here,
// with the leading axes stacked into rows (the same memory):
//   J (nc*r, nv); D (nc*3, r) = D[c, i, j]; dD (nc*r*3, nv) = dD[c, j, i, k];
//   dp (nc*3, nv); J6A/J6B (nc*6, nv).
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <pinocchio/multibody.hpp>

#include "linalg.hpp"  // RowMat, RANK_RTOL, lstsq, solve

namespace contactraj {

// ``mask`` (nv, nv): dof k's joint supports dof i's joint; ``support`` (njoints, nv): dof k's joint
// supports joint j (row 0, the world, is 0). As contact/kinematics.py support_masks.
struct SupportMasks {
  RowMat mask, support;
};
SupportMasks support_masks(const pinocchio::Model& model);

// One step's contact kinematics (contact/kinematics.py ContactGeometry, stacked as above).
struct ContactGeometry {
  int nc = 0, r = 0, nv = 0;
  RowMat J, D, dD, dp, J6A, J6B;
};

// contact/_kernels.py contact_geometry. ``Jw`` (6, nv): Pinocchio's data.J after
// computeJointJacobians; ``support`` (njoints, nv); body indices (nc,); ``points``, ``normals``,
// ``axes`` (nc, 3); ``radius``, ``gaps`` (nc,), ``slides`` (nc, 6) (Contacts.gap, .slide: two round shapes' centre
// line, whose normal turns with both cores; contact/_kernels.py centre_line).
ContactGeometry contact_geometry(const Eigen::Ref<const Eigen::MatrixXd>& Jw, const CRowRef& support,
                                 const CIdxRef& body_a, const CIdxRef& body_b, const CIdxRef& normal_body,
                                 const CIdxRef& point_body, const CRowRef& points, const CRowRef& normals,
                                 const CVecRef& radius, const CRowRef& axes, const CVecRef& gaps, const CRowRef& slides,
                                 bool planar);
// The same into ``g``, whose buffers are reused when their sizes fit (a caller that makes one per call).
void contact_geometry_into(ContactGeometry& g, const Eigen::Ref<const Eigen::MatrixXd>& Jw, const CRowRef& support,
                           const CIdxRef& body_a, const CIdxRef& body_b, const CIdxRef& normal_body,
                           const CIdxRef& point_body, const CRowRef& points, const CRowRef& normals,
                           const CVecRef& radius, const CRowRef& axes, const CVecRef& gaps, const CRowRef& slides,
                           bool planar);

// contact/_kernels.py force_derivative: d(J(q)^T lambda)/dq (nv, nv) with ``lam`` (nc*r,) held.
// ``out`` must be (nv, nv); ``mask`` (nv, nv).
void force_derivative(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                      const CRowRef& dp, const CRowRef& points, const CVecRef& lam, const CRowRef& mask,
                      Eigen::Ref<RowMat> out);

// contact/_kernels.py velocity_derivative: d(J(q) v)/dq (nc*r, nv) at a fixed ``v`` (nv,).
void velocity_derivative(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                         const CRowRef& dp, const CRowRef& points, const CVecRef& v, const CRowRef& mask,
                         Eigen::Ref<RowMat> out);

// The geometry's ``nc`` and ``r`` checked against the stacked arrays (throws when inconsistent).
void check_geometry(const CRowRef& J6A, const CRowRef& J6B, const CRowRef& D, const CRowRef& dD,
                    const CRowRef& dp, const CRowRef& points, const CRowRef& mask, const char* fn);

// contact/adapter.py fixed_impulse_velocity_derivative: J G, plus slope * J on the rows ``rows``
// and dJv on the first dJv.rows() rows (both on the first nv columns).
RowMat fixed_impulse_velocity_derivative(const CRowRef& J, const CRowRef& G, const CIdxRef& rows,
                                         const CVecRef& slope, const CRowRef& dJv);

// contact/adapter.py _solve_reduced: dz (z, ncols) of E dz = -(Fc dc + Fphi dphi); ``Fphi`` with no
// rows: no distance term; ``regular``: plain solve, else least squares with RANK_RTOL (``symmetric``:
// E is symmetric, sym_lstsq; else lstsq).
RowMat solve_reduced(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                     const CRowRef& dphi, bool regular, bool symmetric = false);

// contact/adapter.py _implicit_velocity: G + MJt dlambda, dlambda = P dz (``P`` with no columns:
// dlambda[unknowns] = dz).
RowMat implicit_velocity(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                         const CRowRef& dphi, bool regular, const CRowRef& P, const CIdxRef& unknowns,
                         const CRowRef& MJt, const CRowRef& G, bool symmetric = false);

// contact/adapter.py lambda_jacobian's solve and mapping: (m, ncols) dlambda from dz (m = Fc.cols()).
RowMat lambda_jacobian(const CRowRef& E, const CRowRef& Fc, const CRowRef& Fphi, const CRowRef& dc,
                       const CRowRef& dphi, bool regular, const CRowRef& P, const CIdxRef& unknowns,
                       bool symmetric = false);

// dynamics/contact_step.py ContactModel._reference_correction: the position correction of the deep rows
// ``rows`` of J with distances ``phi_deep``: e = erp (-phi_deep - slop); on the kept rows (all at first)
// W = MJt[:, rows[keep]], A = J[rows[keep]] W, lam = lstsq(A, e[keep], RANK_RTOL); while the smallest
// multiplier pulls (lam_a < -CORRECTION_PULL max|lam|), its row leaves ``keep`` (the first such minimum) and
// the rest is solved again; dq = W lam. ``keep`` indexes ``rows``.
struct Correction {
  RowMat W, A;
  Eigen::VectorXd lam, dq;
  IdxVec keep;
};
//: relative size of a multiplier below which a correction row pulls (ContactModel: CORRECTION_PULL)
constexpr double CORRECTION_PULL = 1e-9;
Correction position_correction(const CRowRef& J, const CRowRef& MJt, const CIdxRef& rows, const CVecRef& phi_deep,
                               double erp, double slop);

// The end of ContactModel.correction_jacobian: D + W lstsq(A, -erp Jd - K - Jd D, RANK_RTOL) (nv, nv),
// with Jd = J[rows] (k, nv), K (k, nv), D (nv, nv).
RowMat correction_jacobian(const CRowRef& A, const CRowRef& W, const CRowRef& Jd, const CRowRef& K, const CRowRef& D,
                           double erp);

}  // namespace contactraj
