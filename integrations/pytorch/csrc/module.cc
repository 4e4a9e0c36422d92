// tidegate.torch._C: the Python face of the backend. tidegate/torch/__init__.py registers
// create_backend with torch.distributed.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "backend.h"
#include "session.h"

namespace py = pybind11;
using tidegate_torch::ProcessGroupTidegate;

namespace {

c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, int64_t timeout_ms,
                                                 const tidegate_torch::Settings& settings) {
  return c10::make_intrusive<tidegate_torch::ProcessGroupTidegate>(
      store, rank, size, std::chrono::milliseconds(timeout_ms), settings);
}

c10::intrusive_ptr<c10d::Work> compressed_allreduce(
    const c10::intrusive_ptr<c10d::Backend>& backend, const at::Tensor& tensor,
    const std::string& codec, uint64_t key, bool error_feedback,
    const std::optional<std::string>& allowed) {
  tidegate_compression_t compression{};
  compression.codec = codec.c_str();
  compression.key = key;
  compression.error_feedback = error_feedback ? 1 : 0;
  compression.allowed = allowed ? allowed->c_str() : nullptr;
  return ProcessGroupTidegate::of(backend, "compressed_allreduce")
      .compressed_allreduce(tensor, compression);
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
  m.def("compressed_allreduce", &compressed_allreduce, py::arg("backend"), py::arg("tensor"),
        py::arg("codec"), py::arg("key"), py::arg("error_feedback"),
        py::arg("allowed") = py::none(),
        "Averages `tensor` in place over the group, compressed with `codec` (a tidegate codec "
        "spec, or \"auto\" choosing from `allowed`) under compression key `key`; returns the "
        "Work (its future holds [tensor]).");
  m.def(
      "save_compression_state",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        return py::bytes(
            ProcessGroupTidegate::of(backend, "save_compression_state").save_compression_state());
      },
      py::arg("backend"),
      "This rank's compression state (residuals per key, ...) as bytes, taken after the "
      "collectives posted before the call.");
  m.def(
      "load_compression_state",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, const std::string& bytes) {
        ProcessGroupTidegate::of(backend, "load_compression_state").load_compression_state(bytes);
      },
      py::arg("backend"), py::arg("state"),
      "Replaces this rank's compression state with bytes from save_compression_state.");
  m.def(
      "reset_compression_state",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        ProcessGroupTidegate::of(backend, "reset_compression_state").reset_compression_state();
      },
      py::arg("backend"), "Forgets this rank's compression state (every key's residuals).");
  tidegate_torch::register_session(m);
  m.def(
      "library_version", [] { return std::string(tidegate_version()); },
      "Version of the libtidegate this module is linked against.");
}
