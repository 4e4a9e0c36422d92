#!/usr/bin/env python3
"""Summarises fault_detection.sh's raw lines ("signal transport phase run rank ms", one per
survivor) into a Markdown table of median and maximum per case, judged against issue 13's
targets under a 5 s timeout, and writes every figure to a JSON file."""
import json
import statistics
import sys

TARGET_MS = {"kill": 1000, "stop": 6000}


def main(raw_path, out_path, repeats):
    cases = {}
    with open(raw_path) as raw:
        for line in raw:
            if not line.strip():
                continue
            signal, transport, phase, run, rank, ms = line.split()
            cases.setdefault((signal, transport, phase), []).append(
                {"run": int(run), "rank": int(rank), "ms": int(ms)})
    print(f"survivors' detection of a lost rank: 4 ranks, TIDEGATE_TIMEOUT_MS=5000, "
          f"{repeats} runs per case, ms from the signal to the survivor's error")
    print("| signal | transport | phase | survivors judged | median | max | within target |")
    print("|---|---|---|---|---|---|---|")
    result = []
    for (signal, transport, phase), seen in cases.items():
        ms = [s["ms"] for s in seen]
        target = TARGET_MS[signal]
        within = sum(1 for m in ms if m <= target)
        print(f"| SIG{signal.upper()} | {transport} | {phase} | {len(ms)} | "
              f"{statistics.median(ms):.0f} ms | {max(ms)} ms | "
              f"{within}/{len(ms)} within {target / 1000:g} s |")
        result.append({"signal": signal, "transport": transport, "phase": phase,
                       "target_ms": target, "survivors": seen})
    with open(out_path, "w") as out:
        json.dump({"repeats": repeats, "ranks": 4, "timeout_ms": 5000, "cases": result}, out,
                  indent=1)
    print(f"written: {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
