// Uses the installed C++ header on a one-rank communicator: the sum of one rank is itself.
#include <tidegate/tidegate.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = tidegate::Communicator::from_env();
    std::vector<float> values = {1.5f, -2.0f, 3.25f};
    comm.allreduce(values.data(), values.data(), 3, TIDEGATE_SUM);
    if (comm.size() != 1 || values[2] != 3.25f) return 1;
    std::printf("consumer ok (tidegate %s)\n", tidegate_version());
    return 0;
  } catch (const tidegate::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
