// The compiled step core: see contact/core.py for how Python finds and checks it.
#include "common.hpp"
#include "source_hash.hpp"  // generated at build time (cpp/source_hash.cmake)

NB_MODULE(contactraj_core, m) {
  m.doc() = "contactraj's compiled step core (nanobind; Pinocchio and coal from the pin/coal wheels)";
  m.attr("pinocchio_version") = CONTACTRAJ_PIN_VERSION;
  m.attr("source_hash") = CONTACTRAJ_SOURCE_HASH;
  contactraj::bind_probe(m);
  contactraj::bind_detection(m);
  contactraj::bind_kinematics(m);
  contactraj::bind_lcp(m);
  contactraj::bind_step(m);
  contactraj::bind_fused_step(m);
  contactraj::bind_params(m);
  contactraj::bind_ncp(m);
  contactraj::bind_relaxed(m);
}
