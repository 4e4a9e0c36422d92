// The c10d Work of one tidegate collective.
//
// Life of a Work (c10d's Work.hpp semantics): the backend stages the tensors and posts one
// non-blocking tidegate collective; tidegate calls back on its progress thread when the request
// finishes, and that callback only hands the completion to a CompletionPool thread. There the
// Work copies staged results back into the caller's tensors, marks itself completed (waking
// wait()) and completes its Future with the result tensors or the error. Until then it holds
// every tensor tidegate reads or writes, so a caller that drops the Work early cannot free
// memory a collective still uses.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "completion_pool.h"
#include "tidegate/tidegate.h"

namespace tidegate_torch {

class TidegateWork : public c10d::Work {
 public:
  // `collective` names the op in messages (a static string); `result` is what result() and the
  // Future hold once the collective succeeds; `inputs` feed the profiler's record of the op.
  TidegateWork(int rank, c10d::OpType type, const char* collective, std::vector<at::Tensor> result,
               const std::vector<at::Tensor>& inputs);

  // Keeps `tensor` (memory tidegate reads or writes) alive until the collective finishes.
  void keep_alive(const at::Tensor& tensor);
  // On success, copies `from` (a staging buffer) into `to` (the caller's tensor) before the
  // Work reports completion.
  void copy_back(const at::Tensor& from, const at::Tensor& to);

  // Takes over a posted request: completion will arrive through `pool`. Call once, right after
  // a successful post; frees the request handle (the collective keeps running).
  void attach(tidegate_request_t request, const std::shared_ptr<CompletionPool>& pool);

  const char* collective() const { return collective_; }

  // c10d::Work. wait(timeout) throws DistBackendError once `timeout` passes (the collective
  // keeps running: wait again, or abort the group); kNoTimeout waits for the collective, which
  // tidegate bounds by the group's timeout.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

 private:
  // tidegate's completion callback (progress thread): hands the completion to the pool.
  static void on_request_done(void* user_data, tidegate_status_t status);
  // Runs once, on a CompletionPool thread.
  void complete(tidegate_status_t status, const std::string& message);

  const char* const collective_;
  std::vector<at::Tensor> result_;
  std::vector<at::Tensor> keep_alive_;                         // cleared on completion
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_backs_;  // (from, to); cleared likewise
  std::optional<c10::Stream> stream_;  // CUDA: the stream the collective was ordered on
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The exception a failed tidegate collective becomes in Python: ValueError for bad arguments,
// NotImplementedError for what this build cannot do (e.g. CUDA memory), DistBackendError for the
// rest (mismatch, timeout, peer failure, ...). The text is "tidegate <what>: <status>:
// <message>". With `backend_error_only` every status is a DistBackendError (a group that cannot
// be created is a backend failure, whatever tidegate's reason).
std::exception_ptr make_error(const char* what, tidegate_status_t status,
                              const std::string& message, bool backend_error_only = false);
[[noreturn]] void throw_error(const char* what, tidegate_status_t status,
                              const std::string& message, bool backend_error_only = false);

}  // namespace tidegate_torch
