#include "api/compressed_args.h"

#include "api/tensor_checks.h"
#include "collectives/algorithm_table.h"
#include "compress/codec_allow_list.h"

namespace tidegate {

Status CodecCache::get(const std::string& spec, std::shared_ptr<const Codec>* codec) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = codecs_.find(spec);
  if (it == codecs_.end()) {
    std::unique_ptr<Codec> made;
    TG_RETURN_IF_ERROR(make_codec(spec, &made));
    it = codecs_.emplace(spec, std::shared_ptr<const Codec>(std::move(made))).first;
  }
  *codec = it->second;
  return Status::ok();
}

Status CodecCache::get_allow_list(const std::string& text, AllowList* allowed) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allow_lists_.find(text);
  if (it == allow_lists_.end()) {
    AllowList parsed;
    TG_RETURN_IF_ERROR(parse_allow_list(text.c_str(), "the allowed option", &parsed));
    it = allow_lists_.emplace(text, std::move(parsed)).first;
  }
  *allowed = it->second;
  return Status::ok();
}

Status compressed_allreduce_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                                 tidegate_reduce_op_t op, const tidegate_compression_t* options,
                                 CodecCache* codecs, const AllowList& default_allowed,
                                 CollectiveArgs* args) {
  TG_RETURN_IF_ERROR(allreduce_args(input, output, op, args));
  TG_CHECK_ARG(options != nullptr, "compressed allreduce: compression options are NULL");
  TG_CHECK_ARG(options->codec != nullptr && options->codec[0] != '\0',
               "compressed allreduce: no codec spec (use \"none\" for the dense allreduce)");
  const bool auto_codec = std::string(options->codec) == "auto";
  std::shared_ptr<const Codec> codec;
  if (!auto_codec) {
    TG_RETURN_IF_ERROR(codecs->get(options->codec, &codec));
    if (codec->id() == CodecId::kNone) return Status::ok();  // the plain allreduce
    TG_CHECK_ARG(options->allowed == nullptr || options->allowed[0] == '\0',
                 std::string("compressed allreduce: an allow-list (\"") + options->allowed +
                     "\") is for codec \"auto\"; codec \"" + options->codec + "\" is fixed");
  }

  TG_CHECK_ARG(op == TIDEGATE_SUM || op == TIDEGATE_AVG,
               std::string("compressed allreduce: reduce op ") + reduce_op_name(op) +
                   " cannot be compressed; use TIDEGATE_SUM or TIDEGATE_AVG (or the dense "
                   "allreduce for MIN, MAX and PROD)");
  const tidegate_dtype_t dtype = args->input.dtype;
  TG_CHECK_ARG(dtype == TIDEGATE_FLOAT32 || dtype == TIDEGATE_FLOAT16 || dtype == TIDEGATE_BFLOAT16,
               std::string("compressed allreduce: dtype ") + dtype_name(dtype) +
                   " cannot be compressed; gradients in float32, float16 or bfloat16 can");
  if (args->input.memory != TIDEGATE_MEMORY_HOST) {
    return unsupported(
        "compressed allreduce: CUDA tensors are not supported by this build's "
        "compressed algorithms; copy to host memory or use the dense allreduce");
  }
  TG_CHECK_ARG(options->error_feedback == 0 || options->error_feedback == 1,
               "compressed allreduce: error_feedback must be 0 or 1");
  CompressionArgs& compression = args->compression;
  compression.key = options->key;
  compression.error_feedback = options->error_feedback == 1;
  compression.algorithm = options->algorithm != nullptr ? options->algorithm : "";
  if (auto_codec) {
    // The plan picks the algorithm with the codec, per op: a fixed one would contradict it.
    TG_CHECK_ARG(compression.algorithm.empty(),
                 "compressed allreduce: codec \"auto\" picks its own algorithm; algorithm \"" +
                     compression.algorithm + "\" needs a fixed codec");
    compression.auto_codec = true;
    if (options->allowed != nullptr && options->allowed[0] != '\0') {
      TG_RETURN_IF_ERROR(codecs->get_allow_list(options->allowed, &compression.allowed));
    } else {
      compression.allowed = default_allowed;
    }
    return Status::ok();
  }
  compression.codec = std::move(codec);
  const AlgorithmRow* row = nullptr;
  TG_RETURN_IF_ERROR(compressed_algorithm(compression, &row));
  if (compression.algorithm.empty()) compression.algorithm = row->name;
  return Status::ok();
}

}  // namespace tidegate
