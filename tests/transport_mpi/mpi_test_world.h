// Shared by the MPI transport tests: this process's rank of MPI_COMM_WORLD with a fresh MPI
// transport over it (each World its own MPI_Comm_dup).
#pragma once

#include <mpi.h>

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "base/store.h"
#include "transports/mpi/mpi_transport.h"

namespace tidegate::mpi {

// The usability agreement needs a store shared by the ranks; here each rank's own answer is
// kept and every other rank is taken as usable (the full-stack tests exercise the real store).
class LocalStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override {
    values_[key] = value;
    return Status::ok();
  }
  Status get(const std::string& key, Deadline, std::string* value) override {
    auto it = values_.find(key);
    *value = it == values_.end() ? "yes" : it->second;
    return Status::ok();
  }

 private:
  std::map<std::string, std::string> values_;
};

struct World {
  int rank = 0;
  int size = 1;
  LocalStore store;
  Config config;
  std::unique_ptr<Transport> transport;

  explicit World(const MpiTransportOptions& options = MpiTransportOptions()) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // The exit watch connects through a store the ranks share; LocalStore is not one (the
    // fault tests run the watch under mpirun through the real store).
    Status off = config.set("TIDEGATE_EXIT_WATCH", "off");
    EXPECT_TRUE(off.is_ok()) << off.to_string();
    TransportContext context;
    context.rank = rank;
    context.size = size;
    context.config = &config;
    context.store = &store;
    context.deadline = Deadline::after_ms(10000);
    Status st = MpiTransport::create(context, options, &transport);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
};

}  // namespace tidegate::mpi
