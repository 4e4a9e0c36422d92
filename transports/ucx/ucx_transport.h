// The UCX transport (DESIGN.md "Transport"): point-to-point messages over UCX's tag API on one
// ucp worker per rank. Host memory always; CUDA memory only when the UCX context reports it
// among its memory types (ucp_context_query, UCP_ATTR_FIELD_MEMORY_TYPES), i.e. when this UCX
// was built with CUDA support (Debian's is not). Payloads are passed without a memory type, so
// UCX detects host or CUDA memory itself (this folder may not include a CUDA header to ask);
// headers and abort messages are ours and declared host memory, which spares that lookup.
//
// Connection: each rank publishes its worker address (hex) under "ucx/<rank>" in the bootstrap
// store and creates an endpoint to every peer from the peers' addresses, with peer error
// handling: an endpoint error fails the transport with PEER_FAILED naming the rank, as soon as
// a transfer with that peer is pending (a peer that closed after its last message is not an
// error until this rank waits on it again).
//
// How a message travels: a 64-byte encoded WireHeader, then (when not empty) the payload
// straight from / into the user's buffer, as two tagged messages. The 64-bit tag packs
//   [63:62] kind (header / payload / abort / ping)   [61:32] channel   [31:0] sender rank
// and data receives match it with a full mask. UCX matches messages of one sender and tag in
// order, so the k-th header and k-th payload of a (peer, channel) pair with the k-th irecv as
// long as payload receives are posted in irecv order, which a per-(peer, channel) queue keeps.
// The payload receive is posted only after the header passed check_wire_header(): no payload
// byte is stored before the check and a longer payload can never overrun the user's buffer.
// A mismatch fails the transfer and the whole transport (the streams are no longer paired)
// and tells every peer.
//
// Abort: kind "abort" carries a status code and text. Every rank keeps one receive posted for
// it from any sender (mask on the kind bits only), so a peer's abort() reaches this rank.
// Kind "ping" carries empty liveness notices, received the same way.
//
// Threading: the worker is created UCS_THREAD_MODE_SERIALIZED and every UCX call except
// ucp_worker_signal() is made under mutex_. Almost all calls come from the progress thread; the
// exception is abort(), which must send the abort messages itself (after a failure the engine
// stops calling progress()), so it takes the mutex rather than only setting a flag. progress()
// never holds the mutex while it sleeps, so abort() waits at most one progress round.
//
// Progress: ucp_worker_progress() until idle, then sleep on the worker's event fd
// (ucp_worker_arm + poll) until max_wait, an event or wake() (ucp_worker_signal, documented as
// safe from any thread). The event fd rather than polling: an idle communicator costs no CPU,
// and UCX's tcp and shared-memory transports support wake-up. Each sleep is capped at
// kMaxSleepMs so a missed event can only cost latency, never a hang.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/transport.h"
#include "transports/common/abort_message.h"
#include "transports/common/transfer_book.h"

namespace tidegate {

// The factory registered in the transport table (name "ucx").
Status create_ucx_transport(const TransportContext& context, std::unique_ptr<Transport>* transport);

namespace ucx {

inline constexpr uint32_t kMaxChannel = (1u << 30) - 1;
inline constexpr int kMaxSleepMs = 50;

// A local UCX call failed (not a peer): SYSTEM, with UCX's own words.
Status ucx_error(const std::string& what, ucs_status_t status);

// Whether `context` supports CUDA memory (UCS_MEMORY_TYPE_CUDA among its memory types).
Status context_supports_cuda(ucp_context_h context, bool* supported);

class UcxTransport final : public Transport {
 public:
  // Collective over the communicator's ranks: creates the context and worker, exchanges
  // worker addresses through context.store and connects to every peer.
  static Status create(const TransportContext& context, std::unique_ptr<Transport>* out);
  ~UcxTransport() override;

  const char* name() const override { return "ucx"; }
  TransportCapabilities capabilities() const override;
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override;
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override;
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override;
  Status progress(Milliseconds max_wait, bool* activity) override;
  void wake() override;
  bool tracks_liveness() const override { return true; }
  void send_liveness() override;
  Clock::time_point last_heard(int peer) const override;
  std::vector<int> awaited_peers() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return book_.awaited_peers(rank_);
  }
  void abort(const Status& reason) override;
  Status close(Deadline deadline) override;

 private:
  enum class Kind : uint8_t { kHeader = 0, kPayload = 1, kAbort = 2, kPing = 3 };
  using Op = Transfer;
  // One UCX request; its address is the request's user_data, so it lives until the callback
  // fired (or the worker is gone).
  struct Part {
    UcxTransport* self = nullptr;
    Handle handle = 0;  // 0: an abort message
    Kind kind = Kind::kHeader;
    bool is_recv = false;
    size_t bytes = 0;  // expected length (receives)
    void* request = nullptr;
    ucs_status_t status = UCS_INPROGRESS;
    size_t length = 0;
    ucp_tag_t sender_tag = 0;
    bool fired = false;  // the callback ran (cancelling is then pointless)
  };
  struct EpArg {  // the error handler's argument
    UcxTransport* self = nullptr;
    int peer = 0;
  };

  UcxTransport(const TransportContext& context);

  // ---- ucx_transport.cc: set-up, posting and completions
  Status init(const TransportContext& context);
  // Context, worker, event fd and this rank's address (hex), before anything is published.
  Status init_local(std::string* published);
  // Reads the context's memory types into cuda_memory_.
  Status query_memory_types();
  Status check_usable(int peer, uint32_t channel) const;
  Status post(Handle handle, Kind kind, int peer, uint32_t channel, void* buffer, size_t bytes,
              bool is_recv);
  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Runs ucp_worker_progress until idle and handles completed requests; true if anything moved.
  bool poll_once();
  // Handles the requests whose callbacks fired; true if there were any.
  bool reap();
  void on_complete(Part& part);
  void finish_header(Op& op);
  void check_dead_peers();
  // A transfer failed because its peer's connection did: the transport fails with `status`
  // after a short grace, unless a peer's abort message (the root cause) arrives first.
  void suspect_peer_failure(const Status& status);
  // Fails the transport with the suspected peer failure once its grace has run out.
  void settle_suspected_failure();

  // ---- ucx_shutdown.cc: failure, abort and close
  void fail(const Status& status, bool tell_peers);
  void send_abort_messages(const Status& status);
  void on_abort_message(const Part& part);
  void on_ping(const Part& part);
  void ping_peers();
  // Standing receives (abort, ping) still outstanding: drain() does not wait for them.
  size_t standing_receives() const;
  // Progresses until every outstanding request completed or `deadline`; true when all did.
  bool drain(Deadline deadline);
  Status release(Deadline deadline, bool force);
  // Receives and drops the messages no receive took, so that destroying the worker does not
  // warn about each (into *scratch, which must outlive the worker).
  void discard_unexpected(std::vector<char>* scratch, Deadline deadline);

  const int rank_;
  const int size_;
  const std::string who_;  // "rank 3", for messages

  mutable std::mutex mutex_;  // guards everything below and serialises our UCX calls
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  bool cuda_memory_ = false;  // the UCX context handles UCS_MEMORY_TYPE_CUDA
  std::vector<ucp_ep_h> eps_;
  std::vector<EpArg> ep_args_;
  std::vector<Status> peer_errors_;  // an endpoint's error, OK while it is healthy
  TransferBook<Op> book_;            // the transfers, and receives waiting for their headers
  std::unordered_map<Part*, std::unique_ptr<Part>> parts_;  // outstanding requests
  std::vector<Part*> completed_;  // filled by the callbacks, handled by poll_once()
  Status failed_;
  Status suspected_;                     // a peer failure waiting out its grace
  Clock::time_point suspected_until_{};  // when that grace ends
  bool closed_ = false;
  bool abort_sent_ = false;
  std::array<char, kAbortMessageBytes> abort_in_{};
  std::string abort_out_;  // the abort message this rank sent; UCX reads it until sent
  // Liveness (Transport::send_liveness): kind "ping", empty messages, one receive standing.
  // A poll in which a ping arrived does not count the worker's progress as activity (only
  // completed transfers then do), so pings never hold off a stalled collective's deadline.
  char ping_in_ = 0;
  char ping_out_ = 0;
  bool ping_arrived_ = false;
  Clock::time_point last_ping_sent_;
  std::vector<Clock::time_point> last_heard_;
  std::atomic<bool> woken_{false};
};

}  // namespace ucx
}  // namespace tidegate
