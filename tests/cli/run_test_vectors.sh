#!/bin/bash
# End to end through the CLI: every GRPO test vector of a vector folder
# (default tests/testdata/grpo; ctest also runs ../shared/testdata/grpo when it
# exists; inputs written by numpy) is run with `tpuoff run --kernel=... --inputs=`
# for the reference and the tiled kernel, the fused LM-head kernel on the
# sibling folder CASES_DIR_fused (grpo_fused), and every output .npy is
# checked against expected_<name>.npy with the case's tolerance. Extra `run`
# flags come from $TPUOFF_RUN_FLAGS (e.g. --backend=pjrt: the same vectors
# on the XLA CPU plugin).
#   run_test_vectors.sh TPUOFF SRC [CASES_DIR]
TPUOFF=$1 SRC=$2
read -r -a RUN_FLAGS <<< "${TPUOFF_RUN_FLAGS:-}"
source "$SRC/tests/cli/data/helpers.bash"
CASES="${3:-$SRC/tests/testdata/grpo}"
if ! ls "$CASES"/*/case.json >/dev/null 2>&1; then
  fail "no test vectors at $CASES"
  finish
fi

# case.json -> kernel flags (one per line).
case_flags() {
  python3 - "$1/case.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
p, s = c['params'], c['shape']
f = ['--mode=fwd_bwd', '--batch=%d' % s['B'], '--seq=%d' % s['T'],
     '--vocab=%d' % s['V'], '--logits-dtype=' + c['logits_dtype'],
     '--block-size=%d' % (16 if s['V'] <= 300 else 1024)]
if 'H' in s:
    f.append('--hidden=%d' % s['H'])
names = {'eps_low': 'eps-low', 'eps_high': 'eps-high', 'temperature': 'temperature',
         'temp_mode': 'temperature-mode', 'beta': 'beta', 'delta': 'delta',
         'loss_type': 'loss-type', 'max_len': 'max-len'}
for k, v in p.items():
    if k == 'total_valid_tokens':
        f.append('--token-count-input')
    else:
        f.append('--%s=%s' % (names[k], v))
if c['on_policy']:
    f.append('--on-policy')
print('\n'.join(f))
PY
}

# compare_outputs CASE_DIR OUT_DIR: every expected file within tolerance.
compare_outputs() {
  python3 - "$1" "$2" <<'PY'
import ast, json, struct, sys
case, out = sys.argv[1], sys.argv[2]
def load(path):
    b = open(path, 'rb').read()
    major = b[6]
    hl = struct.unpack('<H' if major == 1 else '<I', b[8:10] if major == 1 else b[8:12])[0]
    start = 10 if major == 1 else 12
    h = ast.literal_eval(b[start:start + hl].decode())
    fmt = {'<f4': 'f', '<f8': 'd', '<i4': 'i'}[h['descr']]
    data = b[start + hl:]
    return h['shape'], struct.unpack('<%d%s' % (len(data) // struct.calcsize(fmt), fmt), data)
c = json.load(open(case + '/case.json'))
atol, rtol = c['tolerance']['atol'], c['tolerance']['rtol']
bad = []
for name, e in c['expected'].items():
    eshape, want = load(case + '/' + e['file'])
    gshape, got = load(out + '/' + name + '.npy')
    if tuple(eshape) != tuple(gshape):
        bad.append('%s: shape %s, expected %s' % (name, gshape, eshape)); continue
    worst = max((abs(g - w) - (atol + rtol * abs(w)), i) for i, (g, w) in enumerate(zip(got, want)))
    if worst[0] > 0:
        i = worst[1]
        bad.append('%s[%d] = %.8g, expected %.8g (atol %g, rtol %g)' % (name, i, got[i], want[i], atol, rtol))
if bad:
    print('; '.join(bad)); sys.exit(1)
PY
}

for dir in "$CASES"/*/ "$CASES"_fused/*/; do
  [[ -f $dir/case.json ]] || continue
  n=$(basename "$dir")
  mapfile -t flags < <(case_flags "$dir")
  kernels=(grpo_reference grpo_tiled)
  [[ $dir == "$CASES"_fused/* ]] && kernels=(grpo_fused_linear)
  for kernel in "${kernels[@]}"; do
    out="$WORK/$n-$kernel"
    run_cmd 0 "$n/$kernel" -- run --kernel=$kernel "${flags[@]}" "${RUN_FLAGS[@]}" \
      --inputs="$dir" --outputs="$out" || continue
    if msg=$(compare_outputs "$dir" "$out"); then
      pass "$n/$kernel"
    else
      fail "$n/$kernel: $msg (flags: ${flags[*]})"
    fi
  done
done
finish
