// The API edge of the compressed allreduce: the caller's options checked and turned into
// CollectiveArgs before anything is sent (a codec spec that does not parse is a CONFIG error at
// the call), and the codec cache that spares each call the parse.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/collective_args.h"
#include "compress/codec.h"
#include "tidegate/tidegate.h"

namespace tidegate {

using AllowList = std::vector<std::shared_ptr<const Codec>>;

// Parsed codecs by spec string, and parsed allow-lists by their text; thread-safe. Codecs are
// immutable, so one object serves every op, and a training loop that passes the same strings
// every step parses them once (and hands the planner the same codec objects, which it then
// recognises without comparing spec strings).
class CodecCache {
 public:
  Status get(const std::string& spec, std::shared_ptr<const Codec>* codec);
  Status get_allow_list(const std::string& text, AllowList* allowed);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Codec>> codecs_;
  std::map<std::string, AllowList> allow_lists_;
};

// Validates the tensors, the op and the options; args becomes a dense allreduce for codec "none",
// an auto one for codec "auto" (its allow-list: options->allowed, else `default_allowed`, the
// communicator's TIDEGATE_CODECS) and a compressed one otherwise (its algorithm resolved, so a
// bad name fails here).
Status compressed_allreduce_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                                 tidegate_reduce_op_t op, const tidegate_compression_t* options,
                                 CodecCache* codecs, const AllowList& default_allowed,
                                 CollectiveArgs* args);

}  // namespace tidegate
