// A data-parallel MLP on the 8x8 digits, synchronising its gradients through a gradient session:
// backward posts each layer's gradients the moment they exist (last layer first), and the next
// step's forward waits for each layer's gradients just before it uses that layer, so the
// allreduces overlap the rest of backward and the start of the next forward (wait-free
// backpropagation). Priority = the order the forward uses a tensor, so layer 1 goes first.
//
//   tidegate-run -n 4 -- tidegate-example-mlp-digits integrations/examples/data/digits.csv.gz
//
// The deferred update is a reordering only: each layer is updated with the averaged gradient of
// the previous step before this step's forward reads it, exactly as in plain synchronous SGD.
// At the end the ranks compare a hash of their parameters: they must be bitwise identical.
//
// With --checkpoint DIR every rank saves its model, momentum and error-feedback state after each
// epoch. A rank that dies is started again by the launcher (tidegate-run --restarts 1); the
// others see the failure (PEER_FAILED or ABORTED from the step they are in), drop their session
// and communicator and create a new one with it, every rank loads the newest epoch that all of
// them saved, and training goes on. Each epoch's batches depend only on the seed, the epoch and
// the rank, so the job ends with the parameters of a job that never failed, bit for bit:
//
//   tidegate-run -n 4 --restarts 1 -- tidegate-example-mlp-digits DATA --checkpoint /tmp/ck
//       --fail-at 2:5:3      (one line; rank 2 SIGKILLs itself in epoch 5, step 3, first life)
#include <tidegate/tidegate.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "digits_data.h"
#include "mlp_model.h"
#include "rng.h"

namespace {

struct Options {
  std::string data;
  std::string codec;  // "" = dense
  int epochs = 12;
  int batch = 32;  // per rank
  float learning_rate = 0.05f;
  float momentum = 0.9f;
  double min_accuracy = 0.9;
  uint64_t seed = 20240611;
  std::string checkpoint_dir;  // "" = no checkpoints, and a failure ends the job
  int max_rebuilds = 3;
  int fail_rank = -1, fail_epoch = 0, fail_step = 0;  // --fail-at, for the restart test
};

const char kUsage[] =
    "usage: tidegate-example-mlp-digits DIGITS.csv.gz [--codec SPEC] [--epochs N] [--batch B]\n"
    "       [--lr X] [--momentum X] [--min-accuracy X] [--seed N]\n"
    "       [--checkpoint DIR [--max-rebuilds N] [--fail-at RANK:EPOCH:STEP]]\n"
    "  --codec SPEC       compress every gradient (e.g. fp16, qsgd:bits=8), with error\n"
    "                     feedback; default dense. Launch with tidegate-run -n RANKS -- ...\n"
    "  --checkpoint DIR   save every rank's state after each epoch; after a lost rank (started\n"
    "                     again by tidegate-run --restarts), rebuild the communicator and go\n"
    "                     on from the newest epoch every rank saved (at most --max-rebuilds\n"
    "                     times, default 3)\n"
    "  --fail-at R:E:S    rank R kills itself (SIGKILL) in epoch E, step S, mid-backward, in\n"
    "                     its first life only: to test the above\n";

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (arg == "--codec")
      o.codec = value();
    else if (arg == "--epochs")
      o.epochs = std::stoi(value());
    else if (arg == "--batch")
      o.batch = std::stoi(value());
    else if (arg == "--lr")
      o.learning_rate = std::stof(value());
    else if (arg == "--momentum")
      o.momentum = std::stof(value());
    else if (arg == "--min-accuracy")
      o.min_accuracy = std::stod(value());
    else if (arg == "--seed")
      o.seed = std::stoull(value());
    else if (arg == "--checkpoint")
      o.checkpoint_dir = value();
    else if (arg == "--max-rebuilds")
      o.max_rebuilds = std::stoi(value());
    else if (arg == "--fail-at") {
      const std::string spec = value();
      if (std::sscanf(spec.c_str(), "%d:%d:%d", &o.fail_rank, &o.fail_epoch, &o.fail_step) != 3)
        throw std::runtime_error("--fail-at wants RANK:EPOCH:STEP, got '" + spec + "'");
    } else if (arg == "-h" || arg == "--help")
      throw std::runtime_error(kUsage);
    else if (!arg.empty() && arg[0] != '-' && o.data.empty())
      o.data = arg;
    else
      throw std::runtime_error("unknown argument " + arg + "\n" + kUsage);
  }
  if (o.data.empty()) throw std::runtime_error(std::string("no data file given\n") + kUsage);
  if (o.epochs < 1 || o.batch < 1) throw std::runtime_error("--epochs and --batch must be >= 1");
  return o;
}

// Gradient keys: layer i's weight and bias, in the order the forward uses them; the priority
// is the same number (0 = needed first), the key is one more so that no key is 0.
int weight_priority(int layer) { return 2 * layer; }
int bias_priority(int layer) { return 2 * layer + 1; }
uint64_t weight_key(int layer) { return weight_priority(layer) + 1; }
uint64_t bias_key(int layer) { return bias_priority(layer) + 1; }

std::vector<tidegate_gradient_t> gradients_of(mlp::Model& model, const Options& o) {
  std::vector<tidegate_gradient_t> grads;
  for (int i = 0; i < model.layers(); ++i) {
    mlp::Layer& l = model.layer(i);
    for (int bias = 0; bias < 2; ++bias) {
      std::vector<float>& buffer = bias ? l.bias_grad : l.weight_grad;
      tidegate_gradient_t g{};
      g.key = bias ? bias_key(i) : weight_key(i);
      g.priority = bias ? bias_priority(i) : weight_priority(i);
      g.tensor = tidegate::view(buffer.data(), static_cast<int64_t>(buffer.size()));
      g.codec = o.codec.empty() ? nullptr : o.codec.c_str();
      g.error_feedback = o.codec.empty() ? 0 : 1;
      grads.push_back(g);
    }
  }
  return grads;
}

double accuracy(mlp::Model& model, const digits::Dataset& set) {
  model.set_input(set.x.data(), set.size());
  for (int i = 0; i < model.layers(); ++i) model.forward_layer(i);
  const std::vector<int> predicted = model.predictions();
  int right = 0;
  for (int r = 0; r < set.size(); ++r) right += predicted[r] == set.y[r];
  return static_cast<double>(right) / set.size();
}

// The data every life of the communicator trains on: loaded and split once per process.
struct Data {
  digits::Dataset train, test;
};

// A rank restarted by tidegate-run --restarts: it joins a job that lost it, so it resumes from
// the checkpoints like the survivors, and --fail-at no longer applies to it.
bool restarted_process() {
  const char* count = std::getenv("TIDEGATE_RESTART_COUNT");
  return count != nullptr && *count != '\0' && std::string(count) != "0";
}

// Failures that a lost or stalled peer causes, after which a new communicator can go on.
bool survivable(tidegate_status_t status) {
  return status == TIDEGATE_ERR_PEER_FAILED || status == TIDEGATE_ERR_ABORTED ||
         status == TIDEGATE_ERR_TIMEOUT;
}

// One life of the communicator: create it, agree on the epoch to start from, train to the end
// and verify. Returns the exit status; throws tidegate::Error when a collective fails.
int train(const Options& o, const Data& data, bool resume) {
  auto comm = tidegate::Communicator::from_env();
  const int rank = comm.rank(), size = comm.size();
  const digits::Dataset &train = data.train, &test = data.test;
  // Every rank must run the same number of steps (each marks every gradient once per step), so
  // the count comes from the largest shard, rank 0's; a smaller shard's last batch is smaller.
  const int largest_shard = (train.size() + size - 1) / size;
  const int steps_per_epoch = (largest_shard + o.batch - 1) / o.batch;

  mlp::Model model({digits::kFeatures, 128, 64, digits::kClasses}, o.seed);  // same on all ranks
  const int layers = model.layers();

  // Where to start: after the newest epoch that every rank has a checkpoint of (a rank killed
  // between its peers' writes and its own is one epoch behind), or from the start.
  int64_t resume_after =
      resume && !o.checkpoint_dir.empty() ? examples::newest_checkpoint(o.checkpoint_dir, rank) : 0;
  comm.allreduce(&resume_after, &resume_after, 1, TIDEGATE_MIN);
  if (resume_after > 0) {
    std::vector<uint8_t> compression_state;
    examples::load_checkpoint(o.checkpoint_dir, rank, static_cast<int>(resume_after), &model,
                              &compression_state);
    comm.load_compression_state(compression_state);
  }
  const bool fail_here = rank == o.fail_rank && !restarted_process();

  tidegate_session_options_t session_options{};
  session_options.op = TIDEGATE_AVG;
  tidegate_session_stats_t totals{};
  const auto start = std::chrono::steady_clock::now();
  if (rank == 0) {
    std::printf(
        "mlp_digits: %d ranks, %d train / %d test samples, %d steps per epoch, codec %s%s\n", size,
        train.size(), test.size(), steps_per_epoch,
        o.codec.empty() ? "none (dense)" : o.codec.c_str(),
        resume_after > 0 ? (", resuming after epoch " + std::to_string(resume_after)).c_str()
        : resume         ? ", resuming from the start (no epoch saved by every rank)"
                         : "");
    std::fflush(stdout);
  }
  {
    tidegate::GradientSession session(comm, gradients_of(model, o), session_options);
    auto add_stats = [&totals](const tidegate_session_stats_t& s) {
      totals.steps = s.steps;
      totals.ops += s.ops;
      totals.fused_ops += s.fused_ops;
      totals.chunk_ops += s.chunk_ops;
      totals.comm_ms += s.comm_ms;
    };
    std::vector<int> batch_labels;
    std::vector<float> batch_x;
    for (int epoch = static_cast<int>(resume_after) + 1; epoch <= o.epochs; ++epoch) {
      // This rank's samples in an order that depends on the seed, epoch and rank only, so that
      // an epoch run again after a failure sees the same batches.
      std::vector<int> shard;
      for (int i = rank; i < train.size(); i += size) shard.push_back(i);
      examples::Rng rng(o.seed ^ (uint64_t(epoch) << 32) ^ uint64_t(rank));
      rng.shuffle(shard);
      double loss_sum = 0.0, samples = 0.0;
      bool pending = false;  // the previous step's gradients are posted but not applied yet
      for (int step = 0; step < steps_per_epoch; ++step) {
        const int begin = std::min<int>(step * o.batch, static_cast<int>(shard.size()));
        const int end = std::min<int>(begin + o.batch, static_cast<int>(shard.size()));
        batch_x.clear();
        batch_labels.clear();
        for (int k = begin; k < end; ++k) {
          batch_x.insert(batch_x.end(), train.row(shard[k]),
                         train.row(shard[k]) + digits::kFeatures);
          batch_labels.push_back(train.y[shard[k]]);
        }
        model.set_input(batch_x.data(), end - begin);
        // Forward, layer by layer: wait only for the layer about to run, so layer 1 computes
        // while the deeper layers' gradients are still in flight.
        for (int i = 0; i < layers; ++i) {
          if (pending) {
            session.wait(weight_key(i));
            session.wait(bias_key(i));
            model.sgd_layer(i, o.learning_rate, o.momentum);
          }
          model.forward_layer(i);
        }
        // Every gradient of the previous step is applied: close that step before this step's
        // backward marks the gradients again (a key marked twice in one step is an error).
        if (pending) add_stats(session.step());
        loss_sum += model.loss(batch_labels.data());
        samples += end - begin;
        // Backward from the last layer; each layer's gradients go out as soon as they exist.
        for (int i = layers - 1; i >= 0; --i) {
          model.backward_layer(i);
          session.ready(weight_key(i));
          session.ready(bias_key(i));
          // The restart test's fault: dead with its first gradients in flight.
          if (fail_here && epoch == o.fail_epoch && step == o.fail_step) std::raise(SIGKILL);
        }
        pending = true;
      }
      // End of epoch: apply the last step's update so that evaluation sees every step.
      session.wait_all();
      for (int i = 0; i < layers; ++i) model.sgd_layer(i, o.learning_rate, o.momentum);
      add_stats(session.step());
      // Between steps the communicator is free for other collectives (the session is idle).
      double sums[2] = {loss_sum, samples};
      comm.allreduce(sums, sums, 2, TIDEGATE_SUM);
      if (rank == 0) {
        std::printf("epoch %d loss %.4f test_accuracy %.4f\n", epoch, sums[0] / sums[1],
                    accuracy(model, test));
        std::fflush(stdout);
      }
      if (!o.checkpoint_dir.empty()) {
        examples::save_checkpoint(o.checkpoint_dir, rank, epoch, model,
                                  comm.save_compression_state());
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double final_accuracy = accuracy(model, test);

  // Bitwise-identical parameters on every rank: compare the hashes of all ranks.
  const uint64_t hash = model.parameter_hash();
  int64_t mine = 0;
  std::memcpy(&mine, &hash, sizeof mine);
  std::vector<int64_t> hashes(size);
  comm.allgather(&mine, hashes.data(), 1);
  bool identical = true;
  for (int r = 1; r < size; ++r) identical = identical && hashes[r] == hashes[0];
  // Every rank reaches the same verdicts (they share the hashes, and identical parameters give
  // the same accuracy), so rank 0 alone explains them.
  int status = 0;
  if (!identical) {
    status = 1;
    if (rank == 0) {
      std::fprintf(stderr, "FAIL: the ranks' parameters differ; hash per rank:");
      for (int r = 0; r < size; ++r)
        std::fprintf(stderr, " %d:%016llx", r, static_cast<unsigned long long>(hashes[r]));
      std::fprintf(stderr, "\n");
    }
  }
  if (final_accuracy < o.min_accuracy) {
    status = 1;
    if (rank == 0) {
      std::fprintf(stderr, "FAIL: test accuracy %.4f is below --min-accuracy %.4f\n",
                   final_accuracy, o.min_accuracy);
    }
  }
  if (rank == 0) {
    std::printf(
        "%d steps in %.2f s; session: %lld ops (%lld fused, %lld chunks), %.1f ms in "
        "communication; parameter hash %016llx on %s\n",
        static_cast<int>(totals.steps), seconds, static_cast<long long>(totals.ops),
        static_cast<long long>(totals.fused_ops), static_cast<long long>(totals.chunk_ops),
        totals.comm_ms, static_cast<unsigned long long>(hash),
        identical ? "every rank" : "rank 0 only");
  }
  comm.close();
  return status;
}

int run(const Options& o) {
  Data data;
  digits::Dataset all = digits::load_csv_gz(o.data);
  digits::split(all, 0.2, o.seed, &data.train, &data.test);
  bool resume = restarted_process();
  for (int rebuilds = 0;; ++rebuilds) {
    try {
      return train(o, data, resume);
    } catch (const tidegate::Error& e) {
      if (o.checkpoint_dir.empty() || !survivable(e.status()) || rebuilds >= o.max_rebuilds) {
        throw;
      }
      // The session and communicator of the failed life are gone (destroyed as train()
      // unwound); the next life meets the restarted rank in a new communicator.
      std::fprintf(stderr,
                   "mlp_digits: %s\nmlp_digits: rebuilding the communicator (%d of at most %d) "
                   "and resuming from the last checkpoint\n",
                   e.what(), rebuilds + 1, o.max_rebuilds);
      std::fflush(stderr);
      resume = true;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidegate-example-mlp-digits: %s\n", e.what());
    return 1;
  }
}
