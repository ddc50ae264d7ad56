#!/usr/bin/env bash
# Installs what nereid needs to build, test and benchmark on Debian 12, and only what is missing:
#   1. Debian packages (apt-get, run only when one is absent);
#   2. the Python venv at $VENV from scripts/requirements.txt, and Model Analyzer's at $MA_VENV
#      from scripts/requirements-ma.txt (each redone when its file's hash changes);
#   3. ONNX Runtime for C at $ORT_HOME: headers from Debian 13's libonnxruntime-dev (fetched with a
#      private apt configuration pointing at the Debian archive this machine's own apt sources use;
#      the system's apt state is never touched) and the libraries of the onnxruntime-openvino
#      wheel (ONNX Runtime with its CPU and OpenVINO providers).
# Idempotent; prints nothing when everything is present. Run from anywhere:
#   ORT_HOME=... VENV=... MA_VENV=... scripts/setup.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEFAULT_ORT_HOME="$ROOT/.deps/ort"
ORT_HOME=${ORT_HOME:-$DEFAULT_ORT_HOME}
VENV=${VENV:-$ROOT/.venv}
REQS="$ROOT/scripts/requirements.txt"
MA_VENV=${MA_VENV:-$ROOT/.venv-ma}

APT_PKGS=(build-essential pkg-config libmicrohttpd-dev zlib1g-dev libnuma-dev libb64-0d
          libgrpc-dev protobuf-c-compiler libprotobuf-c-dev libyaml-dev
          libarchive-dev # the Python backend's packed execution environments (EXECUTION_ENV_PATH)
          libcurl4-openssl-dev # OTLP/HTTP export of traces (--trace-config mode=opentelemetry),
                               # s3:// and gs:// model repositories (AWS SigV4 built in)
          libxml2-dev # S3's XML listings
          buildah mmdebstrap # make image (chroot isolation, no daemon; a Debian base without a registry)
          haproxy # deploy/haproxy: replicas behind a load balancer (tests/e2e/test_replicas.py)
          wrk nginx-light clang libclang-rt-14-dev valgrind curl ca-certificates
          chromium # chromium: the analyzer report's test renders it headless
          python3 python3-numpy) # the Python backend's default interpreter (model.py files)
HEADERS_SUITE=trixie # the Debian release whose libonnxruntime-dev gives the C headers

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install Debian packages"
    SUDO=(sudo)
fi

# --- 1. Debian packages -------------------------------------------------------------------------
missing=()
for p in "${APT_PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. Python venvs ------------------------------------------------------------------------------
# venv_sync <venv> <requirements>: true when it (re)installed.
venv_sync() {
    local venv=$1 reqs=$2 stamp="$1/.nereid-requirements.sha256" want have
    want=$(sha256sum "$reqs" | cut -d' ' -f1)
    have=$(cat "$stamp" 2>/dev/null || true)
    [ "$want" != "$have" ] || [ ! -x "$venv/bin/python" ] || return 1
    if [ ! -x "$venv/bin/python" ]; then
        say "creating Python venv at $venv"
        python3 -m venv "$venv"
    fi
    say "installing Python packages from ${reqs#"$ROOT"/} into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input \
        --only-binary=:all: -r "$reqs"
    printf '%s\n' "$want" > "$stamp"
}
if venv_sync "$VENV" "$REQS"; then
    # perf_analyzer must start (usage text), not die in the dynamic loader.
    pa_out=$(VENV="$VENV" "$ROOT/scripts/perf_analyzer" --version 2>&1 || true)
    case "$pa_out" in
        *"error while loading shared libraries"*|*"not found"*)
            rm -f "$VENV/.nereid-requirements.sha256"
            die "perf_analyzer does not start: $pa_out" ;;
    esac
fi
venv_sync "$MA_VENV" "$ROOT/scripts/requirements-ma.txt" || true

# --- 3. ONNX Runtime for C ------------------------------------------------------------------------
ort_header() {
    [ -f "$ORT_HOME/include/onnxruntime_c_api.h" ] || [ -f "$ORT_HOME/include/onnxruntime/onnxruntime_c_api.h" ]
}

if [ "$ORT_HOME" != "$DEFAULT_ORT_HOME" ]; then
    # A user-provided ONNX Runtime (e.g. an official release tarball): use it as it is.
    ort_header || die "ORT_HOME=$ORT_HOME has no include/onnxruntime_c_api.h"
    [ -e "$ORT_HOME/lib/libonnxruntime.so" ] || die "ORT_HOME=$ORT_HOME has no lib/libonnxruntime.so"
    exit 0
fi

if [ ! -f "$ORT_HOME/include/onnxruntime_c_api.h" ]; then
    say "fetching ONNX Runtime C headers (Debian $HEADERS_SUITE libonnxruntime-dev) into $ORT_HOME/include"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/etc" "$tmp/deb"
    # The Debian archive (mirror) this machine's apt already uses for its own release: the same
    # URI with the newer suite. No host is named here; apt's proxy settings apply as configured.
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    archive=$(apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE)' \
                  2>/dev/null | awk -v c="$codename" '$2 == c { print $1; exit }')
    [ -n "$archive" ] ||
        die "no Debian archive for '$codename' in this machine's apt sources"
    src_opts=""
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
        src_opts="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    echo "deb ${src_opts}${archive} ${HEADERS_SUITE} main" > "$tmp/etc/sources.list"
    : > "$tmp/status"
    apt_private=(-o "Dir::Etc::SourceList=$tmp/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
                 -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache"
                 -o "Dir::State::Status=$tmp/status" -o Dir::Etc::Preferences=/dev/null
                 -o Dir::Etc::PreferencesParts=/dev/null -o Debug::NoLocking=1
                 -o APT::Sandbox::User=root)
    apt-get "${apt_private[@]}" -qq update >/dev/null ||
        die "apt-get update against Debian $HEADERS_SUITE ($archive) failed"
    (cd "$tmp/deb" && apt-get "${apt_private[@]}" -qq download libonnxruntime-dev >/dev/null) ||
        die "apt-get download libonnxruntime-dev ($HEADERS_SUITE) failed"
    dpkg -x "$tmp"/deb/libonnxruntime-dev_*.deb "$tmp/x"
    mkdir -p "$ORT_HOME/include"
    cp "$tmp"/x/usr/include/onnxruntime/*.h "$ORT_HOME/include/"
    [ -f "$ORT_HOME/include/onnxruntime_c_api.h" ] || die "libonnxruntime-dev has no onnxruntime_c_api.h"
fi

# The library: ONNX Runtime as the onnxruntime-openvino wheel builds it (its CPU provider runs as
# fast as the onnxruntime wheel's here, and it adds the OpenVINO provider: docs/optimization.md,
# "Execution accelerators"), installed by scripts/ort_libs.sh into $ORT_HOME/lib, where nereid
# finds it by default (its RUNPATH).
ORT_WHEEL=${ORT_WHEEL:-onnxruntime-openvino==1.24.1}
VENV="$VENV" "$ROOT/scripts/ort_libs.sh" "$ORT_WHEEL" "$ORT_HOME/lib"
