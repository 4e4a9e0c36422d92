#include "api/communicator_transports.h"

#include "api/transport_registry.h"
#include "base/log.h"
#include "base/store.h"

namespace tidegate {

namespace {

std::string built_names() {
  std::string built;
  for (const TransportEntry& e : built_transports())
    built += std::string(built.empty() ? "" : ", ") + e.name;
  return built;
}

Status connect_one(const TransportEntry& entry, const TransportContext& context,
                   std::unique_ptr<Transport>* transport) {
  std::unique_ptr<Store> scoped = make_prefix_store(context.store, std::string(entry.name) + "/");
  TransportContext own = context;
  own.store = scoped.get();
  return entry.create(own, transport);
}

std::string joined(const std::vector<std::unique_ptr<Transport>>& transports) {
  std::string names;
  for (const auto& t : transports) names += std::string(names.empty() ? "" : ",") + t->name();
  return names;
}

// Every rank publishes the set it connected; all must be equal, or the plan (built from it)
// would differ between ranks.
Status agree_on_set(const TransportContext& context,
                    const std::vector<std::unique_ptr<Transport>>& transports) {
  const std::string mine = joined(transports);
  TG_RETURN_IF_ERROR(context.store->set("transports/" + std::to_string(context.rank), mine));
  for (int r = 0; r < context.size; ++r) {
    std::string theirs;
    TG_RETURN_IF_ERROR(
        context.store->get("transports/" + std::to_string(r), context.deadline, &theirs));
    if (theirs != mine) {
      return mismatch_error(
          "ranks connected different transports under TIDEGATE_TRANSPORT=auto: rank " +
          std::to_string(context.rank) + " has [" + mine + "], rank " + std::to_string(r) +
          " has [" + theirs + "]; set TIDEGATE_TRANSPORT to one transport every rank can use");
    }
  }
  return Status::ok();
}

}  // namespace

Status connect_transports(const TransportContext& context,
                          std::vector<std::unique_ptr<Transport>>* transports) {
  if (built_transports().empty()) return internal_error("this build has no transport");
  const std::string& wanted = context.config->raw("TIDEGATE_TRANSPORT");
  if (!wanted.empty() && wanted != "auto") {
    const TransportEntry* entry = find_transport(wanted);
    if (entry == nullptr) {
      return unsupported("TIDEGATE_TRANSPORT=" + wanted +
                         " is not built into this tidegate; built: " + built_names() +
                         " (see tidegate-info)");
    }
    std::unique_ptr<Transport> transport;
    TG_RETURN_IF_ERROR(connect_one(*entry, context, &transport));
    transports->push_back(std::move(transport));
    return Status::ok();
  }
  for (const TransportEntry& entry : built_transports()) {
    std::unique_ptr<Transport> transport;
    Status st = connect_one(entry, context, &transport);
    if (st.code() == TIDEGATE_ERR_UNSUPPORTED) {
      // Transports that cannot start here agree on it across ranks before touching the wire
      // (e.g. MPI not initialised), so leaving one out is the same decision on every rank.
      TG_LOG(kInfo, "rank " + std::to_string(context.rank),
             std::string("transport ") + entry.name + " not used: " + st.message());
      continue;
    }
    // Anything else (a missing rank, a wrong secret, an unreachable peer) is a real failure
    // that the next transport would only meet again, later: it is the creation's error.
    if (!st.is_ok()) {
      return std::move(st).with_context(std::string("the ") + entry.name +
                                        " transport could not connect the ranks: ");
    }
    transports->push_back(std::move(transport));
  }
  if (transports->empty()) {
    return unsupported("no transport could start (built: " + built_names() + "); see the log");
  }
  return agree_on_set(context, *transports);
}

}  // namespace tidegate
