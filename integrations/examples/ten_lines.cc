// The README's ten-line example, built by CMake so it cannot rot.
#include <tidegate/tidegate.hpp>
#include <vector>

int main() {
  auto comm = tidegate::Communicator::from_env();  // rank/size/store from tidegate-run or mpirun
  std::vector<float> grad(1 << 20, float(comm.rank()));
  comm.allreduce(grad.data(), grad.data(), grad.size(), TIDEGATE_AVG);  // in place
  auto req = comm.iallreduce(tidegate::view(grad.data(), 1024), tidegate::view(grad.data(), 1024),
                             TIDEGATE_SUM);
  req.wait();  // throws tidegate::Error on failure
}
