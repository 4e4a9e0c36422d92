// Forwards one rank's stream (stdout or stderr) to the launcher's own, a whole line at a time
// with a "[rank] " prefix, so that lines from concurrent ranks never interleave mid-line.
#pragma once

#include <cstddef>
#include <string>

namespace tidegate::run {

class LineForwarder {
 public:
  // A line longer than this is forwarded in pieces, each ended by a newline, so a rank that
  // never prints '\n' cannot make the launcher buffer without bound.
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // Writes to `out_fd`; `prefix` is prepended to every line ("" for none).
  LineForwarder(int out_fd, std::string prefix) : out_fd_(out_fd), prefix_(std::move(prefix)) {}

  // Consumes bytes read from the rank's pipe and writes every completed line.
  void feed(const char* data, size_t n);
  // Writes a final partial line (with a newline added) at end of stream.
  void finish();

 private:
  void emit(const char* data, size_t n);

  int out_fd_;
  std::string prefix_;
  std::string pending_;  // bytes of the current, unfinished line
};

// Reads everything available from a non-blocking pipe into `forwarder`. Returns false at end
// of stream (or on a read error), true while the pipe may deliver more.
bool drain_pipe(int fd, LineForwarder* forwarder);

}  // namespace tidegate::run
