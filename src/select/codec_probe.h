// The codec part of the bandwidth probe: every codec family's encode and decode throughput on
// this rank, measured at its default spec on a tensor larger than the caches, for the cost of
// compressed algorithms in the plan. Part of run_probe (probe.h), agreed like the rest: the
// slowest rank's figure counts.
#pragma once

#include <vector>

#include "select/probe_profile.h"

namespace tidegate {

// Each codec's figures on 1 Mi floats (about 40 ms on one core for the dozen codecs, two runs
// each), within `budget_ms`: a first pass on a quarter of the tensor gives every codec a figure
// quickly, and the whole tensor is measured only where it fits in the budget. No codec is started
// once the budget is spent; one left out (a budget too short even for the first pass) is absent
// from the result, so the plan prices it with nominal_codec_figures.
std::vector<CodecFigures> measure_codecs(double budget_ms);

// Figures for a codec the profile has none for (the probe off, or a profile cached before
// codecs were measured): conservative, so that compression wins on figures only where the wire
// is slow enough for it to win by far.
CodecFigures nominal_codec_figures(const std::string& codec);

}  // namespace tidegate
