#include "transports/tcp/paced_exit_watch.h"

#include "base/config.h"
#include "base/store.h"
#include "transports/common/transport_start.h"

namespace tidegate::tcp {

Status PacedExitWatch::start(const TransportContext& context, const std::string& transport,
                             std::unique_ptr<PacedExitWatch>* out) {
  out->reset();
  if (context.config == nullptr || !context.config->exit_watch()) return Status::ok();
  TG_CHECK_ARG(context.secret != nullptr,
               "the " + transport + " transport's exit watch needs the job secret");
  std::unique_ptr<PeerExitWatch> watch;
  Status built = PeerExitWatch::create(context, &watch);
  std::unique_ptr<Store> scoped = make_prefix_store(context.store, "exit-watch/");
  TransportContext agreeing = context;
  agreeing.store = scoped.get();
  const std::string obstacle =
      built.is_ok() ? ""
                    : "its exit watch could not connect (" + built.to_string() +
                          "); peers must reach each other over TCP, or set "
                          "TIDEGATE_EXIT_WATCH=off (a killed rank is then named at the deadline)";
  TG_RETURN_IF_ERROR(agree_on_start(agreeing, transport, obstacle, "", nullptr));
  out->reset(new PacedExitWatch(std::move(watch)));
  return Status::ok();
}

Status PacedExitWatch::poll(Clock::time_point now) {
  if (!seen_.is_ok()) return now >= fail_at_ ? seen_ : Status::ok();
  if (now < next_check_) return Status::ok();
  next_check_ = now + Milliseconds(kCheckMs);
  seen_ = watch_->check();
  fail_at_ = now + Milliseconds(kGraceMs);
  return Status::ok();
}

}  // namespace tidegate::tcp
