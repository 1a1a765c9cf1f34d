#!/bin/bash
# Robustness, endless and long loops: --timeout and --max-loop-iterations
# stop a loop with a message naming it (instruction and computation), also
# on a mesh where the other devices wait at a collective; host memory stays
# flat across iterations; collectives no device can complete fail at once;
# 2048 devices run on a bounded pool.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 4000000

cat >"$WORK/forever.hlo" <<'EOF'
HloModule forever
cond { c = f32[1024] parameter(0) ROOT t = pred[] constant(true) }
body { b = f32[1024] parameter(0) ROOT n = f32[1024] negate(b) }
ENTRY e { x = f32[1024] parameter(0) ROOT spin = f32[1024] while(x), condition=cond, body=body }
EOF
robust "endless loop, --timeout" 1 -- run "$WORK/forever.hlo" --random-inputs --timeout=1 && {
  expect_in "$WORK/err" "time limit of 1 s" "timeout message"
  expect_in "$WORK/err" "while loop %spin (computation e)" "timeout names the loop"
}
robust "endless loop, --max-loop-iterations" 1 -- run "$WORK/forever.hlo" --random-inputs \
  --max-loop-iterations=500 &&
  expect_in "$WORK/err" "while loop %spin (computation e) did not finish within the limit of 500 iterations" \
    "iteration limit message"

# Host memory flat across iterations: RSS after ~1 s and after ~3 s. Under
# AddressSanitizer freed blocks sit in a quarantine (256 MB by default) before
# reuse, so RSS would climb there by design; the quarantine is switched off
# for this one process so the check measures the runtime, not ASan.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0" \
  "$TPUOFF" run "$WORK/forever.hlo" --random-inputs --timeout=4 >/dev/null 2>&1 &
pid=$!
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
sleep 1
early=$(rss)
sleep 2
late=$(rss)
wait "$pid"
rc=$?
[[ $rc -eq 1 ]] || fail "flat-memory loop: exit $rc, want 1 (timeout)"
if [[ -n $early && -n $late ]]; then
  echo "endless loop RSS: ${early} kB after 1 s, ${late} kB after 3 s"
  (( late - early < 8192 )) || fail "host memory grows across iterations: $early kB -> $late kB"
else
  fail "could not sample the loop's RSS"
fi

# A finite loop of a million iterations finishes with the right count (~1 s
# in a release build, ~11 s of CPU under ASan: the hang guard is generous so a
# loaded machine does not fail it).
cat >"$WORK/count.hlo" <<'EOF'
HloModule count
cond { c = s64[] parameter(0) lim = s64[] constant(1000000) ROOT lt = pred[] compare(c, lim), direction=LT }
body { b = s64[] parameter(0) one = s64[] constant(1) ROOT n = s64[] add(b, one) }
ENTRY e { z = s64[] constant(0) ROOT w = s64[] while(z), condition=cond, body=body }
EOF
ROBUST_TIMEOUT=600 robust "1e6 iterations, no parameters, no --inputs" 0 -- run "$WORK/count.hlo" &&
  expect_in "$WORK/out" "output output_0: s64[] sum=1000000 " "loop count"

# Device 1 spins while device 0 waits at the all-reduce after it.
cat >"$WORK/mesh_spin.hlo" <<'EOF'
HloModule mesh_spin, num_partitions=2
add { aa = f32[] parameter(0) ab = f32[] parameter(1) ROOT as = f32[] add(aa, ab) }
cond { c = s64[] parameter(0) lim = s64[] constant(100000000000) ROOT lt = pred[] compare(c, lim), direction=LT }
body { b = s64[] parameter(0) one = s64[] constant(1) ROOT n = s64[] add(b, one) }
quick { q = s64[] parameter(0) ROOT qr = s64[] copy(q) }
spin { s = s64[] parameter(0) ROOT spinning = s64[] while(s), condition=cond, body=body }
ENTRY e { x = f32[2] parameter(0) pid = u32[] partition-id() zero = u32[] constant(0)
  p = pred[] compare(pid, zero), direction=EQ
  z = s64[] constant(0)
  spun = s64[] conditional(p, z, z), true_computation=quick, false_computation=spin
  cv = f32[] convert(spun)
  bc = f32[2] broadcast(cv), dimensions={}
  y = f32[2] add(x, bc)
  ROOT r = f32[2] all-reduce(y), channel_id=1, replica_groups={{0,1}}, to_apply=add }
EOF
robust "mesh: --timeout stops the spinning device" 1 -- run "$WORK/mesh_spin.hlo" \
  --random-inputs --timeout=1 --collective-timeout=600 &&
  expect_in "$WORK/err" "while loop %spinning (computation spin)" "mesh timeout names the loop"
robust "mesh: --collective-timeout" 1 -- run "$WORK/mesh_spin.hlo" --random-inputs \
  --collective-timeout=0.5 && {
  expect_in "$WORK/err" "collective %r" "collective timeout names the collective"
  expect_in "$WORK/err" "did not complete in 0.5s: devices {0} are waiting for devices {1}" \
    "collective timeout names the devices"
}
robust "mesh: --max-loop-iterations" 1 -- run "$WORK/mesh_spin.hlo" --random-inputs \
  --max-loop-iterations=1000 &&
  expect_in "$WORK/err" "device 1: while loop %spinning (computation spin) did not finish" \
    "mesh iteration limit names device and loop"

# Only device 0 reaches the all-reduce: it can never complete.
cat >"$WORK/mismatch.hlo" <<'EOF'
HloModule mismatch, num_partitions=2
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
yes { ya = f32[2] parameter(0) ROOT yr = f32[2] all-reduce(ya), channel_id=1, replica_groups={{0,1}}, to_apply=add }
no { na = f32[2] parameter(0) ROOT nr = f32[2] negate(na) }
ENTRY e { x = f32[2] parameter(0) pid = u32[] partition-id() zero = u32[] constant(0)
  p = pred[] compare(pid, zero), direction=EQ
  ROOT c = f32[2] conditional(p, x, x), true_computation=yes, false_computation=no }
EOF
ROBUST_TIMEOUT=20 robust "unreachable collective fails at once" 1 -- run "$WORK/mismatch.hlo" \
  --random-inputs && expect_in "$WORK/err" "can never complete: devices {0} are waiting for devices {1}" \
  "unreachable collective message"

# 2048 devices, each all-reducing its partition id: sum 0..2047 everywhere.
cat >"$WORK/mesh2048.hlo" <<'EOF'
HloModule mesh2048, num_partitions=2048
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { pid = u32[] partition-id() c = f32[] convert(pid) bc = f32[2] broadcast(c), dimensions={}
  ROOT ar = f32[2] all-reduce(bc), channel_id=1, to_apply=add }
EOF
robust "2048 devices on a bounded pool" 0 -- run "$WORK/mesh2048.hlo" --threads=2 && {
  n=$(grep -c "sum=4192256 " "$WORK/out")
  [[ $n -eq 2048 ]] || fail "2048 devices: $n outputs hold 2*(0+...+2047), want 2048"
}
finish
