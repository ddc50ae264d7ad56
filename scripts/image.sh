#!/usr/bin/env bash
# make image: builds nereid's runtime image with buildah (chroot isolation: no container daemon),
# from deploy/container/Containerfile. The base is Debian 12's official image when a registry
# answers; otherwise (as on machines without one) a Debian 12 base made here with mmdebstrap
# from Debian's packages, through this machine's apt configuration.
#   IMAGE=localhost/nereid:latest   the name to give it
#   BASE=<image>          a base to use as it is (skips the choice above)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
IMAGE=${IMAGE:-localhost/nereid:latest}
STAGE=$BUILD/image
say() { printf 'image: %s\n' "$*"; }
die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }

command -v buildah >/dev/null || die "buildah is missing (Debian: apt-get install buildah)"
[ "$(id -u)" -eq 0 ] || die "buildah with chroot isolation needs root here"

# 1. the files: make install into a staging root; identical libraries become symbolic links
#    (ONNX Runtime's wheel stores each OpenVINO library three times under its three names)
rm -rf "$STAGE/root"
make -C "$ROOT" -s install DESTDIR="$STAGE/root" PREFIX=/usr/local >/dev/null
ln -sf nereid "$STAGE/root/usr/local/bin/tritonserver"
rm -f "$STAGE/root/usr/local/lib/nereid/.wheel"
# OpenVINO's Intel GPU and NPU plugins (24 MB) stay out: the image runs models on CPUs
rm -f "$STAGE/root/usr/local/lib/nereid/"libopenvino_intel_{gpu,npu}_plugin.so
( cd "$STAGE/root/usr/local/lib/nereid"
  declare -A first
  for f in $(find . -maxdepth 1 -type f -name '*.so*' | sort); do
      sum=$(sha256sum "$f" | cut -d' ' -f1)
      if [ -n "${first[$sum]:-}" ]; then ln -sf "$(basename "${first[$sum]}")" "$f"
      else first[$sum]=$f; fi
  done )
find "$STAGE/root/usr/local" -type f \( -name 'nereid*' -o -name '*.so*' \) \
    -exec strip --strip-unneeded {} + 2>/dev/null || true

# 2. the base
if [ -z "${BASE:-}" ]; then
    if buildah pull --quiet docker.io/library/debian:12-slim >/dev/null 2>&1; then
        BASE=docker.io/library/debian:12-slim
    else
        # the packages the Containerfile installs, so that its RUN finds them there
        PKGS=$(sed -n '/apt-get install/,/python3/p' "$ROOT/deploy/container/Containerfile" |
               tr ' \\' '\n\n' | grep -E '^(lib|zlib|ca-|curl|python3)' | sort -u | paste -sd, -)
        # (named after what makes it: a change to the packages or to this script makes another)
        BASE=localhost/nereid-base:bookworm-$( (printf '%s' "$PKGS"; cat "$0") | sha256sum | cut -c1-12)
        if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
            command -v mmdebstrap >/dev/null ||
                die "no registry answers and mmdebstrap is missing (apt-get install mmdebstrap)"
            say "no image registry answers: making $BASE with mmdebstrap"
            mmdebstrap --quiet --variant=minbase --include="$PKGS" \
                --aptopt='APT::Install-Recommends "false"' \
                --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
                --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
                --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
                bookworm "$STAGE/base.tar"
            ctr=$(buildah from scratch)
            buildah add --quiet "$ctr" "$STAGE/base.tar" / >/dev/null
            buildah config --cmd /bin/bash "$ctr"
            buildah commit --quiet "$ctr" "$BASE" >/dev/null
            buildah rm "$ctr" >/dev/null
            rm -f "$STAGE/base.tar"
        fi
    fi
fi

# 3. the image
say "building $IMAGE on $BASE"
buildah bud --quiet --isolation chroot --network host --format docker --layers=false \
    --build-arg BASE="$BASE" -f "$ROOT/deploy/container/Containerfile" -t "$IMAGE" "$STAGE" >/dev/null
size=$(buildah inspect --type image --format '{{.ImageAnnotations}}' "$IMAGE" >/dev/null 2>&1;
       buildah images --format '{{.Size}}' "$IMAGE" | head -1)
say "$IMAGE: $size"
