#!/usr/bin/env bash
# Installs the ONNX Runtime libraries of one PyPI wheel into a folder, for nereid to load:
#   scripts/ort_libs.sh <pip requirement> <folder>
#   e.g. scripts/ort_libs.sh onnxruntime-gpu==1.31.1 .deps/backends-gpu/onnxruntime
# The wheel is downloaded with this machine's pip configuration, not installed (its Python module
# would replace the venv's onnxruntime); its onnxruntime/capi/ libraries (all but the Python
# binding) go to <folder> as they are: they find each other through RUNPATH $ORIGIN. <folder>
# gets libonnxruntime.so.1 and libonnxruntime.so links and a .wheel stamp naming the requirement;
# nothing is done when the stamp already names it. scripts/setup.sh installs the default library
# this way; a folder <dir>/onnxruntime made by it serves `nereid --backend-directory=<dir>`.
# Uses $VENV (default: the repository's .venv) for pip and python.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: scripts/ort_libs.sh <pip requirement> <folder>"
WHEEL=$1
DEST=$2
[ "$(cat "$DEST/.wheel" 2>/dev/null)" != "$WHEEL" ] || [ ! -e "$DEST/libonnxruntime.so" ] || exit 0

say "installing the ONNX Runtime libraries of $WHEEL into $DEST"
wtmp=$(mktemp -d)
trap 'rm -rf "$wtmp" "$DEST.new"' EXIT
"$VENV/bin/pip" download -q --no-deps --only-binary=:all: -d "$wtmp" "$WHEEL" ||
    die "pip download $WHEEL failed"
mkdir -p "$DEST.new"
"$VENV/bin/python" - "$wtmp" "$DEST.new" <<'PY' || die "unpacking $WHEEL failed"
import glob, os, shutil, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(src, "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if name.startswith("onnxruntime/capi/") and ".so" in base and "pybind11" not in base:
            with z.open(name) as f, open(os.path.join(dst, base), "wb") as out:
                shutil.copyfileobj(f, out, 1 << 20)
PY
lib_name=$(cd "$DEST.new" && ls libonnxruntime.so.1.* 2>/dev/null | head -n 1)
[ -n "$lib_name" ] || die "no libonnxruntime.so.1.* in $WHEEL"
ln -sfn "$lib_name" "$DEST.new/libonnxruntime.so.1"
ln -sfn libonnxruntime.so.1 "$DEST.new/libonnxruntime.so"
echo "$WHEEL" > "$DEST.new/.wheel"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
