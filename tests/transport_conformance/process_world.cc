// Worlds whose ranks are the processes of an mpirun job, one rank per process: rank 0 hosts a
// TcpStoreServer and broadcasts its address and a fresh secret over MPI, every rank connects
// to it, and each world creates its transport through the transport registry under its own
// key prefix of that store (mpi, ucx, tcp). The mpi transport also gets MPI_COMM_WORLD as
// context.mpi_comm, as tidegate_comm_create_from_mpi passes it.
#include <mpi.h>
#include <sched.h>

#include <gtest/gtest.h>

#include "api/transport_registry.h"
#include "base/auth.h"
#include "base/config.h"
#include "bootstrap/tcp_store.h"
#include "world.h"

namespace tidegate::conformance {

namespace {

constexpr size_t kMaxBroadcastBytes = 512;

// This process's part of the job, set up by the first world.
struct Job {
  int rank = 0;
  int size = 1;
  Secret secret;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::unique_ptr<Store> store;
  uint64_t worlds = 0;  // worlds created so far: the same count on every rank
};

// Broadcasts rank 0's `text` to every rank.
void broadcast(std::string* text) {
  char buffer[kMaxBroadcastBytes] = {};
  text->copy(buffer, sizeof buffer - 1);
  MPI_Bcast(buffer, sizeof buffer, MPI_CHAR, 0, MPI_COMM_WORLD);
  *text = buffer;
}

Status join(Job* job) {
  MPI_Comm_rank(MPI_COMM_WORLD, &job->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job->size);
  std::string address, secret_text;
  Status st;
  if (job->rank == 0) {
    st = Secret::random(&job->secret);
    // mpirun runs this suite's ranks on this machine: loopback reaches them all.
    if (st.is_ok()) st = TcpStoreServer::start("127.0.0.1", 0, job->secret, &job->server);
    if (st.is_ok()) {
      address = job->server->address();
      secret_text = job->secret.text();
    }
  }
  broadcast(&address);  // empty: rank 0 could not start the store
  broadcast(&secret_text);
  if (job->rank == 0 && !st.is_ok()) return st;
  if (address.empty()) return unsupported("rank 0 could not start the rendezvous store");
  job->secret = Secret::from_text(secret_text);
  return connect_tcp_store(address, job->secret, Deadline::after_ms(kWaitMs), &job->store);
}

Job* job_or_null(Status* joined) {
  static Job job;
  static const Status status = join(&job);
  *joined = status;
  return status.is_ok() ? &job : nullptr;
}

// MPI_Barrier with a deadline (MPI_Ibarrier polled), so that a rank stuck elsewhere fails
// the case instead of hanging the job.
bool barrier_until(Deadline deadline) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (!done) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (deadline.passed()) return false;  // the request stays with MPI: the job is broken
    sched_yield();
  }
  return true;
}

class ProcessRank final : public Rank {
 public:
  ProcessRank(const Job& job, uint64_t comm_id, Transport& transport)
      : job_(job), comm_id_(comm_id), transport_(transport) {}
  int rank() const override { return job_.rank; }
  int size() const override { return job_.size; }
  uint64_t comm_id() const override { return comm_id_; }
  Transport& transport() override { return transport_; }
  void barrier() override {
    EXPECT_TRUE(barrier_until(Deadline::after_ms(kWaitMs)))
        << "rank " << job_.rank << ": not every rank reached the barrier in time";
  }

 private:
  const Job& job_;
  const uint64_t comm_id_;
  Transport& transport_;
};

class ProcessWorld final : public World {
 public:
  ProcessWorld(const Job& job, uint64_t comm_id) : job_(job), comm_id_(comm_id) {}

  Status connect(const TransportEntry& entry, Store* store) {
    store_ = make_prefix_store(store, "world" + std::to_string(comm_id_) + "/");
    Status st = config_.set("TIDEGATE_TIMEOUT_MS", std::to_string(kWaitMs));
    context_.rank = job_.rank;
    context_.size = job_.size;
    context_.comm_id = comm_id_;
    context_.config = &config_;
    context_.store = store_.get();
    context_.secret = &job_.secret;
    context_.deadline = Deadline::after_ms(kWaitMs);
    context_.mpi_comm = &world_comm_;
    if (st.is_ok()) st = entry.create(context_, &transport_);
    return st;
  }

  void run(const RankBody& body) override {
    ASSERT_NE(transport_, nullptr) << "run() twice on one world";
    ProcessRank view(job_, comm_id_, *transport_);
    body(view);
    transport_.reset();  // as the process would end (world.h)
    // The next case starts on every rank together.
    EXPECT_TRUE(barrier_until(Deadline::after_ms(2 * kWaitMs)))
        << "rank " << job_.rank << ": not every rank finished the case in time";
  }

 private:
  const Job& job_;
  const uint64_t comm_id_;
  MPI_Comm world_comm_ = MPI_COMM_WORLD;
  Config config_;
  std::unique_ptr<Store> store_;
  TransportContext context_;
  std::unique_ptr<Transport> transport_;
};

}  // namespace

std::vector<std::string> world_transports() { return {"mpi", "ucx", "tcp"}; }

std::vector<int> world_sizes() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {size};
}

std::unique_ptr<World> make_world(const std::string& transport, int ranks,
                                  std::string* skip_reason) {
  Status joined;
  Job* job = job_or_null(&joined);
  if (job == nullptr) {
    ADD_FAILURE() << "could not join the job's rendezvous store: " << joined.to_string();
    return nullptr;
  }
  const TransportEntry* entry = find_transport(transport);
  if (entry == nullptr || ranks != job->size) {
    *skip_reason = entry == nullptr ? "this build has no " + transport + " transport"
                                    : "this job has " + std::to_string(job->size) + " ranks";
    return nullptr;
  }
  auto world = std::make_unique<ProcessWorld>(*job, 0xc0f00000 + ++job->worlds);
  const Status st = world->connect(*entry, job->store.get());
  // Every rank learns how the others fared: all run the case, all skip it, or all fail it.
  int mine[2] = {st.is_ok() ? 0 : 1, st.code() == TIDEGATE_ERR_UNSUPPORTED ? 1 : 0};
  int any[2] = {0, 0};
  MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any[0] == 0) return world;
  const std::string why = st.is_ok() ? "another rank failed to create it" : st.to_string();
  if (any[1] != 0) {
    *skip_reason =
        transport + " cannot run in this job (rank " + std::to_string(job->rank) + ": " + why + ")";
  } else {
    ADD_FAILURE() << transport << " did not connect " << ranks << " processes: rank " << job->rank
                  << ": " << why;
  }
  return nullptr;
}

}  // namespace tidegate::conformance
