// tidegate-bench's output: the nccl-tests style table on stdout and, with --json, one JSON
// object per row (JSON Lines: a file grows row by row and a crashed run keeps its rows). Only
// rank 0 reports. The rows are flat objects of numbers and a few strings, so a dozen lines of
// printf and one string escaper replace a JSON library dependency.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/tidegate_bench/bench_options.h"

namespace tidegate::bench {

struct Measurement {
  bool present = false;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  int64_t wrong = -1;  // -1: not checked
};

struct Row {
  int64_t bytes = 0;
  int64_t count = 0;
  std::string algo;
  Measurement out_of_place;
  Measurement in_place;
  Measurement baseline;       // the MPI collective
  std::string baseline_note;  // why there is none, or how it was timed
  // --compare-choices: every forced "transport/algorithm" timed on the same buffers.
  std::vector<std::pair<std::string, Measurement>> choices;
  // --codec rows: the codec spec ("" for a dense row), dense ring bytes over the bytes each
  // rank sent (the largest over ranks), and the one-step error against the exact sum.
  std::string codec;
  double ratio = 0;
  double rel_error = -1;
};

// The fastest of row.choices (nullptr when there are none).
const std::pair<std::string, Measurement>* best_choice(const Row& row);

// algbw and busbw from the size and a time (nccl-tests: GB/s with 1 GB = 1e9 bytes).
Measurement measure(int64_t bytes, double seconds, double busbw_factor, int64_t wrong);

class Reporter {
 public:
  Reporter(const BenchOptions& options, int world_size, std::string transport);
  ~Reporter();

  // Opens the JSON file (truncating it). CONFIG error when it cannot be written.
  Status open_json(const std::string& path);
  void print_header() const;
  void add_row(const Row& row);
  // The averages and the correctness summary. Returns the total number of wrong elements.
  int64_t print_footer() const;

 private:
  void write_json(const Row& row);

  const BenchOptions& options_;
  int world_size_;
  std::string transport_;
  double worst_auto_vs_best_ = 0;  // largest auto time / best forced time over the rows
  bool show_in_place_;
  FILE* json_ = nullptr;
  std::vector<Row> rows_;
};

// A JSON string literal of `text` (quotes, backslashes and control characters escaped).
std::string json_string(const std::string& text);

}  // namespace tidegate::bench
