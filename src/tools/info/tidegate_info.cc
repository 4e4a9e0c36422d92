// tidegate-info: what this build has (version, transports, optional parts and their versions)
// and the configuration table with the values in effect. Run inside a job (under tidegate-run
// or mpirun) it also creates a communicator and prints, on rank 0, the bandwidth probe's
// agreed figures per transport and the plan built from them, the codecs' measured throughputs
// and the codec plan of codec "auto" for TIDEGATE_CODECS. `--json` prints the same as one
// JSON object (its "probe" maps each transport to alpha_us and bandwidth_GBps, "codecs" each
// codec family to encode_GBps and decode_GBps, "codec_plan" is null without an allow-list);
// `--config-markdown` prints the configuration table exactly as README.md carries it.
#include <cstdio>
#include <cstring>
#include <string>

#include "api/c_api_internal.h"
#include "api/transport_registry.h"
#include "base/config.h"
#include "build_info.inc"  // generated: TIDEGATE_BUILD_INFO_ROWS
#include "select/codec_plan.h"
#include "src/tools/info/info_launch.h"

namespace {

struct Component {
  const char* name;
  bool used;
  const char* version;
};
const Component kComponents[] = {TIDEGATE_BUILD_INFO_ROWS};

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
      continue;
    }
    out += c;
  }
  return out;
}

void print_json(const tidegate::Config& config, const tidegate::Communicator* comm) {
  std::printf("{\"version\":\"%s\",\"transports\":[", tidegate_version());
  const char* sep = "";
  for (const auto& t : tidegate::built_transports()) {
    std::printf("%s\"%s\"", sep, t.name);
    sep = ",";
  }
  std::printf("],\"build\":{");
  sep = "";
  for (const Component& c : kComponents) {
    std::printf("%s\"%s\":{\"used\":%s,\"version\":\"%s\"}", sep, c.name, c.used ? "true" : "false",
                json_escape(c.version).c_str());
    sep = ",";
  }
  std::printf("},\"config\":{");
  sep = "";
  for (const auto& e : tidegate::config_table()) {
    std::printf("%s\"%s\":{\"value\":\"%s\",\"default\":\"%s\"}", sep, e.env,
                json_escape(config.raw(e.env)).c_str(), json_escape(e.default_value).c_str());
    sep = ",";
  }
  std::printf("}");
  if (comm != nullptr) {
    const tidegate::ProbeProfile& p = comm->probe_profile();
    std::printf(
        ",\"ranks\":%d,\"communicator_transports\":\"%s\",\"probe_source\":\"%s\","
        "\"probe_ms\":%.3f,\"reduce_GBps\":%.6g,\"probe\":{",
        comm->size(), comm->transport_names().c_str(), json_escape(p.source).c_str(), p.probe_ms,
        p.reduce_GBps);
    sep = "";
    for (const tidegate::TransportFigures& f : p.transports) {
      std::printf(
          "%s\"%s\":{\"alpha_us\":%.6g,\"bandwidth_GBps\":%.6g,\"native_alpha_us\":%.6g,"
          "\"native_bandwidth_GBps\":%.6g}",
          sep, f.transport.c_str(), f.alpha_us, f.bandwidth_GBps, f.native_alpha_us,
          f.native_bandwidth_GBps);
      sep = ",";
    }
    std::printf("},\"codecs\":{");
    sep = "";
    for (const tidegate::CodecFigures& c : p.codecs) {
      std::printf("%s\"%s\":{\"encode_GBps\":%.6g,\"decode_GBps\":%.6g}", sep,
                  json_escape(c.codec).c_str(), c.encode_GBps, c.decode_GBps);
      sep = ",";
    }
    std::printf("},\"plan\":%s", comm->planner().plan_json().c_str());
    tidegate::CodecPlan codec_plan;
    const auto& allowed = comm->default_allowed_codecs();
    if (!allowed.empty() && comm->planner().codec_plan(allowed, &codec_plan).is_ok()) {
      std::printf(",\"allowed\":\"%s\",\"codec_plan\":%s",
                  json_escape(tidegate::allow_list_text(allowed)).c_str(),
                  codec_plan.to_json().c_str());
    } else {
      std::printf(",\"allowed\":\"\",\"codec_plan\":null");
    }
  }
  std::printf("}\n");
}

void print_text(const tidegate::Config& config, const tidegate::Communicator* comm) {
  std::printf("tidegate %s\n\ntransports built:", tidegate_version());
  for (const auto& t : tidegate::built_transports()) std::printf(" %s", t.name);
  std::printf("\n\noptional parts:\n");
  for (const Component& c : kComponents) {
    std::printf("  %-8s %-4s %s\n", c.name, c.used ? "yes" : "no", c.version);
  }
  std::printf("\nconfiguration (value in effect, default):\n");
  for (const auto& e : tidegate::config_table()) {
    std::printf("  %-34s %-12s (default %s)\n      %s\n", e.env,
                config.raw(e.env).empty() ? "(unset)" : config.raw(e.env).c_str(),
                e.default_value[0] ? e.default_value : "unset", e.meaning);
  }
  if (comm == nullptr) {
    std::printf("\n(run under tidegate-run or mpirun to see the bandwidth probe and the plan)\n");
    return;
  }
  const tidegate::ProbeProfile& p = comm->probe_profile();
  std::printf("\nbandwidth probe: %d ranks, transports %s, %s, %.0f ms\n", comm->size(),
              comm->transport_names().c_str(), p.source.c_str(), p.probe_ms);
  std::printf("  %-6s %12s %16s %18s %22s\n", "", "alpha (us)", "bandwidth (GB/s)",
              "native alpha (us)", "native bandwidth (GB/s)");
  for (const tidegate::TransportFigures& f : p.transports) {
    std::printf("  %-6s %12.1f %16.4f %18.1f %22.4f\n", f.transport.c_str(), f.alpha_us,
                f.bandwidth_GBps, f.native_alpha_us, f.native_bandwidth_GBps);
  }
  std::printf("  local reduction (float32 sum): %.2f GB/s\n\nplan:\n%s", p.reduce_GBps,
              comm->planner().plan_table().c_str());
  std::printf("\ncodecs (local throughput per byte of float32 input, slowest rank):\n");
  std::printf("  %-10s %14s %14s\n", "", "encode (GB/s)", "decode (GB/s)");
  for (const tidegate::CodecFigures& c : p.codecs) {
    std::printf("  %-10s %14.3f %14.3f\n", c.codec.c_str(), c.encode_GBps, c.decode_GBps);
  }
  const auto& allowed = comm->default_allowed_codecs();
  if (allowed.empty()) {
    std::printf("\ncodec plan: TIDEGATE_CODECS is empty, so codec \"auto\" runs dense\n");
    return;
  }
  tidegate::CodecPlan codec_plan;
  const tidegate::Status built = comm->planner().codec_plan(allowed, &codec_plan);
  if (!built.is_ok()) {
    std::printf("\ncodec plan: %s\n", built.to_string().c_str());
    return;
  }
  std::printf("\ncodec plan of codec \"auto\" for TIDEGATE_CODECS=%s:\n%s",
              tidegate::allow_list_text(allowed).c_str(), codec_plan.to_table().c_str());
}

int usage() {
  std::fprintf(stderr, "usage: tidegate-info [--json | --config-markdown]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config-markdown") == 0) {
      std::fputs(tidegate::config_table_markdown().c_str(), stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--json") != 0) return usage();
    json = true;
  }
  tidegate::Config config;
  tidegate::Status st = tidegate::Config::from_environment(&config);
  if (!st.is_ok()) {
    std::fprintf(stderr, "tidegate-info: %s\n", st.to_string().c_str());
    return 1;
  }
  // Inside a job: join it, so that the probe runs and the plan exists.
  tidegate_comm_t comm = nullptr;
  tidegate_status_t created = TIDEGATE_OK;
  const bool by_mpi = tidegate::info::launched_by_mpi(config);
  if (!config.raw("TIDEGATE_STORE_ADDR").empty()) {
    created = tidegate_comm_create_from_env(&comm);
  } else if (by_mpi) {
    created = tidegate::info::create_mpi_comm(&comm);
  }
  if (created != TIDEGATE_OK) {
    std::fprintf(stderr, "tidegate-info: cannot join the job: %s\n", tidegate_last_error());
    tidegate::info::finish_mpi();
    return 1;
  }
  int rank = 0;
  if (comm != nullptr) tidegate_comm_rank(comm, &rank);
  if (rank == 0) {
    const tidegate::Communicator* impl = comm != nullptr ? comm->impl.get() : nullptr;
    if (json)
      print_json(config, impl);
    else
      print_text(config, impl);
    std::fflush(stdout);
  }
  int rc = 0;
  if (comm != nullptr && tidegate_comm_destroy(comm) != TIDEGATE_OK) {
    std::fprintf(stderr, "tidegate-info: %s\n", tidegate_last_error());
    rc = 1;
  }
  tidegate::info::finish_mpi();
  return rc;
}
