// NCCL transport: creation (device, unique ids, non-blocking communicators, streams, slots),
// capabilities and the mapping of tidegate's types onto NCCL's.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "base/store.h"
#include "transports/common/transport_start.h"
#include "transports/nccl/nccl_transport.h"

namespace tidegate {
namespace nccl {

Status cuda_error(const std::string& who, const char* what, cudaError_t error) {
  return Status(TIDEGATE_ERR_SYSTEM, who + ": " + what + " failed: " + cudaGetErrorString(error));
}

Status nccl_error(const std::string& who, const char* what, ncclResult_t result) {
  std::string text = who + ": " + what + " failed: " + ncclGetErrorString(result);
  // The last error's text is NCCL's detail (which peer, which socket); it may be empty.
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && detail[0] != '\0') text += std::string(" (") + detail + ")";
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) return internal_error(text);
  return peer_failed(text);  // remote, system or internal NCCL errors: the job cannot go on
}

bool nccl_dtype(tidegate_dtype_t dtype, ncclDataType_t* out) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      *out = ncclFloat32;
      return true;
    case TIDEGATE_FLOAT64:
      *out = ncclFloat64;
      return true;
    case TIDEGATE_FLOAT16:
      *out = ncclFloat16;
      return true;
    case TIDEGATE_BFLOAT16:
      *out = ncclBfloat16;
      return true;
    case TIDEGATE_INT32:
      *out = ncclInt32;
      return true;
    case TIDEGATE_INT64:
      *out = ncclInt64;
      return true;
    case TIDEGATE_UINT8:
      *out = ncclUint8;
      return true;
  }
  return false;
}

bool nccl_op(tidegate_reduce_op_t op, ncclRedOp_t* out) {
  switch (op) {
    case TIDEGATE_SUM:
      *out = ncclSum;
      return true;
    case TIDEGATE_AVG:
      *out = ncclAvg;
      return true;
    case TIDEGATE_MIN:
      *out = ncclMin;
      return true;
    case TIDEGATE_MAX:
      *out = ncclMax;
      return true;
    case TIDEGATE_PROD:
      *out = ncclProd;
      return true;
  }
  return false;
}

Status SlotPool::init(const std::string& who, size_t slot_bytes, uint32_t slots) {
  slot_bytes_ = slot_bytes;
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&device_), slot_bytes * slots);
  if (e != cudaSuccess) return cuda_error(who, "cudaMalloc of the header slots", e);
  e = cudaMallocHost(reinterpret_cast<void**>(&host_), slot_bytes * slots);
  if (e != cudaSuccess) return cuda_error(who, "cudaMallocHost of the header slots", e);
  free_.clear();
  for (uint32_t i = slots; i > 0; --i) free_.push_back(i - 1);
  return Status::ok();
}

void SlotPool::release() {
  if (device_ != nullptr) cudaFree(device_);
  if (host_ != nullptr) cudaFreeHost(host_);
  device_ = nullptr;
  host_ = nullptr;
  free_.clear();
}

bool SlotPool::take(uint32_t* slot) {
  if (free_.empty()) return false;
  *slot = free_.back();
  free_.pop_back();
  return true;
}

namespace {

// The launcher's local rank when it sets one (Config captured it; no getenv here), else -1.
int launcher_local_rank(const Config* config) {
  if (config == nullptr) return -1;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const std::string text = config->launcher_variable(name);
    char* end = nullptr;
    const long value = text.empty() ? -1 : std::strtol(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0' && value >= 0) return static_cast<int>(value);
  }
  return -1;
}

// One GPU per rank of a node: the local rank picks it; without a launcher, the global rank
// (right for one node; a multi-node job without a launcher must set CUDA_VISIBLE_DEVICES).
Status choose_device(const TransportContext& context, int* device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return unsupported("rank " + std::to_string(context.rank) +
                       ": the nccl transport needs a CUDA device and this process sees none" +
                       (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : ""));
  }
  const int local = launcher_local_rank(context.config);
  *device = (local >= 0 ? local : context.rank) % count;
  return Status::ok();
}

std::string to_hex(const void* data, size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(data)[i];
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

bool from_hex(const std::string& text, void* out, size_t bytes) {
  if (text.size() != 2 * bytes) return false;
  auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < bytes; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    static_cast<unsigned char*>(out)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

// Every rank says whether it can run NCCL and on which host and device (agree_on_start), so
// that a rank without a GPU does not leave the others waiting in ncclCommInitRankConfig; NCCL
// also refuses two ranks on one device (e.g. several ranks of one process on a one-GPU machine).
Status agree_on_usability(const TransportContext& context, const Status& local, int device) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::vector<std::string> places;  // "host device" per rank
  TG_RETURN_IF_ERROR(agree_on_start(context, "nccl", local.is_ok() ? "" : local.message(),
                                    std::string(host) + " " + std::to_string(device), &places));
  std::map<std::string, int> owner;  // "host device" -> first rank on it
  for (int r = 0; r < context.size; ++r) {
    auto [it, fresh] = owner.emplace(places[static_cast<size_t>(r)], r);
    if (!fresh) {
      return unsupported("the nccl transport is unavailable: ranks " + std::to_string(it->second) +
                         " and " + std::to_string(r) + " would share one GPU (host and device '" +
                         it->first + "'); NCCL needs one GPU per rank");
    }
  }
  return Status::ok();
}

}  // namespace

Status NcclTransport::create(const TransportContext& context, std::unique_ptr<Transport>* out) {
  TG_CHECK_ARG(context.store != nullptr, "the nccl transport needs the bootstrap store");
  int device = 0;
  TG_RETURN_IF_ERROR(agree_on_usability(context, choose_device(context, &device), device));
  std::unique_ptr<tcp::PacedExitWatch> exit_watch;
  TG_RETURN_IF_ERROR(tcp::PacedExitWatch::start(context, "nccl", &exit_watch));
  std::unique_ptr<NcclTransport> transport(new NcclTransport(context, device));
  transport->exit_watch_ = std::move(exit_watch);
  {
    std::lock_guard<std::mutex> lock(transport->mutex_);
    TG_RETURN_IF_ERROR(transport->init(context));
  }
  *out = std::move(transport);
  return Status::ok();
}

NcclTransport::NcclTransport(const TransportContext& context, int device)
    : rank_(context.rank),
      size_(context.size),
      device_(device),
      deadline_ms_(context.config != nullptr ? context.config->timeout_ms() : 300000),
      who_("rank " + std::to_string(context.rank) + " (nccl, cuda:" + std::to_string(device) +
           ")") {}

Status NcclTransport::exchange_ids(const TransportContext& context, ncclUniqueId ids[2]) {
  if (rank_ == 0) {
    for (int i = 0; i < 2; ++i) {
      const ncclResult_t r = ncclGetUniqueId(&ids[i]);
      if (r != ncclSuccess) return nccl_error(who_, "ncclGetUniqueId", r);
    }
    return context.store->set("nccl/ids", to_hex(ids, 2 * sizeof(ncclUniqueId)));
  }
  std::string text;
  TG_RETURN_IF_ERROR(context.store->get("nccl/ids", context.deadline, &text));
  if (!from_hex(text, ids, 2 * sizeof(ncclUniqueId))) {
    return protocol_error(who_ + ": rank 0 published malformed NCCL unique ids");
  }
  return Status::ok();
}

Status NcclTransport::init_comm(const ncclUniqueId& id, Deadline deadline, ncclComm_t* comm) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; we poll, so the creation deadline is ours to keep
  ncclResult_t r = ncclCommInitRankConfig(comm, size_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) return nccl_error(who_, "ncclCommInitRankConfig", r);
  ncclResult_t state = ncclInProgress;
  while (true) {
    r = ncclCommGetAsyncError(*comm, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclInProgress) break;
    if (deadline.passed()) {
      ncclCommAbort(*comm);
      *comm = nullptr;
      return timeout_error(who_ +
                           ": NCCL communicator creation did not finish before the deadline; "
                           "did every rank create the communicator (and pick the nccl transport)?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (state != ncclSuccess) {
    Status st = nccl_error(who_, "NCCL communicator creation", state);
    ncclCommAbort(*comm);
    *comm = nullptr;
    return st;
  }
  return Status::ok();
}

Status NcclTransport::init(const TransportContext& context) {
  const DeviceGuard device_guard(device_);  // the creating thread keeps its own device
  ncclUniqueId ids[2];
  TG_RETURN_IF_ERROR(exchange_ids(context, ids));
  TG_RETURN_IF_ERROR(init_comm(ids[0], context.deadline, &header_comm_));
  TG_RETURN_IF_ERROR(init_comm(ids[1], context.deadline, &data_comm_));
  cudaError_t e = cudaStreamCreateWithFlags(&header_stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_error(who_, "cudaStreamCreate", e);
  e = cudaStreamCreateWithFlags(&data_stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_error(who_, "cudaStreamCreate", e);
  TG_RETURN_IF_ERROR(headers_.init(who_, kWireHeaderBytes, kHeaderSlots));
  TG_RETURN_IF_ERROR(
      gathers_.init(who_, kWireHeaderBytes * static_cast<size_t>(size_), kNativeSlots));
  TG_LOG(kInfo, who_,
         "nccl transport ready: " + std::to_string(size_) + " ranks, NCCL " +
             std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR));
  return Status::ok();
}

// Host memory is not staged: a host pointer reaching NCCL would fault on the device.
Status NcclTransport::check_device_pointer(const void* ptr, const char* what) const {
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, ptr);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls do not report it
    return invalid_argument(who_ + ": " + what + " is not CUDA memory (" + cudaGetErrorString(e) +
                            ")");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return invalid_argument(who_ + ": " + what +
                            " is host memory; the nccl transport moves CUDA device memory only "
                            "(use the tcp, mpi or ucx transport for host tensors)");
  }
  return Status::ok();
}

TransportCapabilities NcclTransport::capabilities() const {
  TransportCapabilities caps;
  caps.host_memory = false;  // not staged through device buffers
  caps.cuda_memory = true;
  caps.native_allreduce = true;
  caps.native_allgather = true;
  caps.native_reduce_scatter = true;
  caps.channels = 1;            // NCCL p2p has no tags: one FIFO per peer (nccl_transport.h)
  caps.receives_ahead = false;  // payload sends wait while a receive awaits its header
  return caps;
}

bool NcclTransport::supports_native(NativeCollective kind, tidegate_dtype_t dtype,
                                    tidegate_reduce_op_t op, tidegate_memory_t memory) const {
  ncclDataType_t t;
  ncclRedOp_t o;
  if (memory != TIDEGATE_MEMORY_CUDA || !nccl_dtype(dtype, &t)) return false;
  return kind == NativeCollective::kAllgather || nccl_op(op, &o);
}

}  // namespace nccl

Status create_nccl_transport(const TransportContext& context,
                             std::unique_ptr<Transport>* transport) {
  return nccl::NcclTransport::create(context, transport);
}

}  // namespace tidegate
