# The GRPO test vectors through the CLI (sourced by tests/cli/run_test_vectors.sh
# and tests/mpi/mpi_ranks.sh; not a test itself).

# case.json -> kernel flags (one per line), then one line "KERNELS ..." with
# the kernel/sharding runs of the case (kernel[:shard:mesh]).
case_flags() {
  python3 - "$1/case.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
p, s = c.get('params', {}), c['shape']
f = ['--mode=fwd_bwd', '--batch=%d' % s['B'], '--seq=%d' % s['T'],
     '--vocab=%d' % s['V'], '--logits-dtype=' + c['logits_dtype'],
     '--block-size=%d' % (16 if s['V'] <= 300 else 1024)]
if 'preset' in c:
    f.append('--preset=' + c['preset'])
for k, v in p.items():
    if v is None:
        continue  # an unset optional (delta, log_ratio_clamp, ...)
    if k == 'total_valid_tokens':
        f.append('--token-count-input')
    elif k == 'total_nonempty_rows':
        f.append('--row-count-input')
    else:
        name = {'temp_mode': 'temperature-mode'}.get(k, k.replace('_', '-'))
        f.append('--%s=%s' % (name, v))
if c['on_policy']:
    f.append('--on-policy')
b = s['B']
batch_mesh = next((n for n in (4, 3, 2) if b % n == 0), 1)
if 'H' in s:
    f += ['--hidden=%d' % s['H'], '--token-chunk=7']
    runs = ['grpo_fused_linear', 'grpo_fused_linear:vocab:3']
else:
    runs = ['grpo_reference', 'grpo_tiled', 'grpo_tiled:vocab:4']
    if batch_mesh > 1:
        runs.append('grpo_reference:batch:%d' % batch_mesh)
if 'H' in s and batch_mesh > 1:
    runs.append('grpo_fused_linear:batch:%d' % batch_mesh)
print('\n'.join(f))
print('KERNELS ' + ' '.join(runs))
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

