#!/usr/bin/env python3
"""HLO text modules for the robustness tests (tests/cli/robustness_*.sh).

  gen_module.py chain N      x -> negate -> ... (N times) -> copy: one long
                             fused chain (N + 2 instructions); the output is
                             x when N is even, -x when odd
  gen_module.py calls N      N computations, each calling the next: call
                             nesting N deep (about 2N instructions); the
                             innermost negates once, so the output is -x
  gen_module.py reduces N    N exp+reduce pairs summed: many sibling reduces
                             (about 3N instructions)
  gen_module.py wide N       N parameters added in a chain (many program
                             inputs and buffers live at once)
"""
import sys


def main():
    kind, n = sys.argv[1], int(sys.argv[2])
    out = []
    w = out.append
    if kind == "chain":
        w("HloModule chain")
        w("ENTRY %main (x: f32[4]) -> f32[4] {")
        w("  %x = f32[4] parameter(0)")
        prev = "x"
        for i in range(n):
            w(f"  %n{i} = f32[4] negate(f32[4] %{prev})")
            prev = f"n{i}"
        w(f"  ROOT %r = f32[4] copy(f32[4] %{prev})")
        w("}")
    elif kind == "calls":
        w("HloModule calls")
        w("%c0 (a0: f32[4]) -> f32[4] {\n  %a0 = f32[4] parameter(0)\n"
          "  ROOT %r0 = f32[4] negate(f32[4] %a0)\n}")
        for i in range(1, n):
            w(f"%c{i} (a{i}: f32[4]) -> f32[4] {{\n  %a{i} = f32[4] parameter(0)\n"
              f"  ROOT %r{i} = f32[4] call(f32[4] %a{i}), to_apply=%c{i - 1}\n}}")
        w(f"ENTRY %main (x: f32[4]) -> f32[4] {{\n  %x = f32[4] parameter(0)\n"
          f"  ROOT %r = f32[4] call(f32[4] %x), to_apply=%c{n - 1}\n}}")
    elif kind == "reduces":
        w("HloModule reduces")
        w("%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
          "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}")
        w("ENTRY %main (x: f32[4,8]) -> f32[4] {")
        w("  %x = f32[4,8] parameter(0)\n  %z = f32[] constant(0)")
        prev = None
        for i in range(n):
            w(f"  %e{i} = f32[4,8] exponential(f32[4,8] %x)")
            w(f"  %r{i} = f32[4] reduce(f32[4,8] %e{i}, f32[] %z), dimensions={{1}}, "
              "to_apply=%sum")
            if prev is None:
                prev = f"r{i}"
            else:
                w(f"  %s{i} = f32[4] add(f32[4] %{prev}, f32[4] %r{i})")
                prev = f"s{i}"
        w(f"  ROOT %out = f32[4] copy(f32[4] %{prev})")
        w("}")
    elif kind == "wide":
        w("HloModule wide")
        params = ", ".join(f"p{i}: f32[2]" for i in range(n))
        w(f"ENTRY %main ({params}) -> f32[2] {{")
        for i in range(n):
            w(f"  %p{i} = f32[2] parameter({i})")
        prev = "p0"
        for i in range(1, n):
            w(f"  %s{i} = f32[2] add(f32[2] %{prev}, f32[2] %p{i})")
            prev = f"s{i}"
        w(f"  ROOT %r = f32[2] copy(f32[2] %{prev})")
        w("}")
    else:
        sys.exit(f"unknown kind {kind}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
