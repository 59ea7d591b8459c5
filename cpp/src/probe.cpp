// A probe of the binding path: Pinocchio objects passed from Python reach C++ by reference.
#include "common.hpp"
#include <nanobind/eigen/dense.h>
#include <pinocchio/algorithm/aba-derivatives.hpp>

namespace contactraj {
void bind_probe(nb::module_& m) {
  m.def(
      "aba_derivatives_probe",
      [](nb::handle model, nb::handle data, const Eigen::VectorXd& q, const Eigen::VectorXd& v,
         const Eigen::VectorXd& tau) {
        auto& M = model_of(model);
        auto& D = data_of(data);
        if (q.size() != M.nq || v.size() != M.nv || tau.size() != M.nv)
          throw nb::value_error("q, v, tau sizes do not match the model (nq, nv, nv)");
        pinocchio::computeABADerivatives(M, D, q, v, tau);
        return Eigen::MatrixXd(D.ddq_dq);
      },
      "ddq/dq by pinocchio::computeABADerivatives called from C++ on the caller's model and data");
}
}  // namespace contactraj
