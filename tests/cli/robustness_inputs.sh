#!/bin/bash
# Robustness, inputs: parameter names are never paths; only regular files
# are read (a FIFO, /dev/zero, a directory are rejected at once, never
# waited on or read without bound); .npy sizes are checked against the
# header before the data is read; chosen_ids outside [0, V) in a kernel's
# inputs are rejected naming the position.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
limit_memory 3000000
export ROBUST_TIMEOUT=20
M="$SRC/tests/cli/data/add_mul.hlo"

# A JSON module whose parameter x is named "../secret".
robust "dump json" 0 -- dump "$M" --format=json --out="$WORK/m.json"
sed 's/"name": "x"/"name": "..\/secret"/' "$WORK/m.json" >"$WORK/evil.json"
grep -q '"\.\./secret"' "$WORK/evil.json" || fail "could not rename the parameter"
mkdir -p "$WORK/in"
write_npy "$WORK/secret.npy" '<f4' '(2, 3)' 9 9 9 9 9 9       # outside in/: never read
write_npy "$WORK/in/y.npy" '<f4' '(2, 3)' 1 1 1 1 1 1
robust "parameter ../secret is not a path" 1 -- run "$WORK/evil.json" --inputs="$WORK/in" && {
  expect_in "$WORK/err" "in/_.._secret.npy: missing" "mapped file name"
  expect_in "$WORK/err" "_.._secret.npy (parameter ../secret)" "listed with its parameter name"
}
write_npy "$WORK/in/_.._secret.npy" '<f4' '(2, 3)' 2 2 2 2 2 2
robust "parameter ../secret read from in/" 0 -- run "$WORK/evil.json" --inputs="$WORK/in" &&
  expect_in "$WORK/out" "output total: f32[] sum=12 " "in/_.._secret.npy was read, not ../secret.npy"

# Not regular files.
mkdir -p "$WORK/in2"
cp "$WORK/in/y.npy" "$WORK/in2/y.npy"
mkfifo "$WORK/in2/x.npy"
robust "FIFO input" 1 -- run "$M" --inputs="$WORK/in2" &&
  expect_in "$WORK/err" "x.npy: is a FIFO, expected a regular file" "FIFO named"
rm "$WORK/in2/x.npy"
ln -s /dev/zero "$WORK/in2/x.npy"
robust "/dev/zero input" 1 -- run "$M" --inputs="$WORK/in2" &&
  expect_in "$WORK/err" "x.npy: is a character device" "device named"
rm "$WORK/in2/x.npy"
mkdir "$WORK/in2/x.npy"
robust "directory input" 1 -- run "$M" --inputs="$WORK/in2" &&
  expect_in "$WORK/err" "x.npy: is a directory" "directory named"
rmdir "$WORK/in2/x.npy"
robust "dump /dev/zero" 1 -- dump /dev/zero && expect_in "$WORK/err" "is a character device" \
  "dump rejects a device"
mkfifo "$WORK/m.fifo"
robust "dump a FIFO" 1 -- dump "$WORK/m.fifo" && expect_in "$WORK/err" "is a FIFO" "dump rejects a FIFO"
robust "dump a directory" 1 -- dump "$WORK/in2"

# Sizes against the header, before reading: a short file, and a header
# claiming 10^12 elements on a tiny file (nothing that large is allocated).
write_npy "$WORK/in2/x.npy" '<f4' '(2, 3)' 1 2 3 4 5 6
head -c -8 "$WORK/in2/x.npy" >"$WORK/in2/x.short" && mv "$WORK/in2/x.short" "$WORK/in2/x.npy"
robust "truncated npy" 1 -- run "$M" --inputs="$WORK/in2" &&
  expect_in "$WORK/err" "needs 24 data bytes but the file holds 16" "size checked against header"
write_npy "$WORK/in2/x.npy" '<f4' '(1000000, 1000000)' 1 2
robust "npy header claiming 4 TB" 1 -- run "$M" --inputs="$WORK/in2" &&
  expect_in "$WORK/err" "needs 4000000000000 data bytes but the file holds 8" "huge header refused"

# chosen_ids outside [0, V) in a kernel's inputs: rejected with the position.
K=(--kernel=grpo_tiled --batch=1 --seq=4 --vocab=16 --block-size=8 --on-policy)
mkdir -p "$WORK/k"
logits=()
for i in $(seq 64); do logits+=("0.$((i % 7))"); done
write_npy "$WORK/k/logits.npy" '<f4' '(1, 4, 16)' "${logits[@]}"
write_npy "$WORK/k/completion_mask.npy" '<f4' '(1, 4)' 1 1 1 1
write_npy "$WORK/k/advantages.npy" '<f4' '(1,)' 0.5
write_npy "$WORK/k/chosen_ids.npy" '<i4' '(1, 4)' 3 0 15 7
robust "valid ids" 0 -- run "${K[@]}" --inputs="$WORK/k"
for bad in 16 -1 2147483647; do
  write_npy "$WORK/k/chosen_ids.npy" '<i4' '(1, 4)' 3 0 "$bad" 7
  robust "chosen id $bad" 1 -- run "${K[@]}" --inputs="$WORK/k" &&
    expect_in "$WORK/err" "chosen_ids[0,2] = $bad is outside the vocabulary [0, 16)" \
      "run names the position of id $bad"
done
robust "compare with an id out of range" 1 -- compare "${K[@]}" --shard=vocab --mesh=2 \
  --inputs="$WORK/k" && expect_in "$WORK/err" "chosen_ids[0,2] = 2147483647" "compare checks ids"
# An input that is there but cannot be reached (a symlink loop) says so,
# not "missing".
mkdir "$WORK/loop"
ln -s y.npy "$WORK/loop/x.npy"
ln -s x.npy "$WORK/loop/y.npy"
robust "inputs in a symlink loop" 1 -- run "$M" --inputs="$WORK/loop" &&
  expect_in "$WORK/err" "loop/x.npy: cannot open: Too many levels of symbolic links" "loop named"
finish
