// signSGD (Bernstein et al., 2018) with majority vote. encode() keeps one bit per element,
// x < 0 (so -0 and +0 vote +1); decode() gives +1 or -1.
//
// Payloads are summable: a signsgd payload is, for each element, the number of negative votes
// among `voters` payloads, width bits_for(voters) bits each, stored as `width` bit planes
// (vote_planes.h: plane b holds bit b of every count). An encoded payload is the case
// voters = 1 (one plane: 1 = negative). sum_payloads() adds the counts of two payloads (voters
// add up); decoding a summed payload gives the majority vote: -1 when negative votes are more
// than half, +1 when fewer, 0 on a tie.
//   PayloadHeader (codec, dtype, count) | u32 voters | u8 width | 3 zero bytes | planes
// A condensed sum (condense_sum(): what an owner sends on once its sum is final) keeps only the
// decision: width 0, then a plane of "negative" bits and, for an even number of voters, a plane
// of "tie" bits (odd voters cannot tie). It decodes like the sum it came from and cannot be
// summed again: 1 or 2 bits per element instead of log2(voters + 1).
// Spec: signsgd (no parameters). Deterministic; biased, so it asks for error feedback.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/parallel.h"
#include "compress/payload.h"
#include "compress/sign_bits.h"
#include "compress/vote_planes.h"
#include "numeric/half.h"

namespace tidegate {

namespace {

constexpr int64_t kChunk = kSignBlock;
constexpr size_t kParamBytes = 8;
constexpr uint32_t kMaxVoters = uint32_t{1} << 31;

struct Votes {
  uint32_t voters = 0;
  bool decided = false;        // a condensed sum: planes are "negative" and, if even, "tie"
  vote_planes::Planes planes;  // the counts' bit planes, or the decision's
};

// Planes of a condensed sum of `voters` votes.
unsigned decided_planes(uint32_t voters) { return voters % 2 == 0 ? 2 : 1; }

class SignSgdCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kSignSgd; }
  std::string spec() const override { return "signsgd"; }
  bool deterministic() const override { return true; }
  bool wants_error_feedback() const override { return true; }
  bool payloads_summable() const override { return true; }

  size_t max_payload_bytes(const TensorView& like) const override {
    return votes_bytes(like.count, 1);
  }
  size_t max_summed_payload_bytes(const TensorView& like, int64_t parties) const override {
    return parties >= 1 && parties <= kMaxVoters
               ? votes_bytes(like.count, static_cast<uint32_t>(parties))
               : 0;
  }

  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, false);
  }
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, true);
  }
  Status sum_payloads(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes,
                      const TensorView& like, uint8_t* out, size_t capacity,
                      size_t* written) const override;
  size_t max_condensed_payload_bytes(const TensorView& like, int64_t parties) const override {
    if (parties < 1 || parties > kMaxVoters) return 0;
    if (parties == 1) return max_payload_bytes(like);
    return kPayloadHeaderBytes + kParamBytes +
           vote_planes::planes_bytes(like.count, decided_planes(static_cast<uint32_t>(parties)));
  }
  Status condense_sum(const uint8_t* sum, size_t bytes, const TensorView& like, uint8_t* out,
                      size_t capacity, size_t* written) const override;

 private:
  static size_t votes_bytes(int64_t count, uint32_t voters) {
    return kPayloadHeaderBytes + kParamBytes + vote_planes::planes_bytes(count, bits_for(voters));
  }
  Status parse(const uint8_t* payload, size_t bytes, int64_t count, Votes* votes) const;
  Status check_counts(const Votes& votes) const;
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;
};

Status SignSgdCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                            size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), input, "input"));
  TG_CHECK_ARG(capacity >= max_payload_bytes(input),
               "signsgd codec: output capacity " + std::to_string(capacity) +
                   " is below max_payload_bytes " + std::to_string(max_payload_bytes(input)));
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(input.dtype), 0, input.count});
  writer.put<uint32_t>(1);
  writer.put<uint32_t>(1);  // width 1 and three zero bytes
  uint8_t* bits = writer.claim(packed_bytes(static_cast<uint64_t>(input.count), 1));
  TG_RETURN_IF_ERROR(writer.status());
  const int64_t chunks = (input.count + kChunk - 1) / kChunk;
  TG_RETURN_IF_ERROR(parallel_ranges(context.threads, chunks, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(input.dtype == TIDEGATE_FLOAT32 ? 0 : kChunk);
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * kChunk;
      const int64_t n = std::min(kChunk, input.count - first);
      const float* x = floats_at(input, first, n, scratch.data());
      if (!pack_signs(x, n, bits + first / 8)) {
        const int64_t bad = first + first_nonfinite(x, n);
        return nonfinite_input(id(), bad, element_value(input, bad));
      }
    }
    return Status::ok();
  }));
  *written = writer.size();
  return Status::ok();
}

Status SignSgdCodec::parse(const uint8_t* payload, size_t bytes, int64_t count,
                           Votes* votes) const {
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(id(), count, &header));
  uint8_t width = 0, reserved[3];
  TG_RETURN_IF_ERROR(reader.get(&votes->voters));
  TG_RETURN_IF_ERROR(reader.get(&width));
  TG_RETURN_IF_ERROR(reader.get(&reserved));
  votes->decided = width == 0 && votes->voters >= 2;
  const unsigned planes = votes->decided ? decided_planes(votes->voters) : width;
  if (votes->voters < 1 || votes->voters > kMaxVoters ||
      (!votes->decided && width != bits_for(votes->voters))) {
    return protocol_error("signsgd payload has " + std::to_string(votes->voters) +
                          " voters and width " + std::to_string(width) +
                          " (voters must be 1..2^31, width bits_for(voters), or 0 for a "
                          "condensed sum of 2 or more)");
  }
  const size_t data = vote_planes::planes_bytes(count, planes);
  if (reader.remaining() != data) {
    return protocol_error("signsgd payload is " + std::to_string(bytes) + " bytes; " +
                          std::to_string(count) + " elements need exactly " +
                          std::to_string(votes_bytes(count, votes->voters)));
  }
  votes->planes.count = count;
  votes->planes.width = planes;
  return reader.take(data, &votes->planes.data);
}

// Counts above the number of voters cannot come from an encoder or a sum.
Status SignSgdCodec::check_counts(const Votes& votes) const {
  if (votes.voters == 1) return Status::ok();  // every 1-bit count is valid
  uint64_t value = 0;
  if (votes.decided) {
    // Read as the number negative + 2 tie, a decision is valid below 3.
    const int64_t both =
        votes.planes.width == 2 ? vote_planes::first_count_above(votes.planes, 2, &value) : -1;
    if (both < 0) return Status::ok();
    return protocol_error("signsgd condensed vote of " + std::to_string(votes.voters) +
                          " voters is both negative and tied at element " + std::to_string(both));
  }
  const int64_t element = vote_planes::first_count_above(votes.planes, votes.voters, &value);
  if (element < 0) return Status::ok();
  return protocol_error("signsgd payload counts " + std::to_string(value) + " negative votes of " +
                        std::to_string(votes.voters) + " voters at element " +
                        std::to_string(element));
}

Status SignSgdCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                                 bool add) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), output, "output"));
  Votes votes;
  TG_RETURN_IF_ERROR(parse(payload, bytes, output.count, &votes));
  TG_RETURN_IF_ERROR(check_counts(votes));  // before writing: no half-added output
  float values[kChunk];
  uint8_t negative[kChunk / 8], tie[kChunk / 8];
  const bool direct = output.dtype == TIDEGATE_FLOAT32;
  // -1 where the negative votes are more than half (count > voters / 2, rounded down); a tie
  // (count == voters / 2 exactly) only where the voters are even.
  const uint64_t half = votes.voters / 2;
  const bool ties_possible = votes.voters % 2 == 0;
  for (int64_t first = 0; first < output.count; first += kChunk) {
    const int64_t n = std::min(kChunk, output.count - first);
    float* out = direct ? static_cast<float*>(output.data) + first : values;
    const bool add_here = direct && add;
    if (votes.voters == 1) {
      unpack_signs(votes.planes.data + first / 8, n, 1.0f, out, add_here);
    } else if (votes.decided) {
      const size_t plane = vote_planes::plane_bytes(output.count);
      if (ties_possible) {
        unpack_votes(votes.planes.data + first / 8, votes.planes.data + plane + first / 8, n, out,
                     add_here);
      } else {
        std::memset(tie, 0, sizeof tie);
        unpack_votes(votes.planes.data + first / 8, tie, n, out, add_here);
      }
    } else {
      vote_planes::compare(votes.planes, first, n, half, negative, tie);
      if (!ties_possible) std::memset(tie, 0, sizeof tie);
      unpack_votes(negative, tie, n, out, add_here);
    }
    if (!direct) store_floats(values, n, output, first, add);
  }
  return Status::ok();
}

Status SignSgdCodec::sum_payloads(const uint8_t* a, size_t a_bytes, const uint8_t* b,
                                  size_t b_bytes, const TensorView& like, uint8_t* out,
                                  size_t capacity, size_t* written) const {
  TG_CHECK_ARG(like.count >= 0, "signsgd sum_payloads: negative count");
  Votes va, vb;
  TG_RETURN_IF_ERROR(parse(a, a_bytes, like.count, &va));
  TG_RETURN_IF_ERROR(parse(b, b_bytes, like.count, &vb));
  if (va.decided || vb.decided) {
    return protocol_error("a condensed signsgd vote (the final decision of " +
                          std::to_string(va.decided ? va.voters : vb.voters) +
                          " voters) cannot be summed again");
  }
  const uint64_t voters = uint64_t{va.voters} + vb.voters;
  TG_CHECK_ARG(voters <= kMaxVoters, "signsgd sum_payloads: more than 2^31 voters");
  const unsigned width = bits_for(voters);
  const size_t total = votes_bytes(like.count, static_cast<uint32_t>(voters));
  TG_CHECK_ARG(capacity >= total,
               "signsgd sum_payloads: output capacity " + std::to_string(capacity) +
                   " is below max_summed_payload_bytes " + std::to_string(total));
  TG_RETURN_IF_ERROR(check_counts(va));  // so that every sum fits in `width` bits
  TG_RETURN_IF_ERROR(check_counts(vb));
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(like.dtype), 0, like.count});
  writer.put<uint32_t>(static_cast<uint32_t>(voters));
  writer.put<uint32_t>(width);  // width and three zero bytes
  uint8_t* planes = writer.claim(vote_planes::planes_bytes(like.count, width));
  TG_RETURN_IF_ERROR(writer.status());
  vote_planes::add(va.planes, vb.planes, width, planes);
  *written = writer.size();
  return Status::ok();
}

Status SignSgdCodec::condense_sum(const uint8_t* sum, size_t bytes, const TensorView& like,
                                  uint8_t* out, size_t capacity, size_t* written) const {
  TG_CHECK_ARG(like.count >= 0, "signsgd condense_sum: negative count");
  Votes votes;
  TG_RETURN_IF_ERROR(parse(sum, bytes, like.count, &votes));
  const size_t total = max_condensed_payload_bytes(like, votes.voters);
  TG_CHECK_ARG(capacity >= total,
               "signsgd condense_sum: output capacity " + std::to_string(capacity) +
                   " is below max_condensed_payload_bytes " + std::to_string(total));
  TG_RETURN_IF_ERROR(check_counts(votes));
  if (votes.voters == 1 || votes.decided) {  // nothing to condense
    std::memcpy(out, sum, bytes);
    *written = bytes;
    return Status::ok();
  }
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(like.dtype), 0, like.count});
  writer.put<uint32_t>(votes.voters);
  writer.put<uint32_t>(0);  // width 0: a decision, and three zero bytes
  const unsigned planes = decided_planes(votes.voters);
  const size_t plane = vote_planes::plane_bytes(like.count);
  uint8_t* negative = writer.claim(plane * planes);
  TG_RETURN_IF_ERROR(writer.status());
  uint8_t tie[kChunk / 8];
  for (int64_t first = 0; first < like.count; first += kChunk) {
    const int64_t n = std::min(kChunk, like.count - first);
    uint8_t* tie_out = planes == 2 ? negative + plane + first / 8 : tie;
    vote_planes::compare(votes.planes, first, n, votes.voters / 2, negative + first / 8, tie_out);
  }
  *written = writer.size();
  return Status::ok();
}

}  // namespace

Status make_signsgd_codec(CodecParams&, std::unique_ptr<Codec>* codec) {
  *codec = std::make_unique<SignSgdCodec>();
  return Status::ok();
}

}  // namespace tidegate
