// ProcessGroupTidegate's own operations behind tidegate.torch.hooks: the compressed allreduce of
// a DDP bucket and the compression state a checkpoint saves and restores.
#include "gil.h"  // first (it includes Python.h): saving and loading release the GIL

#include "backend.h"
#include "staging.h"
#include "tensor_bridge.h"

namespace tidegate_torch {

ProcessGroupTidegate& ProcessGroupTidegate::of(const c10::intrusive_ptr<c10d::Backend>& backend,
                                               const char* what) {
  auto* group = dynamic_cast<ProcessGroupTidegate*>(backend.get());
  TORCH_CHECK_VALUE(group != nullptr, "tidegate ", what,
                    " needs a process group on backend \"tidegate\", got one on \"",
                    backend->getBackendName(), "\"");
  return *group;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::compressed_allreduce(
    const at::Tensor& tensor, const tidegate_compression_t& compression) {
  static constexpr const char* kName = "compressed_allreduce";
  std::vector<at::Tensor> tensors{tensor};
  check_tensor_list(tensors, 1, kName, "in-place");
  // tidegate compresses host memory only; say so here rather than as a status from the call.
  TORCH_CHECK_NOT_IMPLEMENTED(tensor.device().is_cpu(), "tidegate ", kName,
                              " compresses CPU tensors only, got one on ", tensor.device());
  const WireType type = reduction_type(tensor, kName);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLREDUCE, kName, tensors, tensors);
  const tidegate_tensor_t data = view(in_place_buffer(*work, tensor), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_icompressed_allreduce(comm, &data, &data, TIDEGATE_AVG, &compression, request);
  });
}

std::string ProcessGroupTidegate::save_compression_state() {
  static constexpr const char* kName = "compression state save";
  std::string bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  check_open(kName);
  tidegate_status_t status = TIDEGATE_OK;
  std::string message;
  without_gil([&] {
    void* data = nullptr;
    size_t size = 0;
    status = tidegate_ef_state_save(comm_, &data, &size);
    if (status == TIDEGATE_OK) {
      bytes.assign(static_cast<const char*>(data), size);
    } else {
      message = tidegate_last_error();
    }
    tidegate_free(data);
  });
  if (status != TIDEGATE_OK) throw_error(kName, status, message);
  return bytes;
}

void ProcessGroupTidegate::load_compression_state(const std::string& bytes) {
  static constexpr const char* kName = "compression state load";
  std::lock_guard<std::mutex> lock(mutex_);
  check_open(kName);
  tidegate_status_t status = TIDEGATE_OK;
  std::string message;
  without_gil([&] {
    status = tidegate_ef_state_load(comm_, bytes.data(), bytes.size());
    if (status != TIDEGATE_OK) message = tidegate_last_error();
  });
  if (status != TIDEGATE_OK) throw_error(kName, status, message);
}

void ProcessGroupTidegate::reset_compression_state() {
  static constexpr const char* kName = "compression state reset";
  std::lock_guard<std::mutex> lock(mutex_);
  check_open(kName);
  tidegate_status_t status = TIDEGATE_OK;
  std::string message;
  without_gil([&] {
    status = tidegate_ef_state_reset(comm_);
    if (status != TIDEGATE_OK) message = tidegate_last_error();
  });
  if (status != TIDEGATE_OK) throw_error(kName, status, message);
}

}  // namespace tidegate_torch
