#!/usr/bin/env python3
"""Judges a soak log (./run.sh soak): every rank finished, no wrong value, no failed
collective, and resident memory, descriptors and threads flat after warm-up.

usage: summarise_soak.py LOG [--warmup-s 60]
Prints one summary per rank and exits 1 if any check fails. "Flat": after the warm-up, the
last sample's RSS is within 10% (or 16 MiB) of the first one's, and descriptors and threads
are unchanged."""
import re
import sys

SAMPLE = re.compile(r"soak-sample rank (\d+) t_s (\d+) ops (\d+) wrong (\d+) failed (\d+) "
                    r"rss_kb (\d+) fds (\d+) threads (\d+)")
DONE = re.compile(r"soak-done rank (\d+) ops (\d+) wrong (\d+) failed (\d+) seconds (\d+)")


def main():
    path = sys.argv[1]
    warmup = 60
    if "--warmup-s" in sys.argv:
        warmup = int(sys.argv[sys.argv.index("--warmup-s") + 1])
    samples, done = {}, {}
    with open(path, errors="replace") as log:
        for line in log:
            m = SAMPLE.search(line)
            if m:
                rank, t, ops, wrong, failed, rss, fds, threads = map(int, m.groups())
                samples.setdefault(rank, []).append((t, ops, wrong, failed, rss, fds, threads))
            m = DONE.search(line)
            if m:
                rank, ops, wrong, failed, seconds = map(int, m.groups())
                done[rank] = (ops, wrong, failed, seconds)
    ok = bool(done) and set(done) == set(samples)
    for rank in sorted(samples):
        rows = samples[rank]
        after = [r for r in rows if r[0] >= warmup] or rows[-1:]
        first, last = after[0], rows[-1]
        rss_growth = last[4] - first[4]
        flat = (rss_growth <= max(first[4] // 10, 16 * 1024) and last[5] == first[5]
                and last[6] == first[6])
        ops, wrong, failed, seconds = done.get(rank, (last[1], last[2], last[3], last[0]))
        rank_ok = rank in done and wrong == 0 and failed == 0 and flat
        ok = ok and rank_ok
        print(f"rank {rank}: {ops} ops in {seconds} s, {wrong} wrong, {failed} failed; "
              f"after {first[0]} s: rss {first[4]} -> {last[4]} KiB ({rss_growth:+d}), "
              f"fds {first[5]} -> {last[5]}, threads {first[6]} -> {last[6]}: "
              f"{'OK' if rank_ok else 'FAIL'}")
    total = sum(d[0] for d in done.values())
    print(f"{'PASS' if ok else 'FAIL'}: {len(done)} ranks finished, {total} checked ops in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
