// The Python class GradientSession (session.h): registers gradient buffers once, then per step
// ready / wait / wait_all / step, each a thin call into tidegate's C API.
//
// The session runs on the process group's communicator and must end before it: the group
// closes a session still open when it shuts down (ProcessGroupTidegate::attach), so a wrapper
// kept alive by a reference cycle cannot outlive the group's communicator. Calls take a shared
// lock and close() an exclusive one, so closing never frees a session a call is inside.
#include "gil.h"  // first (it includes Python.h)

#include "session.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend.h"
#include "tensor_bridge.h"

namespace py = pybind11;

namespace tidegate_torch {

namespace {

constexpr const char* kName = "gradient session";

class GradientSession : public ProcessGroupTidegate::Attachment {
 public:
  // What tidegate_session_create needs, kept alive for the session's life.
  struct Spec {
    std::vector<at::Tensor> tensors;  // key i is tensors[i]
    std::vector<int64_t> priorities;
    std::optional<std::string> codec;
    std::optional<std::string> allowed;
    bool error_feedback = true;
    bool average = true;
  };

  static std::shared_ptr<GradientSession> create(const c10::intrusive_ptr<c10d::Backend>& backend,
                                                 Spec spec) {
    ProcessGroupTidegate& group = ProcessGroupTidegate::of(backend, kName);
    check(spec);
    auto session = std::shared_ptr<GradientSession>(new GradientSession(std::move(spec)));
    // Registered with the group before the (collective) creation, so a shutdown that races
    // with it still finds the session.
    group.attach(session, [&](tidegate_comm_t comm) { session->open(comm); });
    return session;
  }

  ~GradientSession() override { close(); }

  void ready(uint64_t key) {
    call("ready", [&](tidegate_session_t s) { return tidegate_session_ready(s, key); });
  }
  void wait(uint64_t key, int64_t timeout_ms) {
    call("wait", [&](tidegate_session_t s) { return tidegate_session_wait(s, key, timeout_ms); });
  }
  void wait_all(int64_t timeout_ms) {
    call("wait_all",
         [&](tidegate_session_t s) { return tidegate_session_wait_all(s, timeout_ms); });
  }
  tidegate_session_stats_t step() {
    tidegate_session_stats_t stats{};
    call("step", [&](tidegate_session_t s) { return tidegate_session_step(s, &stats); });
    return stats;
  }

  // Stops the scheduler and frees the session (idempotent); later calls raise.
  void close() override {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (session_ == nullptr) return;
    without_gil([&] { tidegate_session_destroy(session_); });
    session_ = nullptr;
  }

 private:
  explicit GradientSession(Spec spec) : spec_(std::move(spec)) {}

  static void check(const Spec& spec) {
    TORCH_CHECK_VALUE(spec.priorities.size() == spec.tensors.size(), "tidegate ", kName, ": ",
                      spec.tensors.size(), " tensors but ", spec.priorities.size(), " priorities");
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      const at::Tensor& t = spec.tensors[i];
      TORCH_CHECK_NOT_IMPLEMENTED(t.device().is_cpu(), "tidegate ", kName,
                                  " takes CPU gradients, got key ", i, " on ", t.device());
      TORCH_CHECK_VALUE(t.layout() == at::kStrided && t.is_contiguous(), "tidegate ", kName,
                        " reduces gradients in place: key ", i, " must be dense and contiguous");
      reduction_type(t, kName);  // TypeError for a dtype tidegate cannot reduce
    }
  }

  // Runs under the group's lock, with its communicator open (ProcessGroupTidegate::attach).
  void open(tidegate_comm_t comm) {
    std::vector<tidegate_gradient_t> gradients(spec_.tensors.size());
    for (size_t i = 0; i < gradients.size(); ++i) {
      tidegate_gradient_t& g = gradients[i];
      g.key = i;
      g.tensor = view(spec_.tensors[i], reduction_type(spec_.tensors[i], kName));
      g.priority = static_cast<int>(spec_.priorities[i]);
      g.codec = spec_.codec ? spec_.codec->c_str() : nullptr;
      g.allowed = spec_.allowed ? spec_.allowed->c_str() : nullptr;
      g.error_feedback = spec_.error_feedback ? 1 : 0;
    }
    tidegate_session_options_t options{};
    options.op = spec_.average ? TIDEGATE_AVG : TIDEGATE_SUM;
    std::unique_lock<std::shared_mutex> lock(mutex_);
    tidegate_status_t status = TIDEGATE_OK;
    std::string message;
    without_gil([&] {  // collective: waits for the other ranks
      status = tidegate_session_create(comm, gradients.data(),
                                       static_cast<int64_t>(gradients.size()), &options, &session_);
      if (status != TIDEGATE_OK) message = tidegate_last_error();
    });
    if (status != TIDEGATE_OK) throw_error("gradient session creation", status, message);
  }

  template <typename Call>
  void call(const char* what, Call&& body) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    TORCH_CHECK(session_ != nullptr, "tidegate ", kName, " ", what,
                ": the session is closed (its process group was shut down, or close() ran)");
    tidegate_status_t status = TIDEGATE_OK;
    std::string message;
    without_gil([&] {
      status = body(session_);
      if (status != TIDEGATE_OK) message = tidegate_last_error();
    });
    if (status != TIDEGATE_OK) {
      const std::string name = std::string(kName) + " " + what;
      throw_error(name.c_str(), status, message);
    }
  }

  const Spec spec_;
  std::shared_mutex mutex_;
  tidegate_session_t session_ = nullptr;  // guarded by mutex_
};

}  // namespace

void register_session(py::module_& m) {
  py::class_<GradientSession, std::shared_ptr<GradientSession>>(
      m, "GradientSession",
      "tidegate's gradient session on a tidegate process group: key i is tensors[i], reduced in "
      "place (AVG or SUM) as each is marked ready. See tidegate_session_* in tidegate.h.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& backend,
                       std::vector<at::Tensor> tensors, std::vector<int64_t> priorities,
                       std::optional<std::string> codec, std::optional<std::string> allowed,
                       bool error_feedback, bool average) {
             return GradientSession::create(
                 backend, {std::move(tensors), std::move(priorities), std::move(codec),
                           std::move(allowed), error_feedback, average});
           }),
           py::arg("backend"), py::arg("tensors"), py::arg("priorities"),
           py::arg("codec") = py::none(), py::arg("allowed") = py::none(),
           py::arg("error_feedback") = true, py::arg("average") = true,
           "Collective: every rank registers the same tensors (counts, dtypes) and priorities.")
      .def("ready", &GradientSession::ready, py::arg("key"),
           "Marks gradient `key` ready for this step; returns at once.")
      .def("wait", &GradientSession::wait, py::arg("key"), py::arg("timeout_ms") = -1,
           "Waits until gradient `key` of this step is synchronised (-1: tidegate's timeout).")
      .def("wait_all", &GradientSession::wait_all, py::arg("timeout_ms") = -1,
           "Waits for every gradient marked ready in this step.")
      .def(
          "step",
          [](GradientSession& session) {
            const tidegate_session_stats_t s = session.step();
            py::dict stats;
            stats["steps"] = s.steps;
            stats["ops"] = s.ops;
            stats["fused_ops"] = s.fused_ops;
            stats["chunk_ops"] = s.chunk_ops;
            stats["cycles"] = s.cycles;
            stats["comm_ms"] = s.comm_ms;
            stats["bytes_sent"] = s.bytes_sent;
            return stats;
          },
          "Waits for the whole step (every gradient marked) and returns its statistics.")
      .def("close", &GradientSession::close, "Stops the session (idempotent).");
}

}  // namespace tidegate_torch
