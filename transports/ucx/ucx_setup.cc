// UCX transport: creation (context, worker, address exchange, endpoints) and capabilities.
#include <string>
#include <vector>

#include "base/log.h"
#include "base/store.h"
#include "transports/ucx/ucx_transport.h"

namespace tidegate {
namespace ucx {

// A local UCX call failed (not a peer): SYSTEM, with UCX's own words (no errno to report).
Status ucx_error(const std::string& what, ucs_status_t status) {
  return Status(TIDEGATE_ERR_SYSTEM, what + ": " + ucs_status_string(status));
}

Status context_supports_cuda(ucp_context_h context, bool* supported) {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  const ucs_status_t s = ucp_context_query(context, &attr);
  if (s != UCS_OK) return ucx_error("ucp_context_query", s);
  *supported = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  return Status::ok();
}

namespace {

// The store holds text; worker addresses are binary.
std::string to_hex(const void* data, size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(data)[i];
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

bool from_hex(const std::string& text, std::vector<unsigned char>* out) {
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = digit(text[i]), lo = digit(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<unsigned char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

Status UcxTransport::create(const TransportContext& context, std::unique_ptr<Transport>* out) {
  TG_CHECK_ARG(context.store != nullptr, "the ucx transport needs the bootstrap store");
  std::unique_ptr<UcxTransport> transport(new UcxTransport(context));
  {
    std::lock_guard<std::mutex> lock(transport->mutex_);
    TG_RETURN_IF_ERROR(transport->init(context));
  }
  *out = std::move(transport);
  return Status::ok();
}

UcxTransport::UcxTransport(const TransportContext& context)
    : rank_(context.rank), size_(context.size), who_("rank " + std::to_string(context.rank)) {}

Status UcxTransport::init_local(std::string* published) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return ucx_error(who_ + ": ucp_config_read", s);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;  // wake-up: the event fd
  params.mt_workers_shared = 0;                            // one worker, used under our mutex
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK)
    return unsupported(who_ + ": cannot create a UCX context: " + ucs_status_string(s));
  TG_RETURN_IF_ERROR(query_memory_types());

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // several threads, never at once
  s = ucp_worker_create(context_, &wparams, &worker_);
  if (s != UCS_OK)
    return unsupported(who_ + ": cannot create a UCX worker: " + ucs_status_string(s));
  s = ucp_worker_get_efd(worker_, &efd_);
  if (s != UCS_OK) return ucx_error(who_ + ": ucp_worker_get_efd", s);

  ucp_address_t* address = nullptr;
  size_t address_bytes = 0;
  s = ucp_worker_get_address(worker_, &address, &address_bytes);
  if (s != UCS_OK) return ucx_error(who_ + ": ucp_worker_get_address", s);
  *published = to_hex(address, address_bytes);
  ucp_worker_release_address(worker_, address);
  return Status::ok();
}

Status UcxTransport::init(const TransportContext& context) {
  // A rank that cannot start UCX says so under its address key, so that its peers fail at once
  // with its reason instead of waiting for an address until the creation deadline (under
  // TIDEGATE_TRANSPORT=auto every rank then leaves ucx out alike).
  std::string published;
  Status local = init_local(&published);
  TG_RETURN_IF_ERROR(context.store->set("ucx/" + std::to_string(rank_),
                                        local.is_ok() ? published : "no " + local.message()));
  TG_RETURN_IF_ERROR(local);

  eps_.assign(static_cast<size_t>(size_), nullptr);
  ep_args_.resize(static_cast<size_t>(size_));
  peer_errors_.assign(static_cast<size_t>(size_), Status::ok());
  last_heard_.assign(static_cast<size_t>(size_), Clock::time_point());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    std::string text;
    Status got = context.store->get("ucx/" + std::to_string(peer), context.deadline, &text);
    if (!got.is_ok()) {
      return std::move(got).with_context(who_ + " waiting for rank " + std::to_string(peer) +
                                         " to publish its UCX address (is it running?): ");
    }
    if (text.rfind("no ", 0) == 0) {
      return unsupported("the ucx transport is unavailable: rank " + std::to_string(peer) +
                         " cannot start it: " + text.substr(3));
    }
    std::vector<unsigned char> remote;
    if (!from_hex(text, &remote) || remote.empty()) {
      return protocol_error(who_ + ": rank " + std::to_string(peer) +
                            " published a malformed UCX address");
    }
    ep_args_[static_cast<size_t>(peer)] = EpArg{this, peer};
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // errors reach on_ep_error instead of aborting
    ep.err_handler.cb = &UcxTransport::on_ep_error;
    ep.err_handler.arg = &ep_args_[static_cast<size_t>(peer)];
    const ucs_status_t s = ucp_ep_create(worker_, &ep, &eps_[static_cast<size_t>(peer)]);
    if (s != UCS_OK) {
      return unsupported(who_ + ": cannot create a UCX endpoint to rank " + std::to_string(peer) +
                         ": " + ucs_status_string(s));
    }
  }
  // The standing receives for peers' abort messages and liveness pings (any sender: mask on
  // the kind only).
  TG_RETURN_IF_ERROR(post(0, Kind::kAbort, 0, 0, abort_in_.data(), abort_in_.size(), true));
  return post(0, Kind::kPing, 0, 0, &ping_in_, sizeof ping_in_, true);
}

Status UcxTransport::query_memory_types() {
  TG_RETURN_IF_ERROR(context_supports_cuda(context_, &cuda_memory_));
  TG_LOG(kInfo, who_,
         std::string("ucx transport: CUDA memory ") +
             (cuda_memory_ ? "supported by this UCX"
                           : "not supported by this UCX (host memory only)"));
  return Status::ok();
}

TransportCapabilities UcxTransport::capabilities() const {
  TransportCapabilities caps;
  caps.host_memory = true;
  caps.cuda_memory = cuda_memory_;  // what this UCX build reports, never assumed
  caps.channels = kMaxChannel + 1;  // the channel's bits of the tag (ucx_transport.h)
  return caps;
}

}  // namespace ucx

Status create_ucx_transport(const TransportContext& context,
                            std::unique_ptr<Transport>* transport) {
  return ucx::UcxTransport::create(context, transport);
}

}  // namespace tidegate
