// A real model's gradients, as tidegate-bench --step replays them: the profile files of
// bench/profiles/ (ResNet-50, BERT-base, GPT-2 small), and the emulated step built from one.
//
// A profile lists the tensors in the order backward produced their gradients; each tensor
// names its layer (the module that owns it), the order the forward pass first uses it, and the
// layer's forward+backward FLOPs (shared by the layer's tensors; 0 for layers without matmuls
// or convolutions). The emulated step spreads a chosen compute time over the layers in
// proportion to their FLOPs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate::bench {

struct ProfileTensor {
  std::string name;
  std::string layer;
  int64_t numel = 0;
  int64_t forward_index = 0;  // the order the next forward needs it (0 = first)
  double layer_flops = 0;     // forward+backward FLOPs of its layer
};

struct StepProfile {
  std::string model;
  std::vector<ProfileTensor> tensors;  // backward order
  int64_t total_numel() const;
};

// Reads a profile file. CONFIG error naming the file and the tensor for anything that does not
// hold: fields missing or of the wrong type, numel not the product of the shape, a dtype other
// than float32, backward_index out of list order, forward_index not a permutation, tensors of
// one layer with different FLOPs.
Status load_step_profile(const std::string& path, StepProfile* profile);
// The same from the file's text (`source` names it in errors).
Status parse_step_profile(const std::string& text, const std::string& source, StepProfile* profile);

// One layer of the emulated step.
struct StepLayer {
  std::string name;
  double forward_s = 0;         // its share of the forward time
  double backward_s = 0;        // its share of the backward time
  std::vector<size_t> tensors;  // its tensors (indices into the backward-ordered list)
};

// The step a trainer would run on the profile's model, with compute scaled to the given
// totals. Gradients live in one flat float32 buffer in backward order (as DDP's
// gradient-as-bucket-view does), so that buckets and the whole model are contiguous slices.
struct StepWorkload {
  std::vector<ProfileTensor> tensors;  // backward order
  std::vector<int64_t> offsets;        // each tensor's first element in the flat buffer
  std::vector<StepLayer> layers;       // in forward order (of their first tensor's first use)
  std::vector<size_t> layer_of;        // tensor -> index into layers
  size_t first_needed = 0;             // the tensor with forward_index 0
  int64_t total_numel = 0;
};

// Layers get backward_ms and forward_ms in proportion to their FLOPs (all zero: evenly).
StepWorkload make_step_workload(const StepProfile& profile, double backward_ms, double forward_ms);

}  // namespace tidegate::bench
