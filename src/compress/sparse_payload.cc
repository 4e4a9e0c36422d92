#include "compress/sparse_payload.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "compress/bitpack.h"
#include "compress/float_io.h"
#include "compress/float_output.h"
#include "compress/magnitude_scan.h"
#include "compress/payload.h"

namespace tidegate {
namespace {

size_t bitmap_bytes(int64_t count) { return static_cast<size_t>((count + 7) / 8); }

float load_value(const uint8_t* values, int64_t i) {
  float v;
  std::memcpy(&v, values + static_cast<size_t>(i) * sizeof(float), sizeof v);
  return v;
}

Status check_entries(int64_t count, const int64_t* indices, int64_t k) {
  for (int64_t i = 0; i < k; ++i) {
    TG_CHECK_INTERNAL(indices[i] >= 0 && indices[i] < count);
    TG_CHECK_INTERNAL(i == 0 || indices[i] > indices[i - 1]);
  }
  return Status::ok();
}

Status bad_payload(CodecId codec, const std::string& what) {
  return protocol_error(std::string(codec_name(codec)) + " payload " + what);
}

// Index layout: every index is checked before the scatter, so a bad one writes nothing.
Status check_indices(CodecId codec, const uint8_t* packed, int64_t k, int64_t count,
                     unsigned bits) {
  BitReader reader(packed, packed_bytes(static_cast<uint64_t>(k), bits));
  uint64_t previous = 0;
  for (int64_t i = 0; i < k; ++i) {
    const uint64_t index = reader.get(bits);
    if (index >= static_cast<uint64_t>(count) || (i > 0 && index <= previous)) {
      return bad_payload(codec,
                         "entry " + std::to_string(i) + " has index " + std::to_string(index) +
                             (index >= static_cast<uint64_t>(count)
                                  ? ", past the tensor's " + std::to_string(count) + " elements"
                                  : ", not above the previous " + std::to_string(previous)));
    }
    previous = index;
  }
  return Status::ok();
}

// The value out[index] takes: overwriting keeps the sent bits (-0.0 stays -0.0).
float combine(float old_value, float v, SparseDecode mode) {
  switch (mode) {
    case SparseDecode::kAdd:
      return old_value + v;
    case SparseDecode::kSubtract:
      return old_value - v;
    case SparseDecode::kOverwrite:
      break;
  }
  return v;
}

// The entries land a cache line or more apart in a large tensor (1% kept: one in a hundred), so
// the scatter waits on memory, not on arithmetic: indices are unpacked a batch at a time and the
// batch's targets prefetched before they are combined (decode_add of a 1% top-k payload into
// 64 Mi elements: 14.5 against 18.5 ms one index at a time, medians of 4 interleaved runs of
// tidegate-codec-bench --benchmark_filter='decode_add/topk:ratio=0.01,mode=exact/67108864').
void scatter_indices(const uint8_t* packed, const uint8_t* values, int64_t k, unsigned bits,
                     float* out, SparseDecode mode) {
  constexpr int64_t kBatch = 256;
  uint64_t batch[kBatch];
  BitReader reader(packed, packed_bytes(static_cast<uint64_t>(k), bits));
  for (int64_t first = 0; first < k; first += kBatch) {
    const int64_t n = std::min(kBatch, k - first);
    for (int64_t i = 0; i < n; ++i) {
      batch[i] = reader.get(bits);
      __builtin_prefetch(out + batch[i], /*rw=*/1);
    }
    for (int64_t i = 0; i < n; ++i) {
      out[batch[i]] = combine(out[batch[i]], load_value(values, first + i), mode);
    }
  }
}

Status check_bitmap(CodecId codec, const uint8_t* map, int64_t k, int64_t count) {
  const size_t bytes = bitmap_bytes(count);
  int64_t set = 0;
  for (size_t b = 0; b < bytes; ++b) set += std::popcount(map[b]);
  const unsigned tail = static_cast<unsigned>(count % 8);
  if (set != k || (tail != 0 && (map[bytes - 1] >> tail) != 0)) {
    return bad_payload(codec, "bitmap marks " + std::to_string(set) +
                                  " elements (or bits past the tensor's end) but k is " +
                                  std::to_string(k));
  }
  return Status::ok();
}

void scatter_bitmap(const uint8_t* map, const uint8_t* values, int64_t count, float* out,
                    SparseDecode mode) {
  int64_t next = 0;
  for (size_t b = 0; b < bitmap_bytes(count); ++b) {
    for (unsigned bits = map[b]; bits != 0; bits &= bits - 1) {
      const int64_t index = static_cast<int64_t>(b) * 8 + std::countr_zero(bits);
      out[index] = combine(out[index], load_value(values, next++), mode);
    }
  }
}

void copy_dense(const uint8_t* values, int64_t count, float* out, SparseDecode mode) {
  if (count == 0) return;  // out may be null
  switch (mode) {
    case SparseDecode::kOverwrite:
      std::memcpy(out, values, static_cast<size_t>(count) * sizeof(float));
      return;
    case SparseDecode::kAdd:
      for (int64_t i = 0; i < count; ++i) out[i] += load_value(values, i);
      return;
    case SparseDecode::kSubtract:
      for (int64_t i = 0; i < count; ++i) out[i] -= load_value(values, i);
      return;
  }
}

}  // namespace

unsigned sparse_index_bits(int64_t count) {
  return bits_for(count > 1 ? static_cast<uint64_t>(count - 1) : 0);
}

size_t sparse_body_bytes(int64_t count, int64_t k, SparseLayout layout) {
  const size_t values = static_cast<size_t>(k) * sizeof(float);
  switch (layout) {
    case SparseLayout::kIndices:
      return packed_bytes(static_cast<uint64_t>(k), sparse_index_bits(count)) + values;
    case SparseLayout::kBitmap:
      return bitmap_bytes(count) + values;
    case SparseLayout::kDense:
      return static_cast<size_t>(count) * sizeof(float);
  }
  return 0;
}

SparseLayout choose_sparse_layout(int64_t count, int64_t k) {
  SparseLayout best = SparseLayout::kIndices;
  for (SparseLayout layout : {SparseLayout::kBitmap, SparseLayout::kDense}) {
    if (sparse_body_bytes(count, k, layout) < sparse_body_bytes(count, k, best)) best = layout;
  }
  return best;
}

size_t sparse_payload_bound(int64_t count, int64_t max_k) {
  max_k = std::clamp<int64_t>(max_k, 0, count);
  return kSparsePrefixBytes + sparse_body_bytes(count, max_k, choose_sparse_layout(count, max_k));
}

void write_sparse_prefix(PayloadWriter* writer, CodecId codec, tidegate_dtype_t dtype,
                         uint8_t codec_flags, int64_t count, int64_t k, SparseLayout layout) {
  writer->header({codec, static_cast<uint8_t>(dtype),
                  static_cast<uint8_t>(codec_flags | static_cast<uint8_t>(layout)), count});
  writer->put<int64_t>(k);
  writer->put<uint8_t>(static_cast<uint8_t>(sparse_index_bits(count)));
}

Status write_sparse_payload(CodecId codec, tidegate_dtype_t dtype, uint8_t codec_flags,
                            int64_t count, const int64_t* indices, const float* values, int64_t k,
                            uint8_t* out, size_t capacity, size_t* written) {
  TG_CHECK_INTERNAL(count >= 0 && count <= kMaxSparseCount && k >= 0 && k <= count);
  TG_CHECK_INTERNAL((codec_flags & kSparseLayoutMask) == 0);
  TG_RETURN_IF_ERROR(check_entries(count, indices, k));
  const SparseLayout layout = choose_sparse_layout(count, k);
  const unsigned bits = sparse_index_bits(count);
  PayloadWriter writer(out, capacity);
  write_sparse_prefix(&writer, codec, dtype, codec_flags, count, k, layout);
  if (layout == SparseLayout::kIndices) {
    if (uint8_t* p = writer.claim(packed_bytes(static_cast<uint64_t>(k), bits))) {
      pack_bits(reinterpret_cast<const uint64_t*>(indices), k, bits, p);  // non-negative: same bits
    }
    writer.bytes(values, static_cast<size_t>(k) * sizeof(float));
  } else if (layout == SparseLayout::kBitmap) {
    if (uint8_t* p = writer.claim(bitmap_bytes(count))) {
      std::memset(p, 0, bitmap_bytes(count));
      for (int64_t i = 0; i < k; ++i)
        p[indices[i] / 8] |= static_cast<uint8_t>(1u << (indices[i] % 8));
    }
    writer.bytes(values, static_cast<size_t>(k) * sizeof(float));
  } else if (uint8_t* p = writer.claim(static_cast<size_t>(count) * sizeof(float))) {
    std::memset(p, 0, static_cast<size_t>(count) * sizeof(float));
    for (int64_t i = 0; i < k; ++i)
      std::memcpy(p + indices[i] * sizeof(float), values + i, sizeof(float));
  }
  TG_RETURN_IF_ERROR(writer.status());
  *written = writer.size();
  return Status::ok();
}

Status write_dense_sparse_payload(CodecId codec, tidegate_dtype_t dtype, uint8_t codec_flags,
                                  int64_t count, const float* x, uint8_t* out, size_t capacity,
                                  size_t* written) {
  TG_CHECK_INTERNAL(count >= 0 && count <= kMaxSparseCount &&
                    (codec_flags & kSparseLayoutMask) == 0);
  PayloadWriter writer(out, capacity);
  write_sparse_prefix(&writer, codec, dtype, codec_flags, count, count, SparseLayout::kDense);
  writer.bytes(x, static_cast<size_t>(count) * sizeof(float));
  TG_RETURN_IF_ERROR(writer.status());
  *written = writer.size();
  return Status::ok();
}

Status parse_sparse_payload(CodecId codec, uint8_t allowed_codec_flags, const uint8_t* payload,
                            size_t bytes, int64_t count, ParsedSparsePayload* parsed) {
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(codec, count, &header));
  const uint8_t layout_bits = header.flags & kSparseLayoutMask;
  const uint8_t codec_flags = header.flags & static_cast<uint8_t>(~kSparseLayoutMask);
  if (!payload_dtype_ok(header.dtype) || layout_bits > static_cast<uint8_t>(SparseLayout::kDense) ||
      (codec_flags & ~allowed_codec_flags) != 0) {
    return bad_payload(codec, "has dtype #" + std::to_string(header.dtype) + " and flags " +
                                  std::to_string(header.flags));
  }
  const auto layout = static_cast<SparseLayout>(layout_bits);
  int64_t k = 0;
  uint8_t bits = 0;
  TG_RETURN_IF_ERROR(reader.get(&k));
  TG_RETURN_IF_ERROR(reader.get(&bits));
  if (k < 0 || k > count)
    return bad_payload(codec,
                       "keeps " + std::to_string(k) + " of " + std::to_string(count) + " elements");
  if (bits != sparse_index_bits(count)) {
    return bad_payload(codec, "has " + std::to_string(bits) + "-bit indices; a tensor of " +
                                  std::to_string(count) + " elements uses " +
                                  std::to_string(sparse_index_bits(count)));
  }
  // k <= count <= kMaxSparseCount, so the body size is computed without overflow.
  const size_t body = sparse_body_bytes(count, k, layout);
  if (reader.remaining() != body) {
    return bad_payload(codec, "body is " + std::to_string(reader.remaining()) + " bytes; " +
                                  std::to_string(k) + " kept elements need exactly " +
                                  std::to_string(body));
  }
  const uint8_t* data = nullptr;
  TG_RETURN_IF_ERROR(reader.take(body, &data));
  const size_t head =
      body - static_cast<size_t>(layout == SparseLayout::kDense ? count : k) * sizeof(float);
  const uint8_t* values = data + head;
  if (!packed_floats_finite(values, layout == SparseLayout::kDense ? count : k)) {
    return bad_payload(codec, "holds a NaN or infinite value, which no encoder sends");
  }
  if (layout == SparseLayout::kIndices)
    TG_RETURN_IF_ERROR(check_indices(codec, data, k, count, bits));
  if (layout == SparseLayout::kBitmap) TG_RETURN_IF_ERROR(check_bitmap(codec, data, k, count));
  *parsed = {count, k, layout, bits, codec_flags, data, values};
  return Status::ok();
}

Status decode_sparse_payload(CodecId codec, uint8_t allowed_codec_flags, const uint8_t* payload,
                             size_t bytes, const TensorView& output, SparseDecode mode,
                             SparsePayloadInfo* info) {
  TG_RETURN_IF_ERROR(check_sparse_tensor(codec, output, "output"));
  TG_CHECK_ARG(mode != SparseDecode::kSubtract || output.dtype == TIDEGATE_FLOAT32,
               std::string(codec_name(codec)) + " codec: subtracting a payload needs a float32 " +
                   "output, not " + dtype_name(output.dtype));
  ParsedSparsePayload p;
  TG_RETURN_IF_ERROR(
      parse_sparse_payload(codec, allowed_codec_flags, payload, bytes, output.count, &p));
  // A float16/bfloat16 output is decoded into float32 scratch and added or stored from there.
  FloatOutput out(output, mode == SparseDecode::kAdd);
  const SparseDecode into =
      mode == SparseDecode::kAdd && !out.add() ? SparseDecode::kOverwrite : mode;
  if (p.layout != SparseLayout::kDense && into == SparseDecode::kOverwrite && p.count > 0) {
    std::memset(out.data(), 0, static_cast<size_t>(p.count) * sizeof(float));
  }
  if (p.layout == SparseLayout::kIndices) {
    scatter_indices(p.where, p.values, p.k, p.index_bits, out.data(), into);
  } else if (p.layout == SparseLayout::kBitmap) {
    scatter_bitmap(p.where, p.values, p.count, out.data(), into);
  } else {
    copy_dense(p.values, p.count, out.data(), into);
  }
  out.commit();
  if (info != nullptr) *info = {p.k, p.layout, p.codec_flags};
  return Status::ok();
}

Status check_sparse_tensor(CodecId codec, const TensorView& tensor, const char* role) {
  TG_RETURN_IF_ERROR(check_codec_tensor(codec, tensor, role));
  TG_CHECK_ARG(tensor.count <= kMaxSparseCount,
               std::string(codec_name(codec)) + " codec " + role + ": " +
                   std::to_string(tensor.count) + " elements is beyond the 2^56 the codec handles");
  return Status::ok();
}

bool payload_dtype_ok(uint8_t dtype) {
  return dtype == TIDEGATE_FLOAT32 || dtype == TIDEGATE_FLOAT64 || dtype == TIDEGATE_FLOAT16 ||
         dtype == TIDEGATE_BFLOAT16;
}

}  // namespace tidegate
