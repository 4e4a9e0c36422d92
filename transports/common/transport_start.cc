#include "transports/common/transport_start.h"

#include "base/store.h"

namespace tidegate {

Status agree_on_start(const TransportContext& context, const std::string& transport,
                      const std::string& obstacle, const std::string& detail,
                      std::vector<std::string>* details) {
  TG_RETURN_IF_ERROR(context.store->set("usable/" + std::to_string(context.rank),
                                        obstacle.empty() ? "yes " + detail : "no " + obstacle));
  if (details != nullptr) details->clear();
  for (int r = 0; r < context.size; ++r) {
    std::string answer;
    TG_RETURN_IF_ERROR(
        context.store->get("usable/" + std::to_string(r), context.deadline, &answer));
    if (answer != "yes" && answer.rfind("yes ", 0) != 0) {
      return unsupported("the " + transport + " transport is unavailable: rank " +
                         std::to_string(r) + ": " + answer.substr(answer.find(' ') + 1));
    }
    if (details != nullptr) details->push_back(answer.size() > 4 ? answer.substr(4) : "");
  }
  return Status::ok();
}

}  // namespace tidegate
