#!/bin/bash
# Robustness, outputs: a failed run never deletes or replaces anything the
# user had; --outputs is published all or nothing (a kill -9 at any point
# of the commit leaves the old output or the new one, and the next run
# cleans up what the killed one left); staging happens inside DIR when only
# DIR is writable; messages name the user's path; --out/--trace write
# through devices and FIFOs and keep symlinks; the trace is written only on
# success; nothing is written outside the output location; no output
# replaces an input; --overwrite trusts only manifests tpuoff could have
# written; stdout write failures (full disk, closed pipe) are exit 1.
TPUOFF=$(realpath "$1") SRC=$(realpath "$2")
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 3000000
export ROBUST_TIMEOUT=30
M="$SRC/tests/cli/data/add_mul.hlo"
cd "$WORK" || exit 1

# The user's files in the output directory survive a refused run.
mkdir user_out
echo "user data" >user_out/a.npy
mkdir user_out/b.npy
robust "non-empty --outputs refused" 1 -- run "$M" --random-inputs --outputs=user_out && {
  expect_in "$WORK/err" "user_out: is not empty" "names the user's directory"
  grep -q "tpuoff-staging" "$WORK/err" && fail "message names a staging path: $(cat "$WORK/err")"
}
[[ $(cat user_out/a.npy) == "user data" && -d user_out/b.npy ]] || fail "the user's user_out/a.npy or user_out/b.npy changed"
robust "--overwrite of a non-output refused" 1 -- run "$M" --random-inputs --outputs=user_out --overwrite
[[ $(cat user_out/a.npy) == "user data" && -d user_out/b.npy ]] || fail "--overwrite touched the user's files"

# A failing run (out of simulated HBM) leaves the trace and outputs alone.
echo "user trace" >trace.json
robust "failed run" 1 -- run "$M" --random-inputs --hbm-gib=0.00000001 --outputs=new \
  --trace=trace.json
[[ $(cat trace.json) == "user trace" ]] || fail "a failed run replaced trace.json"
[[ -e new ]] && fail "a failed run created its output directory"
# A good run replaces the trace; a symlinked trace stays a symlink.
mkdir traces
ln -s traces/real.json link.json
robust "trace through a symlink" 0 -- run "$M" --random-inputs --trace=link.json
[[ -L link.json ]] || fail "--trace replaced the symlink"
grep -q traceEvents traces/real.json || fail "the symlink's target holds no trace"
before=$(ls -A "$WORK" | sort | tr '\n' ' ')
robust "new output directory" 0 -- run "$M" --random-inputs --seed=1 --outputs=res
after=$(ls -A "$WORK" | sort | tr '\n' ' ')
[[ $after == "$(echo "$before res" | tr ' ' '\n' | grep . | sort | tr '\n' ' ')" ]] ||
  fail "something besides res/ appeared: before [$before] after [$after]"
[[ -f res/manifest.json && -f res/prod.npy && -f res/total.npy ]] || fail "res/ incomplete"
no_leftovers "$WORK" "after a good run"

# Devices and FIFOs are written through, never replaced.
robust "--out=/dev/stdout" 0 -- dump "$M" --out=/dev/stdout &&
  expect_in "$WORK/out" "HloModule add_mul" "written through /dev/stdout"
if [[ $(id -u) -eq 0 ]] && mknod "$WORK/null" c 1 3 2>/dev/null; then
  dev="$WORK/null"  # a char device of our own: a regression cannot hurt /dev/null
else
  dev=/dev/null
fi
robust "--out to a character device" 0 -- dump "$M" --out="$dev"
[[ -c $dev ]] || fail "--out replaced the character device $dev"
mkfifo pipe
timeout 20 cat pipe >from_pipe &
reader=$!
robust "--out to a FIFO" 0 -- dump "$M" --out=pipe
wait "$reader"
[[ -p pipe ]] || fail "--out replaced the FIFO"
grep -q "HloModule add_mul" from_pipe || fail "nothing came through the FIFO"

# kill -9 during a commit: the old output or the new one, never a mix; the
# next run removes what the killed one left behind.
signature() { (cd "$1" && cat manifest.json ./*.npy | md5sum); }
kill_commit() {  # K ARGS...: run with the kill hook, expect SIGKILL
  local k=$1
  shift
  TPUOFF_TEST_KILL_IN_COMMIT=$k timeout 30 "$TPUOFF" "$@" >/dev/null 2>&1
  local rc=$?
  [[ $rc -eq 137 ]] || fail "kill hook $k: exit $rc, want 137 (tpuoff $*)"
}
kill_commit 1 run "$M" --random-inputs --seed=2 --outputs=fresh
[[ -e fresh ]] && fail "killed before publishing, yet fresh/ exists"
robust "next run after a kill" 0 -- run "$M" --random-inputs --seed=2 --outputs=fresh
no_leftovers "$WORK" "stale staging removed by the next run"
old=$(signature res)
kill_commit 1 run "$M" --random-inputs --seed=7 --outputs=res --overwrite
[[ $(signature res) == "$old" ]] || fail "killed before the swap, yet res/ changed"
kill_commit 3 run "$M" --random-inputs --seed=7 --outputs=res --overwrite
new=$(signature res)
[[ $new != "$old" ]] || fail "killed after the swap, yet res/ holds the old output"
robust "new output, reference" 0 -- run "$M" --random-inputs --seed=7 --outputs=ref
[[ $new == "$(signature ref)" ]] || fail "killed after the swap: res/ is not the complete new output"
robust "next run cleans the old output" 0 -- run "$M" --random-inputs --seed=8 --outputs=res --overwrite
no_leftovers "$WORK" "old output removed"

# Only the output directory is writable: staging happens inside it (as an
# unprivileged user, since root ignores permissions).
as_user=()
USER_TPUOFF=$TPUOFF
if [[ $(id -u) -eq 0 ]]; then
  command -v setpriv >/dev/null || { fail "setpriv (util-linux) needed to test as a user"; finish; }
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  # The binary and module where that user can reach them.
  cp "$TPUOFF" "$WORK/tpuoff" && chmod 755 "$WORK/tpuoff" && USER_TPUOFF="$WORK/tpuoff"
  cp "$M" "$WORK/m.hlo" && chmod 644 "$WORK/m.hlo" && M="$WORK/m.hlo"
fi
mkdir -p locked/out
chmod 755 "$WORK"
chmod 777 locked/out
chmod 555 locked
user_run() { timeout 30 "${as_user[@]}" "$USER_TPUOFF" "$@" >"$WORK/out" 2>"$WORK/err"; }
user_run run "$M" --random-inputs --outputs=locked/out
rc=$?
[[ $rc -eq 0 ]] || fail "only DIR writable: exit $rc: $(cat "$WORK/err")"
[[ -f locked/out/manifest.json && -f locked/out/prod.npy ]] || fail "only DIR writable: no output"
no_leftovers locked/out "staging inside DIR removed"
user_run run "$M" --random-inputs --outputs=locked/out
[[ $? -eq 1 ]] || fail "only DIR writable, not empty: want exit 1"
grep -q "locked/out: is not empty" "$WORK/err" || fail "message does not name locked/out: $(cat "$WORK/err")"
grep -q tpuoff-staging "$WORK/err" && fail "message names a staging path: $(cat "$WORK/err")"
user_run run "$M" --random-inputs --outputs=locked/new
[[ $? -eq 1 ]] && grep -q "locked/new: cannot create it" "$WORK/err" ||
  fail "unwritable parent, new DIR: $(cat "$WORK/err")"
# Killed while moving files in one by one: the next run takes them back.
chmod 777 locked && rm -rf locked/out && mkdir locked/out && chmod 777 locked/out && chmod 555 locked
TPUOFF_TEST_KILL_IN_COMMIT=2 timeout 30 "${as_user[@]}" "$USER_TPUOFF" run "$M" --random-inputs \
  --outputs=locked/out >/dev/null 2>&1
[[ $? -eq 137 ]] || fail "kill hook inside DIR did not fire"
[[ -e locked/out/manifest.json ]] && fail "killed mid-move, yet the manifest is there"
user_run run "$M" --random-inputs --outputs=locked/out
[[ $? -eq 0 && -f locked/out/manifest.json ]] || fail "after a kill mid-move: $(cat "$WORK/err")"
no_leftovers locked/out "killed staging inside DIR removed"
chmod 755 locked

# An output never replaces an input: --trace onto the module or an input
# .npy (through a symlink too), dump --out onto its module; the inputs stay.
mkdir inputs_dir
cp "$M" own.hlo
ln -s own.hlo own_link.hlo
write_npy inputs_dir/x.npy '<f4' '(2, 3)' 1 2 3 4 5 6
write_npy inputs_dir/y.npy '<f4' '(2, 3)' 1 1 1 1 1 1
sum_before=$(cat own.hlo inputs_dir/*.npy | md5sum)
robust "--trace onto the module" 1 -- run own.hlo --random-inputs --trace=own.hlo &&
  expect_in "$WORK/err" "--trace=own.hlo: is the input own.hlo" "names the module"
robust "--trace onto an input .npy" 1 -- run own_link.hlo --inputs=inputs_dir \
  --trace=inputs_dir/y.npy &&
  expect_in "$WORK/err" "is the input inputs_dir/y.npy" "names the input"
robust "dump --out onto its module (via a symlink)" 1 -- dump own_link.hlo --out=own.hlo &&
  expect_in "$WORK/err" "--out=own.hlo: is the input own_link.hlo" "names the module"
[[ $(cat own.hlo inputs_dir/*.npy | md5sum) == "$sum_before" ]] || fail "an input was replaced"
robust "--trace beside the inputs" 0 -- run own.hlo --inputs=inputs_dir \
  --trace=inputs_dir/trace.json
# A manifest listing a file tpuoff never writes (not <name>.npy): --overwrite
# deletes nothing.
mkdir forged
echo "user notes" >forged/notes.txt
echo '{"outputs": [{"name": "n", "file": "notes.txt"}]}' >forged/manifest.json
robust "--overwrite with a forged manifest" 1 -- run "$M" --random-inputs --outputs=forged \
  --overwrite && expect_in "$WORK/err" "its manifest.json lists 'notes.txt'" "names the file"
[[ $(cat forged/notes.txt) == "user notes" ]] || fail "--overwrite deleted the user's notes.txt"

# stdout that cannot be written: help on a full disk and a closed pipe are
# failures (exit 1 naming <stdout>), never exit 0 or SIGPIPE.
for args in "--help" "run --help" "help memory"; do
  # shellcheck disable=SC2086
  timeout 30 "$TPUOFF" $args >/dev/full 2>"$WORK/err"
  code=$?
  [[ $code -eq 1 ]] || fail "tpuoff $args >/dev/full: exit $code, want 1"
  expect_in "$WORK/err" "<stdout>: write failed" "tpuoff $args >/dev/full"
done
# Cleaning what killed runs left beside DIR removes only what tpuoff writes:
# a user's directory that merely has a staging name keeps its files (before,
# every regular file in it was deleted), while a real leftover (arrays and a
# manifest) goes.
mkdir -p .keep.tpuoff-staging-mine .keep.tpuoff-staging-killed
echo "user thesis" >.keep.tpuoff-staging-mine/thesis.txt
echo "x" >.keep.tpuoff-staging-mine/a.npy
echo "x" >.keep.tpuoff-staging-killed/a.npy
echo "{}" >.keep.tpuoff-staging-killed/manifest.json
robust "run beside a user directory named like staging" 0 -- run "$M" --random-inputs --outputs=keep
[[ $(cat .keep.tpuoff-staging-mine/thesis.txt 2>/dev/null) == "user thesis" &&
   -f .keep.tpuoff-staging-mine/a.npy ]] || fail "the user's .keep.tpuoff-staging-mine lost files"
[[ -e .keep.tpuoff-staging-killed ]] && fail "a killed run's staging directory was left"
# A run that fails at its last steps publishes nothing: a trace written
# through /dev/full or a full stdout fail before the outputs directory is
# renamed into place (before, it was there and the run exited 1); --trace
# inside --outputs is a usage error (it could never be written there).
robust "trace to /dev/full" 1 -- run "$M" --random-inputs --outputs=late_a --trace=/dev/full
[[ -e late_a ]] && fail "a run whose trace failed published its outputs"
timeout 30 "$TPUOFF" run "$M" --random-inputs --outputs=late_b --trace=late_b.json >/dev/full 2>"$WORK/err"
code=$?
[[ $code -eq 1 ]] || fail "stdout to /dev/full: exit $code, want 1"
[[ -e late_b || -e late_b.json ]] && fail "a run whose report failed wrote its files"
mkdir late_c
robust "trace inside outputs" 2 -- run "$M" --random-inputs --outputs=late_c --trace=late_c/t.json &&
  expect_in "$WORK/err" "is --outputs=late_c or inside it" "trace inside outputs message"
robust "trace is outputs" 2 -- run "$M" --random-inputs --outputs=late_d/ --trace=late_d
# --overwrite reads back the manifests tpuoff writes, also large ones (11000
# outputs: 1.07 MB; refused as "not one tpuoff wrote" above 1 MiB before).
python3 -c '
n = 11000
t = ", ".join(["f32[]"] * n)
print("HloModule many\nENTRY %main () -> (" + t + ") {\n  %c = f32[] constant(1)\n"
      "  ROOT %t = (" + t + ") tuple(" + ", ".join(["%c"] * n) + ")\n}")' >many.hlo
robust "11000 outputs" 0 -- run many.hlo --outputs=many_out &&
  robust "11000 outputs again, --overwrite" 0 -- run many.hlo --outputs=many_out --overwrite
# (a module of 20000 instructions: ~1 MB of text, far beyond a pipe's buffer)
python3 -c '
n = 20000
print("HloModule wide\nENTRY %main (p: f32[4]) -> f32[4] {\n  %a0 = f32[4] parameter(0)")
for i in range(1, n):
    print(f"  %a{i} = f32[4] add(%a{i - 1}, %a0)")
print(f"  ROOT %r = f32[4] negate(%a{n - 1})\n}}")' >wide.hlo
timeout 60 "$TPUOFF" dump wide.hlo 2>"$WORK/err" | head -c 1 >/dev/null
code=${PIPESTATUS[0]}
[[ $code -eq 1 ]] || fail "dump into a closed pipe: exit $code, want 1 (141 is SIGPIPE)"
expect_in "$WORK/err" "<stdout>: write failed: Broken pipe" "dump into a closed pipe"
finish
