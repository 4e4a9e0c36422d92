#include "bench/tidegate_bench/step_report.h"

#include <cstdio>

#include "select/plan_text.h"

namespace tidegate::bench {

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string number(double value) { return format_number(value); }

std::string timeline_json(const StepTimeline& tl) {
  std::string json = "{\"forward_end_ms\":" + number(tl.forward_end) +
                     ",\"backward_end_ms\":" + number(tl.backward_end) +
                     ",\"step_end_ms\":" + number(tl.step_end) +
                     ",\"next_forward_end_ms\":" + number(tl.next_forward_end) + ",\"units\":[";
  for (size_t i = 0; i < tl.units.size(); ++i) {
    const SyncUnit& u = tl.units[i];
    json += (i == 0 ? "{" : ",{") + std::string("\"name\":") + json_string(u.name) +
            ",\"bytes\":" + std::to_string(u.bytes) + ",\"ready_ms\":" + number(u.ready) +
            ",\"done_ms\":" + number(u.done) + "}";
  }
  return json + "]}";
}

std::string row_json(const StepRunInfo& info, const StepRow& r) {
  std::string json =
      "{\"step\":{\"model\":" + json_string(info.model) +
      ",\"profile\":" + json_string(info.profile) + ",\"ranks\":" + std::to_string(info.ranks) +
      ",\"backward_ms\":" + number(info.backward_ms) +
      ",\"forward_ms\":" + number(info.forward_ms) + ",\"warmup\":" + std::to_string(info.warmup) +
      ",\"iters\":" + std::to_string(info.iters) + ",\"tensors\":" + std::to_string(info.tensors) +
      ",\"bytes\":" + std::to_string(info.bytes) + "},\"mode\":" + json_string(r.mode) +
      ",\"codec\":" + json_string(r.codec) + ",\"step_ms\":" + number(r.step_ms) +
      ",\"compute_ms\":" + number(r.compute_ms) + ",\"comm_alone_ms\":" + number(r.comm_ms) +
      ",\"ideal_ms\":" + number(r.ideal_ms()) + ",\"exposed_ms\":" + number(r.exposed_ms()) +
      ",\"step_over_ideal\":" + number(r.step_ms / r.ideal_ms()) +
      ",\"speedup_vs_noverlap\":" + (r.speedup > 0 ? number(r.speedup) : "null") +
      ",\"ops_per_step\":" + std::to_string(r.ops) +
      ",\"first_needed\":{\"name\":" + json_string(info.first_name) +
      ",\"bytes\":" + std::to_string(info.first_bytes) +
      ",\"ready_to_done_ms\":" + number(r.first_ms) + ",\"alone_ms\":" + number(r.first_alone_ms) +
      "}";
  if (r.session) {
    const SessionFigures& f = r.figures;
    json += ",\"session\":{\"fusion_bytes\":" + std::to_string(f.fusion_bytes) +
            ",\"chunk_bytes\":" + std::to_string(f.chunk_bytes) +
            ",\"ops\":" + std::to_string(f.ops) + ",\"fused_ops\":" + std::to_string(f.fused_ops) +
            ",\"chunk_ops\":" + std::to_string(f.chunk_ops) +
            ",\"cycles\":" + std::to_string(f.cycles) + "}";
  }
  return json + ",\"timeline\":" + timeline_json(r.timeline) + "}";
}

}  // namespace

void print_step_header(const StepRunInfo& info, const std::string& codec) {
  std::printf(
      "# step: %s (%zu tensors, %.1f MiB float32), %d ranks, backward %.1f ms, forward "
      "%.1f ms, codec %s, %d warm-up + %d measured steps\n",
      info.model.c_str(), info.tensors, mib(info.bytes), info.ranks, info.backward_ms,
      info.forward_ms, codec.c_str(), info.warmup, info.iters);
  std::fflush(stdout);
}

void print_step_rows(const StepRunInfo& info, const std::vector<StepRow>& rows) {
  std::printf("# %-13s %9s %10s %9s %9s %10s %10s %11s %8s\n", "mode", "step_ms", "compute_ms",
              "comm_ms", "ideal_ms", "exposed_ms", "step/ideal", "vs_noverlap", "ops");
  for (const StepRow& r : rows) {
    char speedup[32] = "-";
    if (r.speedup > 0) std::snprintf(speedup, sizeof speedup, "%.2fx", r.speedup);
    std::printf("  %-13s %9.1f %10.1f %9.1f %9.1f %10.1f %10.2f %11s %8lld\n", r.mode.c_str(),
                r.step_ms, r.compute_ms, r.comm_ms, r.ideal_ms(), r.exposed_ms(),
                r.step_ms / r.ideal_ms(), speedup, static_cast<long long>(r.ops));
  }
  std::printf("# first needed gradient %s (%.2f MiB): alone %.2f ms; ready to done per mode:",
              info.first_name.c_str(), mib(info.first_bytes),
              rows.empty() ? 0.0 : rows[0].first_alone_ms);
  for (const StepRow& r : rows) {
    std::printf(" %s %.2f ms (%.2fx)", r.mode.c_str(), r.first_ms,
                r.first_alone_ms > 0 ? r.first_ms / r.first_alone_ms : 0.0);
  }
  std::printf("\n");
  for (const StepRow& r : rows) {
    if (!r.session) continue;
    const SessionFigures& f = r.figures;
    std::printf(
        "# %s: fusion %s, chunks %s; last step %lld ops (%lld fused, %lld chunks), "
        "%lld negotiation cycles\n",
        r.mode.c_str(), f.fusion_bytes < 0 ? "off" : human_bytes(f.fusion_bytes).c_str(),
        f.chunk_bytes < 0 ? "off" : human_bytes(f.chunk_bytes).c_str(),
        static_cast<long long>(f.ops), static_cast<long long>(f.fused_ops),
        static_cast<long long>(f.chunk_ops), static_cast<long long>(f.cycles));
  }
  std::printf("# gradients bitwise identical on every rank after every phase\n");
  std::fflush(stdout);
}

Status append_step_json(const std::string& path, const StepRunInfo& info,
                        const std::vector<StepRow>& rows) {
  FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) return config_error("cannot open --json file '" + path + "'");
  for (const StepRow& r : rows) std::fprintf(file, "%s\n", row_json(info, r).c_str());
  const bool ok = std::fclose(file) == 0;
  return ok ? Status::ok() : config_error("cannot write --json file '" + path + "'");
}

}  // namespace tidegate::bench
