#include "tools/tidegate_run/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/socket_util.h"

namespace tidegate::run {

SecretFile::~SecretFile() { remove(); }

Status SecretFile::create(const Secret& secret) {
  std::error_code error;
  std::filesystem::path dir = std::filesystem::temp_directory_path(error);
  if (error) dir = "/tmp";
  std::string pattern = (dir / "tidegate-secret-XXXXXX").string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  // mkstemp creates the file O_EXCL with mode 0600, so no other user can open it, not even
  // between creation and the write.
  UniqueFd fd(::mkstemp(name.data()));
  if (!fd.valid()) return system_error("cannot create the job secret file " + pattern, errno);
  path_ = name.data();
  if (::fchmod(fd.get(), S_IRUSR | S_IWUSR) != 0) {
    return system_error("chmod 0600 " + path_, errno);
  }
  const std::string& text = secret.text();
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return system_error("cannot write the job secret file " + path_, errno);
    written += static_cast<size_t>(n);
  }
  return Status::ok();
}

void SecretFile::remove() {
  if (path_.empty()) return;
  ::unlink(path_.c_str());
  path_.clear();
}

}  // namespace tidegate::run
