// A PeerExitWatch as a transport whose own library does not report a killed peer uses it (mpi:
// Open MPI 4.1 has no ULFM; nccl: a peer that dies mid-kernel leaves the survivors' kernels
// waiting): started on every rank or on none, looked at every kCheckMs while the owner polls,
// and an exit it sees turned into the owner's failure only kGraceMs later.
//
// Why the grace: the watch's socket and the owner's data path are separate, so a rank that
// finished its part of an op and then died may have its last messages still on the way when
// its exit is seen; an op those messages complete must not fail. The owner keeps polling its
// own library during the grace (the mpi fault case "between" saw exactly that race).
//
// Why every rank or none: a rank whose watch could not connect must not leave the others
// watching sockets it is about to close (they would read that as its exit).
//
// Threading: not thread-safe; the owning transport calls it under its own lock.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/transport.h"
#include "base/types.h"
#include "transports/tcp/peer_exit_watch.h"

namespace tidegate::tcp {

class PacedExitWatch {
 public:
  static constexpr int64_t kCheckMs = 10;
  static constexpr int64_t kGraceMs = 200;

  // Collective over context's ranks, under context.deadline: builds the watch (in the store
  // scope "exit-watch/") and agrees with every rank that all built it. UNSUPPORTED naming
  // `transport`, the first rank that could not and how to turn the watch off, otherwise.
  // Leaves *out null, starting nothing, with TIDEGATE_EXIT_WATCH=off (or no config);
  // INVALID_ARGUMENT without the job secret.
  static Status start(const TransportContext& context, const std::string& transport,
                      std::unique_ptr<PacedExitWatch>* out);

  // Non-blocking. PEER_FAILED naming the lost rank once kGraceMs passed since the watch saw
  // its process end; OK before that and while nobody died. Looks at the sockets at most every
  // kCheckMs.
  Status poll(Clock::time_point now);
  // Tells every peer that this rank leaves normally (PeerExitWatch::say_goodbye).
  void say_goodbye() { watch_->say_goodbye(); }

 private:
  explicit PacedExitWatch(std::unique_ptr<PeerExitWatch> watch) : watch_(std::move(watch)) {}

  std::unique_ptr<PeerExitWatch> watch_;
  Clock::time_point next_check_;
  Status seen_;                // the watch's report, until the grace ends
  Clock::time_point fail_at_;  // when seen_ becomes the verdict
};

}  // namespace tidegate::tcp
