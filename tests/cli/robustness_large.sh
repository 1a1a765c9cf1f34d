#!/bin/bash
# Robustness, large programs: a 200,000-instruction straight chain and a
# 100,000-deep call nesting (about 200,000 instructions) dump (text, proto,
# JSON), plan (`memory`) and run with the right values; no walk over
# instructions or computations recurses (a stack overflow would be SIGSEGV).
# Under a sanitizer (bigger frames, slower) the sizes are a tenth, still far past
# any recursion depth an 8 MiB stack allows.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 8000000  # 8 GB of address space
GEN="python3 $SRC/tests/cli/data/gen_module.py"
N=200000
is_sanitized && N=20000
export ROBUST_TIMEOUT=120

$GEN chain "$N" >"$WORK/chain.hlo"
$GEN chain 0 >"$WORK/copy.hlo"  # the same parameter x, returned as is
$GEN calls $((N / 2)) >"$WORK/calls.hlo"
$GEN reduces $((N / 3)) >"$WORK/reduces.hlo"

# Every path once: text -> proto -> text and JSON, plan from text and from
# proto, run.
robust "chain: dump as proto" 0 -- dump "$WORK/chain.hlo" --format=proto --out="$WORK/chain.pb"
robust "chain: proto back to text" 0 -- dump "$WORK/chain.pb" --out="$WORK/chain.back.hlo"
robust "chain: plans from proto" 0 -- memory "$WORK/chain.pb" &&
  expect_in "$WORK/out" "peak HBM" "chain: memory report"
robust "chain: runs" 0 -- run "$WORK/chain.hlo" --random-inputs --seed=3 &&
  cp "$WORK/out" "$WORK/chain.run"
robust "calls: dump as json" 0 -- dump "$WORK/calls.hlo" --format=json --out="$WORK/calls.json"
robust "calls: plans from json" 0 -- memory "$WORK/calls.json"
robust "calls: runs" 0 -- run "$WORK/calls.hlo" --random-inputs --seed=3 &&
  cp "$WORK/out" "$WORK/calls.run"
# Values: an even chain of negations returns x, the call nesting -x.
robust "identity reference" 0 -- run "$WORK/copy.hlo" --random-inputs --seed=3
want=$(grep -o 'hash=[0-9a-f]*' "$WORK/out")
got=$(grep -o 'hash=[0-9a-f]*' "$WORK/chain.run")
[[ -n $want && $want == "$got" ]] || fail "chain of $N negations: $got, want x's $want"
want_sum=$(grep -o 'sum=[-0-9.e+]*' "$WORK/out" | head -1 | cut -d= -f2)
got_sum=$(grep -o 'sum=[-0-9.e+]*' "$WORK/calls.run" | head -1 | cut -d= -f2)
python3 -c "import sys; a, b = float('$want_sum'), float('$got_sum'); sys.exit(0 if a == -b else 1)" ||
  fail "call nesting: sum $got_sum, want -($want_sum)"

# Many sibling reduces: planned in near-linear time (a quadratic sibling
# search took minutes at this size).
robust "many reduces plan" 0 -- memory "$WORK/reduces.hlo"
finish
