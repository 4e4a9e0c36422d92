#include "api/communicator.h"

#include <openssl/rand.h>

#include "api/communicator_transports.h"
#include "api/settings_agreement.h"
#include "base/log.h"
#include "compress/codec_allow_list.h"
#include "select/probe.h"
#include "select/probe_exchange.h"

namespace tidegate {

namespace {

// Rank 0 draws the communicator id (and, when the caller gave no secret, the data-connection
// secret) and publishes them; every other rank reads them. The store is trusted: it is either
// the caller's own or authenticated with the job secret.
Status agree_on_identity(int rank, Store* store, Deadline deadline, uint64_t* comm_id,
                         Secret* secret) {
  if (rank == 0) {
    uint64_t id = 0;
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&id), sizeof id) != 1) {
      return internal_error("OpenSSL RAND_bytes failed while drawing the communicator id");
    }
    if (secret->empty()) TG_RETURN_IF_ERROR(Secret::random(secret));
    TG_RETURN_IF_ERROR(store->set("secret", secret->text()));
    TG_RETURN_IF_ERROR(store->set("comm_id", std::to_string(id)));
    *comm_id = id;
    return Status::ok();
  }
  std::string text;
  TG_RETURN_IF_ERROR(store->get("comm_id", deadline, &text));
  *comm_id = std::stoull(text);
  if (secret->empty()) {
    std::string shared;
    TG_RETURN_IF_ERROR(store->get("secret", deadline, &shared));
    *secret = Secret::from_text(shared);
  }
  return Status::ok();
}

}  // namespace

namespace {

// Every rank's creation error goes to the store ("failed/<rank>"), best effort, so that the
// others, which usually see only its consequence (a timeout waiting for it), can name it.
constexpr const char* kFailedKey = "failed/";

// `own`, the error of this rank's creation, with the root cause a peer reported, when this
// rank only saw a consequence of it (it timed out waiting, or lost the connection).
Status with_peer_cause(Store* store, int rank, int size, Status own) {
  (void)store->set(kFailedKey + std::to_string(rank),
                   "rank " + std::to_string(rank) + ": " + own.message());
  if (own.code() != TIDEGATE_ERR_TIMEOUT && own.code() != TIDEGATE_ERR_PEER_FAILED) return own;
  for (int r = 0; r < size; ++r) {
    std::string cause;
    if (r == rank ||
        !store->get(kFailedKey + std::to_string(r), Deadline::after_ms(0), &cause).is_ok()) {
      continue;
    }
    return Status(own.code(), own.message() + " [first failure reported by a peer: " + cause + "]");
  }
  return own;
}

}  // namespace

Status Communicator::create(CommunicatorOptions options, std::unique_ptr<Communicator>* out) {
  TG_CHECK_ARG(options.size >= 1,
               "communicator size must be at least 1, got " + std::to_string(options.size));
  TG_CHECK_ARG(options.rank >= 0 && options.rank < options.size,
               "rank " + std::to_string(options.rank) + " is outside [0, " +
                   std::to_string(options.size) + ")");
  TG_CHECK_ARG(options.store != nullptr, "communicator creation needs a store");
  set_log_level(options.config.log_level());

  std::unique_ptr<Communicator> comm(new Communicator());
  comm->rank_ = options.rank;
  comm->size_ = options.size;
  comm->config_ = std::move(options.config);
  comm->keep_alive_ = std::move(options.keep_alive);
  // Before any rendezvous: a malformed allow-list fails every rank at once, naming it.
  TG_RETURN_IF_ERROR(parse_allow_list(comm->config_.raw("TIDEGATE_CODECS"), "TIDEGATE_CODECS",
                                      &comm->default_allowed_codecs_));
  const Deadline deadline = Deadline::after_ms(comm->config_.timeout_ms());
  std::unique_ptr<Store> store = make_prefix_store(options.store, "tidegate/");

  Secret secret = std::move(options.secret);
  TG_RETURN_IF_ERROR(
      agree_on_identity(comm->rank_, store.get(), deadline, &comm->comm_id_, &secret));

  TransportContext context;
  context.rank = comm->rank_;
  context.size = comm->size_;
  context.comm_id = comm->comm_id_;
  context.config = &comm->config_;
  context.store = store.get();
  context.secret = &secret;
  context.deadline = deadline;
  context.advertise_host = options.advertise_host;
  context.mpi_comm = options.mpi_comm;
  Status connected = comm->connect(context, store.get(), deadline);
  if (!connected.is_ok()) {
    return with_peer_cause(store.get(), comm->rank_, comm->size_, std::move(connected));
  }
  std::vector<Transport*> transports;
  for (const auto& t : comm->transports_) transports.push_back(t.get());

  TaskContext task_context;
  task_context.transport = transports.front();
  task_context.rank = comm->rank_;
  task_context.size = comm->size_;
  task_context.comm_id = comm->comm_id_;
  task_context.config = &comm->config_;
  comm->engine_ = std::make_unique<ProgressEngine>(task_context, transports, comm->planner_.get());
  TG_LOG(kInfo, "rank " + std::to_string(comm->rank_),
         "communicator of " + std::to_string(comm->size_) + " ranks ready on " +
             comm->transport_names() + "; plan:\n" + comm->planner_->plan_table());
  *out = std::move(comm);
  return Status::ok();
}

Status Communicator::connect(const TransportContext& context, Store* store, Deadline deadline) {
  TG_RETURN_IF_ERROR(connect_transports(context, &transports_));
  std::vector<Transport*> transports;
  for (const auto& t : transports_) transports.push_back(t.get());
  TG_RETURN_IF_ERROR(make_planner(store, transports, deadline));
  // A barrier on the first transport before any rank leaves creation: rank 0 usually hosts the
  // store, and a rank that went on to its first collective (and perhaps failed and exited)
  // must not take the store away from a slower rank still reading the agreed probe from it.
  // That rank would report a lost store instead of the collective's own error.
  //
  // Its token also says whether any rank has TIDEGATE_NATIVE_PREDICTION off. Prediction needs
  // every rank to take part (one that does not would leave the others' predicted collective
  // unmatched until the deadline, engine/native_prediction.h), so one rank's "off" turns it off
  // on every rank. And it carries the settings every rank must share (settings_agreement.h):
  // every rank reads the same maxima, so a difference fails creation on every rank alike.
  ProbeWire wire(transports.front(), rank_, size_, comm_id_, deadline, "end-of-creation barrier");
  std::vector<double> token{config_.native_prediction() ? 0.0 : 1.0};
  append_settings_to_agree(config_, &token);
  TG_RETURN_IF_ERROR(wire.ring_max(&token));
  TG_RETURN_IF_ERROR(check_settings_agree(config_, token, 1));
  if (token[0] > 0 && config_.native_prediction()) {
    TG_RETURN_IF_ERROR(config_.set("TIDEGATE_NATIVE_PREDICTION", "off"));
    TG_LOG(kInfo, "rank " + std::to_string(rank_),
           "TIDEGATE_NATIVE_PREDICTION is off on another rank: off on every rank");
  }
  return Status::ok();
}

Communicator::~Communicator() {
  // A communicator whose creation failed half-way has no engine yet: nothing to finish.
  if (!shut_down_ && engine_) {
    Status st = shutdown();
    (void)st;  // the destructor cannot report; tidegate_comm_destroy calls shutdown() itself
  }
}

Status Communicator::post(CollectiveArgs args, std::shared_ptr<Request>* request,
                          bool caller_waits) {
  std::lock_guard<std::mutex> lock(post_mutex_);
  if (shut_down_) return aborted_error("communicator was destroyed");
  args.op_seq = next_op_seq_;
  auto posted = std::make_shared<Request>(std::move(args));
  TG_RETURN_IF_ERROR(engine_->post(posted, caller_waits));
  ++next_op_seq_;
  *request = std::move(posted);
  ++posted_user_ops_;
  const int64_t interval = config_.replan_interval();
  if (interval > 0 && posted_user_ops_ % static_cast<uint64_t>(interval) == 0) {
    // Every rank posts the same ops in the same order, so every rank inserts this round at the
    // same place: an allreduce of the planner's statistics (buffers supplied by the engine).
    CollectiveArgs round;
    round.kind = OpKind::kAllreduce;
    round.op_seq = next_op_seq_;
    round.replan_round = true;
    round.input.dtype = round.output.dtype = TIDEGATE_FLOAT64;
    round.input.count = round.output.count = planner_->replan_statistics_count();
    round.reduce_op = TIDEGATE_SUM;
    // A refusal means the communicator already failed; the caller's request reports that. A
    // caller who waits leaves the round to the progress thread once its own op finished.
    Status st = engine_->post(std::make_shared<Request>(std::move(round)), caller_waits);
    if (st.is_ok()) ++next_op_seq_;
  }
  return Status::ok();
}

Status Communicator::run_local(std::function<Status(CompressionState& state)> work) {
  CollectiveArgs args;
  args.kind = OpKind::kInternal;
  CompressionState* state = engine_->compression_state();
  args.local_work = [state, work = std::move(work)]() { return work(*state); };
  auto request = std::make_shared<Request>(std::move(args));
  {
    std::lock_guard<std::mutex> lock(post_mutex_);
    if (shut_down_) return aborted_error("communicator was destroyed");
    TG_RETURN_IF_ERROR(engine_->post(request));  // no op number: the peers never see it
  }
  // The engine bounds every op before this one by its deadline and then runs or fails this one,
  // so the wait ends; waiting no less keeps `work`, which may write into the caller's memory,
  // from running after the caller has returned.
  return request->wait(Deadline(Clock::time_point::max()));
}

void Communicator::abort(const std::string& reason) {
  engine_->abort(aborted_error("rank " + std::to_string(rank_) + " aborted the communicator" +
                               (reason.empty() ? std::string() : ": " + reason)));
}

Status Communicator::shutdown() {
  {
    std::lock_guard<std::mutex> lock(post_mutex_);
    if (shut_down_) return Status::ok();
    shut_down_ = true;
  }
  // An earlier failure was reported by the collectives it ended; destroying the communicator
  // is a separate act whose own outcome is what the caller learns here.
  const bool failed_earlier = !engine_->drain().is_ok();
  engine_.reset();
  Status closed = Status::ok();
  if (!failed_earlier) {
    const Deadline deadline = Deadline::after_ms(config_.timeout_ms());
    for (auto& transport : transports_) {
      Status st = transport->close(deadline);
      if (closed.is_ok()) closed = st;
    }
  }
  transports_.clear();
  keep_alive_.reset();
  return closed;
}

std::string Communicator::transport_names() const {
  std::string names;
  for (const auto& t : transports_) names += std::string(names.empty() ? "" : ",") + t->name();
  return names;
}

std::string Communicator::planned_choice_for(const CollectiveArgs& args) const {
  PlanDecision decision;
  Status st = planner_->choose(args, &decision);
  if (!st.is_ok()) return "(" + st.message() + ")";
  return decision.transport + "/" + decision.algorithm->name;
}

Status Communicator::make_planner(Store* store, const std::vector<Transport*>& transports,
                                  Deadline deadline) {
  ProbeInputs probe;
  probe.rank = rank_;
  probe.size = size_;
  probe.comm_id = comm_id_;
  probe.config = &config_;
  probe.store = store;
  probe.transports = transports;
  probe.deadline = deadline;
  PlanInputs plan;
  plan.size = size_;
  TG_RETURN_IF_ERROR(run_probe(probe, &plan.profile));
  for (Transport* t : transports) plan.transports.push_back({t->name(), t->capabilities()});
  TG_RETURN_IF_ERROR(parse_tune(config_.raw("TIDEGATE_TUNE"), &plan.tune));
  plan.config = &config_;
  plan.use_size_rule = !config_.probe_enabled();
  return Planner::create(std::move(plan), transports, &planner_);
}

}  // namespace tidegate
