// tidegate.torch._C: the Python face of the backend. tidegate/torch/__init__.py registers
// create_backend with torch.distributed.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include "backend.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, int64_t timeout_ms,
                                                 const tidegate_torch::Settings& settings) {
  return c10::make_intrusive<tidegate_torch::ProcessGroupTidegate>(
      store, rank, size, std::chrono::milliseconds(timeout_ms), settings);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tidegate's torch.distributed backend (use: import tidegate.torch)";
  // Blocks until every rank of the group has joined: without the GIL, so that other Python
  // threads (and a Python-implemented store) keep running.
  m.def("create_backend", &create_backend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_ms"), py::arg("settings"), py::call_guard<py::gil_scoped_release>(),
        "A tidegate process group backend of `size` ranks rendezvousing through `store`; "
        "`settings` are (TIDEGATE_* variable, value) pairs applied over the environment.");
  m.def(
      "library_version", [] { return std::string(tidegate_version()); },
      "Version of the libtidegate this module is linked against.");
}
