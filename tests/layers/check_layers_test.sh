#!/usr/bin/env bash
# The layer check (cmake/check_layers.py) against the real tree and against deliberate
# violations on temporary files, which must be refused with a message naming the file, the line
# and both layers.
#   check_layers_test.sh PYTHON SOURCE_DIR LAYER_TABLE
set -euo pipefail
python="$1"; root="$2"; table="$3"
check="$root/cmake/check_layers.py"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. The tree as it is respects the layers.
"$python" "$check" --table "$table" --root "$root" > "$scratch/clean.txt" ||
  { cat "$scratch/clean.txt"; fail "the source tree violates the layers"; }
grep -q "respect the layers" "$scratch/clean.txt" || fail "no verdict printed"

# 2. base (layer 0) including the communicator (api, layer 4): refused.
printf '// probe\n#include "base/status.h"\n#include "api/communicator.h"\n' > "$scratch/upward.h"
if "$python" "$check" --table "$table" --root "$root" \
     --extra "$scratch/upward.h=src/base/zz_upward_probe.h" > "$scratch/upward.txt"; then
  fail "an upward include from base into api was accepted"
fi
grep -q 'src/base/zz_upward_probe.h:3: includes "api/communicator.h" from src/api (layer 4), but src/base (layer 0)' \
  "$scratch/upward.txt" || { cat "$scratch/upward.txt"; fail "the refusal does not name file, line and layers"; }
grep -q "zz_upward_probe.h:2" "$scratch/upward.txt" && fail "a legal include (base/status.h) was refused"

# 3. A codec including a collective (same layer, not a declared use): refused as well.
printf '#include "collectives/task.h"\n' > "$scratch/sideways.cc"
if "$python" "$check" --table "$table" --root "$root" \
     --extra "$scratch/sideways.cc=src/compress/zz_sideways_probe.cc" > "$scratch/sideways.txt"; then
  fail "a codec including a collective was accepted"
fi
grep -q 'zz_sideways_probe.cc:1: includes "collectives/task.h"' "$scratch/sideways.txt" ||
  { cat "$scratch/sideways.txt"; fail "the sideways refusal is not named"; }

# 4. A collective including a codec (a declared use inside its layer): accepted.
printf '#include "compress/codec.h"\n' > "$scratch/declared.cc"
"$python" "$check" --table "$table" --root "$root" \
  --extra "$scratch/declared.cc=src/collectives/zz_declared_probe.cc" > "$scratch/declared.txt" ||
  { cat "$scratch/declared.txt"; fail "a declared use (collectives -> compress) was refused"; }

# 5. A declaration that points upwards (a component using a higher layer) is refused too.
cp "$table" "$scratch/layers.txt"
sed -i -E 's/^(tidegate_base\|[^|]*\|0\|)/\1tidegate_api/' "$scratch/layers.txt"
if "$python" "$check" --table "$scratch/layers.txt" --root "$root" > "$scratch/declaration.txt"; then
  fail "a base component that uses api was accepted"
fi
grep -q "src/base (layer 0) uses src/api (layer 4)" "$scratch/declaration.txt" ||
  { cat "$scratch/declaration.txt"; fail "the upward declaration is not named"; }
echo "layer check: clean tree accepted; upward, sideways and declared-upward uses refused"
