// Notices within milliseconds that a peer's process ended, for transports whose own library
// does not say so: Open MPI 4.1 (no ULFM) never fails a receive from a rank that was killed,
// so without this the survivors learn of it only at the deadline, as for a stopped rank.
//
// How: one authenticated TCP connection per pair of ranks (the TCP transport's own set-up,
// tcp_connect.h, in the owning transport's store scope) that carries nothing but a one-byte
// goodbye. When a process ends, however it ends, its kernel closes its sockets, so the
// survivor reads end-of-file at once; a stopped process keeps its sockets open and stays the
// deadline's to name. A transport that closes normally sends the goodbye first, so that its
// peers, which may still be finishing their own last transfers, do not read its close as an
// exit.
//
// Threading: not thread-safe; the owning transport calls it under its own lock.
#pragma once

#include <memory>
#include <vector>

#include "base/socket_util.h"
#include "base/status.h"
#include "base/transport.h"
#include "base/types.h"

namespace tidegate::tcp {

class PeerExitWatch {
 public:
  // Collective over context's ranks, under context.deadline.
  static Status create(const TransportContext& context, std::unique_ptr<PeerExitWatch>* out);

  // Non-blocking (one poll() with a zero timeout). PEER_FAILED naming the first peer whose
  // connection ended without a goodbye since the last call; OK otherwise. A peer that said
  // goodbye is no longer watched.
  Status check();
  // Tells every peer still watched that this rank is leaving normally; closes the connections.
  void say_goodbye();
  // Peers still watched (neither gone nor said goodbye); tests use it.
  int watched() const;

 private:
  PeerExitWatch(int rank, std::vector<UniqueFd> links) : rank_(rank), links_(std::move(links)) {}

  const int rank_;
  std::vector<UniqueFd> links_;  // per peer; invalid for this rank and peers no longer watched
};

}  // namespace tidegate::tcp
