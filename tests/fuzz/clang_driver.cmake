# Runs every codec decoder fuzz target (tests/fuzz/fuzz_*.cc) from the main build, whatever its
# compiler: libFuzzer needs clang, so CTest configures and builds the small clang project in
# tests/fuzz/clang (codec sources only, ASan + UBSan) into <build>/fuzz-clang, then runs each
# target for TIDEGATE_FUZZ_CI_SECONDS from its committed seeds (corpus/<name>/, read only; new
# inputs and crash artifacts go to <build>/fuzz-clang/work/<name>/). Done through CTest
# fixtures rather than ExternalProject so that a plain `ninja` never needs clang and never pays
# for the instrumented build; only `ctest` does. Without a clang with libFuzzer, nothing is
# registered. The opt-in whole-project fuzz build (TIDEGATE_FUZZ=ON, tests/fuzz/CMakeLists.txt)
# registers the same targets itself, so this driver stands aside there.
if(TIDEGATE_FUZZ OR TIDEGATE_SANITIZE)  # a sanitizer build runs the suite, not the fuzzers
  return()
endif()
set(TIDEGATE_FUZZ_CI_SECONDS 3 CACHE STRING "Seconds each codec fuzz target runs under CTest (g++ builds)")

if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(tidegate_fuzz_clang ${CMAKE_CXX_COMPILER})
else()
  find_program(TIDEGATE_FUZZ_CLANG NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14
               DOC "clang++ used to build the codec fuzz targets")
  set(tidegate_fuzz_clang ${TIDEGATE_FUZZ_CLANG})
endif()
set(tidegate_fuzz_runtime FALSE)
if(tidegate_fuzz_clang)
  execute_process(COMMAND ${tidegate_fuzz_clang} -print-resource-dir OUTPUT_VARIABLE resource_dir
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  file(GLOB fuzzer_runtime "${resource_dir}/lib/*/libclang_rt.fuzzer*.a")
  if(fuzzer_runtime)
    set(tidegate_fuzz_runtime TRUE)
  endif()
endif()
if(NOT tidegate_fuzz_runtime)
  message(STATUS "tidegate: no clang++ with libFuzzer found: codec fuzz targets are not run by CTest")
  return()
endif()

set(fuzz_bin ${CMAKE_BINARY_DIR}/fuzz-clang)
add_test(NAME fuzz.clang.configure
         COMMAND ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR}/tests/fuzz/clang -B ${fuzz_bin} -G ${CMAKE_GENERATOR}
                 -DCMAKE_CXX_COMPILER=${tidegate_fuzz_clang})
set_tests_properties(fuzz.clang.configure PROPERTIES FIXTURES_SETUP tidegate_fuzz_configured LABELS fuzz TIMEOUT 300)
add_test(NAME fuzz.clang.build COMMAND ${CMAKE_COMMAND} --build ${fuzz_bin})
set_tests_properties(fuzz.clang.build PROPERTIES FIXTURES_REQUIRED tidegate_fuzz_configured
                     FIXTURES_SETUP tidegate_fuzz_built LABELS fuzz TIMEOUT 1800)

file(GLOB fuzz_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_*.cc)
foreach(source ${fuzz_sources})
  get_filename_component(target ${source} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${target})
  set(work ${fuzz_bin}/work/${name})
  file(MAKE_DIRECTORY ${work})
  set(seeds ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name})
  if(NOT IS_DIRECTORY ${seeds})
    set(seeds "")
  endif()
  add_test(NAME fuzz.clang.${name}
           COMMAND ${fuzz_bin}/${target} -max_total_time=${TIDEGATE_FUZZ_CI_SECONDS} -max_len=4096 -timeout=10
                   -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=${work}/ ${work} ${seeds})
  set_tests_properties(fuzz.clang.${name} PROPERTIES FIXTURES_REQUIRED tidegate_fuzz_built LABELS fuzz TIMEOUT 120)
endforeach()
