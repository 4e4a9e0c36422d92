// tidegate-bench: nccl-tests style benchmark of tidegate's collectives, optionally against the
// matching MPI collective on the same buffers in the same run.
//
//   mpirun -np 4 tidegate-bench -b 1K -e 64M --baseline mpi
//   tidegate-run -n 4 -- tidegate-bench -b 1K -e 64M -c 1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/tidegate_bench/bench_case.h"
#include "bench/tidegate_bench/bench_options.h"
#include "bench/tidegate_bench/compressed_case.h"
#include "bench/tidegate_bench/introspect.h"
#include "bench/tidegate_bench/mpi_support.h"
#include "bench/tidegate_bench/report.h"
#include "bench/tidegate_bench/sfb_bench.h"
#include "bench/tidegate_bench/step_bench.h"
#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {
namespace {

struct Session {
  tidegate_comm_t comm = nullptr;
  bool mpi = false;
  int rank = 0;
  int size = 1;
  double create_ms = 0;  // wall time of communicator creation (rendezvous, connect, probe)
};

// Reads the launcher's environment only to decide how to bootstrap (the library reads its own
// configuration itself): TIDEGATE_RANK means tidegate-run started us.
bool use_mpi(const BenchOptions& options) {
  if (options.bootstrap != Bootstrap::kAuto) return options.bootstrap == Bootstrap::kMpi;
  return std::getenv("TIDEGATE_RANK") == nullptr && mpi::built();
}

// --transport and --algo become the library's configuration variables before the
// communicator reads them at creation.
void apply_library_overrides(const BenchOptions& options) {
  if (!options.transport.empty()) setenv("TIDEGATE_TRANSPORT", options.transport.c_str(), 1);
  if (!options.algo.empty()) {
    const std::string forced = std::string(traits(options.collective).name) + "=" + options.algo;
    setenv("TIDEGATE_ALGO", forced.c_str(), 1);
  }
}

Status start_session(const BenchOptions& options, int* argc, char*** argv, Session* s) {
  apply_library_overrides(options);
  s->mpi = use_mpi(options);
  if (options.baseline_mpi && !s->mpi) {
    return config_error("--baseline mpi needs MPI: run under mpirun (and a build with MPI)");
  }
  if (s->mpi) TG_RETURN_IF_ERROR(mpi::init(argc, argv));
  const auto start = std::chrono::steady_clock::now();
  if (s->mpi) {
    TG_RETURN_IF_ERROR(mpi::create_comm(&s->comm));
  } else {
    TG_RETURN_IF_ERROR(
        from_tidegate(tidegate_comm_create_from_env(&s->comm), "tidegate_comm_create_from_env"));
  }
  s->create_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_comm_rank(s->comm, &s->rank), "tidegate_comm_rank"));
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_comm_size(s->comm, &s->size), "tidegate_comm_size"));
  if (options.root >= s->size)
    return config_error("-r " + std::to_string(options.root) + " is not a rank");
  return Status::ok();
}

// Sum of the ranks' wrong-element counts, plus the number of ranks whose output is not
// bitwise identical to rank 0's (for collectives whose output is the same everywhere).
Status global_wrong(const Session& s, const BenchCase& c, int64_t* wrong) {
  int64_t local = c.count_wrong();
  tidegate_tensor_t t = tidegate_host_tensor(&local, 1, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(
      from_tidegate(tidegate_allreduce(s.comm, &t, &t, TIDEGATE_SUM), "allreduce of #wrong"));
  *wrong = local;
  if (!traits(c.collective()).identical_output) return Status::ok();
  int64_t hash = static_cast<int64_t>(c.output_hash());
  std::vector<int64_t> hashes(static_cast<size_t>(s.size));
  tidegate_tensor_t in = tidegate_host_tensor(&hash, 1, TIDEGATE_INT64);
  tidegate_tensor_t out = tidegate_host_tensor(hashes.data(), s.size, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(
      from_tidegate(tidegate_allgather(s.comm, &in, &out), "allgather of output hashes"));
  for (int64_t h : hashes) *wrong += h != hashes[0] ? 1 : 0;
  return Status::ok();
}

// The barrier every timed iteration starts after. With the MPI baseline it is MPI_Barrier for
// every row, tidegate's and MPI's alike, so that all rows start from the same synchronisation:
// which barrier precedes changes how far apart the ranks leave it, and that spread is timed
// with the op (tidegate's barrier left the ranks further apart than MPI's: small allreduces
// measured 0.4-1.1x MPI's speed after it and 0.8-1.3x after MPI_Barrier, same run, same op).
std::function<Status()> start_barrier(const BenchOptions& o, const Session& s) {
  if (o.baseline_mpi) return [] { return mpi::barrier(); };
  return [&s] { return from_tidegate(tidegate_barrier(s.comm), "tidegate_barrier"); };
}

// Times `loop` (each iteration after start_barrier), checks the result when asked, fills *m.
Status time_checked(const BenchOptions& o, const Session& s, BenchCase& c, TimedLoop loop,
                    Measurement* m) {
  loop.barrier = start_barrier(o, s);
  std::vector<double> seconds;
  TG_RETURN_IF_ERROR(run_timed(loop, o.warmup, o.iters, &seconds));
  double median = 0;
  TG_RETURN_IF_ERROR(slowest_rank_median(s.comm, seconds, &median));
  int64_t wrong = -1;
  if (o.check) TG_RETURN_IF_ERROR(global_wrong(s, c, &wrong));
  *m = measure(c.bytes(), median, busbw_factor(c.collective(), s.size), wrong);
  return Status::ok();
}

Status time_tidegate(const BenchOptions& o, const Session& s, BenchCase& c, bool in_place,
                     Measurement* m) {
  TimedLoop loop;
  if (in_place) loop.prepare = [&] { c.prepare_in_place(); };
  loop.operation = [&] {
    return from_tidegate(c.run(s.comm, in_place), traits(c.collective()).name);
  };
  return time_checked(o, s, c, std::move(loop), m);
}

// The same case forced onto one transport/algorithm (--compare-choices).
Status time_choice(const BenchOptions& o, const Session& s, BenchCase& c, const std::string& choice,
                   Measurement* m) {
  TimedLoop loop;
  loop.operation = [&] { return from_tidegate(run_choice(s.comm, c, choice), choice.c_str()); };
  return time_checked(o, s, c, std::move(loop), m);
}

Status time_mpi(const BenchOptions& o, const Session& s, BenchCase& c, Measurement* m) {
  TimedLoop loop;
  loop.barrier = start_barrier(o, s);
  loop.operation = [&] { return mpi::run(c); };
  std::vector<double> seconds;
  TG_RETURN_IF_ERROR(run_timed(loop, o.warmup, o.iters, &seconds));
  double median = 0;
  TG_RETURN_IF_ERROR(slowest_rank_median(s.comm, seconds, &median));
  *m = measure(c.bytes(), median, busbw_factor(c.collective(), s.size), -1);
  return Status::ok();
}

// A --codec row in the making: its case (its own buffers and key), and the loop that times it.
struct CodecRow {
  std::unique_ptr<CompressedCase> c;
  TimedLoop loop;
  Row row;
};

Status prepare_codec(const BenchOptions& o, const Session& s, int64_t bytes, size_t index,
                     CodecRow* r) {
  const std::string& spec = o.codecs[index];
  // One key per (codec, size): error feedback state carries over between its iterations only.
  const uint64_t key = (static_cast<uint64_t>(index + 1) << 48) ^ static_cast<uint64_t>(bytes);
  r->c = std::make_unique<CompressedCase>(spec, o.codec_algorithm, o.error_feedback, o.dtype, o.op,
                                          s.rank, s.size, bytes, key);
  r->c->set_allowed(o.allowed);
  TG_RETURN_IF_ERROR(r->c->prepare());
  r->row.bytes = r->c->bytes();
  r->row.count = r->c->count();
  r->row.codec = spec;
  r->loop.barrier = start_barrier(o, s);
  CompressedCase* c = r->c.get();
  r->loop.operation = [c, &s, &spec] { return from_tidegate(c->run(s.comm), spec.c_str()); };
  return Status::ok();
}

// After the timed iterations (this rank's `seconds`): the median, one more op through a request
// for the bytes and the pick, the check, and the row beside the dense one.
Status finish_codec(const BenchOptions& o, const Session& s, const Row& dense,
                    std::vector<double> seconds, CodecRow* r) {
  CompressedCase& c = *r->c;
  Row* row = &r->row;
  const std::string& spec = row->codec;
  double median = 0;
  TG_RETURN_IF_ERROR(slowest_rank_median(s.comm, std::move(seconds), &median));
  // One more of the same op, untimed, through a request: the bytes it sent and what ran it
  // (for auto, the plan's pick right after the timed iterations).
  uint64_t sent = 0;
  std::string choice;
  TG_RETURN_IF_ERROR(from_tidegate(c.run_reporting(s.comm, &sent, &choice), spec.c_str()));
  CompressedCheck check;
  if (o.check) {
    TG_RETURN_IF_ERROR(c.check(s.comm, &check));
  } else {
    check.wrong = -1;
  }
  row->out_of_place = measure(c.bytes(), median, busbw_factor(o.collective, s.size), check.wrong);
  row->rel_error = o.check ? check.rel_error : -1;
  if (spec == "auto") {
    row->algo = "auto=" + choice;  // the plan's pick, e.g. auto=tcp/sra+qsgd:bits=4,bucket=512
  } else if (!choice.empty()) {
    row->algo = choice;  // what ran: its own transport, which need not be the dense row's
  } else {
    row->algo = dense.algo.substr(0, dense.algo.find('/')) + "/" +
                (check.algorithm.empty() ? o.codec_algorithm : check.algorithm) + "+" + spec;
  }
  // Bytes on the wire: the most any rank sent in that run.
  int64_t most = static_cast<int64_t>(sent);
  tidegate_tensor_t t = tidegate_host_tensor(&most, 1, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_allreduce(s.comm, &t, &t, TIDEGATE_MAX), "bytes sent"));
  const double dense_ring = busbw_factor(o.collective, s.size) * static_cast<double>(c.bytes());
  row->ratio = most > 0 ? dense_ring / static_cast<double>(most) : 0;
  row->baseline = dense.baseline;
  row->baseline_note = dense.baseline_note;
  // The row's keys are not used again: their residuals (up to three tensors' worth per key
  // with error feedback) would otherwise pile up over codecs and sizes (6.5 GiB per rank by the
  // 16 MiB rows of a twelve-codec run, and the kernel's OOM killer).
  return from_tidegate(tidegate_ef_state_reset(s.comm), "resetting error feedback");
}

// A --codec row: the compressed allreduce timed on the same size, then its check run.
Status bench_codec(const BenchOptions& o, const Session& s, int64_t bytes, size_t index,
                   const Row& dense, Row* row) {
  CodecRow r;
  TG_RETURN_IF_ERROR(prepare_codec(o, s, bytes, index, &r));
  std::vector<double> seconds;
  TG_RETURN_IF_ERROR(run_timed(r.loop, o.warmup, o.iters, &seconds));
  TG_RETURN_IF_ERROR(finish_codec(o, s, dense, std::move(seconds), &r));
  *row = std::move(r.row);
  return Status::ok();
}

// The rows a size adds beside its own: every forced choice (--compare-choices) and the
// in-place variant (-I 1), each timed row after row.
Status time_choices_and_in_place(const BenchOptions& o, const Session& s, BenchCase& c, Row* row) {
  if (o.compare_choices) {
    for (const std::string& choice : forced_choices(s.comm, c, o.choices)) {
      Measurement m;
      TG_RETURN_IF_ERROR(time_choice(o, s, c, choice, &m));
      row->choices.emplace_back(choice, m);
    }
  }
  if (o.in_place && traits(o.collective).has_in_place) {
    TG_RETURN_IF_ERROR(time_tidegate(o, s, c, true, &row->in_place));
  }
  return Status::ok();
}

Status bench_one_size(const BenchOptions& o, const Session& s, int64_t bytes, Row* row) {
  BenchCase c(o.collective, o.dtype, o.op, o.root, s.rank, s.size, bytes);
  c.fill();
  row->bytes = c.bytes();
  row->count = c.count();
  row->algo = planned_algorithm(s.comm, c);
  TG_RETURN_IF_ERROR(time_tidegate(o, s, c, false, &row->out_of_place));
  // Online re-planning may have moved the choice while timing: show both.
  const std::string after = planned_algorithm(s.comm, c);
  if (after != row->algo) row->algo += "->" + after;
  TG_RETURN_IF_ERROR(time_choices_and_in_place(o, s, c, row));
  if (o.baseline_mpi) {
    if (mpi::supports(c, &row->baseline_note))
      TG_RETURN_IF_ERROR(time_mpi(o, s, c, &row->baseline));
  }
  return Status::ok();
}

// --interleave 1: MPI_Allreduce (when asked), tidegate's own choice and every --codec row of
// one size, timed in turns (run_timed_interleaved). MPI goes first in each turn: it writes the
// same buffers as tidegate's dense op, whose result the check then reads. Forced choices and
// the in-place variant are timed after, one row after another.
Status bench_size_interleaved(const BenchOptions& o, const Session& s, int64_t bytes, Row* row,
                              std::vector<Row>* codec_rows) {
  BenchCase c(o.collective, o.dtype, o.op, o.root, s.rank, s.size, bytes);
  c.fill();
  row->bytes = c.bytes();
  row->count = c.count();
  row->algo = planned_algorithm(s.comm, c);
  TimedLoop mpi_loop, dense;
  const bool with_mpi = o.baseline_mpi && mpi::supports(c, &row->baseline_note);
  mpi_loop.barrier = dense.barrier = start_barrier(o, s);
  mpi_loop.operation = [&c] { return mpi::run(c); };
  dense.operation = [&] {
    return from_tidegate(c.run(s.comm, false), traits(c.collective()).name);
  };
  std::vector<CodecRow> codecs(o.codecs.size());
  std::vector<const TimedLoop*> loops;
  if (with_mpi) loops.push_back(&mpi_loop);
  loops.push_back(&dense);
  for (size_t i = 0; i < codecs.size(); ++i) {
    TG_RETURN_IF_ERROR(prepare_codec(o, s, bytes, i, &codecs[i]).with_context(o.codecs[i] + ": "));
    loops.push_back(&codecs[i].loop);
  }
  std::vector<std::vector<double>> seconds;
  TG_RETURN_IF_ERROR(run_timed_interleaved(loops, o.warmup, o.iters, &seconds));
  size_t k = 0;
  if (with_mpi) {
    double median = 0;
    TG_RETURN_IF_ERROR(slowest_rank_median(s.comm, std::move(seconds[k++]), &median));
    row->baseline = measure(c.bytes(), median, busbw_factor(c.collective(), s.size), -1);
  }
  double median = 0;
  TG_RETURN_IF_ERROR(slowest_rank_median(s.comm, std::move(seconds[k++]), &median));
  const std::string after = planned_algorithm(s.comm, c);
  if (after != row->algo) row->algo += "->" + after;
  int64_t wrong = -1;
  if (o.check) TG_RETURN_IF_ERROR(global_wrong(s, c, &wrong));
  row->out_of_place = measure(c.bytes(), median, busbw_factor(c.collective(), s.size), wrong);
  TG_RETURN_IF_ERROR(time_choices_and_in_place(o, s, c, row));
  for (CodecRow& r : codecs) {
    TG_RETURN_IF_ERROR(
        finish_codec(o, s, *row, std::move(seconds[k++]), &r).with_context(r.row.codec + ": "));
    codec_rows->push_back(std::move(r.row));
  }
  return Status::ok();
}

std::vector<int64_t> sizes(const BenchOptions& o) {
  std::vector<int64_t> list;
  const int64_t elem = static_cast<int64_t>(tidegate_dtype_size(o.dtype));
  for (int64_t b = o.min_bytes; b <= o.max_bytes;) {
    list.push_back(b);
    int64_t next = o.step_bytes > 0 ? b + o.step_bytes : b * o.step_factor;
    b = next > b ? next : b + elem;  // from 0, step by one element
  }
  return list;
}

Status run_step(const BenchOptions& o, const Session& s) {
  StepBenchOptions step;
  step.profile_path = o.step;
  step.backward_ms = o.backward_ms;
  step.forward_ms = o.forward_ms;
  TG_RETURN_IF_ERROR(parse_step_modes(o.step_modes, &step.modes));
  step.codecs = o.codecs;
  step.warmup = o.warmup;
  step.iters = o.iters;
  step.json_path = o.json_path;
  if (s.rank == 0) {
    std::printf("# communicator created in %.0f ms: %s\n", s.create_ms,
                creation_summary(s.comm).c_str());
  }
  return run_step_bench(s.comm, s.rank, s.size, step);
}

Status run_bench(const BenchOptions& o, const Session& s, int64_t* wrong) {
  if (!o.step.empty()) {
    *wrong = 0;  // a difference between ranks is an error of run_step
    return run_step(o, s);
  }
  if (!o.sfb.empty()) {
    SfbShapeOption shape;
    TG_RETURN_IF_ERROR(parse_sfb_shape(o.sfb, &shape));
    if (s.rank == 0) {
      std::printf("# communicator created in %.0f ms: %s\n", s.create_ms,
                  creation_summary(s.comm).c_str());
    }
    *wrong = 0;
    return run_sfb_bench(s.comm, s.rank, s.size, shape, o.warmup, o.iters, o.json_path);
  }
  Reporter reporter(o, s.size, transport_name(s.comm));
  if (s.rank == 0) {
    if (!o.json_path.empty()) TG_RETURN_IF_ERROR(reporter.open_json(o.json_path));
    std::printf("# communicator created in %.0f ms: %s\n", s.create_ms,
                creation_summary(s.comm).c_str());
    reporter.print_header();
  }
  for (int64_t bytes : sizes(o)) {
    Row row;
    if (o.interleave) {
      std::vector<Row> compressed;
      TG_RETURN_IF_ERROR(bench_size_interleaved(o, s, bytes, &row, &compressed)
                             .with_context(std::to_string(bytes) + " bytes: "));
      if (s.rank == 0) {
        reporter.add_row(row);
        for (const Row& r : compressed) reporter.add_row(r);
      }
      continue;
    }
    TG_RETURN_IF_ERROR(
        bench_one_size(o, s, bytes, &row).with_context(std::to_string(bytes) + " bytes: "));
    if (s.rank == 0) reporter.add_row(row);
    for (size_t i = 0; i < o.codecs.size(); ++i) {
      Row compressed;
      TG_RETURN_IF_ERROR(
          bench_codec(o, s, bytes, i, row, &compressed)
              .with_context(o.codecs[i] + " at " + std::to_string(bytes) + " bytes: "));
      if (s.rank == 0) reporter.add_row(compressed);
    }
  }
  *wrong = s.rank == 0 ? reporter.print_footer() : 0;
  return Status::ok();
}

[[noreturn]] void fail(const Session& s, const Status& st) {
  std::fprintf(stderr, "tidegate-bench: rank %d: %s\n", s.rank, st.to_string().c_str());
  std::fflush(stderr);
  // Under mpirun the other ranks may be blocked in MPI: only MPI_Abort ends them. Under
  // tidegate-run, our exit makes the launcher stop them.
  if (s.mpi) mpi::abort_job(1);
  std::exit(1);
}

}  // namespace
}  // namespace tidegate::bench

int main(int argc, char** argv) {
  using namespace tidegate::bench;
  BenchOptions options;
  bool help = false;
  tidegate::Status st = parse_bench_options(argc, argv, &options, &help);
  if (help || !st.is_ok()) {
    if (!st.is_ok()) std::fprintf(stderr, "tidegate-bench: %s\n\n", st.message().c_str());
    std::fputs(bench_usage(), help ? stdout : stderr);
    return help ? 0 : 2;
  }
  Session session;
  st = start_session(options, &argc, &argv, &session);
  if (!st.is_ok()) fail(session, st);
  int64_t wrong = 0;
  st = run_bench(options, session, &wrong);
  if (!st.is_ok()) fail(session, st);
  st = from_tidegate(tidegate_comm_destroy(session.comm), "tidegate_comm_destroy");
  if (!st.is_ok()) fail(session, st);
  if (session.mpi) mpi::finalize();
  return wrong == 0 ? 0 : 1;
}
