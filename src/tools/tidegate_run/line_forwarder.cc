#include "tools/tidegate_run/line_forwarder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tidegate::run {

void LineForwarder::feed(const char* data, size_t n) {
  while (n > 0) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', n));
    if (newline == nullptr) {
      size_t room = kMaxLineBytes - pending_.size();
      size_t take = n < room ? n : room;
      pending_.append(data, take);
      data += take;
      n -= take;
      if (pending_.size() == kMaxLineBytes) {
        emit(pending_.data(), pending_.size());
        pending_.clear();
      }
      continue;
    }
    size_t line = static_cast<size_t>(newline - data);
    pending_.append(data, line);
    emit(pending_.data(), pending_.size());
    pending_.clear();
    data += line + 1;
    n -= line + 1;
  }
}

void LineForwarder::finish() {
  if (pending_.empty()) return;
  emit(pending_.data(), pending_.size());
  pending_.clear();
}

void LineForwarder::emit(const char* data, size_t n) {
  // One write per line (prefix, text, newline) keeps lines whole on a pipe or terminal.
  std::string line;
  line.reserve(prefix_.size() + n + 1);
  line += prefix_;
  line.append(data, n);
  line += '\n';
  size_t written = 0;
  while (written < line.size()) {
    ssize_t w = ::write(out_fd_, line.data() + written, line.size() - written);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our own stdout is gone (EPIPE): drop the output, keep supervising
    written += static_cast<size_t>(w);
  }
}

bool drain_pipe(int fd, LineForwarder* forwarder) {
  char buffer[16384];
  // A bounded number of reads per call, so one chatty rank cannot starve the others (or the
  // signal handling) of the launcher's attention; poll() brings us back for the rest.
  for (int reads = 0; reads < 64; ++reads) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      forwarder->feed(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // EOF or error
  }
  return true;
}

}  // namespace tidegate::run
