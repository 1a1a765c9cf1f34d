#!/usr/bin/env python3
"""Fails when a source file includes a project header from a layer it may not
depend on. The table below is the layering of docs/ARCHITECTURE.md: each folder
may include itself and the folders listed for it (and, transitively, nothing
else). Run by ctest as `layering`."""
import pathlib
import re
import sys

ALLOWED = {
    "hlo/ir": set(),
    "hlo/text": {"hlo/ir"},
    "hlo/proto": {"hlo/ir", "proto"},
    "hlo/analysis": {"hlo/ir"},
    "hlo/spmd": {"hlo/ir"},
    "kernels": {"hlo/ir", "hlo/spmd"},
    "runtime/cpu": {"hlo/ir"},
    "runtime/device": {"hlo/ir", "hlo/spmd", "runtime/cpu"},
    "runtime/emulator": {"hlo/ir", "hlo/analysis", "runtime/cpu", "runtime/device"},
    "runtime/pjrt": {"hlo/ir", "hlo/proto", "proto", "runtime/cpu", "runtime/device"},
    "tools/io": {"hlo/ir", "hlo/text", "hlo/proto", "hlo/spmd", "hlo/analysis", "runtime/cpu",
                 "runtime/device", "runtime/emulator", "runtime/pjrt"},
}
# Top layers: the CLI, and the Python extension (python/src) over it; nothing
# below may include them.
ALLOWED["tools/cli"] = set(ALLOWED) | {"proto"}
ALLOWED["python"] = set(ALLOWED) | {"proto"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path: str) -> str | None:
    for f in sorted(ALLOWED, key=len, reverse=True):
        if path.startswith(f + "/"):
            return f
    return None


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    checked = 0
    for src in sorted(root.glob("**/*")):
        if src.suffix not in (".h", ".cc") or "build" in src.relative_to(root).parts[0]:
            continue
        rel = src.relative_to(root).as_posix()
        me = folder_of(rel)
        if me is None:
            continue
        checked += 1
        for inc in INCLUDE.findall(src.read_text(errors="replace")):
            them = folder_of(inc) or ("proto" if inc.startswith("proto/") else None)
            if them is None:
                top = inc.split("/")[0]
                if top in ("hlo", "runtime", "kernels", "tools", "python"):
                    bad.append(f"{rel}: includes {inc}, which is in no known layer")
                continue
            if them != me and them not in ALLOWED[me]:
                bad.append(f"{rel}: {me} may not include {inc} ({them})")
    for b in bad:
        print(b)
    print(f"layering: {checked} files checked, {len(bad)} violations")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
