// Communicator over a store the caller already runs (a trainer's or PyTorch's), handed in as
// C callbacks.
#include "api/communicator.h"
#include "bootstrap/callback_store.h"

namespace tidegate {

Status create_communicator_with_store(
    int rank, int size, const tidegate_store_t& callbacks,
    const std::vector<std::pair<std::string, std::string>>& settings,
    std::unique_ptr<Communicator>* out) {
  CommunicatorOptions options;
  TG_RETURN_IF_ERROR(Config::from_environment(&options.config));
  for (const auto& [name, value] : settings) {
    Status applied = options.config.set(name, value);
    if (!applied.is_ok()) {
      return config_error("setting " + name + "='" + value +
                          "' passed to the communicator: " + applied.message());
    }
  }
  options.rank = rank;
  options.size = size;
  // The caller's store is trusted; without a configured secret rank 0 draws one and shares it
  // through the store for authenticating the data connections.
  TG_RETURN_IF_ERROR(Secret::from_config(options.config, /*required=*/false, &options.secret));
  // The store's network location is unknown here: multi-host jobs name the interface or
  // address (TIDEGATE_TCP_IFACE / TIDEGATE_TCP_ADDR); otherwise ranks meet on loopback.
  TG_RETURN_IF_ERROR(choose_advertise_host(options.config, "", 0, &options.advertise_host));
  CallbackStore store(callbacks);
  options.store = &store;
  return Communicator::create(std::move(options), out);
}

}  // namespace tidegate
