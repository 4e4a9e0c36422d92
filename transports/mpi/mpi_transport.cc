// MPI transport: creation, posting and polling (the design is described in mpi_transport.h).
#include "transports/mpi/mpi_transport.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/config.h"
#include "base/store.h"
#include "transports/common/transport_start.h"
#include "transports/mpi/mpi_util.h"

namespace tidegate {
namespace mpi {

namespace {

int header_tag(uint32_t channel) { return 1 + 2 * static_cast<int>(channel); }
int payload_tag(uint32_t channel) { return 2 + 2 * static_cast<int>(channel); }

// Why this rank cannot run the MPI transport, or "" when it can; sets *base to the MPI
// communicator whose ranks are the tidegate communicator's ranks.
std::string local_obstacle(const TransportContext& context, MPI_Comm* base) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return "MPI is not initialised in this process (run under mpirun and call MPI_Init_thread "
           "before creating the communicator, or choose TIDEGATE_TRANSPORT=tcp)";
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {
    return "MPI provides thread level " + std::to_string(level) +
           " but the mpi transport needs MPI_THREAD_MULTIPLE (initialise MPI with "
           "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...); with Open MPI's plain MPI_Init, "
           "set OMPI_MPI_THREAD_LEVEL=3)";
  }
  const bool from_mpi = context.mpi_comm != nullptr;
  *base = from_mpi ? *static_cast<const MPI_Comm*>(context.mpi_comm) : MPI_COMM_WORLD;
  int rank = -1, size = 0;
  MPI_Comm_rank(*base, &rank);
  MPI_Comm_size(*base, &size);
  if (rank != context.rank || size != context.size) {
    return std::string("this process is rank ") + std::to_string(rank) + " of " +
           std::to_string(size) + (from_mpi ? " in its MPI communicator" : " in MPI_COMM_WORLD") +
           " but rank " + std::to_string(context.rank) + " of " + std::to_string(context.size) +
           " in tidegate (create the communicator with tidegate_comm_create_from_mpi)";
  }
  return "";
}

}  // namespace

Status MpiTransport::create(const TransportContext& context, const MpiTransportOptions& options,
                            std::unique_ptr<Transport>* out) {
  TG_CHECK_ARG(options.chunk_bytes >= 1 && options.chunk_bytes <= kDefaultChunkBytes,
               "chunk_bytes must be in [1, 2^30]");
  TG_CHECK_ARG(
      options.native_max_elements >= 1 && options.native_max_elements <= kMaxNativeElements,
      "native_max_elements must be in [1, INT_MAX]");
  TG_CHECK_ARG(context.store != nullptr, "the mpi transport needs the bootstrap store");
  MPI_Comm base = MPI_COMM_NULL;
  // All ranks duplicate the communicator (a collective call) or all fail with the same error.
  TG_RETURN_IF_ERROR(agree_on_start(context, "mpi", local_obstacle(context, &base), "", nullptr));
  std::unique_ptr<tcp::PacedExitWatch> exit_watch;
  TG_RETURN_IF_ERROR(tcp::PacedExitWatch::start(context, "mpi", &exit_watch));

  // A private duplicate: our tags can never match the application's messages.
  MPI_Comm comm = MPI_COMM_NULL;
  TG_RETURN_IF_ERROR(check_mpi(MPI_Comm_dup(base, &comm), "MPI_Comm_dup"));
  // Errors come back as codes (turned into Status) instead of aborting the job.
  TG_RETURN_IF_ERROR(
      check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  // A second duplicate for native collectives: collectives and point-to-point messages must
  // never share a matching context, and the header exchange of a native op must not be
  // confused with anything the point-to-point side sends.
  MPI_Comm coll_comm = MPI_COMM_NULL;
  Status st = check_mpi(MPI_Comm_dup(base, &coll_comm), "MPI_Comm_dup (collectives)");
  if (st.is_ok()) {
    st =
        check_mpi(MPI_Comm_set_errhandler(coll_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  if (!st.is_ok()) {
    MPI_Comm_free(&comm);
    if (coll_comm != MPI_COMM_NULL) MPI_Comm_free(&coll_comm);
    return st;
  }
  // Native reductions are offered only where MPI computes what tidegate's algorithms compute
  // (mpi_semantics.h), as every rank measured it.
  ReductionSet reductions = 0;
  st = agree_on_reductions(coll_comm, measure_agreeing_reductions(), &reductions);
  if (!st.is_ok()) {
    MPI_Comm_free(&comm);
    MPI_Comm_free(&coll_comm);
    return st;
  }
  std::unique_ptr<MpiTransport> transport(new MpiTransport(context, options, comm, coll_comm));
  transport->agreeing_reductions_ = reductions;
  transport->exit_watch_ = std::move(exit_watch);
  {
    std::lock_guard<std::mutex> lock(transport->mutex_);
    TG_RETURN_IF_ERROR(transport->post_abort_receive());
    TG_RETURN_IF_ERROR(transport->post_ping_receive());
  }
  *out = std::move(transport);
  return Status::ok();
}

MpiTransport::MpiTransport(const TransportContext& context, const MpiTransportOptions& options,
                           MPI_Comm comm, MPI_Comm coll_comm)
    : rank_(context.rank),
      size_(context.size),
      chunk_bytes_(options.chunk_bytes),
      native_max_elements_(options.native_max_elements),
      // Channel c uses tags 1 + 2c and 2 + 2c, below the ping tag (MPI_TAG_UB).
      max_channel_((tag_upper_bound(comm) - 3) / 2),
      who_("rank " + std::to_string(context.rank)),
      comm_(comm),
      coll_comm_(coll_comm),
      ping_tag_(tag_upper_bound(comm)),
      last_heard_(static_cast<size_t>(context.size)) {}

TransportCapabilities MpiTransport::capabilities() const {
  TransportCapabilities caps;
  caps.host_memory = true;  // CUDA-aware MPI is not assumed: device buffers go elsewhere
  // Host memory only, and not for every dtype (no float16/bfloat16): supports_native().
  caps.native_allreduce = true;
  caps.native_allgather = true;
  caps.native_reduce_scatter = true;
  // Two tags per channel below the MPI's tag upper bound (mpi_transport.h).
  caps.channels = static_cast<uint32_t>(std::min<int64_t>(max_channel_ + 1, UINT32_MAX));
  return caps;
}

uint64_t MpiTransport::messages_posted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_posted_;
}

Status MpiTransport::check_usable(int peer, uint32_t channel) const {
  if (!failed_.is_ok()) return failed_;
  if (closed_) return aborted_error(who_ + ": the mpi transport is closed");
  TG_CHECK_ARG(
      peer >= 0 && peer < size_ && peer != rank_,
      who_ + ": peer " + std::to_string(peer) + " is not another rank of " + std::to_string(size_));
  TG_CHECK_ARG(static_cast<int64_t>(channel) <= max_channel_,
               "channel " + std::to_string(channel) +
                   " exceeds the largest this MPI's tags allow (" + std::to_string(max_channel_) +
                   ")");
  return Status::ok();
}

void MpiTransport::track(MPI_Request request, Handle handle, Part part, bool is_recv,
                         size_t bytes) {
  requests_.push_back(request);
  slots_.push_back(Slot{handle, part, is_recv, bytes});
  ++messages_posted_;
}

// Posting failures leave the tag streams unpaired, so callers fail the whole transport.
Status MpiTransport::post_header(Handle handle, Op& op) {
  const bool recv = !op.is_send;
  MPI_Request request = MPI_REQUEST_NULL;
  const int tag = header_tag(op.channel);
  const int n = static_cast<int>(kWireHeaderBytes);
  TG_RETURN_IF_ERROR(
      check_mpi(recv ? MPI_Irecv(op.wire.data(), n, MPI_BYTE, op.peer, tag, comm_, &request)
                     : MPI_Isend(op.wire.data(), n, MPI_BYTE, op.peer, tag, comm_, &request),
                recv ? "MPI_Irecv" : "MPI_Isend"));
  track(request, handle, Part::kHeader, recv, kWireHeaderBytes);
  ++op.parts_left;
  return Status::ok();
}

Status MpiTransport::post_chunks(Handle handle, Op& op, char* data, size_t bytes) {
  const bool recv = !op.is_send;
  const int tag = payload_tag(op.channel);
  for (size_t offset = 0; offset < bytes; offset += chunk_bytes_) {
    const int n = static_cast<int>(std::min(chunk_bytes_, bytes - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    TG_RETURN_IF_ERROR(
        check_mpi(recv ? MPI_Irecv(data + offset, n, MPI_BYTE, op.peer, tag, comm_, &request)
                       : MPI_Isend(data + offset, n, MPI_BYTE, op.peer, tag, comm_, &request),
                  recv ? "MPI_Irecv" : "MPI_Isend"));
    track(request, handle, Part::kChunk, recv, static_cast<size_t>(n));
    ++op.parts_left;
  }
  op.payload_posted = true;
  return Status::ok();
}

Status MpiTransport::isend(int peer, uint32_t channel, const WireHeader& header,
                           const void* payload, size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_usable(peer, channel));
  TG_RETURN_IF_ERROR(check_send_arguments(header, payload, bytes));
  Op* op = nullptr;
  const Handle h = book_.add_send(peer, channel, header, &op);
  Status st = post_header(h, *op);
  // MPI only reads a send buffer; the cast is for its pre-MPI-3 C binding.
  if (st.is_ok()) st = post_chunks(h, *op, static_cast<char*>(const_cast<void*>(payload)), bytes);
  if (!st.is_ok()) fail(st, true);
  *handle = h;
  return Status::ok();  // a posting failure is reported by test(), like any failed transfer
}

Status MpiTransport::irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload,
                           size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_usable(peer, channel));
  TG_RETURN_IF_ERROR(check_recv_arguments(expected, payload, bytes));
  Op* op = nullptr;
  const Handle h = book_.add_recv(peer, channel, expected, payload, &op);
  Status st = post_header(h, *op);
  if (!st.is_ok()) fail(st, true);
  *handle = h;
  return Status::ok();
}

Status MpiTransport::test(Handle handle, bool* done, size_t* payload_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return book_.test(handle, done, payload_bytes);
}

// The receiver's check: only a header that checks out lets its payload receive be posted.
void MpiTransport::finish_header(Op& op) {
  Status st = book_.accept_header(op, rank_, [this](Handle h, Op& ready) {
    return post_chunks(h, ready, ready.data, ready.length);
  });
  // A mismatch: the peer's payload messages no longer pair with our receives.
  if (!st.is_ok()) fail(st, true);
}

void MpiTransport::on_complete(const Slot& slot, const MPI_Status& status, bool status_has_error) {
  if (slot.is_recv && status.MPI_SOURCE >= 0 && status.MPI_SOURCE < size_) {
    last_heard_[static_cast<size_t>(status.MPI_SOURCE)] = Clock::now();
  }
  if (slot.handle == 0) return;  // drained after a failure
  Op* pending = book_.find_pending(slot.handle);
  if (pending == nullptr) return;
  Op& op = *pending;
  if (op.native) {
    on_native_complete(slot, op, status_has_error ? status.MPI_ERROR : MPI_SUCCESS);
    return;
  }
  Status st;
  if (status_has_error && status.MPI_ERROR != MPI_SUCCESS) {
    st = check_mpi(status.MPI_ERROR, slot.is_recv ? "receive from rank " + std::to_string(op.peer)
                                                  : "send to rank " + std::to_string(op.peer));
  } else if (slot.is_recv) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (static_cast<size_t>(count) != slot.bytes) {
      st = protocol_error(who_ + ": rank " + std::to_string(op.peer) + " sent a " +
                          std::to_string(count) + "-byte message where " +
                          std::to_string(slot.bytes) + " bytes were expected");
    }
  }
  if (!st.is_ok()) {
    fail(st, true);
    return;
  }
  --op.parts_left;
  if (slot.is_recv && slot.part == Part::kHeader) finish_header(op);
  if (!op.done) TransferBook<Op>::settle(op);
}

void MpiTransport::compact_requests() {
  size_t kept = 0;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    requests_[kept] = requests_[i];
    slots_[kept] = slots_[i];
    ++kept;
  }
  requests_.resize(kept);
  slots_.resize(kept);
}

void MpiTransport::check_exits() {
  if (!exit_watch_ || !failed_.is_ok()) return;
  // Told to every peer: those that do not watch this peer learn of its loss from us.
  const Status lost = exit_watch_->poll(Clock::now());
  if (!lost.is_ok()) fail(lost, true);
}

Status MpiTransport::poll_once(bool* moved) {
  *moved = check_abort_receive();
  check_ping_receive();
  if (!requests_.empty()) {
    const int n = static_cast<int>(requests_.size());
    std::vector<int> indices(requests_.size());
    std::vector<MPI_Status> statuses(requests_.size());
    int outcount = 0;
    const int rc = MPI_Testsome(n, requests_.data(), &outcount, indices.data(), statuses.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      fail(check_mpi(rc, "MPI_Testsome"), true);
    } else if (outcount != MPI_UNDEFINED && outcount > 0) {
      *moved = true;
      // Copy the slots first: on_complete() may fail the transport, which touches slots_.
      std::vector<Slot> finished;
      for (int i = 0; i < outcount; ++i)
        finished.push_back(slots_[static_cast<size_t>(indices[i])]);
      for (int i = 0; i < outcount; ++i)
        on_complete(finished[static_cast<size_t>(i)], statuses[i], rc == MPI_ERR_IN_STATUS);
      compact_requests();
      advance_natives();  // a finished header exchange lets its collective be posted
    }
  }
  // After MPI's poll, so that what a dead peer sent before it died is taken first.
  check_exits();
  return failed_;
}

Status MpiTransport::progress(Milliseconds max_wait, bool* activity) {
  *activity = false;
  const Deadline until = Deadline::after(max_wait);
  std::unique_lock<std::mutex> lock(mutex_);
  for (int round = 0;; ++round) {
    if (closed_) return failed_;
    bool moved = false;
    Status st = poll_once(&moved);
    *activity |= moved;
    if (!st.is_ok() || moved || woken_.exchange(false) || until.passed()) return st;
    // Nothing completed: let other threads (abort(), the application's MPI calls) in.
    lock.unlock();
    if (round < 64) {
      sched_yield();
    } else {
      const int nap_us = std::min(kMaxNapUs, 10 * (round - 63));
      std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
    }
    lock.lock();
  }
}

void MpiTransport::wake() { woken_.store(true); }

Status MpiTransport::post_ping_receive() {
  return check_mpi(MPI_Irecv(&ping_in_, 0, MPI_BYTE, MPI_ANY_SOURCE, ping_tag_, comm_, &ping_recv_),
                   "MPI_Irecv (ping tag)");
}

void MpiTransport::check_ping_receive() {
  if (ping_recv_ == MPI_REQUEST_NULL || !failed_.is_ok() || closed_) return;
  int flag = 0;
  MPI_Status status;
  if (MPI_Test(&ping_recv_, &flag, &status) != MPI_SUCCESS || !flag) return;
  if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < size_) {
    last_heard_[static_cast<size_t>(status.MPI_SOURCE)] = Clock::now();
  }
  if (!post_ping_receive().is_ok()) ping_recv_ = MPI_REQUEST_NULL;
  if (Clock::now() - last_ping_sent_ >= Milliseconds(kLivenessAnswerMs)) ping_peers();
}

void MpiTransport::ping_peers() {
  if (!failed_.is_ok() || closed_) return;
  last_ping_sent_ = Clock::now();
  // Finished pings are forgotten; a peer that stopped receiving keeps its few unfinished ones.
  ping_sends_.erase(std::remove_if(ping_sends_.begin(), ping_sends_.end(),
                                   [](MPI_Request& r) {
                                     int done = 0;
                                     MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                                     return done != 0;
                                   }),
                    ping_sends_.end());
  for (int peer = 0; peer < size_; ++peer) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (peer != rank_ &&
        MPI_Isend(nullptr, 0, MPI_BYTE, peer, ping_tag_, comm_, &request) == MPI_SUCCESS) {
      ping_sends_.push_back(request);
    }
  }
}

void MpiTransport::send_liveness() {
  std::lock_guard<std::mutex> lock(mutex_);
  ping_peers();
}

Clock::time_point MpiTransport::last_heard(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peer >= 0 && peer < size_ ? last_heard_[static_cast<size_t>(peer)] : Clock::time_point();
}

}  // namespace mpi

Status create_mpi_transport(const TransportContext& context,
                            std::unique_ptr<Transport>* transport) {
  return mpi::MpiTransport::create(context, mpi::MpiTransportOptions{}, transport);
}

}  // namespace tidegate
