// A small fully-connected network (ReLU hidden layers, softmax cross-entropy) with a layer-by-layer
// interface, so that a trainer can put communication between layers: post a layer's gradients
// as soon as its backward is done, and apply its update just before its next forward.
#ifndef TIDEGATE_EXAMPLES_MLP_MODEL_H
#define TIDEGATE_EXAMPLES_MLP_MODEL_H

#include <cstdint>
#include <vector>

namespace mlp {

// One dense layer y = W x + b; W is out x in, row-major. The gradient buffers are what the
// trainer registers with the gradient session: they are reduced in place, so they must not move.
struct Layer {
  int in = 0, out = 0;
  std::vector<float> weight, bias;
  std::vector<float> weight_grad, bias_grad;
  std::vector<float> weight_velocity, bias_velocity;  // momentum
};

class Model {
 public:
  // widths = {inputs, hidden..., classes}. Same seed -> bitwise the same weights (He-uniform).
  Model(const std::vector<int>& widths, uint64_t seed);

  int layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return layers_[i]; }
  const Layer& layer(int i) const { return layers_[i]; }

  // Copies `rows` samples (row-major, widths[0] features each) in as the input activation.
  void set_input(const float* x, int rows);
  // Computes layer i's output from its input (ReLU on every layer but the last).
  void forward_layer(int i);
  // Softmax cross-entropy of the last layer's output against `labels`: returns the loss summed
  // over the rows and stores its gradient (of the mean loss) for backward_layer.
  double loss(const int* labels);
  // Writes layer i's gradients (of the mean loss over the rows) and, for i > 0, the gradient
  // flowing into layer i-1. Needs forward_layer(i) and backward_layer(i+1) (or loss) first.
  void backward_layer(int i);
  // SGD with momentum on layer i from its gradient buffers: v = m v + g; w -= lr v.
  void sgd_layer(int i, float learning_rate, float momentum);
  // The predicted class of each row of the last forward.
  std::vector<int> predictions() const;
  // FNV-1a 64 over the bytes of every weight and bias, in layer order.
  uint64_t parameter_hash() const;

 private:
  std::vector<Layer> layers_;
  int rows_ = 0;
  std::vector<std::vector<float>> activations_;  // [0] input, [i+1] output of layer i
  std::vector<std::vector<float>> deltas_;       // [i+1] d loss / d output of layer i
};

}  // namespace mlp

#endif  // TIDEGATE_EXAMPLES_MLP_MODEL_H
