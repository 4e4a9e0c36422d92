#include "bench/tidegate_bench/step_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tidegate::bench {

namespace {

using Json = nlohmann::json;

// Counts in the files are JSON numbers: whole, non-negative and exact in a double.
bool whole_number(const Json* v, int64_t* out) {
  if (v == nullptr || !v->is_number()) return false;
  const double d = v->get<double>();
  if (!(d >= 0 && d <= 9007199254740992.0) || std::floor(d) != d) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// The member `key` of an object, or nullptr.
const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Status read_tensor(const Json& item, size_t position, const std::string& source, ProfileTensor* t) {
  const std::string where = source + ": tensor #" + std::to_string(position);
  const Json* name = member(item, "name");
  const Json* layer = member(item, "layer");
  const Json* dtype = member(item, "dtype");
  const Json* shape = member(item, "shape");
  const Json* flops = member(item, "layer_flops_fwd_bwd");
  int64_t backward_index = 0;
  if (!item.is_object() || name == nullptr || !name->is_string() || layer == nullptr ||
      !layer->is_string() || shape == nullptr || !shape->is_array() || flops == nullptr ||
      !flops->is_number() || flops->get<double>() < 0 ||
      !whole_number(member(item, "numel"), &t->numel) ||
      !whole_number(member(item, "forward_index"), &t->forward_index) ||
      !whole_number(member(item, "backward_index"), &backward_index)) {
    return config_error(where +
                        ": needs name, layer, shape, numel, forward_index, "
                        "backward_index and layer_flops_fwd_bwd");
  }
  t->name = name->get<std::string>();
  t->layer = layer->get<std::string>();
  t->layer_flops = flops->get<double>();
  const std::string named = where + " (" + t->name + ")";
  if (dtype != nullptr && (!dtype->is_string() || dtype->get<std::string>() != "float32")) {
    return config_error(named + ": only float32 gradients are replayed");
  }
  int64_t product = 1;
  for (const Json& dim : *shape) {
    int64_t d = 0;
    if (!whole_number(&dim, &d)) return config_error(named + ": shape holds a non-count");
    product *= d;
  }
  if (product != t->numel) {
    return config_error(named + ": numel " + std::to_string(t->numel) +
                        " is not the product of its shape");
  }
  // The replay takes the list order as the backward order: the file must agree.
  if (backward_index != static_cast<int64_t>(position)) {
    return config_error(named + ": backward_index " + std::to_string(backward_index) +
                        " but listed at " + std::to_string(position));
  }
  return Status::ok();
}

// forward_index must be a permutation (the next forward needs every tensor exactly once), and
// a layer's tensors share its FLOPs (the compute is spread per layer, not per tensor).
Status check_profile(const StepProfile& p, const std::string& source) {
  std::vector<bool> seen(p.tensors.size(), false);
  std::map<std::string, double> flops;
  for (const ProfileTensor& t : p.tensors) {
    if (t.forward_index >= static_cast<int64_t>(seen.size()) ||
        seen[static_cast<size_t>(t.forward_index)]) {
      return config_error(source + ": " + t.name + ": forward_index " +
                          std::to_string(t.forward_index) + " repeated or out of range");
    }
    seen[static_cast<size_t>(t.forward_index)] = true;
    auto [it, added] = flops.emplace(t.layer, t.layer_flops);
    if (!added && it->second != t.layer_flops) {
      return config_error(source + ": " + t.name + ": layer " + t.layer +
                          " has different FLOPs on different tensors");
    }
  }
  return Status::ok();
}

}  // namespace

int64_t StepProfile::total_numel() const {
  int64_t n = 0;
  for (const ProfileTensor& t : tensors) n += t.numel;
  return n;
}

Status parse_step_profile(const std::string& text, const std::string& source,
                          StepProfile* profile) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return config_error(source + ": not JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  }
  const Json* model = member(doc, "model");
  const Json* tensors = member(doc, "tensors");
  if (model == nullptr || !model->is_string() || tensors == nullptr || !tensors->is_array() ||
      tensors->empty()) {
    return config_error(source + ": a profile needs \"model\" and a non-empty \"tensors\" list");
  }
  StepProfile p;
  p.model = model->get<std::string>();
  p.tensors.resize(tensors->size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    TG_RETURN_IF_ERROR(read_tensor((*tensors)[i], i, source, &p.tensors[i]));
  }
  TG_RETURN_IF_ERROR(check_profile(p, source));
  *profile = std::move(p);
  return Status::ok();
}

Status load_step_profile(const std::string& path, StepProfile* profile) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return config_error("--step: cannot read the profile '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_step_profile(text.str(), path, profile);
}

StepWorkload make_step_workload(const StepProfile& profile, double backward_ms, double forward_ms) {
  StepWorkload w;
  w.tensors = profile.tensors;
  const size_t n = w.tensors.size();
  w.offsets.resize(n);
  w.layer_of.resize(n);
  for (size_t t = 0; t < n; ++t) {
    w.offsets[t] = w.total_numel;
    w.total_numel += w.tensors[t].numel;
  }
  // Layers in forward order: walk the tensors by forward_index, a layer starting at its first.
  std::vector<size_t> by_forward(n);
  for (size_t t = 0; t < n; ++t) by_forward[static_cast<size_t>(w.tensors[t].forward_index)] = t;
  w.first_needed = by_forward[0];
  std::map<std::string, size_t> index;
  double total_flops = 0;
  for (size_t t : by_forward) {
    auto [it, added] = index.emplace(w.tensors[t].layer, w.layers.size());
    if (added) {
      w.layers.push_back({w.tensors[t].layer, 0, 0, {}});
      total_flops += w.tensors[t].layer_flops;
    }
    w.layers[it->second].tensors.push_back(t);
    w.layer_of[t] = it->second;
  }
  for (StepLayer& layer : w.layers) {
    const double flops = w.tensors[layer.tensors[0]].layer_flops;
    const double share =
        total_flops > 0 ? flops / total_flops : 1.0 / static_cast<double>(w.layers.size());
    layer.forward_s = forward_ms * 1e-3 * share;
    layer.backward_s = backward_ms * 1e-3 * share;
  }
  return w;
}

}  // namespace tidegate::bench
