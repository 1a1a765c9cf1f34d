# Shared helpers of the tests/cli/*.sh scripts (sourced; not a test itself).
# Usage in a script:  source "$SRC/tests/cli/data/helpers.bash"
set -u
FAILURES=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpuoff_cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

# run_cmd EXPECTED_EXIT DESCRIPTION -- ARGS...: runs $TPUOFF ARGS with stdout
# in $WORK/out and stderr in $WORK/err and checks the exit code.
run_cmd() {
  local want=$1 desc=$2
  shift 3
  "$TPUOFF" "$@" >"$WORK/out" 2>"$WORK/err"
  local got=$?
  if [[ $got -ne $want ]]; then
    fail "$desc: exit $got, want $want (tpuoff $*); stderr: $(head -c 600 "$WORK/err")"
    return 1
  fi
  return 0
}

# expect_in FILE PATTERN DESCRIPTION: fixed-string grep.
expect_in() {
  if ! grep -qF -- "$2" "$1"; then
    fail "$3: '$2' not found in $(basename "$1"): $(head -c 600 "$1")"
    return 1
  fi
}

# expect_one_line FILE DESCRIPTION: stderr is exactly one non-empty line.
expect_one_line() {
  local n
  n=$(wc -l <"$1")
  if [[ $n -ne 1 || ! -s $1 ]]; then
    fail "$2: expected one line on stderr, got $n: $(head -c 600 "$1")"
    return 1
  fi
}

# expect_manifest FILE JSON_OBJECT DESCRIPTION: FILE (run's manifest.json) is
# JSON and one of its "outputs" holds JSON_OBJECT's keys with its values, in
# its key order.
expect_manifest() {
  local why
  if ! why=$(python3 - "$1" "$2" 2>&1 <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
want = json.loads(sys.argv[2])
for e in doc["outputs"]:
    if all(e.get(k) == v for k, v in want.items()) and [k for k in e if k in want] == list(want):
        sys.exit(0)
sys.exit(f"no output entry {sys.argv[2]} in {json.dumps(doc['outputs'])[:500]}")
PY
  ); then
    fail "$3: $why"
    return 1
  fi
}

# no_leftovers DIR DESCRIPTION: no temp files or staging directories
# (.*tmp-*, .*tpuoff-staging-*, .*tpuoff-old-*) remain in DIR.
no_leftovers() {
  local left
  left=$(find "$1" -maxdepth 1 \( -name '.*tmp-*' -o -name '.*tpuoff-staging-*' \
                                  -o -name '.*tpuoff-old-*' \) | head -5)
  if [[ -n $left ]]; then
    fail "$2: temp files left behind: $left"
    return 1
  fi
}

# write_npy FILE DESCR SHAPE VALUES...: a .npy file written by python's
# struct module (no numpy needed). DESCR like '<f4', SHAPE like '(2, 3)'.
write_npy() {
  python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, *vals = sys.argv[1:]
fmt = {'<f4': 'f', '<f8': 'd', '<i4': 'i', '<i8': 'q', '|b1': '?', '|u1': 'B'}[descr]
conv = float if fmt in 'fd' else int
data = b''.join(struct.pack('<' + fmt, conv(v)) for v in vals)
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
total = 10 + len(header) + 1
header += ' ' * ((total + 63) // 64 * 64 - total) + '\n'
with open(path, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + data)
PY
}

# read_npy FILE: prints "descr shape v0 v1 ..." of a .npy file.
read_npy() {
  python3 - "$1" <<'PY'
import ast, struct, sys
b = open(sys.argv[1], 'rb').read()
assert b[:6] == b'\x93NUMPY', 'bad magic'
hl = struct.unpack('<H', b[8:10])[0]
h = ast.literal_eval(b[10:10 + hl].decode())
fmt = {'<f4': 'f', '<f8': 'd', '<i4': 'i', '<i8': 'q', '|b1': '?', '|u1': 'B',
       '<u4': 'I', '<u8': 'Q', '<i2': 'h', '<u2': 'H', '|i1': 'b'}[h['descr']]
data = b[10 + hl:]
n = len(data) // struct.calcsize(fmt)
vals = struct.unpack('<%d%s' % (n, fmt), data)
print(h['descr'], h['shape'], *[('%g' % v if fmt in 'fd' else int(v)) for v in vals])
PY
}

finish() {
  if [[ $FAILURES -ne 0 ]]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

# ---- robustness checks (tests/cli/robustness_*.sh) ---------------------------

# robust DESCRIPTION WANT... -- ARGS...: runs $TPUOFF ARGS under `timeout`
# ($ROBUST_TIMEOUT s, default 60) with stdout in $WORK/out and stderr in
# $WORK/err. The exit code must be one of WANT (never a signal, >= 128, and
# never the timeout, 124), and a failure (1 or 2) must say something on
# stderr prefixed "tpuoff".
robust() {
  local desc=$1
  shift
  local wants=()
  while [[ $1 != -- ]]; do wants+=("$1"); shift; done
  shift
  timeout "${ROBUST_TIMEOUT:-60}" "$TPUOFF" "$@" >"$WORK/out" 2>"$WORK/err"
  local got=$?
  ROBUST_RC=$got
  if [[ $got -eq 124 ]]; then
    fail "$desc: timed out after ${ROBUST_TIMEOUT:-60}s (tpuoff $*)"
    return 1
  fi
  if [[ $got -ge 128 ]]; then
    fail "$desc: killed by signal $((got - 128)) (tpuoff $*); stderr: $(head -c 400 "$WORK/err")"
    return 1
  fi
  local w ok=0
  for w in "${wants[@]}"; do [[ $got -eq $w ]] && ok=1; done
  if [[ $ok -eq 0 ]]; then
    fail "$desc: exit $got, want ${wants[*]} (tpuoff $*); stderr: $(head -c 600 "$WORK/err")"
    return 1
  fi
  if [[ $got -ne 0 ]] && ! grep -q '^tpuoff' "$WORK/err"; then
    fail "$desc: exit $got without a 'tpuoff ...' message on stderr: $(head -c 400 "$WORK/err")"
    return 1
  fi
  return 0
}

# is_sanitized: the binary is built with AddressSanitizer or
# ThreadSanitizer (ulimit -v cannot apply to it; it runs several times slower).
is_sanitized() { grep -qaE '__(asan|tsan)_init' "$TPUOFF"; }

# limit_memory KB: `ulimit -v` for the rest of the script (not under a
# sanitizer, whose shadow memory reserves terabytes of address space).
limit_memory() { is_sanitized || ulimit -v "$1"; }

