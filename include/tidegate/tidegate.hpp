// tidegate.hpp - a thin RAII C++ layer over the C API in tidegate.h.
//
// Handles are move-only owners that release their C handle on destruction; every failing call
// throws tidegate::Error, which carries the status code and the library's message. Threading and
// ordering rules are those of tidegate.h. Header-only: it adds no ABI of its own.
//
//   tidegate::Communicator comm = tidegate::Communicator::from_env();
//   std::vector<float> grad(1 << 20, 1.0f);
//   comm.allreduce(grad.data(), grad.data(), grad.size(), TIDEGATE_SUM);  // in place
#ifndef TIDEGATE_TIDEGATE_HPP
#define TIDEGATE_TIDEGATE_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidegate/tidegate.h"

namespace tidegate {

// The one exception type: a status code plus the library's explanation.
class Error : public std::runtime_error {
 public:
  Error(tidegate_status_t status, const std::string& message)
      : std::runtime_error(std::string(tidegate_status_string(status)) + ": " + message),
        status_(status) {}
  tidegate_status_t status() const noexcept { return status_; }

 private:
  tidegate_status_t status_;
};

// Throws Error unless status is TIDEGATE_OK (reads the calling thread's last error).
inline void check(tidegate_status_t status) {
  if (status != TIDEGATE_OK) throw Error(status, tidegate_last_error());
}

// dtype of a C++ element type (float16/bfloat16 have no standard type: pass the dtype).
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr tidegate_dtype_t value = TIDEGATE_FLOAT32;
};
template <>
struct dtype_of<double> {
  static constexpr tidegate_dtype_t value = TIDEGATE_FLOAT64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr tidegate_dtype_t value = TIDEGATE_INT32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr tidegate_dtype_t value = TIDEGATE_INT64;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr tidegate_dtype_t value = TIDEGATE_UINT8;
};

// A host tensor view of count elements at data (no ownership).
template <typename T>
tidegate_tensor_t view(T* data, int64_t count) {
  return tidegate_host_tensor(const_cast<std::remove_const_t<T>*>(data), count,
                              dtype_of<std::remove_const_t<T>>::value);
}
inline tidegate_tensor_t view(void* data, int64_t count, tidegate_dtype_t dtype) {
  return tidegate_host_tensor(data, count, dtype);
}

// An outstanding collective. Destroying an unfinished Request releases the handle only; the
// collective still runs to completion (keep its buffers alive until then, e.g. by wait()).
class Request {
 public:
  Request() = default;
  explicit Request(tidegate_request_t handle) : handle_(handle) {}
  Request(Request&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      tidegate_request_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { tidegate_request_free(handle_); }

  // True when finished; throws if it finished with an error.
  bool test() {
    int done = 0;
    check(tidegate_request_test(handle_, &done));
    return done != 0;
  }
  // Waits (timeout_ms < 0: the configured default); throws on error or timeout.
  void wait(int64_t timeout_ms = -1) { check(tidegate_request_wait(handle_, timeout_ms)); }
  // Runs callback(status, message) once the request finishes, on the progress thread (or at
  // once, here, if it already has); see tidegate_request_on_complete for what it may do.
  // `message` is empty on success. The callback must not throw.
  void on_complete(std::function<void(tidegate_status_t, const std::string&)> callback) {
    auto* owned =
        new std::function<void(tidegate_status_t, const std::string&)>(std::move(callback));
    const tidegate_status_t status = tidegate_request_on_complete(
        handle_,
        [](void* user_data, tidegate_status_t code) {
          std::unique_ptr<std::function<void(tidegate_status_t, const std::string&)>> fn(
              static_cast<std::function<void(tidegate_status_t, const std::string&)>*>(user_data));
          (*fn)(code, tidegate_last_error());
        },
        owned);
    if (status != TIDEGATE_OK) delete owned;
    check(status);
  }
  tidegate_request_t get() const noexcept { return handle_; }
  // What ran the finished op ("tcp/ring", "tcp/sra+qsgd:bits=4,bucket=512"): see
  // tidegate_request_choice.
  std::string choice() const {
    char buffer[512];
    check(tidegate_request_choice(handle_, buffer, sizeof buffer));
    return buffer;
  }

 private:
  tidegate_request_t handle_ = nullptr;
};

// How a compressed allreduce compresses (see tidegate_compression_t): the codec spec ("auto":
// the plan picks per op among `allowed`, "" = TIDEGATE_CODECS), the tensor key, error feedback
// and, optionally, the algorithm ("" = the codec's default).
struct Compression {
  std::string codec;
  uint64_t key = 0;
  bool error_feedback = false;
  std::string algorithm;
  std::string allowed;

  tidegate_compression_t c() const {
    tidegate_compression_t options{};
    options.codec = codec.c_str();
    options.key = key;
    options.error_feedback = error_feedback ? 1 : 0;
    options.algorithm = algorithm.c_str();
    options.allowed = allowed.c_str();
    return options;
  }
};

class Communicator {
 public:
  // From TIDEGATE_* / launcher variables (see tidegate_comm_create_from_env).
  static Communicator from_env() {
    tidegate_comm_t comm = nullptr;
    check(tidegate_comm_create_from_env(&comm));
    return Communicator(comm);
  }
  // Through the caller's store callbacks (see tidegate_comm_create).
  static Communicator with_store(int rank, int size, const tidegate_store_t& store) {
    tidegate_comm_t comm = nullptr;
    check(tidegate_comm_create(rank, size, &store, &comm));
    return Communicator(comm);
  }
  // Through the caller's store callbacks, with (variable, value) settings applied over the
  // environment (see tidegate_comm_create_with_settings).
  static Communicator with_store(int rank, int size, const tidegate_store_t& store,
                                 const std::vector<std::pair<std::string, std::string>>& settings) {
    std::vector<tidegate_setting_t> c_settings;
    for (const auto& [name, value] : settings) c_settings.push_back({name.c_str(), value.c_str()});
    tidegate_comm_t comm = nullptr;
    check(tidegate_comm_create_with_settings(rank, size, &store, c_settings.data(),
                                             c_settings.size(), &comm));
    return Communicator(comm);
  }
  // Over an MPI communicator: pass &comm (see tidegate_comm_create_from_mpi).
  static Communicator from_mpi(const void* mpi_comm) {
    tidegate_comm_t comm = nullptr;
    check(tidegate_comm_create_from_mpi(mpi_comm, &comm));
    return Communicator(comm);
  }

  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    if (this != &other) {
      tidegate_comm_destroy(comm_);
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  // Destroys the communicator; errors are dropped here (call close() to see them).
  ~Communicator() { tidegate_comm_destroy(comm_); }

  // Destroys now and throws if finishing the posted collectives failed.
  void close() { check(tidegate_comm_destroy(std::exchange(comm_, nullptr))); }
  void abort(const std::string& reason) { check(tidegate_comm_abort(comm_, reason.c_str())); }

  int rank() const {
    int r = 0;
    check(tidegate_comm_rank(comm_, &r));
    return r;
  }
  int size() const {
    int s = 0;
    check(tidegate_comm_size(comm_, &s));
    return s;
  }
  tidegate_comm_t get() const noexcept { return comm_; }

  // Non-blocking collectives on raw views.
  Request iallreduce(const tidegate_tensor_t& in, const tidegate_tensor_t& out,
                     tidegate_reduce_op_t op) {
    tidegate_request_t r = nullptr;
    check(tidegate_iallreduce(comm_, &in, &out, op, &r));
    return Request(r);
  }
  Request ireduce_scatter(const tidegate_tensor_t& in, const tidegate_tensor_t& out,
                          tidegate_reduce_op_t op) {
    tidegate_request_t r = nullptr;
    check(tidegate_ireduce_scatter(comm_, &in, &out, op, &r));
    return Request(r);
  }
  Request iallgather(const tidegate_tensor_t& in, const tidegate_tensor_t& out) {
    tidegate_request_t r = nullptr;
    check(tidegate_iallgather(comm_, &in, &out, &r));
    return Request(r);
  }
  Request ibroadcast(const tidegate_tensor_t& tensor, int root) {
    tidegate_request_t r = nullptr;
    check(tidegate_ibroadcast(comm_, &tensor, root, &r));
    return Request(r);
  }
  Request ibarrier() {
    tidegate_request_t r = nullptr;
    check(tidegate_ibarrier(comm_, &r));
    return Request(r);
  }
  // Compressed allreduce (tidegate_icompressed_allreduce): op SUM or AVG.
  Request icompressed_allreduce(const tidegate_tensor_t& in, const tidegate_tensor_t& out,
                                tidegate_reduce_op_t op, const Compression& compression) {
    const tidegate_compression_t options = compression.c();
    tidegate_request_t r = nullptr;
    check(tidegate_icompressed_allreduce(comm_, &in, &out, op, &options, &r));
    return Request(r);
  }
  void compressed_allreduce(const tidegate_tensor_t& in, const tidegate_tensor_t& out,
                            tidegate_reduce_op_t op, const Compression& compression) {
    const tidegate_compression_t options = compression.c();
    check(tidegate_compressed_allreduce(comm_, &in, &out, op, &options));
  }

  // The compression state (tidegate_ef_state_save and friends): local, ordered with this
  // rank's collectives.
  std::vector<uint8_t> save_compression_state() {
    void* data = nullptr;
    size_t bytes = 0;
    check(tidegate_ef_state_save(comm_, &data, &bytes));
    std::unique_ptr<void, void (*)(void*)> owned(data, tidegate_free);
    const auto* begin = static_cast<const uint8_t*>(data);
    return std::vector<uint8_t>(begin, begin + bytes);
  }
  void load_compression_state(const std::vector<uint8_t>& state) {
    check(tidegate_ef_state_load(comm_, state.data(), state.size()));
  }
  void reset_compression_state() { check(tidegate_ef_state_reset(comm_)); }
  void flush_residuals(uint64_t key, const tidegate_tensor_t& dense, tidegate_reduce_op_t op) {
    check(tidegate_ef_flush(comm_, key, &dense, op));
  }

  // Blocking conveniences on typed pointers.
  template <typename T>
  void allreduce(const T* in, T* out, int64_t count, tidegate_reduce_op_t op) {
    const tidegate_tensor_t i = view(in, count), o = view(out, count);
    check(tidegate_allreduce(comm_, &i, &o, op));
  }
  template <typename T>
  void allgather(const T* in, T* out, int64_t count) {
    const tidegate_tensor_t i = view(in, count), o = view(out, count * size());
    check(tidegate_allgather(comm_, &i, &o));
  }
  template <typename T>
  void broadcast(T* data, int64_t count, int root) {
    const tidegate_tensor_t t = view(data, count);
    check(tidegate_broadcast(comm_, &t, root));
  }
  void barrier() { check(tidegate_barrier(comm_)); }

 private:
  explicit Communicator(tidegate_comm_t comm) : comm_(comm) {}
  tidegate_comm_t comm_ = nullptr;
};

// A gradient session (tidegate_session_create and friends): register the gradients once, then
// per step ready() each as backward produces it, wait() for one before the forward layer that
// uses it, step() at the end. Thread safety as documented on the C calls.
class GradientSession {
 public:
  GradientSession(Communicator& comm, const std::vector<tidegate_gradient_t>& gradients,
                  const tidegate_session_options_t& options = {}) {
    check(tidegate_session_create(comm.get(), gradients.data(),
                                  static_cast<int64_t>(gradients.size()), &options, &session_));
  }
  GradientSession(GradientSession&& other) noexcept
      : session_(std::exchange(other.session_, nullptr)) {}
  GradientSession& operator=(GradientSession&& other) noexcept {
    if (this != &other) {
      tidegate_session_destroy(session_);
      session_ = std::exchange(other.session_, nullptr);
    }
    return *this;
  }
  GradientSession(const GradientSession&) = delete;
  GradientSession& operator=(const GradientSession&) = delete;
  ~GradientSession() { tidegate_session_destroy(session_); }

  void ready(uint64_t key) { check(tidegate_session_ready(session_, key)); }
  void wait(uint64_t key, int64_t timeout_ms = -1) {
    check(tidegate_session_wait(session_, key, timeout_ms));
  }
  void wait_all(int64_t timeout_ms = -1) { check(tidegate_session_wait_all(session_, timeout_ms)); }
  tidegate_session_stats_t step() {
    tidegate_session_stats_t stats{};
    check(tidegate_session_step(session_, &stats));
    return stats;
  }
  tidegate_session_options_t options_used() const {
    tidegate_session_options_t options{};
    check(tidegate_session_options_used(session_, &options));
    return options;
  }
  tidegate_session_t get() const noexcept { return session_; }

 private:
  tidegate_session_t session_ = nullptr;
};

}  // namespace tidegate

#endif  // TIDEGATE_TIDEGATE_HPP
