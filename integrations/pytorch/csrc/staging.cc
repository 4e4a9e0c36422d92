#include "staging.h"

namespace tidegate_torch {

at::Tensor input_buffer(TidegateWork& work, const at::Tensor& tensor) {
  at::Tensor buffer = tensor.contiguous();
  work.keep_alive(buffer);
  return buffer;
}

at::Tensor output_buffer(TidegateWork& work, const at::Tensor& tensor) {
  if (tensor.is_contiguous()) {
    work.keep_alive(tensor);
    return tensor;
  }
  at::Tensor buffer = at::empty_like(tensor, at::MemoryFormat::Contiguous);
  work.keep_alive(buffer);
  work.copy_back(buffer, tensor);
  return buffer;
}

at::Tensor in_place_buffer(TidegateWork& work, const at::Tensor& tensor) {
  if (tensor.is_contiguous()) {
    work.keep_alive(tensor);
    return tensor;
  }
  at::Tensor buffer = tensor.contiguous();
  work.keep_alive(buffer);
  work.copy_back(buffer, tensor);
  return buffer;
}

at::Tensor scratch_copy(TidegateWork& work, const at::Tensor& tensor) {
  at::Tensor buffer = tensor.clone(at::MemoryFormat::Contiguous);
  work.keep_alive(buffer);
  return buffer;
}

at::Tensor concatenated(TidegateWork& work, const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  at::Tensor buffer = at::cat(flat);
  work.keep_alive(buffer);
  return buffer;
}

at::Tensor flat_buffer(TidegateWork& work, const at::Tensor& like, int64_t numel) {
  at::Tensor buffer = at::empty({numel}, like.options());
  work.keep_alive(buffer);
  return buffer;
}

int64_t copy_back_slices(TidegateWork& work, const at::Tensor& flat, int64_t offset,
                         const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    work.copy_back(flat.narrow(0, offset, t.numel()).view(t.sizes()), t);
    offset += t.numel();
  }
  return offset;
}

int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += t.numel();
  return total;
}

}  // namespace tidegate_torch
