#include "bench/tidegate_bench/report.h"

#include <algorithm>

#include <cerrno>
#include <cstring>

#include "base/types.h"

namespace tidegate::bench {

namespace {

// "  1234.5" or "     N/A": one numeric cell.
std::string cell(bool present, double value, int width, int precision) {
  char text[64];
  if (present)
    std::snprintf(text, sizeof text, "%*.*f", width, precision, value);
  else
    std::snprintf(text, sizeof text, "%*s", width, "N/A");
  return text;
}

std::string wrong_cell(int64_t wrong) {
  char text[32];
  if (wrong < 0)
    std::snprintf(text, sizeof text, "%6s", "N/A");
  else
    std::snprintf(text, sizeof text, "%6lld", static_cast<long long>(wrong));
  return text;
}

std::string measurement_cells(const Measurement& m) {
  return cell(m.present, m.time_us, 10, 1) + cell(m.present, m.algbw_GBps, 8, 3) +
         cell(m.present, m.busbw_GBps, 8, 3) + " " + wrong_cell(m.present ? m.wrong : -1);
}

}  // namespace

Measurement measure(int64_t bytes, double seconds, double factor, int64_t wrong) {
  Measurement m;
  m.present = true;
  m.time_us = seconds * 1e6;
  m.algbw_GBps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  m.busbw_GBps = m.algbw_GBps * factor;
  m.wrong = wrong;
  return m;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

Reporter::Reporter(const BenchOptions& options, int world_size, std::string transport)
    : options_(options),
      world_size_(world_size),
      transport_(std::move(transport)),
      show_in_place_(options.in_place && traits(options.collective).has_in_place) {}

Reporter::~Reporter() {
  if (json_ != nullptr) std::fclose(json_);
}

Status Reporter::open_json(const std::string& path) {
  json_ = std::fopen(path.c_str(), "w");
  if (json_ == nullptr) return config_error("--json " + path + ": " + std::strerror(errno));
  return Status::ok();
}

void Reporter::print_header() const {
  const CollectiveTraits& t = traits(options_.collective);
  std::printf("# tidegate-bench: %s, %d ranks, transport %s, dtype %s, op %s\n", t.name,
              world_size_, transport_.c_str(), dtype_name(options_.dtype),
              t.reduces ? reduce_op_name(options_.op) : "none");
  std::printf(
      "# time: median over %d iterations (after %d warm-up) of the slowest rank; each "
      "iteration starts after a barrier\n",
      options_.iters, options_.warmup);
  std::printf("# busbw factor: %.4f (nccl-tests convention)\n#\n",
              busbw_factor(options_.collective, world_size_));
  std::printf("# %12s %12s %8s %6s   %-36s", "", "", "", "", "out-of-place");
  if (show_in_place_) std::printf(" %-36s", "in-place");
  if (options_.baseline_mpi) std::printf(" %-24s", "MPI baseline");
  std::printf("\n# %12s %12s %8s %6s %10s %8s %8s %6s", "size", "count", "type", "redop", "time",
              "algbw", "busbw", "#wrong");
  if (show_in_place_) std::printf(" %10s %8s %8s %6s", "time", "algbw", "busbw", "#wrong");
  if (options_.baseline_mpi) std::printf(" %10s %8s %6s", "time", "busbw", "vs_mpi");
  std::printf("  algo\n# %12s %12s %8s %6s %10s %8s %8s %6s", "(B)", "(elements)", "", "", "(us)",
              "(GB/s)", "(GB/s)", "");
  if (show_in_place_) std::printf(" %10s %8s %8s %6s", "(us)", "(GB/s)", "(GB/s)", "");
  if (options_.baseline_mpi) std::printf(" %10s %8s %6s", "(us)", "(GB/s)", "(x)");
  std::printf("\n");
  std::fflush(stdout);
}

void Reporter::add_row(const Row& row) {
  rows_.push_back(row);
  const CollectiveTraits& t = traits(options_.collective);
  std::string line;
  char head[96];
  std::snprintf(head, sizeof head, "  %12lld %12lld %8s %6s", static_cast<long long>(row.bytes),
                static_cast<long long>(row.count), dtype_name(options_.dtype),
                t.reduces ? reduce_op_name(options_.op) : "none");
  line = head + measurement_cells(row.out_of_place);
  if (show_in_place_) line += measurement_cells(row.in_place);
  if (options_.baseline_mpi) {
    const Measurement& b = row.baseline;
    const bool ratio = b.present && row.out_of_place.present && row.out_of_place.time_us > 0;
    line += cell(b.present, b.time_us, 11, 1) + cell(b.present, b.busbw_GBps, 9, 3) +
            cell(ratio, ratio ? b.time_us / row.out_of_place.time_us : 0, 7, 2);
  }
  line += "  " + row.algo;
  if (!row.codec.empty()) {
    char extra[96];
    std::snprintf(extra, sizeof extra, "  ratio %.1f rel_error %.3g", row.ratio, row.rel_error);
    line += extra;
  }
  std::printf("%s\n", line.c_str());
  if (const auto* best = best_choice(row)) {
    const double ratio = row.out_of_place.time_us / best->second.time_us;
    worst_auto_vs_best_ = std::max(worst_auto_vs_best_, ratio);
    std::string choices;
    for (const auto& [name, m] : row.choices) {
      char text[96];
      std::snprintf(text, sizeof text, "%s%s %.1f", choices.empty() ? "" : ", ", name.c_str(),
                    m.time_us);
      choices += text;
    }
    std::printf("#   forced choices (us): %s | best %s, auto/best %.3f\n", choices.c_str(),
                best->first.c_str(), ratio);
  }
  std::fflush(stdout);
  if (json_ != nullptr) write_json(row);
}

void Reporter::write_json(const Row& row) {
  const CollectiveTraits& t = traits(options_.collective);
  const Measurement& m = row.out_of_place;
  std::fprintf(json_,
               "{\"collective\":%s,\"bytes\":%lld,\"count\":%lld,\"dtype\":%s,\"op\":%s,"
               "\"ranks\":%d,\"transport\":%s,\"algo\":%s,\"iters\":%d,\"warmup\":%d,"
               "\"time_us\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,\"wrong\":%lld",
               json_string(t.name).c_str(), static_cast<long long>(row.bytes),
               static_cast<long long>(row.count), json_string(dtype_name(options_.dtype)).c_str(),
               json_string(t.reduces ? reduce_op_name(options_.op) : "none").c_str(), world_size_,
               json_string(transport_).c_str(), json_string(row.algo).c_str(), options_.iters,
               options_.warmup, m.time_us, m.algbw_GBps, m.busbw_GBps,
               static_cast<long long>(m.wrong));
  if (row.in_place.present) {
    std::fprintf(
        json_, ",\"inplace_time_us\":%.3f,\"inplace_busbw_GBps\":%.6f,\"inplace_wrong\":%lld",
        row.in_place.time_us, row.in_place.busbw_GBps, static_cast<long long>(row.in_place.wrong));
  }
  if (row.baseline.present) {
    std::fprintf(json_,
                 ",\"baseline\":\"mpi\",\"baseline_time_us\":%.3f,\"baseline_busbw_GBps\":%.6f,"
                 "\"baseline_ratio\":%.4f",
                 row.baseline.time_us, row.baseline.busbw_GBps,
                 m.time_us > 0 ? row.baseline.time_us / m.time_us : 0.0);
  }
  if (!row.baseline_note.empty())
    std::fprintf(json_, ",\"baseline_note\":%s", json_string(row.baseline_note).c_str());
  // Compressed rows: busbw is on the dense size, so dense and compressed rows share one scale.
  std::fprintf(json_, ",\"codec\":%s,\"dense_equivalent_busbw_GBps\":%.6f",
               json_string(row.codec.empty() ? "dense" : row.codec).c_str(), m.busbw_GBps);
  if (!row.codec.empty()) {
    std::fprintf(json_, ",\"ratio\":%.4f,\"rel_error\":%.6g", row.ratio, row.rel_error);
  }
  if (const auto* best = best_choice(row)) {
    std::fprintf(json_, ",\"choices\":{");
    bool first = true;
    for (const auto& [name, choice] : row.choices) {
      std::fprintf(json_, "%s%s:%.3f", first ? "" : ",", json_string(name).c_str(), choice.time_us);
      first = false;
    }
    std::fprintf(json_, "},\"best_choice\":%s,\"auto_vs_best\":%.4f",
                 json_string(best->first).c_str(), m.time_us / best->second.time_us);
  }
  std::fprintf(json_, "}\n");
  std::fflush(json_);
}

const std::pair<std::string, Measurement>* best_choice(const Row& row) {
  const std::pair<std::string, Measurement>* best = nullptr;
  for (const auto& choice : row.choices) {
    if (!choice.second.present || choice.second.time_us <= 0) continue;
    if (best == nullptr || choice.second.time_us < best->second.time_us) best = &choice;
  }
  return best != nullptr && row.out_of_place.present ? best : nullptr;
}

int64_t Reporter::print_footer() const {
  double sum = 0, baseline_sum = 0;
  int n = 0, baseline_n = 0;
  int64_t wrong = 0;
  for (const Row& row : rows_) {
    for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
      if (!m->present) continue;
      sum += m->busbw_GBps;
      ++n;
      if (m->wrong > 0) wrong += m->wrong;
    }
    if (row.baseline.present) {
      baseline_sum += row.baseline.busbw_GBps;
      ++baseline_n;
    }
  }
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
              wrong == 0 ? "OK" : "ERROR");
  std::printf("# Avg bus bandwidth    : %g\n", n ? sum / n : 0.0);
  if (baseline_n) std::printf("# Avg MPI bus bandwidth: %g\n", baseline_sum / baseline_n);
  if (worst_auto_vs_best_ > 0) {
    std::printf("# Worst auto/best-forced time ratio over the sizes: %.3f\n", worst_auto_vs_best_);
  }
  for (const Row& row : rows_) {
    if (!row.baseline_note.empty()) {
      std::printf("# MPI baseline: %s\n", row.baseline_note.c_str());
      break;
    }
  }
  std::printf("#\n");
  std::fflush(stdout);
  return wrong;
}

}  // namespace tidegate::bench
