#!/usr/bin/env python3
"""make check-layers: every `#include "..."` under src/ goes down or sideways within its own
layer, never up and never across frontends (docs/architecture.md, "Layers").

    common  <  config, proto  <  backends  <  core  <  frontends/<f>  <  api  <  main.c
                                                    tools/perf  <  tools/analyzer

A layer may include itself and what its row below allows. api/ (the server brought up from its
options, and the public C API's implementation) may include the public header, include/nereid.h. The gRPC messages generated at build
time are included as "proto/<p>.pb-c.h" and belong to proto. A backend sees only the backend
interface (backends/*.h), not another backend's folder; core too. frontends/mhd is plumbing that
the libmicrohttpd frontends (http, metrics) share. Prints each offending line as file:line and
exits 1; prints one summary line and exits 0 otherwise. Run from anywhere; needs only python3.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# layer -> the layers it may include (itself always)
ALLOWED = {
    "common": set(),
    "config": {"common"},
    "proto": {"common"},
    "backends": {"common", "config"},
    "core": {"common", "config", "backends"},
    "frontends": {"common", "config", "proto", "core"},
    "api": {"common", "config", "proto", "backends", "core", "frontends", "include"},
    "tools/perf": {"common", "config", "proto"},
    "tools/analyzer": {"common", "config", "proto", "tools/perf"},
    "main": {"common", "config", "proto", "backends", "core", "frontends", "api"},
}
SHARED_FRONTEND = "mhd"  # frontends/mhd: what http and metrics share


def unit(path):
    """(layer, part) of a file under src/ (or the public headers, include/: "include"): part
    is the frontend's or backend's own folder."""
    if path.is_relative_to(ROOT / "include"):
        return ("include", None)
    rel = path.relative_to(SRC).parts
    if len(rel) == 1:
        return ("main", None)
    if rel[0] in ("frontends", "backends"):
        return (rel[0], rel[1] if len(rel) > 2 else None)
    if rel[0] == "tools":
        return ("tools/" + rel[1], None)
    return (rel[0], None)


def target_of(src_file, name):
    """The file an include names (relative to the includer, as the compiler looks first), or a
    generated proto header; None when it is neither (a header of another project)."""
    if name.startswith("proto/") and name.endswith(".pb-c.h"):
        return SRC / name
    for base in (src_file.parent, SRC):
        p = (base / name).resolve()
        if p.is_file():
            return p
    return None


def verdict(src_file, tgt):
    """None if src_file may include tgt, else why not."""
    (a, a_part), (b, b_part) = unit(src_file), unit(tgt)
    if a == b:
        if a == "frontends" and a_part != b_part and b_part != SHARED_FRONTEND:
            return f"across frontends ({a_part} -> {b_part})"
        if a == "backends" and a_part is not None and b_part is not None and a_part != b_part:
            return f"across backends ({a_part} -> {b_part})"
        return None
    if b not in ALLOWED[a]:
        return f"{a} may not include {b}"
    if b == "backends" and b_part is not None:
        return "only the backend interface (backends/*.h) is visible above backends"
    return None


def main():
    bad = checked = 0
    for f in sorted(SRC.rglob("*.[ch]")):
        for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            checked += 1
            rel = f.relative_to(ROOT)
            tgt = target_of(f, m.group(1))
            if tgt is None or not (tgt.is_relative_to(SRC) or tgt.is_relative_to(ROOT / "include")):
                print(f'{rel}:{no}: "{m.group(1)}" is not a file under src/')
                bad += 1
                continue
            why = verdict(f, tgt)
            if why:
                print(f'{rel}:{no}: "{m.group(1)}": {why}')
                bad += 1
    if bad:
        print(f"check-layers: {bad} of {checked} includes break the layer rule "
              "(docs/architecture.md, \"Layers\")")
        return 1
    print(f"check-layers: {checked} includes, all downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
