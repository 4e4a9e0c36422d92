// What a rank of a multi-process check makes of a failed communicator creation.
//
// Creation ends with a barrier on the first transport, but a barrier cannot let every rank leave
// at once: the others may already run the first collective while the last rank still waits
// for the barrier's final message. In the "mismatch" scenario they find the mismatch and abort,
// and that rank then learns of it while it is still being created. That is a correct outcome,
// provided what it reports is the mismatch itself: code MISMATCH, naming the op and the field.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "tidegate/tidegate.h"

namespace tidegate::testing {

// Returns the rank's exit code after creation returned `st` (not TIDEGATE_OK).
inline int creation_failure_exit_code(tidegate_status_t st, int argc, char** argv) {
  const std::string message = tidegate_last_error();
  std::fprintf(stderr, "communicator creation failed: %s\n", message.c_str());
  bool mismatch_scenario = false;
  for (int i = 1; i + 1 < argc; ++i) {
    mismatch_scenario |=
        std::strcmp(argv[i], "--scenario") == 0 && std::strcmp(argv[i + 1], "mismatch") == 0;
  }
  const bool learned_the_mismatch = st == TIDEGATE_ERR_MISMATCH &&
                                    message.find("field 'count'") != std::string::npos &&
                                    message.find("op #0") != std::string::npos;
  if (mismatch_scenario && learned_the_mismatch) {
    std::printf("this rank learned of the mismatch while finishing creation: %s\n",
                message.c_str());
    return 0;
  }
  return 1;
}

}  // namespace tidegate::testing
