#include "checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace examples {
namespace {

// File layout (little-endian, as written by this machine): the magic, epoch, layer count, each
// layer's in and out widths, then per layer its weight, bias, weight velocity and bias velocity
// (float32), the compression state's length and bytes, and last an FNV-1a 64 of everything
// before it, so that a damaged file is refused rather than trained on.
constexpr char kMagic[8] = {'T', 'G', 'M', 'L', 'P', 'C', 'K', '1'};

std::string path_of(const std::string& dir, int rank, int epoch) {
  return dir + "/rank" + std::to_string(rank) + ".epoch" + std::to_string(epoch) + ".ckpt";
}

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_floats(std::string* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Reads the file's fields in order; every read checks that the bytes are there.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  T get() {
    T value;
    take(&value, sizeof value);
    return value;
  }
  void get_floats(std::vector<float>* v) { take(v->data(), v->size() * sizeof(float)); }
  void take(void* out, size_t n) {
    if (bytes_.size() - at_ < n) fail("is truncated");
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("checkpoint " + path_ + " " + what);
  }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

}  // namespace

void save_checkpoint(const std::string& dir, int rank, int epoch, const mlp::Model& model,
                     const std::vector<uint8_t>& compression_state) {
  std::string bytes(kMagic, sizeof kMagic);
  put(&bytes, static_cast<uint32_t>(epoch));
  put(&bytes, static_cast<uint32_t>(model.layers()));
  for (int i = 0; i < model.layers(); ++i) {
    put(&bytes, static_cast<uint32_t>(model.layer(i).in));
    put(&bytes, static_cast<uint32_t>(model.layer(i).out));
  }
  for (int i = 0; i < model.layers(); ++i) {
    const mlp::Layer& l = model.layer(i);
    for (const std::vector<float>* v : {&l.weight, &l.bias, &l.weight_velocity, &l.bias_velocity})
      put_floats(&bytes, *v);
  }
  put(&bytes, static_cast<uint64_t>(compression_state.size()));
  bytes.append(reinterpret_cast<const char*>(compression_state.data()), compression_state.size());
  put(&bytes, fnv1a(bytes));

  const std::string path = path_of(dir, rank, epoch), temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw std::runtime_error("cannot write checkpoint " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + temporary + " to " + path + ": " +
                             std::strerror(errno));
  }
  for (int older = epoch - 2; older >= 1; --older) {
    std::error_code ignored;
    if (!std::filesystem::remove(path_of(dir, rank, older), ignored)) break;
  }
}

int newest_checkpoint(const std::string& dir, int rank) {
  const std::string prefix = "rank" + std::to_string(rank) + ".epoch";
  int newest = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + 5 ||
        name.compare(name.size() - 5, 5, ".ckpt") != 0) {
      continue;
    }
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    newest = std::max(newest, std::stoi(digits));
  }
  return newest;
}

void load_checkpoint(const std::string& dir, int rank, int epoch, mlp::Model* model,
                     std::vector<uint8_t>* compression_state) {
  const std::string path = path_of(dir, rank, epoch);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint " + path + " cannot be opened");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(bytes, path);
  if (bytes.size() < sizeof kMagic + sizeof(uint64_t)) r.fail("is truncated");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
  if (fnv1a(bytes.substr(0, bytes.size() - sizeof stored)) != stored) {
    r.fail("fails its checksum (damaged)");
  }
  char magic[sizeof kMagic];
  r.take(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) r.fail("is not a digits-MLP checkpoint");
  if (r.get<uint32_t>() != static_cast<uint32_t>(epoch)) r.fail("holds another epoch");
  if (r.get<uint32_t>() != static_cast<uint32_t>(model->layers())) {
    r.fail("has another number of layers");
  }
  for (int i = 0; i < model->layers(); ++i) {
    const uint32_t in_width = r.get<uint32_t>(), out_width = r.get<uint32_t>();
    if (in_width != static_cast<uint32_t>(model->layer(i).in) ||
        out_width != static_cast<uint32_t>(model->layer(i).out)) {
      r.fail("has another shape at layer " + std::to_string(i));
    }
  }
  for (int i = 0; i < model->layers(); ++i) {
    mlp::Layer& l = model->layer(i);
    for (std::vector<float>* v : {&l.weight, &l.bias, &l.weight_velocity, &l.bias_velocity})
      r.get_floats(v);
  }
  const uint64_t state_bytes = r.get<uint64_t>();
  if (state_bytes > bytes.size()) r.fail("is truncated");
  compression_state->resize(state_bytes);
  r.take(compression_state->data(), state_bytes);
}

}  // namespace examples
