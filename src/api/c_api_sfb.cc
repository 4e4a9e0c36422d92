// The sufficient-factor allreduce (tidegate.h, tidegate_sfb_allreduce): shapes agreed first,
// then the HybComm rule (select/hybcomm.h) or the caller's method, then either the factors'
// allgather and every rank's own sum of products (numeric/outer_product.h), or the local
// product and a dense allreduce. Built on the public collectives, so every wait has the
// communicator's deadline and every peer failure surfaces as their errors.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "api/c_api_internal.h"
#include "numeric/outer_product.h"
#include "select/hybcomm.h"

using tidegate::Status;

namespace tidegate {
namespace {

Status from_call(tidegate_status_t code, const std::string& what) {
  if (code == TIDEGATE_OK) return Status::ok();
  return Status(code, "sfb allreduce: " + what + ": " + tidegate_last_error());
}

struct Matrix {
  int64_t rows = 0, cols = 0;
};

Status check_matrix(const tidegate_tensor_t* t, const char* name, bool shape_optional,
                    Matrix* shape) {
  TG_CHECK_ARG(t != nullptr, std::string("sfb allreduce: ") + name + " is NULL");
  TG_CHECK_ARG(t->dtype == TIDEGATE_FLOAT32,
               std::string("sfb allreduce: ") + name + " must be float32");
  TG_CHECK_ARG(t->memory == TIDEGATE_MEMORY_HOST,
               std::string("sfb allreduce: ") + name + " must be in host memory");
  TG_CHECK_ARG(t->count >= 0 && (t->count == 0 || t->data != nullptr),
               std::string("sfb allreduce: ") + name + " has no data");
  const bool shaped = t->rows != 0 || t->cols != 0;
  TG_CHECK_ARG(shaped || shape_optional,
               std::string("sfb allreduce: ") + name + " needs rows and cols (K x M or K x N)");
  if (shaped) {
    TG_CHECK_ARG(t->rows >= 0 && t->cols >= 0 && t->rows * t->cols == t->count,
                 std::string("sfb allreduce: ") + name + " is " + std::to_string(t->rows) +
                     " x " + std::to_string(t->cols) + " but holds " + std::to_string(t->count) +
                     " elements");
  }
  shape->rows = t->rows;
  shape->cols = t->cols;
  return Status::ok();
}

// Multiply-adds per microsecond of the product kernel, the slowest rank's (one allreduce).
Status agreed_kernel_speed(tidegate_comm_t comm, double* macs_per_us) {
  if (comm->impl->sfb_macs_per_us() > 0) {
    *macs_per_us = comm->impl->sfb_macs_per_us();
    return Status::ok();
  }
  constexpr int64_t k = 16, m = 128, n = 2048;
  std::vector<float> u(k * m, 0.5f), v(k * n, 0.25f), out(m * n);
  const FactorBlock block{u.data(), v.data(), k};
  double best = 1e300;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    sum_outer_products(&block, 1, m, n, out.data());
    best = std::min(best, std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  double slowest = std::max(best, 1e-3);
  tidegate_tensor_t t = tidegate_host_tensor(&slowest, 1, TIDEGATE_FLOAT64);
  TG_RETURN_IF_ERROR(
      from_call(tidegate_allreduce(comm, &t, &t, TIDEGATE_MAX), "agreeing the kernel's speed"));
  *macs_per_us = static_cast<double>(k * m * n) / slowest;
  comm->impl->set_sfb_macs_per_us(*macs_per_us);
  return Status::ok();
}

Status sfb_allreduce(tidegate_comm_t comm, const tidegate_tensor_t* u, const tidegate_tensor_t* v,
                     const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                     tidegate_sfb_method_t method, std::string* choice) {
  TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
  TG_CHECK_ARG(op == TIDEGATE_SUM || op == TIDEGATE_AVG,
               "sfb allreduce: the op must be TIDEGATE_SUM or TIDEGATE_AVG");
  TG_CHECK_ARG(method == TIDEGATE_SFB_AUTO || method == TIDEGATE_SFB_FACTORS ||
                   method == TIDEGATE_SFB_DENSE,
               "sfb allreduce: unknown method " + std::to_string(static_cast<int>(method)));
  Matrix us, vs, outs;
  TG_RETURN_IF_ERROR(check_matrix(u, "u", false, &us));
  TG_RETURN_IF_ERROR(check_matrix(v, "v", false, &vs));
  TG_RETURN_IF_ERROR(check_matrix(output, "output", true, &outs));
  TG_CHECK_ARG(us.rows == vs.rows, "sfb allreduce: u has " + std::to_string(us.rows) +
                                       " rows and v " + std::to_string(vs.rows) +
                                       "; both are K (the batch)");
  const int64_t k = us.rows, m = us.cols, n = vs.cols;
  TG_CHECK_ARG(output->count == m * n && (outs.rows == 0 || (outs.rows == m && outs.cols == n)),
               "sfb allreduce: output must be " + std::to_string(m) + " x " + std::to_string(n) +
                   " (M x N)");

  // Every rank's (K, M, N, method, op): shapes must agree, K may differ.
  const int size = comm->impl->size();
  int64_t mine[5] = {k, m, n, static_cast<int64_t>(method), static_cast<int64_t>(op)};
  std::vector<int64_t> all(static_cast<size_t>(5 * size));
  tidegate_tensor_t in = tidegate_host_tensor(mine, 5, TIDEGATE_INT64);
  tidegate_tensor_t gathered = tidegate_host_tensor(all.data(), 5 * size, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(from_call(tidegate_allgather(comm, &in, &gathered), "gathering the shapes"));
  int64_t total_k = 0, largest_k = 0;
  std::vector<int64_t> counts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const int64_t* s = &all[static_cast<size_t>(5 * r)];
    if (s[1] != all[1] || s[2] != all[2] || s[3] != all[3] || s[4] != all[4]) {
      return Status(TIDEGATE_ERR_MISMATCH,
                    "sfb allreduce: rank " + std::to_string(r) + " has M x N = " +
                        std::to_string(s[1]) + " x " + std::to_string(s[2]) + " (method " +
                        std::to_string(s[3]) + ", op " + std::to_string(s[4]) + ") but rank 0 " +
                        std::to_string(all[1]) + " x " + std::to_string(all[2]) + " (method " +
                        std::to_string(all[3]) + ", op " + std::to_string(all[4]) +
                        "); every rank's layer must have the same shape");
    }
    total_k += s[0];
    largest_k = std::max(largest_k, s[0]);
    counts[static_cast<size_t>(r)] = s[0] * (m + n);
  }

  bool factors = method == TIDEGATE_SFB_FACTORS;
  if (method == TIDEGATE_SFB_AUTO) {
    HybCommPrices prices;
    const Planner& planner = comm->impl->planner();
    prices.allgather_us = [&](int64_t bytes) {
      return planner.price_us(OpKind::kAllgatherv, bytes);
    };
    prices.allreduce_us = [&](int64_t bytes) {
      return planner.price_us(OpKind::kAllreduce, bytes);
    };
    TG_RETURN_IF_ERROR(agreed_kernel_speed(comm, &prices.macs_per_us));
    factors = choose_hybcomm({total_k, m, n, largest_k}, prices).sfb;
  }
  *choice = factors ? "sfb" : "dense";
  float* out = static_cast<float*>(output->data);

  if (factors) {
    std::vector<float> packed(static_cast<size_t>(k * (m + n)));
    if (k > 0) {
      std::memcpy(packed.data(), u->data, static_cast<size_t>(k * m) * sizeof(float));
      std::memcpy(packed.data() + k * m, v->data, static_cast<size_t>(k * n) * sizeof(float));
    }
    std::vector<float> everyone(static_cast<size_t>(total_k * (m + n)));
    tidegate_tensor_t p = tidegate_host_tensor(packed.data(), k * (m + n), TIDEGATE_FLOAT32);
    tidegate_tensor_t e =
        tidegate_host_tensor(everyone.data(), total_k * (m + n), TIDEGATE_FLOAT32);
    TG_RETURN_IF_ERROR(
        from_call(tidegate_allgatherv(comm, &p, &e, counts.data()), "allgather of the factors"));
    std::vector<FactorBlock> blocks;
    int64_t offset = 0;
    for (int r = 0; r < size; ++r) {
      const int64_t kr = all[static_cast<size_t>(5 * r)];
      blocks.push_back({everyone.data() + offset, everyone.data() + offset + kr * m, kr});
      offset += kr * (m + n);
    }
    sum_outer_products(blocks.data(), size, m, n, out);
  } else {
    const FactorBlock own{static_cast<const float*>(u->data), static_cast<const float*>(v->data),
                          k};
    sum_outer_products(&own, 1, m, n, out);
    tidegate_tensor_t t = tidegate_host_tensor(out, m * n, TIDEGATE_FLOAT32);
    TG_RETURN_IF_ERROR(
        from_call(tidegate_allreduce(comm, &t, &t, TIDEGATE_SUM), "allreduce of the products"));
  }
  if (op == TIDEGATE_AVG) {
    const auto ranks = static_cast<float>(size);
    for (int64_t i = 0; i < m * n; ++i) out[i] /= ranks;
  }
  return Status::ok();
}

}  // namespace
}  // namespace tidegate

extern "C" tidegate_status_t tidegate_sfb_allreduce(tidegate_comm_t comm,
                                                    const tidegate_tensor_t* u,
                                                    const tidegate_tensor_t* v,
                                                    const tidegate_tensor_t* output,
                                                    tidegate_reduce_op_t op,
                                                    tidegate_sfb_method_t method, char* choice,
                                                    size_t choice_capacity) {
  return tidegate::c_api_guarded([&]() -> Status {
    std::string made;
    TG_RETURN_IF_ERROR(tidegate::sfb_allreduce(comm, u, v, output, op, method, &made));
    if (choice != nullptr) {
      TG_CHECK_ARG(made.size() < choice_capacity, "sfb allreduce: choice buffer too small");
      std::memcpy(choice, made.c_str(), made.size() + 1);
    }
    return Status::ok();
  });
}
