#include "core/communicator.h"

#include <openssl/rand.h>

#include "core/log.h"
#include "core/transport_registry.h"

namespace tidegate {

namespace {

Status choose_transport(const Config& config, const TransportEntry** entry) {
  const std::string& wanted = config.raw("TIDEGATE_TRANSPORT");
  if (built_transports().empty()) return internal_error("this build has no transport");
  if (wanted.empty() || wanted == "auto") {
    // The measured plan (probe issue) replaces this; until then the first built transport.
    *entry = &built_transports().front();
    return Status::ok();
  }
  *entry = find_transport(wanted);
  if (*entry == nullptr) {
    std::string built;
    for (const TransportEntry& e : built_transports()) built += std::string(built.empty() ? "" : ", ") + e.name;
    return unsupported("TIDEGATE_TRANSPORT=" + wanted + " is not built into this tidegate; built: " +
                       built + " (see tidegate-info)");
  }
  return Status::ok();
}

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

Status Communicator::create(CommunicatorOptions options, std::unique_ptr<Communicator>* out) {
  TG_CHECK_ARG(options.size >= 1, "communicator size must be at least 1, got " + std::to_string(options.size));
  TG_CHECK_ARG(options.rank >= 0 && options.rank < options.size,
               "rank " + std::to_string(options.rank) + " is outside [0, " + std::to_string(options.size) + ")");
  TG_CHECK_ARG(options.store != nullptr, "communicator creation needs a store");
  set_log_level(options.config.log_level());

  std::unique_ptr<Communicator> comm(new Communicator());
  comm->rank_ = options.rank;
  comm->size_ = options.size;
  comm->config_ = std::move(options.config);
  comm->keep_alive_ = std::move(options.keep_alive);
  const Deadline deadline = Deadline::after_ms(comm->config_.timeout_ms());
  std::unique_ptr<Store> store = make_prefix_store(options.store, "tidegate/");

  Secret secret = std::move(options.secret);
  TG_RETURN_IF_ERROR(agree_on_identity(comm->rank_, store.get(), deadline, &comm->comm_id_, &secret));

  const TransportEntry* entry = nullptr;
  TG_RETURN_IF_ERROR(choose_transport(comm->config_, &entry));
  std::unique_ptr<Store> transport_store = make_prefix_store(store.get(), std::string(entry->name) + "/");
  TransportContext context;
  context.rank = comm->rank_;
  context.size = comm->size_;
  context.comm_id = comm->comm_id_;
  context.config = &comm->config_;
  context.store = transport_store.get();
  context.secret = &secret;
  context.deadline = deadline;
  context.advertise_host = options.advertise_host;
  context.mpi_comm = options.mpi_comm;
  TG_RETURN_IF_ERROR(entry->create(context, &comm->transport_));

  TaskContext task_context;
  task_context.transport = comm->transport_.get();
  task_context.rank = comm->rank_;
  task_context.size = comm->size_;
  task_context.comm_id = comm->comm_id_;
  task_context.config = &comm->config_;
  comm->engine_ = std::make_unique<ProgressEngine>(task_context);
  TG_LOG(kInfo, "rank " + std::to_string(comm->rank_),
         "communicator of " + std::to_string(comm->size_) + " ranks ready on " + entry->name);
  *out = std::move(comm);
  return Status::ok();
}

Communicator::~Communicator() {
  // A communicator whose creation failed half-way has no engine yet: nothing to finish.
  if (!shut_down_ && engine_) {
    Status st = shutdown();
    (void)st;  // the destructor cannot report; tidegate_comm_destroy calls shutdown() itself
  }
}

Status Communicator::post(CollectiveArgs args, std::shared_ptr<Request>* request) {
  std::lock_guard<std::mutex> lock(post_mutex_);
  if (shut_down_) return aborted_error("communicator was destroyed");
  args.op_seq = next_op_seq_;
  auto posted = std::make_shared<Request>(std::move(args));
  TG_RETURN_IF_ERROR(engine_->post(posted));
  ++next_op_seq_;
  *request = std::move(posted);
  return Status::ok();
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
  Status drained = engine_->drain();
  engine_.reset();
  Status closed = drained.is_ok() ? transport_->close(Deadline::after_ms(config_.timeout_ms()))
                                  : Status::ok();
  transport_.reset();
  keep_alive_.reset();
  return drained.is_ok() ? closed : drained;
}

std::string Communicator::planned_algorithm_for(const CollectiveArgs& args) const {
  TaskContext context;
  context.transport = transport_.get();
  context.rank = rank_;
  context.size = size_;
  context.comm_id = comm_id_;
  context.config = &config_;
  return planned_algorithm(context, args);
}

}  // namespace tidegate
