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
#include <tidegate/tidegate.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

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
};

const char kUsage[] =
    "usage: tidegate-example-mlp-digits DIGITS.csv.gz [--codec SPEC] [--epochs N] [--batch B]\n"
    "       [--lr X] [--momentum X] [--min-accuracy X] [--seed N]\n"
    "  --codec SPEC   compress every gradient (e.g. fp16, qsgd:bits=8), with error feedback;\n"
    "                 default dense. Launch with tidegate-run -n RANKS -- ...\n";

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
    else if (arg == "-h" || arg == "--help")
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

int run(const Options& o) {
  auto comm = tidegate::Communicator::from_env();
  const int rank = comm.rank(), size = comm.size();

  digits::Dataset all = digits::load_csv_gz(o.data), train, test;
  digits::split(all, 0.2, o.seed, &train, &test);
  std::vector<int> shard;  // this rank's training samples
  for (int i = rank; i < train.size(); i += size) shard.push_back(i);
  // Every rank must run the same number of steps (each marks every gradient once per step), so
  // the count comes from the largest shard, rank 0's; a smaller shard's last batch is smaller.
  const int largest_shard = (train.size() + size - 1) / size;
  const int steps_per_epoch = (largest_shard + o.batch - 1) / o.batch;

  mlp::Model model({digits::kFeatures, 128, 64, digits::kClasses}, o.seed);  // same on all ranks
  const int layers = model.layers();
  tidegate_session_options_t session_options{};
  session_options.op = TIDEGATE_AVG;
  double final_accuracy = 0.0;
  tidegate_session_stats_t totals{};
  const auto start = std::chrono::steady_clock::now();
  if (rank == 0) {
    std::printf("mlp_digits: %d ranks, %d train / %d test samples, %d steps per epoch, codec %s\n",
                size, train.size(), test.size(), steps_per_epoch,
                o.codec.empty() ? "none (dense)" : o.codec.c_str());
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
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
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
      final_accuracy = accuracy(model, test);
      if (rank == 0) {
        std::printf("epoch %d loss %.4f test_accuracy %.4f\n", epoch, sums[0] / sums[1],
                    final_accuracy);
        std::fflush(stdout);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

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

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidegate-example-mlp-digits: %s\n", e.what());
    return 1;
  }
}
