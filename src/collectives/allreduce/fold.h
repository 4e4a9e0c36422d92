// Folding a non-power-of-two world into a power of two, shared by recursive doubling and
// Rabenseifner. With P = pof2 + extra, the first 2*extra ranks pair up as (2i, 2i+1): the even
// rank hands its whole vector to the odd one, which combines them (the even, lower rank's
// value first) and joins the power-of-two phase as new rank i; the even rank sits it out and
// gets the finished result back at the end. Ranks from 2*extra on join as new rank r - extra.
// New ranks keep the order of real ranks, so "lower new rank first" is a canonical order.
#pragma once

namespace tidegate {

struct Fold {
  int pof2 = 1;        // largest power of two <= size
  int extra = 0;       // size - pof2
  int new_rank = -1;   // rank in the power-of-two phase; -1 for a rank that sits out
  int fold_peer = -1;  // partner of the fold/unfold exchange, -1 for none

  static Fold plan(int rank, int size) {
    Fold f;
    while (f.pof2 * 2 <= size) f.pof2 *= 2;
    f.extra = size - f.pof2;
    if (rank < 2 * f.extra) {
      const bool even = rank % 2 == 0;
      f.fold_peer = even ? rank + 1 : rank - 1;
      f.new_rank = even ? -1 : rank / 2;
    } else {
      f.new_rank = rank - f.extra;
    }
    return f;
  }

  bool sits_out() const { return new_rank < 0; }
  // The one that hands its data over (even rank of a folded pair).
  bool gives() const { return fold_peer >= 0 && sits_out(); }
  // The one that combines and later hands the result back (odd rank of a folded pair).
  bool takes() const { return fold_peer >= 0 && !sits_out(); }

  // Real rank of new rank `n`.
  int real_rank(int n) const { return n < extra ? 2 * n + 1 : n + extra; }

  // Steps of the power-of-two phase: log2(pof2).
  int steps() const {
    int s = 0;
    while ((1 << s) < pof2) ++s;
    return s;
  }
};

}  // namespace tidegate
