// The two baselines of tidegate-bench --step: no overlap, and DDP's buckets.
#include <cstring>

#include "bench/tidegate_bench/step_sync.h"
#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {

namespace {

constexpr int64_t kFloat = static_cast<int64_t>(sizeof(float));

// Posts one op over gradients [first, first + count) of the flat buffer.
tidegate_status_t post(const SyncSetup& s, int64_t first, int64_t count, uint64_t key,
                       tidegate_request_t* request) {
  tidegate_tensor_t t = tidegate_host_tensor(s.gradients + first, count, TIDEGATE_FLOAT32);
  if (dense_codec(s.codec)) return tidegate_iallreduce(s.comm, &t, &t, TIDEGATE_AVG, request);
  const tidegate_compression_t c = step_compression(s.codec, key);
  return tidegate_icompressed_allreduce(s.comm, &t, &t, TIDEGATE_AVG, &c, request);
}

// Waits for a posted unit and records when it finished (unless a poll saw it first).
Status finish(tidegate_request_t* request, SyncUnit* unit) {
  if (*request == nullptr) return Status::ok();
  const tidegate_status_t code = tidegate_request_wait(*request, -1);
  if (unit->done < 0) unit->done = now_s();
  tidegate_request_free(*request);
  *request = nullptr;
  return from_tidegate(code, unit->name.c_str());
}

Status poll_requests(std::vector<tidegate_request_t>* requests, std::vector<SyncUnit>* units) {
  for (size_t u = 0; u < requests->size(); ++u) {
    if ((*requests)[u] == nullptr || (*units)[u].done >= 0) continue;
    int done = 0;
    TG_RETURN_IF_ERROR(
        from_tidegate(tidegate_request_test((*requests)[u], &done), (*units)[u].name.c_str()));
    if (done) (*units)[u].done = now_s();
  }
  return Status::ok();
}

void free_requests(std::vector<tidegate_request_t>* requests) {
  for (tidegate_request_t& r : *requests) {
    tidegate_request_free(r);
    r = nullptr;
  }
}

// Backward first, then everything: dense as one allreduce of the whole flat buffer (the
// fewest messages there can be), compressed as one op per tensor (a codec's error feedback is
// per tensor), all posted at once and waited for in order.
class NoOverlapSync : public GradientSync {
 public:
  explicit NoOverlapSync(const SyncSetup& s) : s_(s) {
    const StepWorkload& w = *s.workload;
    if (dense_codec(s.codec)) {
      units_.push_back({"all gradients", w.total_numel * kFloat, -1, -1});
      unit_of_.assign(w.tensors.size(), 0);
    } else {
      for (size_t t = 0; t < w.tensors.size(); ++t) {
        units_.push_back({w.tensors[t].name, w.tensors[t].numel * kFloat, -1, -1});
        unit_of_.push_back(t);
      }
    }
    requests_.assign(units_.size(), nullptr);
  }
  ~NoOverlapSync() override { free_requests(&requests_); }

  Status produced(size_t) override { return Status::ok(); }
  Status needed(size_t) override { return Status::ok(); }
  Status poll() override { return poll_requests(&requests_, &units_); }

  Status backward_done() override {
    const StepWorkload& w = *s_.workload;
    for (size_t u = 0; u < units_.size(); ++u) {
      const bool whole = units_.size() == 1;
      units_[u].ready = now_s();
      units_[u].done = -1;
      TG_RETURN_IF_ERROR(from_tidegate(
          post(s_, whole ? 0 : w.offsets[u], whole ? w.total_numel : w.tensors[u].numel,
               s_.key_base + u, &requests_[u]),
          units_[u].name.c_str()));
    }
    for (size_t u = 0; u < units_.size(); ++u)
      TG_RETURN_IF_ERROR(finish(&requests_[u], &units_[u]));
    return Status::ok();
  }

 private:
  SyncSetup s_;
  std::vector<tidegate_request_t> requests_;
};

// DDP: a bucket's op is posted when its last gradient is produced. Backward produces them in
// list order, so buckets fill (and are posted) in bucket order, as DDP requires; backward ends
// by waiting for all of them (DDP's finalize), so the next forward never waits.
class DdpSync : public GradientSync {
 public:
  explicit DdpSync(const SyncSetup& s) : s_(s) {
    const StepWorkload& w = *s.workload;
    buckets_ = ddp_buckets(w, 1 << 20, 25 << 20);
    unit_of_.resize(w.tensors.size());
    for (size_t b = 0; b < buckets_.size(); ++b) {
      int64_t numel = 0;
      for (size_t t : buckets_[b]) {
        numel += w.tensors[t].numel;
        unit_of_[t] = b;
      }
      units_.push_back({"bucket " + std::to_string(b), numel * kFloat, -1, -1});
    }
    requests_.assign(units_.size(), nullptr);
  }
  ~DdpSync() override { free_requests(&requests_); }

  Status produced(size_t t) override {
    const size_t b = unit_of_[t];
    if (buckets_[b].back() != t) return Status::ok();
    const StepWorkload& w = *s_.workload;
    const int64_t first = w.offsets[buckets_[b].front()];
    units_[b].ready = now_s();
    units_[b].done = -1;
    return from_tidegate(post(s_, first, units_[b].bytes / kFloat, s_.key_base + b, &requests_[b]),
                         units_[b].name.c_str());
  }

  Status backward_done() override {
    for (size_t b = 0; b < units_.size(); ++b)
      TG_RETURN_IF_ERROR(finish(&requests_[b], &units_[b]));
    return Status::ok();
  }
  Status needed(size_t) override { return Status::ok(); }
  Status poll() override { return poll_requests(&requests_, &units_); }

 private:
  SyncSetup s_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<tidegate_request_t> requests_;
};

}  // namespace

std::vector<std::vector<size_t>> ddp_buckets(const StepWorkload& w, int64_t first_cap_bytes,
                                             int64_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets(1);
  int64_t bytes = 0;
  for (size_t t = 0; t < w.tensors.size(); ++t) {
    buckets.back().push_back(t);
    bytes += w.tensors[t].numel * kFloat;
    const int64_t cap = buckets.size() == 1 ? first_cap_bytes : cap_bytes;
    if (bytes >= cap && t + 1 < w.tensors.size()) {
      buckets.emplace_back();
      bytes = 0;
    }
  }
  return buckets;
}

tidegate_compression_t step_compression(const std::string& codec, uint64_t key) {
  tidegate_compression_t c;
  std::memset(&c, 0, sizeof c);
  c.codec = codec.c_str();
  c.key = key;
  c.error_feedback = 1;  // as a trainer would run a lossy codec
  return c;
}

Status make_baseline_sync(StepMode mode, const SyncSetup& setup,
                          std::unique_ptr<GradientSync>* sync) {
  if (mode == StepMode::kNoOverlap) {
    *sync = std::make_unique<NoOverlapSync>(setup);
  } else {
    *sync = std::make_unique<DdpSync>(setup);
  }
  return Status::ok();
}

}  // namespace tidegate::bench
