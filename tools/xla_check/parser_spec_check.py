"""Measures tpuoff against the module strings of XLA's own parser tests
(openxla/xla xla/hlo/parser/hlo_parser_test.cc, read from a checkout you
give; nothing of it is stored here). Each raw string holding an HloModule is
classified by its test: the round-trip tables (CreateTestCases,
CreateShortTestCases, CreateNonRoundtripTestCases) are valid; a TEST_F
string is valid or invalid by the status assertion that follows it. Every
case goes through `tpuoff dump` (accepted?), text and proto round trips, and,
with the pinned jaxlib, XLA's own print of our reprint against XLA's print of
the original (everything XLA prints kept?).

  python parser_spec_check.py --spec PATH/hlo_parser_test.cc --tpuoff build/tools/tpuoff
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile


def extract(path):
    src = open(path).read()
    lines_at = lambda pos: src.count("\n", 0, pos) + 1
    RAW = re.compile(r'R"([^(\s]*)\((.*?)\)\1"', re.S)
    def fn_range(name):
        s = src.index(name + "() {")
        e = src.index("// clang-format on", s)
        return s, e
    cases = []
    for fname, kind in (("CreateTestCases", "roundtrip"), ("CreateShortTestCases", "short"),
                        ("CreateNonRoundtripTestCases", "nonroundtrip")):
        s, e = fn_range(fname)
        body = src[s:e]
        for m in re.finditer(r'\{\s*\n?"(\w+)",\s*\n?', body):
            r = RAW.search(body, m.end())
            if not r or r.start() - m.end() > 5: continue
            cases.append(dict(name=m.group(1), kind=kind, expect="valid", text=r.group(2),
                              line=lines_at(s + r.start())))
    # TEST bodies: each string judged by the status assertions that follow it
    tests = list(re.finditer(r'^TEST(?:_F|_P)?\((\w+),\s*(\w+)\)\s*\{', src, re.M))
    INVAL = re.compile(r'EXPECT_NE\(absl::OkStatus\(\)|EXPECT_FALSE\([^;]*(ok\(\)|Parse)|'
                       r'ExpectHasSubstr\(|ASSERT_FALSE\([^;]*ok\(\)|ASSERT_TRUE\(!|StatusIs\(|'
                       r'Not\(IsOk|EXPECT_THAT\(\s*[\w.>()-]*status\(\)|status\(\)\.message\(\)')
    VAL = re.compile(r'TF_ASSERT_OK|ASSERT_OK|TF_EXPECT_OK|EXPECT_OK|ASSERT_TRUE\([^!;]*ok\(\)|'
                     r'EXPECT_TRUE\([^!;]*ok\(\)|EXPECT_EQ\(absl::OkStatus\(\)|IsOk\(\)\)')
    for i, t in enumerate(tests):
        if t.group(1) not in ("HloParserTest",):
            continue
        end = tests[i + 1].start() if i + 1 < len(tests) else len(src)
        body = src[t.end():end]
        strs = [r for r in RAW.finditer(body) if "HloModule" in r.group(2)]
        for k, r in enumerate(strs):
            seg_end = strs[k + 1].start() if k + 1 < len(strs) else len(body)
            seg = body[r.end():seg_end]
            mi, mv = INVAL.search(seg), VAL.search(seg)
            if mi and (not mv or mi.start() < mv.start()): exp = "invalid"
            elif mv: exp = "valid"
            else: exp = "?"
            txt = r.group(2)
            templ = bool(re.search(r'%(s|d)|\$\w', txt))
            cases.append(dict(name=t.group(2) + (f"#{k}" if len(strs) > 1 else ""), kind="test",
                              expect=exp, text=txt, line=lines_at(t.end() + r.start()),
                              templated=templ, nstrings=len(strs)))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True, help="hlo_parser_test.cc of an XLA checkout")
    ap.add_argument("--tpuoff", required=True)
    ap.add_argument("--json", default=None, help="per-case results")
    ap.add_argument("--show", default=None, help="print the XLA diff of this case")
    args = ap.parse_args()
    cases = extract(args.spec)
    tpuoff, verbose = args.tpuoff, args.show
    try:
        from jax._src.lib import xla_client as xc
        opts = xc.hlo.HloPrintOptions(); opts.print_large_constants = True
        def xla_print(t):
            try: return xc.hlo.hlo_module_from_text(t).to_string(opts)
            except Exception as e: return None
    except ImportError:
        xla_print = lambda t: None
    work = tempfile.mkdtemp(prefix="i16b_measure_")
    res = collections.Counter(); rows = []
    def run(args):
        p = subprocess.run([tpuoff] + args, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr.strip()
    for i, c in enumerate(cases):
        f = os.path.join(work, f"c{i}.hlo"); t1 = f + ".1"; t2 = f + ".2"; pb = f + ".pb"; t3 = f + ".3"
        open(f, "w").write(c["text"])
        rc, err = run(["dump", f, f"--out={t1}"])
        r = dict(name=c["name"], kind=c["kind"], expect=c["expect"], line=c["line"], rc=rc, err=err[-300:])
        if rc not in (0, 1, 2): r["crash"] = True
        if rc == 0:
            a = open(t1).read()
            run(["dump", t1, f"--out={t2}"]); run(["dump", t1, "--format=proto", f"--out={pb}"])
            run(["dump", pb, f"--out={t3}"])
            r["fixed"] = os.path.exists(t2) and open(t2).read() == a
            r["proto"] = os.path.exists(t3) and open(t3).read() == a
            x0 = xla_print(c["text"])
            if x0 is not None:
                x1 = xla_print(a)
                r["xla_same"] = x1 == x0
                if x1 is None: r["xla_same"] = "xla rejects our print"
                if verbose and c["name"] == verbose:
                    import difflib
                    print("\n".join(difflib.unified_diff(x0.splitlines(), (x1 or "").splitlines(), lineterm="")))
                    print("---- ours:\n" + a)
            else:
                r["xla_same"] = "xla rejects original"
        elif verbose and c["name"] == verbose:
            print(err)
        rows.append(r)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    def summary(kind_filter, label):
        sel = [r for r in rows if kind_filter(r)]
        acc = [r for r in sel if r["rc"] == 0]
        same = [r for r in acc if r.get("xla_same") is True]
        rt = [r for r in acc if r.get("fixed") and r.get("proto")]
        print(f"{label}: {len(sel)} cases, accepted {len(acc)}, own text+proto round trip {len(rt)}, "
              f"XLA prints ours the same as the original {len(same)}")
    summary(lambda r: r["kind"] in ("roundtrip", "short", "nonroundtrip"), "round-trip cases")
    summary(lambda r: r["kind"] == "test" and r["expect"] == "valid", "valid parse cases")
    inv = [r for r in rows if r["kind"] == "test" and r["expect"] == "invalid"]
    print(f"invalid cases: {len(inv)}, wrongly accepted {sum(r['rc'] == 0 for r in inv)}")
    print(f"unclassified: {sum(r['expect'] == '?' for r in rows)}; crashes: {sum(bool(r.get('crash')) for r in rows)}")


if __name__ == "__main__":
    main()
