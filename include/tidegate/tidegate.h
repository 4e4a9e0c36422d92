/*
 * tidegate.h - the stable C API of tidegate.
 *
 * tidegate synchronises gradients across the ranks of a data-parallel job. This header is the
 * whole public C surface: opaque handles, status codes, tensor views and collectives. It is
 * usable from C99, C++ and any language with a C FFI; it includes no third-party header.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *   - Functions return a tidegate_status_t. TIDEGATE_OK means success. On any other code a
 *     human-readable explanation (what happened, on which rank and op, and what to do) is
 *     available from tidegate_last_error() on the calling thread until its next tidegate call.
 *   - Output pointers are written only on success.
 *   - Handles are owned by the caller and released with the matching destroy/free function.
 *   - Collectives on one communicator must be posted in the same order on every rank (like MPI
 *     and NCCL). Posting is thread-safe, but the order across threads is the order the calls
 *     take the communicator's lock, so a program that posts from several threads must itself
 *     make that order identical on every rank.
 *   - Element counts are 64-bit: tensors may exceed 2^31 elements.
 */
#ifndef TIDEGATE_TIDEGATE_H
#define TIDEGATE_TIDEGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TIDEGATE_API __attribute__((visibility("default")))
#else
#define TIDEGATE_API
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                                */
/* ------------------------------------------------------------------------------------------ */

/** Result of every tidegate call. Values are part of the ABI and never renumbered. */
typedef enum tidegate_status {
  TIDEGATE_OK = 0,
  /** The call's own arguments are invalid (null handle, negative count, unknown enum, ...). */
  TIDEGATE_ERR_INVALID_ARGUMENT = 1,
  /** Ranks posted collectives that do not match (count, dtype, op, kind or order differ). */
  TIDEGATE_ERR_MISMATCH = 2,
  /** A deadline passed: a peer did not answer, or a wait's own timeout elapsed. */
  TIDEGATE_ERR_TIMEOUT = 3,
  /** A peer closed its connection, died, or reported an error of its own. */
  TIDEGATE_ERR_PEER_FAILED = 4,
  /** Authentication with the job secret failed, or no secret is configured. */
  TIDEGATE_ERR_AUTH = 5,
  /** A peer sent bytes that are not a valid tidegate message (bad magic, length, version). */
  TIDEGATE_ERR_PROTOCOL = 6,
  /** The request needs a feature this build or this transport does not have. */
  TIDEGATE_ERR_UNSUPPORTED = 7,
  /** Memory could not be allocated. */
  TIDEGATE_ERR_NO_MEMORY = 8,
  /** The communicator was aborted (locally or by a peer) and must be destroyed. */
  TIDEGATE_ERR_ABORTED = 9,
  /** An operating-system call failed (socket, bind, fork, ...); the message names it. */
  TIDEGATE_ERR_SYSTEM = 10,
  /** Configuration (environment variable or TIDEGATE_TUNE string) is malformed. */
  TIDEGATE_ERR_CONFIG = 11,
  /** A bug in tidegate itself; please report it with the message. */
  TIDEGATE_ERR_INTERNAL = 12,
  /** Not an error: a non-blocking request has not finished yet (see tidegate_request_wait). */
  TIDEGATE_IN_PROGRESS = 13
} tidegate_status_t;

/** Short, static, English name of a status code ("timeout", ...). Never NULL; thread-safe. */
TIDEGATE_API const char* tidegate_status_string(tidegate_status_t status);

/**
 * Detailed message of the most recent failed tidegate call on this thread (empty string when
 * the last call succeeded). The pointer stays valid until the next tidegate call on the same
 * thread. Thread-safe (thread-local storage).
 */
TIDEGATE_API const char* tidegate_last_error(void);

/** Library version as "MAJOR.MINOR.PATCH". Static string; thread-safe. */
TIDEGATE_API const char* tidegate_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/** Element types. Values are part of the ABI. */
typedef enum tidegate_dtype {
  TIDEGATE_FLOAT32 = 0,
  TIDEGATE_FLOAT64 = 1,
  TIDEGATE_FLOAT16 = 2,  /* IEEE binary16 */
  TIDEGATE_BFLOAT16 = 3, /* bfloat16 */
  TIDEGATE_INT32 = 4,
  TIDEGATE_INT64 = 5,
  TIDEGATE_UINT8 = 6
} tidegate_dtype_t;

/** Size of one element of dtype in bytes, or 0 for an unknown dtype. Thread-safe. */
TIDEGATE_API size_t tidegate_dtype_size(tidegate_dtype_t dtype);

/** Where a tensor's memory lives. */
typedef enum tidegate_memory {
  TIDEGATE_MEMORY_HOST = 0,
  TIDEGATE_MEMORY_CUDA = 1
} tidegate_memory_t;

/**
 * A view of caller-owned memory: tidegate never takes ownership and never frees it. The memory
 * must stay valid and untouched by the caller until the collective that uses it completes.
 *
 * data    pointer to the first element; may be NULL only when count == 0
 * count   number of elements (64-bit)
 * dtype   element type
 * memory  host or CUDA device memory
 * stream  for CUDA memory: the cudaStream_t the data is ordered on (NULL = default stream);
 *         ignored for host memory
 * rows, cols  optional 2-D shape for matrix codecs: both 0 for a plain 1-D tensor, otherwise
 *         rows * cols == count (row-major)
 */
typedef struct tidegate_tensor {
  void* data;
  int64_t count;
  tidegate_dtype_t dtype;
  tidegate_memory_t memory;
  void* stream;
  int64_t rows;
  int64_t cols;
} tidegate_tensor_t;

/** Convenience: a 1-D host tensor view. */
static inline tidegate_tensor_t tidegate_host_tensor(void* data, int64_t count,
                                                     tidegate_dtype_t dtype) {
  tidegate_tensor_t t;
  t.data = data;
  t.count = count;
  t.dtype = dtype;
  t.memory = TIDEGATE_MEMORY_HOST;
  t.stream = NULL;
  t.rows = 0;
  t.cols = 0;
  return t;
}

/**
 * Reduction operators. AVG divides the sum by the world size (integer division for ints).
 *
 * Reduction semantics: one definition per dtype x op, the same whichever transport and
 * algorithm the plan picks (a transport's native collective is used only where it computes
 * exactly this; e.g. Open MPI's vectorised 8-bit sums saturate, so MPI's native uint8 SUM is not
 * used), and bitwise identical on every rank:
 *  - INT32, INT64, UINT8: SUM and PROD wrap modulo 2^bits (two's complement: 200 + 100 = 44 in
 *    uint8, INT32_MAX + 1 = INT32_MIN), never saturate; AVG is that wrapped sum divided by the
 *    world size, truncating toward zero; MIN and MAX are exact.
 *  - FLOAT32, FLOAT64: IEEE 754 arithmetic, round to nearest even, in an order the algorithm
 *    fixes (so a sum's last bits may differ between two algorithms, never between ranks):
 *    overflow gives +-infinity, inf + -inf gives NaN, a NaN operand gives NaN, and a sum of
 *    zeros is -0 only when every operand is -0. MIN and MAX propagate NaN (the result is NaN
 *    when any operand is) and order -0 below +0 (MIN(-0, +0) = -0, MAX(-0, +0) = +0). When
 *    ranks contribute NaNs with different payloads, which payload results is unspecified.
 *    AVG divides the sum once, in the dtype's precision.
 *  - FLOAT16, BFLOAT16: as float32, computed in float32 and rounded to the 16-bit format (to
 *    nearest even) after each operation.
 * On CUDA memory the nccl transport's collectives compute instead (NCCL's MIN/MAX return the
 * non-NaN operand, its float AVG scales before summing); no other path runs device memory, so
 * there too the result does not depend on the plan.
 */
typedef enum tidegate_reduce_op {
  TIDEGATE_SUM = 0,
  TIDEGATE_AVG = 1,
  TIDEGATE_MIN = 2,
  TIDEGATE_MAX = 3,
  TIDEGATE_PROD = 4
} tidegate_reduce_op_t;

/* ------------------------------------------------------------------------------------------ */
/* Communicators                                                                               */
/* ------------------------------------------------------------------------------------------ */

/** Opaque communicator: a group of ranks, their connections and a progress thread. */
typedef struct tidegate_comm* tidegate_comm_t;

/**
 * Key-value store callbacks, for trainers (or PyTorch) that already run a rendezvous store.
 * tidegate only ever calls them from the thread inside tidegate_comm_create, and only until
 * it returns.
 *
 * set: store value (length len bytes, may contain NUL) under key; return 0 on success.
 * get: wait until key exists or timeout_ms passes; on success copy at most capacity bytes
 *      into value, write the full length to *len and return 0; return 1 on timeout, any
 *      other value on failure. If *len > capacity, tidegate calls again with a larger buffer.
 * ctx: passed back unchanged to both callbacks.
 */
typedef struct tidegate_store {
  void* ctx;
  int (*set)(void* ctx, const char* key, const void* value, size_t len);
  int (*get)(void* ctx, const char* key, void* value, size_t capacity, size_t* len,
             int64_t timeout_ms);
} tidegate_store_t;

/**
 * Create a communicator from the environment (see the configuration table printed by
 * tidegate-info): rank and size from TIDEGATE_RANK/TIDEGATE_SIZE, or from the launcher's own
 * variables (Open MPI, PMI, Slurm); the rendezvous store from TIDEGATE_STORE_ADDR (rank 0 hosts
 * it when no launcher does); the job secret from TIDEGATE_SECRET or TIDEGATE_SECRET_FILE.
 * Collective over all ranks: blocks until every rank has joined or the timeout passes.
 * Communicators created one after another through the same store (e.g. after a failure) are
 * kept apart by a generation each rank counts in the store, so a rank that its launcher started
 * again (tidegate-run --restarts: a new process) joins the survivors' next communicator.
 * Errors: CONFIG (missing or malformed variables), AUTH, TIMEOUT, SYSTEM.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_create_from_env(tidegate_comm_t* comm);

/**
 * Create a communicator of `size` ranks in which the caller is `rank`, rendezvousing through
 * the caller's store. Keys written are prefixed with "tidegate/"; the store must be fresh for
 * each communicator (or keys from an earlier one must be gone). The job secret for
 * authenticating data connections comes from the environment as for _from_env; when none is
 * set, a random one is chosen by rank 0 and shared through the store.
 * The store callbacks are used only during this call. Collective over all ranks.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_create(int rank, int size,
                                                    const tidegate_store_t* store,
                                                    tidegate_comm_t* comm);

/**
 * One configuration setting: `name` is a variable of the configuration table printed by
 * tidegate-info (e.g. "TIDEGATE_TIMEOUT_MS") and `value` its text, written as in the
 * environment (e.g. "60000"). Both strings are read during the call only.
 */
typedef struct tidegate_setting {
  const char* name;
  const char* value;
} tidegate_setting_t;

/**
 * Like tidegate_comm_create, with `settings` (num_settings entries; may be NULL when
 * num_settings is 0) applied over the environment: a setting wins over the same variable in
 * the environment, and later entries win over earlier ones. For integrations that receive
 * their configuration from a host framework rather than the environment (the PyTorch backend
 * passes the process group's timeout as TIDEGATE_TIMEOUT_MS). Collective over all ranks.
 * Errors: CONFIG when a name is not in the configuration table or a value is malformed (the
 * message names the variable); otherwise as tidegate_comm_create.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_create_with_settings(
    int rank, int size, const tidegate_store_t* store, const tidegate_setting_t* settings,
    size_t num_settings, tidegate_comm_t* comm);

/**
 * Create a communicator over the ranks of an MPI communicator. `mpi_comm` points to an
 * MPI_Comm (pass &comm); MPI must be initialised. Rank 0 hosts the rendezvous store and
 * broadcasts its address and a fresh job secret over MPI. Collective over the MPI communicator.
 * Errors: UNSUPPORTED when tidegate was built without MPI.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_create_from_mpi(const void* mpi_comm,
                                                             tidegate_comm_t* comm);

/**
 * Destroy a communicator: finish the collectives already posted (each under its deadline),
 * close connections and stop the progress thread. Requests of this communicator that the
 * caller still holds stay valid and must still be freed. NULL is accepted and ignored.
 * Returns the status of the destruction itself: a communicator that failed earlier (its
 * collectives reported that failure) is released and destroy returns TIDEGATE_OK; an error
 * means the connections could not be closed cleanly. After a failure (PEER_FAILED, TIMEOUT,
 * ABORTED, ...) the surviving processes may destroy the communicator and create a new one,
 * over new or the same ranks, in the same processes.
 * Not thread-safe with other calls on the same communicator.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_destroy(tidegate_comm_t comm);

/**
 * Abort a communicator: fail every pending request with TIDEGATE_ERR_ABORTED, tell the peers
 * (best effort) so that their pending requests fail too, and stop communicating. The handle
 * must still be destroyed. Thread-safe; may be called while another thread waits.
 */
TIDEGATE_API tidegate_status_t tidegate_comm_abort(tidegate_comm_t comm, const char* reason);

/** This process's rank in the communicator. Thread-safe. */
TIDEGATE_API tidegate_status_t tidegate_comm_rank(tidegate_comm_t comm, int* rank);

/** Number of ranks in the communicator. Thread-safe. */
TIDEGATE_API tidegate_status_t tidegate_comm_size(tidegate_comm_t comm, int* size);

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/**
 * Opaque handle of one posted collective. Up to TIDEGATE_OPS_IN_FLIGHT collectives of a
 * communicator run at once, but requests complete in posting order: when a request reports
 * done, every request posted before it on the same communicator has finished too.
 */
typedef struct tidegate_request* tidegate_request_t;

/**
 * Non-blocking check: *done = 1 when the request has finished (successfully or not), else 0.
 * Returns the collective's own status when it finished with an error. Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_request_test(tidegate_request_t request, int* done);

/**
 * Wait until the request finishes or timeout_ms passes (negative = the configured default
 * TIDEGATE_TIMEOUT_MS). Returns the collective's status; TIDEGATE_ERR_TIMEOUT when this wait's
 * own timeout passed first (the collective keeps running; wait again or abort). Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_request_wait(tidegate_request_t request,
                                                     int64_t timeout_ms);

/**
 * Function called once when a request finishes: `status` is the collective's status. Inside the
 * call, tidegate_last_error() returns the collective's message (empty on success).
 */
typedef void (*tidegate_request_callback_t)(void* user_data, tidegate_status_t status);

/**
 * Register `callback(user_data, status)` to run once `request` finishes. It runs on the thread
 * that drives the communicator as the request completes (requests complete in posting order):
 * its progress thread, or a thread inside a blocking collective of the same communicator (a
 * blocking call runs the ops in flight itself while the progress thread is not busy; see
 * TIDEGATE_CALLER_RUNS), or at once on the calling thread when the request has already finished. Several callbacks on
 * one request run in the order they were registered. The callback must return promptly: it must
 * not block, and must not wait for a request of the same communicator (that would stall the
 * progress thread); setting a future or signalling another thread is the intended use. The
 * request handle may be freed after this call; the callback still runs. Thread-safe.
 * Errors: INVALID_ARGUMENT for a NULL request or callback.
 */
TIDEGATE_API tidegate_status_t tidegate_request_on_complete(tidegate_request_t request,
                                                            tidegate_request_callback_t callback,
                                                            void* user_data);

/**
 * Release a request handle. A request that has not finished keeps running to completion
 * inside the communicator (its buffers must stay valid until then). NULL is ignored.
 */
TIDEGATE_API void tidegate_request_free(tidegate_request_t request);

/* ------------------------------------------------------------------------------------------ */
/* Collectives. Non-blocking versions start with "i" and return a request in *request.       */
/* Input and output may be the same view (in place) where noted. Every rank must pass the    */
/* same count, dtype and op; a mismatch ends in TIDEGATE_ERR_MISMATCH on every rank.          */
/* ------------------------------------------------------------------------------------------ */

/** output[i] = op over ranks of input[i]. input and output have equal count and dtype;
 *  output may be the same memory as input. */
TIDEGATE_API tidegate_status_t tidegate_iallreduce(tidegate_comm_t comm,
                                                   const tidegate_tensor_t* input,
                                                   const tidegate_tensor_t* output,
                                                   tidegate_reduce_op_t op,
                                                   tidegate_request_t* request);

/**
 * Reduce `input` (count N, the same on every rank) and leave on rank r block r of the result:
 * the blocks split N as tidegate_block_range() says (the first N % size ranks get one element
 * more). output.count must equal this rank's block length. In place comes in two shapes, both
 * accepted on every rank: output at the start of input (MPI_IN_PLACE: the result lands there)
 * or output at this rank's own block of input (NCCL's in place). Any other overlap of output
 * and input is INVALID_ARGUMENT on every rank alike.
 */
TIDEGATE_API tidegate_status_t tidegate_ireduce_scatter(tidegate_comm_t comm,
                                                        const tidegate_tensor_t* input,
                                                        const tidegate_tensor_t* output,
                                                        tidegate_reduce_op_t op,
                                                        tidegate_request_t* request);

/** Each rank contributes input (count n, same on all ranks); output (count size*n) holds rank
 *  r's input at offset r*n. */
TIDEGATE_API tidegate_status_t tidegate_iallgather(tidegate_comm_t comm,
                                                   const tidegate_tensor_t* input,
                                                   const tidegate_tensor_t* output,
                                                   tidegate_request_t* request);

/** Like allgather with per-rank counts: counts[r] elements from rank r land at the sum of the
 *  counts before r. counts has `size` entries, identical on every rank; input.count must equal
 *  counts[rank]; output.count must equal the sum. tidegate copies counts. */
TIDEGATE_API tidegate_status_t tidegate_iallgatherv(tidegate_comm_t comm,
                                                    const tidegate_tensor_t* input,
                                                    const tidegate_tensor_t* output,
                                                    const int64_t* counts,
                                                    tidegate_request_t* request);

/** Copy root's tensor into every rank's tensor (in place). */
TIDEGATE_API tidegate_status_t tidegate_ibroadcast(tidegate_comm_t comm,
                                                   const tidegate_tensor_t* tensor, int root,
                                                   tidegate_request_t* request);

/** Complete only when every rank has entered the barrier. */
TIDEGATE_API tidegate_status_t tidegate_ibarrier(tidegate_comm_t comm, tidegate_request_t* request);

/**
 * Personalised all-to-all: rank r sends send_counts[p] elements starting at send_offsets[p]
 * of input to rank p, and receives recv_counts[p] elements from rank p at recv_offsets[p] of
 * output. Arrays have `size` entries; tidegate copies them. send_counts[p] on rank r must equal
 * recv_counts[r] on rank p (checked: a mismatch is an error on both ranks).
 */
TIDEGATE_API tidegate_status_t tidegate_ialltoallv(
    tidegate_comm_t comm, const tidegate_tensor_t* input, const int64_t* send_counts,
    const int64_t* send_offsets, const tidegate_tensor_t* output, const int64_t* recv_counts,
    const int64_t* recv_offsets, tidegate_request_t* request);

/* Blocking wrappers: post, wait with the configured timeout, free the request. */
TIDEGATE_API tidegate_status_t tidegate_allreduce(tidegate_comm_t comm,
                                                  const tidegate_tensor_t* input,
                                                  const tidegate_tensor_t* output,
                                                  tidegate_reduce_op_t op);
TIDEGATE_API tidegate_status_t tidegate_reduce_scatter(tidegate_comm_t comm,
                                                       const tidegate_tensor_t* input,
                                                       const tidegate_tensor_t* output,
                                                       tidegate_reduce_op_t op);
TIDEGATE_API tidegate_status_t tidegate_allgather(tidegate_comm_t comm,
                                                  const tidegate_tensor_t* input,
                                                  const tidegate_tensor_t* output);
TIDEGATE_API tidegate_status_t tidegate_allgatherv(tidegate_comm_t comm,
                                                   const tidegate_tensor_t* input,
                                                   const tidegate_tensor_t* output,
                                                   const int64_t* counts);
TIDEGATE_API tidegate_status_t tidegate_broadcast(tidegate_comm_t comm,
                                                  const tidegate_tensor_t* tensor, int root);
TIDEGATE_API tidegate_status_t tidegate_barrier(tidegate_comm_t comm);
TIDEGATE_API tidegate_status_t
tidegate_alltoallv(tidegate_comm_t comm, const tidegate_tensor_t* input, const int64_t* send_counts,
                   const int64_t* send_offsets, const tidegate_tensor_t* output,
                   const int64_t* recv_counts, const int64_t* recv_offsets);

/* ------------------------------------------------------------------------------------------ */
/* Compressed allreduce                                                                        */
/* ------------------------------------------------------------------------------------------ */

/**
 * How a compressed allreduce compresses. Zero-initialise it, then set what you need.
 *
 * codec           codec spec string (required): "fp16", "bf16", "qsgd:bits=4,bucket=512",
 *                 "maxmin:bits=4", "terngrad", "onebit", "efsign", "signsgd",
 *                 "topk:ratio=0.01[,mode=approx]", "randomk:ratio=0.01", "threshold:value=0.01",
 *                 "powersgd:rank=4", or "none" (the plain dense allreduce). The README lists every
 *                 codec and parameter.
 * key             the tensor's key: error-feedback residuals, PowerSGD's Q and the step counter
 *                 from which stochastic codecs draw are kept per (communicator, key). Use one key
 *                 per gradient tensor (or bucket) and keep it across steps.
 * error_feedback  1: what the codec leaves out is kept (per key) and added the next time, on the
 *                 sender and, where the owner of a block re-encodes a sum, on the owner too
 *                 (DeepSpeed's 1-bit Adam). 0: off. Biased codecs (top-k, signsgd, onebit,
 *                 efsign, nearest rounding, PowerSGD) need it to converge.
 * algorithm       NULL or "" for the codec's default, or one of: "allgather" (gather every
 *                 rank's payload, decode-add in rank order; any codec but powersgd),
 *                 "sparse_reduce_scatter" (balanced, strided regions with a density switch;
 *                 topk, threshold, randomk), "shared_randomk" (every rank keeps the same k
 *                 indices; randomk), "sra" (CGX's scatter-reduce-allgather; every codec but the
 *                 sparsifiers and powersgd), "summable" (payloads summed without decoding;
 *                 signsgd's majority vote), "powersgd" (two small allreduces; powersgd).
 *                 Defaults: topk/threshold allgather, randomk shared_randomk, powersgd powersgd,
 *                 signsgd summable, every other codec sra. Must be NULL or "" for codec "auto".
 * allowed         codec "auto" only: the lossy codecs the plan may choose from for this tensor,
 *                 as a comma-separated list ("fp16,qsgd:bits=4,topk:ratio=0.01"; "none" may be
 *                 listed and adds nothing: dense is always allowed). NULL or "": TIDEGATE_CODECS.
 *
 * codec "auto": per op, the plan (cost model from the measured links and codec throughputs,
 * refined online) runs the cheapest of dense and every allowed codec x compressed algorithm x
 * transport; never a codec outside `allowed`. A key that goes back to dense sends its residuals
 * with that dense op (nothing is lost), on every rank at the same op. TIDEGATE_TUNE rules with
 * codec=SPEC force a choice; tidegate_request_choice() tells what an op ran.
 */
typedef struct tidegate_compression {
  const char* codec;
  uint64_t key;
  int error_feedback;
  const char* algorithm;
  const char* allowed;
} tidegate_compression_t;

/**
 * output = op over ranks of input, compressed as `compression` says. op: TIDEGATE_SUM or
 * TIDEGATE_AVG (other ops cannot be compressed: INVALID_ARGUMENT). input and output: equal count,
 * float32, float16 or bfloat16 (accumulation is in float32; a float16/bfloat16 result is rounded
 * once), host memory; output may be input. Every rank ends with bitwise-identical output.
 * Every rank must pass the same codec spec, algorithm, key and error_feedback (and the same
 * TIDEGATE_SEED): a difference is TIDEGATE_ERR_MISMATCH on every rank naming the field.
 * Errors at the call, before anything is sent: CONFIG for a codec spec that does not parse or an
 * unknown algorithm, UNSUPPORTED for an algorithm that cannot run the codec or device memory,
 * INVALID_ARGUMENT for the tensors or the op. NaN or infinity in the input fails the op with
 * INVALID_ARGUMENT naming the element, on every rank, and leaves every residual as it was.
 * A payload from a peer that does not decode fails the op naming the peer.
 * Results: the dense sum's, within the codec's error (exactly the decoded payloads' sum for the
 * sparsifiers); signsgd's summable algorithm gives the majority vote (-1, 0 or +1 per element)
 * for SUM and AVG alike.
 */
TIDEGATE_API tidegate_status_t tidegate_icompressed_allreduce(
    tidegate_comm_t comm, const tidegate_tensor_t* input, const tidegate_tensor_t* output,
    tidegate_reduce_op_t op, const tidegate_compression_t* compression,
    tidegate_request_t* request);
/** Blocking form of tidegate_icompressed_allreduce. */
TIDEGATE_API tidegate_status_t tidegate_compressed_allreduce(
    tidegate_comm_t comm, const tidegate_tensor_t* input, const tidegate_tensor_t* output,
    tidegate_reduce_op_t op, const tidegate_compression_t* compression);

/**
 * The communicator's compression state (every key's residuals, PowerSGD's Q, top-k's thresholds
 * and each key's step counter), for a training checkpoint. Each rank saves and loads its own:
 * residuals differ between ranks. These calls are local (not collective) and ordered with the
 * rank's collectives: they act after every collective posted before them has finished and
 * before any posted after them starts; they block until then (under TIDEGATE_TIMEOUT_MS).
 *
 * tidegate_ef_state_save writes a buffer allocated by tidegate into *data (free it with
 * tidegate_free) and its length into *bytes. The same state always gives the same bytes.
 * tidegate_ef_state_load replaces the state with a saved one; the buffer is checked completely
 * first (INVALID_ARGUMENT naming the problem, state unchanged). After a load, the next step of
 * every key is bit for bit the step the saved run would have taken.
 * tidegate_ef_state_reset forgets all of it.
 * tidegate_ef_flush adds the residuals of `key` (the sender's and, for blocks this rank owns, the
 * owner's) into `dense`, a tensor about to be sent uncompressed with `op`, and releases them, so
 * that nothing is lost when a tensor stops being compressed; dense must have the key's count
 * (a key that holds no residuals adds nothing). Codec "auto" does this itself when it switches
 * a key back to dense.
 * Thread-safe with respect to posting.
 */
TIDEGATE_API tidegate_status_t tidegate_ef_state_save(tidegate_comm_t comm, void** data,
                                                      size_t* bytes);
TIDEGATE_API tidegate_status_t tidegate_ef_state_load(tidegate_comm_t comm, const void* data,
                                                      size_t bytes);
TIDEGATE_API tidegate_status_t tidegate_ef_state_reset(tidegate_comm_t comm);
TIDEGATE_API tidegate_status_t tidegate_ef_flush(tidegate_comm_t comm, uint64_t key,
                                                 const tidegate_tensor_t* dense,
                                                 tidegate_reduce_op_t op);

/** Frees a buffer tidegate allocated for the caller (tidegate_ef_state_save). NULL is ignored. */
TIDEGATE_API void tidegate_free(void* data);

/**
 * Payload bytes this rank sent for a finished request's collective (headers excluded): what
 * crossed the wire from this rank, so dense bytes over this figure is the compression ratio
 * seen on the wire. INVALID_ARGUMENT while the request has not finished. Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_request_bytes_sent(tidegate_request_t request,
                                                           uint64_t* bytes);

/**
 * Sufficient-factor allreduce (Poseidon's SFB, for fully connected layers): each rank passes
 * the factors of its gradient, u (K x M) and v (K x N), float32 host tensors with rows and
 * cols set (K may differ between ranks, M and N may not), whose product u^T v is its M x N
 * gradient; every rank receives the sum over ranks (TIDEGATE_SUM) or its mean (TIDEGATE_AVG:
 * the sum divided by the number of ranks) in `output` (M x N: rows and cols set, or 0 and
 * count M N), bitwise identical on every rank.
 *   TIDEGATE_SFB_FACTORS  allgather the factors; every rank sums all ranks' products in rank
 *                         order (P K (M + N) floats sent to each rank instead of ~2 M N)
 *   TIDEGATE_SFB_DENSE    form u^T v locally and allreduce the matrix
 *   TIDEGATE_SFB_AUTO     the HybComm rule: the cheaper of the two by the plan's predictions of
 *                         the allgather and the allreduce and the product kernel's speed
 *                         (measured at the first call, agreed across ranks), alike on every rank
 * `choice` (may be NULL) receives "sfb" or "dense" (capacity 8 suffices). Blocking; a
 * collective: every rank calls it with the same method and op. MISMATCH (on every rank, naming
 * the ranks) when M or N differ across ranks; INVALID_ARGUMENT for shapes that do not fit.
 */
typedef enum tidegate_sfb_method {
  TIDEGATE_SFB_AUTO = 0,
  TIDEGATE_SFB_FACTORS = 1,
  TIDEGATE_SFB_DENSE = 2
} tidegate_sfb_method_t;

TIDEGATE_API tidegate_status_t tidegate_sfb_allreduce(tidegate_comm_t comm,
                                                      const tidegate_tensor_t* u,
                                                      const tidegate_tensor_t* v,
                                                      const tidegate_tensor_t* output,
                                                      tidegate_reduce_op_t op,
                                                      tidegate_sfb_method_t method, char* choice,
                                                      size_t choice_capacity);

/**
 * What ran a finished request's collective, as "transport/algorithm" ("tcp/ring") or, when it
 * was compressed, "transport/algorithm+codec" ("tcp/sra+qsgd:bits=4,bucket=512"): with codec
 * "auto", the choice the plan made for this op (the same on every rank). Written into `buffer`
 * with its terminating NUL; INVALID_ARGUMENT while the request has not finished or when
 * `capacity` is too small (128 bytes hold every choice of this build's specs). Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_request_choice(tidegate_request_t request, char* buffer,
                                                       size_t capacity);

/**
 * The block of a count-N tensor that rank `rank` of `size` owns in reduce-scatter:
 * the first N % size ranks get N/size + 1 elements, the others N/size. Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_block_range(int64_t count, int size, int rank,
                                                    int64_t* offset, int64_t* length);

/* ------------------------------------------------------------------------------------------ */
/* Gradient session: wait-free overlapped gradient synchronisation                              */
/* ------------------------------------------------------------------------------------------ */

/**
 * A training loop's gradients, registered once; then, per step, each gradient is marked ready
 * the moment backward has produced it, and the session synchronises it (allreduce in place,
 * dense or compressed) in the background while backward goes on (Poseidon's wait-free
 * backpropagation). Its scheduler runs the gradients that are ready on every rank in priority
 * order (the order the next forward needs them, as in P3 / ByteScheduler), cuts large tensors
 * into chunks so that a high-priority gradient that becomes ready late overtakes the rest, and
 * fuses small ones into one op (as Horovod and DDP do). Ranks may mark gradients ready in any
 * order: which gradient runs next is decided from readiness agreed by every rank (a small
 * allreduce of counters, one per scheduling cycle), so every rank runs the same ops in the same
 * order. A dense gradient's result is bitwise the same fused, chunked or alone (every dense op
 * of a session sums in one rank-tree order, whatever the element's position), and identical on
 * every rank.
 */
typedef struct tidegate_session* tidegate_session_t;

/**
 * One gradient of a session. Zero-initialise it, then set what you need.
 *
 * key             unique within the session; also the compression key (error-feedback residuals
 *                 of a compressed gradient are kept under it, in the communicator's state)
 * tensor          the gradient buffer, reduced in place: must stay valid for the session's life
 *                 and untouched between marking it ready and its wait returning. Host memory;
 *                 float32, float64, float16, bfloat16, int32 or int64 (compressed: the
 *                 compressed allreduce's dtypes). count may be 0 (done as soon as it is ready).
 * priority        smaller runs first: 0 for the gradient the next forward needs first (the first
 *                 layer's). Ties go by key.
 * codec           NULL, "" or "none": dense. Otherwise a codec spec or "auto", as in
 *                 tidegate_compression_t (a compressed gradient is one op: never fused or cut,
 *                 so a codec's buckets stay within it).
 * allowed         codec "auto" only: the allow-list (NULL: TIDEGATE_CODECS).
 * error_feedback  for a codec: 1 keeps what it leaves out, per key (see tidegate_compression_t).
 */
typedef struct tidegate_gradient {
  uint64_t key;
  tidegate_tensor_t tensor;
  int priority;
  const char* codec;
  const char* allowed;
  int error_feedback;
} tidegate_gradient_t;

/**
 * The scheduler's knobs. Zero-initialise it: every 0 takes the default (printed by
 * tidegate-info, set job-wide by the environment variable named).
 *
 * op             TIDEGATE_SUM (0 stands for it) or TIDEGATE_AVG
 * fusion_bytes   dense gradients at most this big are packed together into one op, up to this
 *                many bytes (TIDEGATE_FUSION_BYTES; default: from the plan, the size where the
 *                per-message latency stops dominating); -1: no fusion
 * chunk_bytes    dense gradients bigger than this are cut into pieces of this size
 *                (TIDEGATE_CHUNK_BYTES; default: from the plan); -1: never cut
 * cycle_us       how long an idle scheduler waits for a new gradient before it negotiates again
 *                (TIDEGATE_SESSION_CYCLE_US)
 * priority       1 (default, also for 0): priority order; -1: the order in which gradients
 *                became ready everywhere (what DDP's buckets do), for comparisons
 */
typedef struct tidegate_session_options {
  tidegate_reduce_op_t op;
  int64_t fusion_bytes;
  int64_t chunk_bytes;
  int64_t cycle_us;
  int priority;
} tidegate_session_options_t;

/**
 * Registers `count` gradients on `comm` and starts the session's scheduler thread. Collective:
 * every rank registers the same keys with the same counts, dtypes, codecs and priorities
 * (compared at creation: MISMATCH naming the first differing key and field, on every rank).
 * `options` may be NULL. INVALID_ARGUMENT for a duplicate key, a bad tensor or option; CONFIG for
 * a codec spec that does not parse. The communicator must outlive the session; while a step is
 * running, do not post other collectives on it from other threads (their order against the
 * session's ops could differ between ranks: MISMATCH, never a wrong sum).
 */
TIDEGATE_API tidegate_status_t tidegate_session_create(tidegate_comm_t comm,
                                                       const tidegate_gradient_t* gradients,
                                                       int64_t count,
                                                       const tidegate_session_options_t* options,
                                                       tidegate_session_t* session);

/**
 * Marks a gradient ready for this step: returns at once (it only records the fact and wakes the
 * scheduler). Every registered gradient must be marked once per step, in any order; the step
 * ends when all of them are synchronised on every rank. INVALID_ARGUMENT for an unknown key or a
 * key marked twice in one step. A key that some ranks mark and others never do fails the session
 * on every rank within TIDEGATE_TIMEOUT_MS, naming the key (MISMATCH). Thread-safe: backward
 * threads may call it concurrently with each other and with the waits.
 */
TIDEGATE_API tidegate_status_t tidegate_session_ready(tidegate_session_t session, uint64_t key);

/**
 * Waits until `key`'s gradient of the current step is synchronised (its buffer holds the result)
 * or `timeout_ms` passes (TIMEOUT; < 0: TIDEGATE_TIMEOUT_MS). Returns at once for a gradient
 * already done, or not marked ready in this step yet but done in the previous one (the buffer
 * holds that result). The session's error, once it failed. Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_session_wait(tidegate_session_t session, uint64_t key,
                                                     int64_t timeout_ms);

/** Waits for every gradient marked ready in this step, as tidegate_session_wait. Thread-safe. */
TIDEGATE_API tidegate_status_t tidegate_session_wait_all(tidegate_session_t session,
                                                         int64_t timeout_ms);

/**
 * Step boundary (optional): waits for the whole step (every gradient must have been marked) and
 * returns its statistics (may be NULL). The next tidegate_session_ready starts the next step.
 * Thread-safe, but meant for the training loop's thread.
 */
typedef struct tidegate_session_stats {
  int64_t steps;            /* steps finished so far */
  int64_t ops;              /* collectives the last step ran (fused, chunks and whole) */
  int64_t fused_ops;        /* of which packed two gradients or more */
  int64_t chunk_ops;        /* of which carried a piece of a cut gradient */
  int64_t cycles;           /* negotiation rounds of the last step */
  double comm_ms;           /* last step: first op posted to last op finished */
  uint64_t bytes_sent;      /* last step: payload bytes this rank sent */
} tidegate_session_stats_t;

TIDEGATE_API tidegate_status_t tidegate_session_step(tidegate_session_t session,
                                                     tidegate_session_stats_t* stats);

/**
 * The knobs the session runs with (defaults resolved), for logs. Thread-safe.
 */
TIDEGATE_API tidegate_status_t tidegate_session_options_used(tidegate_session_t session,
                                                             tidegate_session_options_t* options);

/**
 * Stops the scheduler and frees the session. A step still running is failed (ABORTED) and waited
 * for under TIDEGATE_TIMEOUT_MS. Not concurrent with other calls on the session. NULL is ignored.
 */
TIDEGATE_API tidegate_status_t tidegate_session_destroy(tidegate_session_t session);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TIDEGATE_TIDEGATE_H */
