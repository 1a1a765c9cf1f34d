#!/bin/bash
# Robustness, host memory: work the host cannot hold is refused before
# anything is allocated, with a message naming what is needed and what the
# host has (MemAvailable, `ulimit -v`); the proto/JSON importers reject
# arrays the text parser rejects; nothing ends in SIGABRT.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 3000000  # 3 GB of address space for every command below

cat >"$WORK/huge.hlo" <<'EOF'
HloModule huge
ENTRY e { x = f32[30000000000] parameter(0) ROOT n = f32[30000000000] negate(x) }
EOF
robust "120 GB parameter, --random-inputs" 1 -- run "$WORK/huge.hlo" --random-inputs && {
  expect_in "$WORK/err" "not enough host memory: this run needs about" "need named"
  expect_in "$WORK/err" "but the host has" "available named"
}
for cmd in run compare; do
  extra=()
  [[ $cmd == compare ]] && extra=(--shard=batch --mesh=2) || extra=(--random-inputs)
  robust "$cmd: 64 GB of logits" 1 -- "$cmd" --kernel=grpo_tiled --batch=1000 --seq=16 \
    --vocab=1000000 "${extra[@]}" &&
    expect_in "$WORK/err" "not enough host memory" "$cmd: refused up front"
done
# Under the address-space limit: 2 GB of inputs and as much again for the
# result do not fit in the 3 GB `ulimit -v` leaves.
if ! is_sanitized; then
  cat >"$WORK/big.hlo" <<'EOF'
HloModule big
ENTRY e { x = f32[500000000] parameter(0) ROOT n = f32[500000000] negate(x) }
EOF
  robust "ulimit -v named" 1 -- run "$WORK/big.hlo" --random-inputs &&
    expect_in "$WORK/err" "ulimit -v leaves" "address-space limit named"
fi

# The importers check array sizes like the text parser does.
cat >"$WORK/small.hlo" <<'EOF'
HloModule small
ENTRY e { x = f32[8] parameter(0) ROOT n = f32[8] negate(x) }
EOF
robust "json of a small module" 0 -- dump "$WORK/small.hlo" --format=json --out="$WORK/small.json"
sed 's/"8"/"999999999999"/g' "$WORK/small.json" >"$WORK/bigdim.json"
grep -q 999999999999 "$WORK/bigdim.json" || fail "could not make the JSON module with a huge dimension"
for cmd in dump memory run; do
  robust "json dimension 999999999999: $cmd" 1 -- "$cmd" "$WORK/bigdim.json" &&
    expect_in "$WORK/err" "the limit of" "$cmd: json size limit named"
done
robust "json dimension 999999999999: run --random-inputs" 1 -- run "$WORK/bigdim.json" --random-inputs

# bench: shapes it cannot hold are refused before its inputs exist.
robust "bench: absurd shape" 2 -- bench --batch=100000 --seq=100000 --vocab=1000000 \
  --cases=grpo_tiled --dtypes=f32 && expect_in "$WORK/err" "too large" "bench shape bound"
robust "bench: 400 GB of logits" 1 -- bench --batch=1000 --seq=1000 --vocab=100000 \
  --cases=grpo_tiled --dtypes=f32 --no-floor && expect_in "$WORK/err" "not enough host memory" \
  "bench refuses up front"
robust "bench: huge bandwidth buffer" 2 -- bench --bandwidth-mib=100000000 --quick
robust "bench: bandwidth buffer past the host" 1 -- bench --bandwidth-mib=1000000 --quick &&
  expect_in "$WORK/err" "not enough host memory" "bench bandwidth buffer refused"
finish
