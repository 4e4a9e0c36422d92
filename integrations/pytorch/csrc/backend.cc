// ProcessGroupTidegate's life: creation through the group's store, shutdown, abort.
#include "gil.h"  // first (it includes Python.h): shutdown() releases the GIL

#include "backend.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "store_bridge.h"

namespace tidegate_torch {

ProcessGroupTidegate::ProcessGroupTidegate(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                           int size, std::chrono::milliseconds timeout,
                                           const Settings& settings)
    : Backend(rank, size),
      options_(c10::make_intrusive<Options>("tidegate", timeout)),
      completions_(std::make_shared<CompletionPool>()) {
  // torch.distributed already gives each group its own store prefix, but a store can outlive a
  // group (torchrun's agent store across re-initialisations), and tidegate needs keys no earlier
  // communicator wrote. Every rank counts its own creations under this prefix, so the n-th
  // creation is generation n on every rank without any agreement round.
  const int64_t generation = store->add("tidegate_generation/rank" + std::to_string(rank), 1);
  StoreBridge bridge(
      c10::make_intrusive<c10d::PrefixStore>("tidegate_gen" + std::to_string(generation), store));
  const tidegate_store_t callbacks = bridge.callbacks();
  std::vector<tidegate_setting_t> c_settings;
  for (const auto& [name, value] : settings) c_settings.push_back({name.c_str(), value.c_str()});
  const tidegate_status_t status = tidegate_comm_create_with_settings(
      rank, size, &callbacks, c_settings.data(), c_settings.size(), &comm_);
  if (status != TIDEGATE_OK) {
    std::string message = tidegate_last_error();
    const std::string store_error = bridge.last_store_error();
    if (!store_error.empty()) message += " (the c10d store reported: " + store_error + ")";
    throw_error("process group creation", status, message, /*backend_error_only=*/true);
  }
  init();
}

ProcessGroupTidegate::~ProcessGroupTidegate() { shutdown(); }

void ProcessGroupTidegate::check_open(const char* collective) const {
  if (comm_ != nullptr) return;
  throw_error(collective, TIDEGATE_ERR_ABORTED,
              aborted_ ? "this process group was aborted; create a new one"
                       : "this process group was shut down; create a new one");
}

void ProcessGroupTidegate::attach(const std::shared_ptr<Attachment>& attachment,
                                  const std::function<void(tidegate_comm_t)>& open) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_open("attach");
  open(comm_);
  attachments_.push_back(attachment);
}

void ProcessGroupTidegate::close_attachments() {
  std::vector<std::weak_ptr<Attachment>> attachments;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    attachments.swap(attachments_);
  }
  for (const std::weak_ptr<Attachment>& weak : attachments) {
    if (std::shared_ptr<Attachment> attachment = weak.lock()) attachment->close();
  }
}

void ProcessGroupTidegate::shutdown() {
  // A session still open on the communicator would outlive it (Python may keep the wrapper
  // that owns it alive in a reference cycle until the next garbage collection).
  without_gil([&] { close_attachments(); });
  tidegate_comm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = std::exchange(comm_, nullptr);
  }
  without_gil([&] {
    // Finishes what was posted (each collective within tidegate's timeout); their completions
    // reach the pool, which then runs them all before its threads end. Failures were already
    // reported to the Works.
    if (comm != nullptr) tidegate_comm_destroy(comm);
    completions_->shutdown();
  });
}

void ProcessGroupTidegate::abort() {
  tidegate_comm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = std::exchange(comm_, nullptr);
    aborted_ = true;
  }
  if (comm == nullptr) return;
  // Fails every pending collective here and, through tidegate's abort message, on the peers;
  // the sessions' pending ops fail with them, so closing those does not wait.
  tidegate_comm_abort(comm, "torch.distributed aborted the process group");
  without_gil([&] {
    close_attachments();
    tidegate_comm_destroy(comm);
    completions_->shutdown();
  });
}

}  // namespace tidegate_torch
