# Writes OUT: a header defining CONTACTRAJ_SOURCE_HASH, the SHA-256 of "<name>:<sha256>\n" over the core's sources
# (SRC_DIR/*.cpp and *.hpp, sorted by name). contact/core.py computes the same over cpp/src and refuses a module
# built from other sources (an edited tree that was not rebuilt).
file(GLOB files RELATIVE "${SRC_DIR}" "${SRC_DIR}/*.cpp" "${SRC_DIR}/*.hpp")
list(SORT files)
set(acc "")
foreach(f IN LISTS files)
  file(SHA256 "${SRC_DIR}/${f}" h)
  string(APPEND acc "${f}:${h}\n")
endforeach()
string(SHA256 total "${acc}")
file(WRITE "${OUT}" "#pragma once\n#define CONTACTRAJ_SOURCE_HASH \"${total}\"\n")
