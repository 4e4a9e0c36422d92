// The job secret, written to a private temporary file whose path (never the secret itself) is
// handed to the ranks as TIDEGATE_SECRET_FILE: command lines and environments are visible to
// other users through /proc, a 0600 file is not.
#pragma once

#include <string>

#include "base/auth.h"
#include "base/status.h"

namespace tidegate::run {

class SecretFile {
 public:
  SecretFile() = default;
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  // Removes the file (if one was created).
  ~SecretFile();

  // Writes `secret` to a fresh mode-0600 file in the temporary directory.
  Status create(const Secret& secret);
  // Removes the file now; idempotent. Safe to call from normal (non-signal) context only.
  void remove();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tidegate::run
