// tidegate.torch._C.GradientSession: tidegate's gradient session (tidegate_session_*) over a
// tidegate process group, for tidegate.torch.WaitFreeDataParallel.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace tidegate_torch {

// Adds the class GradientSession to the extension module `m`.
void register_session(pybind11::module_& m);

}  // namespace tidegate_torch
