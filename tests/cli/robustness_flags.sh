#!/bin/bash
# Robustness, flags and edges: every numeric flag of every subcommand (read
# from its --help) given huge, negative, overflowing, empty and non-finite
# values exits 0, 1 or 2 with a message, never a signal or a hang; bench
# bounds its flags and fails when a requested side fails; float kernel
# parameters are checked against f32; --mesh needs --shard; collectives
# naming devices the module does not have fail verification; checksums of
# +inf and -inf; control characters in names are escaped when printed.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 3000000
export ROBUST_TIMEOUT=30
M="$SRC/tests/cli/data/add_mul.hlo"

# A small, quick invocation of each subcommand that every flag is added to.
declare -A BASE=(
  [dump]="$M --out=$WORK/d.txt"
  [run]="--kernel=grpo_tiled --batch=1 --seq=2 --vocab=8 --block-size=4 --random-inputs"
  [compare]="--kernel=grpo_tiled --batch=2 --seq=2 --vocab=8 --block-size=4 --shard=batch --mesh=2"
  [memory]="--kernel=grpo_tiled --batch=1 --seq=2 --vocab=8"
  [bench]="--quick --cases=entropy_tiled --dtypes=f32 --reps=1 --warmup=0 --no-floor --xla-python= --seq=4 --vocab=64 --bandwidth-mib=1"
)
# BASE of CMD without the flag FLAG (a flag may be given once).
base_without() {
  local a out=()
  for a in ${BASE[$1]}; do [[ $a == "$2="* ]] || out+=("$a"); done
  echo "${out[@]}"
}
INT_VALUES=(-1 0 9223372036854775807 9223372036854775808 -9223372036854775809 "" abc 1e3)
NUM_VALUES=(-1 0 1e-300 1e300 1e39 nan inf -inf "" abc)
sweeps=0
for cmd in dump run compare memory bench; do
  "$TPUOFF" "$cmd" --help >"$WORK/help" 2>&1 || fail "$cmd --help failed"
  ints=$(grep -oE -- '--[a-z0-9-]+=INT' "$WORK/help" | sed 's/=INT//' | sort -u)
  nums=$(grep -oE -- '--[a-z0-9-]+=NUM' "$WORK/help" | sed 's/=NUM//' | sort -u)
  [[ -n $ints ]] || fail "$cmd: no INT flags found in --help"
  for flag in $ints $nums; do
    values=("${INT_VALUES[@]}")
    [[ $nums == *"$flag"* ]] && values=("${NUM_VALUES[@]}")
    for v in "${values[@]}"; do
      # shellcheck disable=SC2046
      robust "$cmd $flag=$v" 0 1 2 -- "$cmd" $(base_without "$cmd" "$flag") "$flag=$v"
      sweeps=$((sweeps + 1))
    done
  done
  for s in --inputs= --outputs= --trace= --out= --json= --cases= --dtypes= --kernel=; do
    grep -q -- "${s%=}=" "$WORK/help" || continue
    # shellcheck disable=SC2046
    robust "$cmd $s(empty)" 0 1 2 -- "$cmd" $(base_without "$cmd" "${s%=}") "$s"
  done
done
echo "numeric flag sweep: $sweeps invocations"

# bench: bounded flags, and a requested side that fails fails the bench.
robust "bench --threads=100000" 2 -- bench --quick --threads=100000
robust "bench --bandwidth-mib=9223372036854775807" 2 -- bench --quick \
  --bandwidth-mib=9223372036854775807
robust "bench --mesh=100000" 2 -- bench --quick --mesh=100000
robust "bench --xla-python=/bin/false" 1 -- bench --quick --cases=entropy_tiled --dtypes=f32 \
  --reps=1 --warmup=0 --no-floor --xla-python=/bin/false \
  --xla-script="$SRC/tools/xla_check/bench_xla.py" --work-dir="$WORK/bench"
# Float parameters as the kernels use them: f32.
robust "--temperature=1e-300" 2 -- run --kernel=grpo_tiled --batch=1 --seq=2 --vocab=8 \
  --random-inputs --temperature=1e-300 &&
  expect_in "$WORK/err" "below the smallest normal f32" "temperature underflow named"
robust "--beta=1e39" 2 -- dump --kernel=grpo_reference --beta=1e39 &&
  expect_in "$WORK/err" "overflows f32" "beta overflow named"
# eps_low = 1 is allowed (clips below at 0, TRL's cispo cap); just above 1
# is refused even where f32 rounds it to 1.
robust "--eps-low=1.00000000001" 2 -- dump --kernel=grpo_reference --eps-low=1.00000000001 &&
  expect_in "$WORK/err" "eps_low must be in [0, 1]" "eps_low range named"
robust "--eps-low=1.0000001" 2 -- dump --kernel=grpo_reference --eps-low=1.0000001
robust "--delta=1.00000000001" 2 -- dump --kernel=grpo_reference --delta=1.00000000001
# --mesh without --shard.
for cmd in dump run memory; do
  robust "$cmd --mesh without --shard" 2 -- "$cmd" --kernel=grpo_tiled --mesh=4 &&
    expect_in "$WORK/err" "--mesh only applies with --shard" "$cmd: --mesh usage error"
done
# A module without parameters runs without --inputs.
cat >"$WORK/noparams.hlo" <<'EOF'
HloModule noparams
ENTRY e { c = f32[3] constant({1, 2, 3}) ROOT n = f32[3] negate(c) }
EOF
robust "no parameters, no --inputs" 0 -- run "$WORK/noparams.hlo" &&
  expect_in "$WORK/out" "sum=-6 " "no-parameter module ran"
# Replica groups naming devices the module does not have.
cat >"$WORK/groups.hlo" <<'EOF'
HloModule groups, num_partitions=4
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=add }
EOF
for args in "run --random-inputs" memory dump; do
  # shellcheck disable=SC2086
  robust "$args: replica group names device 4 of 4" 1 -- $args "$WORK/groups.hlo" &&
    expect_in "$WORK/err" "instruction r: replica_groups name device 4 but the module has 4 devices" \
      "$args: verifier names the instruction"
done
robust "--collective-timeout listed" 0 -- run --help &&
  expect_in "$WORK/out" "--collective-timeout" "collective timeout flag"
# Checksums of +inf and -inf, no "-nan".
cat >"$WORK/inf.hlo" <<'EOF'
HloModule infs
ENTRY e { c = f32[3] constant({inf, -inf, 1}) ROOT n = f32[3] copy(c) }
EOF
robust "checksum with +inf and -inf" 0 -- run "$WORK/inf.hlo" && {
  expect_in "$WORK/out" "sum=1 abs_sum=1 hash=" "finite sums"
  expect_in "$WORK/out" "+inf=1 -inf=1" "infinities counted"
  grep -q "nan" "$WORK/out" && fail "checksum prints nan: $(cat "$WORK/out")"
}
# Control characters in names are escaped when printed.
robust "json of add_mul" 0 -- dump "$M" --format=json --out="$WORK/m.json"
sed 's/"name": "add_mul"/"name": "evil\\u001b[31m\\u0007name"/' "$WORK/m.json" >"$WORK/ctl.json"
robust "control characters in the module name" 0 -- run "$WORK/ctl.json" --random-inputs && {
  expect_in "$WORK/out" 'module evil\x1b[31m\x07name' "name escaped"
  grep -q $'\x1b' "$WORK/out" "$WORK/err" && fail "a raw ESC byte was printed"
}
sed 's/"name": "x"/"name": "x\\u001b]0;pwned\\u0007"/' "$WORK/m.json" >"$WORK/ctl2.json"
robust "control characters in an error" 1 -- run "$WORK/ctl2.json" --inputs="$WORK" && {
  grep -q $'\x1b' "$WORK/err" && fail "a raw ESC byte was printed in an error"
  expect_in "$WORK/err" '\x1b]0;pwned\x07' "escaped in the error"
}
finish
