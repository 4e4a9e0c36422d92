// ProcessGroupTidegate: the c10d backend behind torch.distributed's backend="tidegate".
//
// One tidegate communicator per process group, created through the group's c10d Store. Each
// collective checks its arguments here, stages what tidegate cannot read in place (a contiguous
// copy of a strided tensor, a flat buffer for a list of tensors), posts one non-blocking
// tidegate collective and returns a TidegateWork that completes asynchronously (work.h).
// Collectives must be called in the same order on every rank, as with every c10d backend.
// tidegate has no point-to-point operations, so send/recv are refused.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "completion_pool.h"
#include "tidegate/tidegate.h"
#include "work.h"

namespace tidegate_torch {

// (variable, value) pairs for tidegate_comm_create_with_settings.
using Settings = std::vector<std::pair<std::string, std::string>>;

class ProcessGroupTidegate : public c10d::Backend {
 public:
  // Rendezvouses with the other `size` ranks through `store` (collective; blocks until every
  // rank has joined or tidegate's timeout passes). `settings` override tidegate's environment.
  ProcessGroupTidegate(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const Settings& settings);
  ~ProcessGroupTidegate() override;

  const std::string getBackendName() const override { return "tidegate"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }

  // Reductions (backend_reduce.cc).
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;

  // Data movement (backend_gather.cc).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // All-to-all and synchronisation (backend_exchange.cc).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // Lifecycle (backend.cc). shutdown() finishes the posted collectives (each within tidegate's
  // timeout) and closes the communicator; abort() fails them on every rank at once. After
  // either, collectives on this group raise.
  void shutdown() override;
  void abort() override;

  // The tidegate group behind `backend` (what ProcessGroup._get_backend returns to Python);
  // ValueError naming the backend it is instead, for `what` (backend_compressed.cc).
  static ProcessGroupTidegate& of(const c10::intrusive_ptr<c10d::Backend>& backend,
                                  const char* what);

  // tidegate's own operations, for tidegate.torch's DDP hooks (backend_compressed.cc).
  // Compressed allreduce of `tensor` in place (AVG over the ranks, float32/float16/bfloat16 CPU
  // tensor), as tidegate_icompressed_allreduce with `compression`; the Work's Future holds
  // [tensor] once every rank has the result.
  c10::intrusive_ptr<c10d::Work> compressed_allreduce(const at::Tensor& tensor,
                                                      const tidegate_compression_t& compression);
  // This rank's compression state (error-feedback residuals, ...) as bytes, and back: local
  // calls, ordered after the collectives posted before them (tidegate_ef_state_save/load).
  std::string save_compression_state();
  void load_compression_state(const std::string& bytes);
  // Forgets it all (tidegate_ef_state_reset): residuals of a bucket layout that changed.
  void reset_compression_state();

  // Objects built on this group's communicator that must end before it does (a gradient
  // session): `attachment->close()` runs in shutdown() or abort() unless it has been destroyed
  // by then. `open` receives the communicator (checked open) under the group's lock.
  struct Attachment {
    virtual ~Attachment() = default;
    virtual void close() = 0;
  };
  void attach(const std::shared_ptr<Attachment>& attachment,
              const std::function<void(tidegate_comm_t)>& open);

 private:
  // Posts with `post(comm, &request)` and attaches completion to `work`; raises tidegate's
  // error if posting fails.
  template <typename Post>
  c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<TidegateWork>& work, Post&& post) {
    std::lock_guard<std::mutex> lock(mutex_);
    check_open(work->collective());
    tidegate_request_t request = nullptr;
    const tidegate_status_t status = post(comm_, &request);
    if (status != TIDEGATE_OK) throw_error(work->collective(), status, tidegate_last_error());
    work->attach(request, completions_);
    return work;
  }
  void check_open(const char* collective) const;
  // Closes what attach() registered and still lives (outside mutex_: closing waits for ops).
  void close_attachments();

  c10::intrusive_ptr<Options> options_;
  std::shared_ptr<CompletionPool> completions_;
  mutable std::mutex mutex_;
  tidegate_comm_t comm_ = nullptr;                      // guarded by mutex_; null after shutdown()
  bool aborted_ = false;                                // guarded by mutex_
  std::vector<std::weak_ptr<Attachment>> attachments_;  // guarded by mutex_
};

}  // namespace tidegate_torch
