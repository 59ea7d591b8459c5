// Shared helpers of the compiled core: the Pinocchio/coal objects of the Python bindings.
#pragma once
#include <nanobind/nanobind.h>
#include <boost/python.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/geometry.hpp>
#include <string>
#include <typeinfo>

namespace contactraj {
namespace nb = nanobind;

// The C++ object behind a Pinocchio (boost.python) binding object, by reference: the same
// Model/Data/GeometryModel/GeometryData the Python code uses, no copy. Raises TypeError naming
// what was expected when `obj` is something else.
template <class T>
T& borrow(nb::handle obj, const char* what) {
  void* p = boost::python::converter::get_lvalue_from_python(
      obj.ptr(), boost::python::converter::registered<T>::converters);
  if (p == nullptr) {
    PyErr_Clear();  // boost.python may leave a conversion error set
    std::string got = nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())))).c_str();
    throw nb::type_error((std::string("expected a ") + what + ", got " + got).c_str());
  }
  return *static_cast<T*>(p);
}

inline pinocchio::Model& model_of(nb::handle h) { return borrow<pinocchio::Model>(h, "pinocchio.Model"); }
inline pinocchio::Data& data_of(nb::handle h) { return borrow<pinocchio::Data>(h, "pinocchio.Data"); }
inline pinocchio::GeometryModel& geometry_of(nb::handle h) {
  return borrow<pinocchio::GeometryModel>(h, "pinocchio.GeometryModel");
}
inline pinocchio::GeometryData& geometry_data_of(nb::handle h) {
  return borrow<pinocchio::GeometryData>(h, "pinocchio.GeometryData");
}

// Each part of the core binds its functions in its own file (bind_<part> in src/<part>.cpp),
// declared here and called by module.cpp.
void bind_probe(nb::module_& m);
void bind_detection(nb::module_& m);
void bind_kinematics(nb::module_& m);
void bind_lcp(nb::module_& m);
void bind_step(nb::module_& m);
void bind_fused_step(nb::module_& m);
void bind_params(nb::module_& m);
void bind_ncp(nb::module_& m);
void bind_relaxed(nb::module_& m);
}  // namespace contactraj
