#include "mlp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rng.h"

namespace mlp {

Model::Model(const std::vector<int>& widths, uint64_t seed) {
  examples::Rng rng(seed);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer l;
    l.in = widths[i];
    l.out = widths[i + 1];
    const size_t n = static_cast<size_t>(l.in) * l.out;
    // He-uniform: keeps the ReLU activations' variance steady from layer to layer.
    const double limit = std::sqrt(6.0 / l.in);
    l.weight.resize(n);
    for (float& w : l.weight) w = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
    l.bias.assign(l.out, 0.0f);
    l.weight_grad.assign(n, 0.0f);
    l.bias_grad.assign(l.out, 0.0f);
    l.weight_velocity.assign(n, 0.0f);
    l.bias_velocity.assign(l.out, 0.0f);
    layers_.push_back(std::move(l));
  }
  activations_.resize(layers_.size() + 1);
  deltas_.resize(layers_.size() + 1);
}

void Model::set_input(const float* x, int rows) {
  rows_ = rows;
  activations_[0].assign(x, x + static_cast<size_t>(rows) * layers_[0].in);
}

void Model::forward_layer(int i) {
  const Layer& l = layers_[i];
  const std::vector<float>& in = activations_[i];
  std::vector<float>& out = activations_[i + 1];
  out.resize(static_cast<size_t>(rows_) * l.out);
  const bool relu = i + 1 < layers();
  for (int r = 0; r < rows_; ++r) {
    const float* x = in.data() + static_cast<size_t>(r) * l.in;
    for (int o = 0; o < l.out; ++o) {
      const float* w = l.weight.data() + static_cast<size_t>(o) * l.in;
      float sum = l.bias[o];
      for (int k = 0; k < l.in; ++k) sum += w[k] * x[k];
      out[static_cast<size_t>(r) * l.out + o] = relu ? std::max(sum, 0.0f) : sum;
    }
  }
}

double Model::loss(const int* labels) {
  const int classes = layers_.back().out;
  const std::vector<float>& logits = activations_.back();
  std::vector<float>& delta = deltas_.back();
  delta.resize(logits.size());
  double total = 0.0;
  for (int r = 0; r < rows_; ++r) {
    const float* z = logits.data() + static_cast<size_t>(r) * classes;
    float* d = delta.data() + static_cast<size_t>(r) * classes;
    const float top = *std::max_element(z, z + classes);  // subtracted so exp cannot overflow
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c] - top));
    total += std::log(sum) - double(z[labels[r]] - top);
    for (int c = 0; c < classes; ++c) {
      const double p = std::exp(double(z[c] - top)) / sum;
      d[c] = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) / rows_);
    }
  }
  return total;
}

void Model::backward_layer(int i) {
  Layer& l = layers_[i];
  const std::vector<float>& x = activations_[i];
  const std::vector<float>& dy = deltas_[i + 1];
  std::fill(l.weight_grad.begin(), l.weight_grad.end(), 0.0f);
  std::fill(l.bias_grad.begin(), l.bias_grad.end(), 0.0f);
  for (int r = 0; r < rows_; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * l.in;
    const float* dr = dy.data() + static_cast<size_t>(r) * l.out;
    for (int o = 0; o < l.out; ++o) {
      if (dr[o] == 0.0f) continue;  // a ReLU that was off: nothing flows
      float* g = l.weight_grad.data() + static_cast<size_t>(o) * l.in;
      for (int k = 0; k < l.in; ++k) g[k] += dr[o] * xr[k];
      l.bias_grad[o] += dr[o];
    }
  }
  if (i == 0) return;
  // Into the previous layer's output, through its ReLU (whose output is x: zero where it was off).
  std::vector<float>& dx = deltas_[i];
  dx.assign(static_cast<size_t>(rows_) * l.in, 0.0f);
  for (int r = 0; r < rows_; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * l.in;
    const float* dr = dy.data() + static_cast<size_t>(r) * l.out;
    float* out = dx.data() + static_cast<size_t>(r) * l.in;
    for (int o = 0; o < l.out; ++o) {
      const float* w = l.weight.data() + static_cast<size_t>(o) * l.in;
      for (int k = 0; k < l.in; ++k) out[k] += dr[o] * w[k];
    }
    for (int k = 0; k < l.in; ++k)
      if (xr[k] <= 0.0f) out[k] = 0.0f;
  }
}

void Model::sgd_layer(int i, float learning_rate, float momentum) {
  Layer& l = layers_[i];
  auto update = [&](std::vector<float>& p, std::vector<float>& v, const std::vector<float>& g) {
    for (size_t k = 0; k < p.size(); ++k) {
      v[k] = momentum * v[k] + g[k];
      p[k] -= learning_rate * v[k];
    }
  };
  update(l.weight, l.weight_velocity, l.weight_grad);
  update(l.bias, l.bias_velocity, l.bias_grad);
}

std::vector<int> Model::predictions() const {
  const int classes = layers_.back().out;
  const std::vector<float>& logits = activations_.back();
  std::vector<int> out(rows_);
  for (int r = 0; r < rows_; ++r) {
    const float* z = logits.data() + static_cast<size_t>(r) * classes;
    out[r] = static_cast<int>(std::max_element(z, z + classes) - z);
  }
  return out;
}

uint64_t Model::parameter_hash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const std::vector<float>& v) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t k = 0; k < v.size() * sizeof(float); ++k) h = (h ^ bytes[k]) * 0x100000001b3ull;
  };
  for (const Layer& l : layers_) {
    mix(l.weight);
    mix(l.bias);
  }
  return h;
}

}  // namespace mlp
