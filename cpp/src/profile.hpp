// Section timers of the fused step, compiled in only with -DCONTACTRAJ_PROFILE (a profiling build:
// cmake -DCMAKE_CXX_FLAGS=-DCONTACTRAJ_PROFILE); otherwise PROF_SCOPE expands to nothing. The module then
// has ``_profile(reset)``: {section: (calls, seconds)} accumulated since the last reset.
#pragma once
#ifdef CONTACTRAJ_PROFILE
#include <time.h>
#include <map>
#include <string>
#include <utility>

namespace contactraj::prof {
inline std::map<std::string, std::pair<long, double>>& table() {
  static std::map<std::string, std::pair<long, double>> t;
  return t;
}
inline double now() {  // this thread's CPU time: the machine is shared, wall time counts the others' work
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
struct Scope {
  const char* name;
  double t0 = now();
  explicit Scope(const char* n) : name(n) {}
  ~Scope() {
    auto& e = table()[name];
    e.first += 1;
    e.second += now() - t0;
  }
};
}  // namespace contactraj::prof
#define PROF_CAT2(a, b) a##b
#define PROF_CAT(a, b) PROF_CAT2(a, b)
#define PROF_SCOPE(name) ::contactraj::prof::Scope PROF_CAT(prof_scope_, __LINE__)(name)
#else
#define PROF_SCOPE(name)
#endif
