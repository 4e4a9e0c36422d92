// Settings that every rank of a communicator must share, checked once when it is created.
//
// Some settings shape the ops themselves: which channel an op runs on (TIDEGATE_OPS_IN_FLIGHT),
// how a ring cuts its messages (TIDEGATE_SEGMENT_BYTES), where re-planning rounds are inserted
// (TIDEGATE_REPLAN_INTERVAL) and what they decide (TIDEGATE_REPLAN_MARGIN), which algorithm the
// plan picks (TIDEGATE_ALGO, TIDEGATE_TUNE and the probe-off thresholds), how a gradient session
// fuses and cuts (TIDEGATE_FUSION_BYTES, TIDEGATE_CHUNK_BYTES) and the stochastic codecs' draws
// (TIDEGATE_SEED). Ranks that differ in one of them post ops that do not match: at best a
// MISMATCH at the first such op, at worst a wait until the deadline with no word on why. So the
// end-of-creation barrier carries them, and a difference fails creation on every rank with a
// CONFIG error naming the setting.
//
// The barrier is a ring max of doubles: each setting travels as (value, -value), so after the
// max every rank holds the largest and (negated) the smallest value, and the setting agrees
// exactly when they are equal. Text settings travel as the first 48 bits of their SHA-256,
// which a double holds exactly.
#pragma once

#include <cstddef>
#include <vector>

#include "base/config.h"
#include "base/status.h"

namespace tidegate {

// Appends this rank's (value, -value) pair of every setting that must agree to `token`.
void append_settings_to_agree(const Config& config, std::vector<double>* token);

// After the ring max: a CONFIG error naming the first setting whose largest and smallest values
// differ (with this rank's own value), or OK. `first` is where append_settings_to_agree began.
Status check_settings_agree(const Config& config, const std::vector<double>& token, size_t first);

}  // namespace tidegate
