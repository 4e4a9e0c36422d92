# TIDEGATE_SANITIZE: builds every C/C++ target (library, tests, tools) with the named sanitizers,
# for the sanitizer stage of the test suite (run.sh sanitize). Two sets are supported, the two
# that cannot be combined in one process:
#   address,undefined  AddressSanitizer (heap/stack overflows, use after free, leaks) plus
#                      UndefinedBehaviorSanitizer (overflow, misaligned or null access, bad shifts)
#   thread             ThreadSanitizer (data races, lock-order inversions)
# Every report is fatal (-fno-sanitize-recover), so a finding fails the test that triggered it
# instead of scrolling past in a log. CUDA sources are not instrumented (nvcc's host pass does
# not take these flags); run.sh configures sanitizer builds without CUDA, NCCL and PyTorch.
set(TIDEGATE_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread (empty: none)")
set_property(CACHE TIDEGATE_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
if(TIDEGATE_SANITIZE STREQUAL "")
  return()
endif()
if(NOT TIDEGATE_SANITIZE MATCHES "^(address,undefined|address|undefined|thread)$")
  message(FATAL_ERROR "TIDEGATE_SANITIZE=${TIDEGATE_SANITIZE}: must be address,undefined, address, "
                      "undefined or thread")
endif()
set(tidegate_sanitize_flags -fsanitize=${TIDEGATE_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
# One check is left out: -fsanitize=enum. The C API takes tidegate_dtype_t, tidegate_reduce_op_t
# and the other enums from C callers, for whom any int is a valid value of an enum; the library
# checks them as ints (dtype_is_valid, reduce_op_is_valid) and answers INVALID_ARGUMENT. Loading
# such a value as the C++ enum is what the check reports, on every test of that refusal, and
# neither compiler assumes an enum's range without -fstrict-enums, which this project never sets.
if(TIDEGATE_SANITIZE MATCHES "undefined")
  list(APPEND tidegate_sanitize_flags -fno-sanitize=enum)
endif()
# ThreadSanitizer and ifuncs do not mix: the loader runs the resolvers of the vector-clone
# kernels (compress/simd.h, numeric/avx2_clones.h) before TSan's runtime is up, and GCC
# instruments them, so every binary crashed at load. The TSan build runs the baseline clone.
if(TIDEGATE_SANITIZE STREQUAL "thread")
  add_compile_definitions(TG_NO_VECTOR_CLONES)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${tidegate_sanitize_flags}>")
add_link_options(-fsanitize=${TIDEGATE_SANITIZE})
message(STATUS "tidegate: every target built with -fsanitize=${TIDEGATE_SANITIZE}")
