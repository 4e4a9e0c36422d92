// Training checkpoints of the digits example: one file per rank and epoch, holding the model's
// weights and momentum and the communicator's compression state (the error-feedback residuals,
// which differ from rank to rank), so that a job that lost a rank can go on from the last epoch
// every rank finished, bit for bit as if nothing had happened.
#ifndef TIDEGATE_EXAMPLES_CHECKPOINT_H
#define TIDEGATE_EXAMPLES_CHECKPOINT_H

#include <cstdint>
#include <string>
#include <vector>

#include "mlp_model.h"

namespace examples {

// Writes DIR/rank<R>.epoch<E>.ckpt (to a temporary name, then renamed, so a rank killed while
// writing leaves no torn file), then removes this rank's checkpoints older than epoch E-1: a rank
// that died between the others' writes and its own is one epoch behind them, and the job resumes
// from the newest epoch that every rank has. Throws std::runtime_error naming the file.
void save_checkpoint(const std::string& dir, int rank, int epoch, const mlp::Model& model,
                     const std::vector<uint8_t>& compression_state);

// The newest epoch this rank has a checkpoint of in `dir`; 0 when it has none.
int newest_checkpoint(const std::string& dir, int rank);

// Loads rank `rank`'s checkpoint of `epoch` into `model` (which must have the saved layer
// shapes) and `compression_state`. Throws std::runtime_error naming the file and what is wrong
// with it (missing, truncated, another model's, checksum).
void load_checkpoint(const std::string& dir, int rank, int epoch, mlp::Model* model,
                     std::vector<uint8_t>* compression_state);

}  // namespace examples

#endif  // TIDEGATE_EXAMPLES_CHECKPOINT_H
