#!/usr/bin/env bash
# Build the module images without a Docker daemon: a Debian bookworm base made locally with mmdebstrap
# from Debian's packages, then buildah (vfs storage, chroot isolation) over module/images/*/Dockerfile.
# Needs: mmdebstrap and buildah (installed with apt-get when missing, as root), the wheels of `nox -s build` in dist/,
# and a python with pip (to download the dependency wheels on the host: the build itself is offline).
# Images are saved as OCI archives under $ISVC_CACHE_DIR/images and rebuilt only when their inputs change.
# With ISVC_IMAGES_MANIFEST=FILE, FILE lists the archive of each image for this tree (`NAME PATH` lines): the
# real-node tests run exactly those, not whichever archive another checkout sharing the cache wrote last.
# ISVC_IMAGE_NAMES="controller planner" builds a subset (the real-node tests run no model fetcher).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${ISVC_CACHE_DIR:-$HOME/.cache/isvc-testbed}/images
PY=${PYTHON:-python3}
NAMES=${ISVC_IMAGE_NAMES:-controller planner modelFetcher modelCache}  # a subset builds only those
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
mkdir -p "$CACHE"
log() { echo "[build-images +${SECONDS}s] $*"; }

# What the build runs with, installed only when missing (as build-bins.sh installs the real node's packages).
need=()
for tool in mmdebstrap buildah; do command -v "$tool" >/dev/null || need+=("$tool"); done
if (( ${#need[@]} )); then
  log "apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# libstdc++6: cel-expr-python (the planner client) is a C++ extension.
BASE_PKGS=python3.11-minimal,libpython3.11-stdlib,python3.11-venv,ca-certificates,libstdc++6
BASE_KEY=$(echo "$BASE_PKGS" | sha256sum | cut -c1-8)
BASE=localhost/isvc/python-base:bookworm-$BASE_KEY
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  if [ ! -f "$CACHE/base-$BASE_KEY.tar" ]; then
    log "base: mmdebstrap bookworm ($BASE_PKGS)"
    mmdebstrap --quiet --variant=essential --include="$BASE_PKGS" --format=tar bookworm "$CACHE/base.tar.part" \
      http://deb.debian.org/debian
    mv "$CACHE/base.tar.part" "$CACHE/base-$BASE_KEY.tar"
  fi
  c=$(buildah from scratch)
  buildah add -q "$c" "$CACHE/base-$BASE_KEY.tar" /
  buildah config --env PATH=/usr/bin:/bin "$c"   # the images set USER 64535 in their final stage
  buildah commit -q "$c" "$BASE" >/dev/null
  buildah rm "$c" >/dev/null
fi
log "base $BASE: $(buildah inspect --type image --format '{{.FromImageDigest}}' "$BASE")"

log "wheelhouse: dependency wheels for Python 3.11, glibc <= 2.36 (bookworm), x86_64, into dist/"
# every version from module/images/constraints.txt (`nox -s lock`), as the Dockerfiles install them
declare -A WANT=([controller]="isvc-operator==0.1.0" [planner]="isvc-planner==0.1.0"
                 [modelFetcher]="huggingface_hub[cli]" [modelCache]="isvc-model-cache==0.1.0")
# every image's wheels, whichever are built: an image's key hashes all of dist/, so a subset keeps the same keys
for name in controller planner modelFetcher modelCache; do
  "$PY" -m pip download --quiet --disable-pip-version-check --dest "$ROOT/dist" --find-links "$ROOT/dist" \
    --only-binary=:all: --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_36_x86_64 \
    --constraint "$ROOT/module/images/constraints.txt" "${WANT[$name]}"
done

manifest=()
for name in $NAMES; do
  tag=localhost/isvc/$(echo "$name" | sed 's/\([A-Z]\)/-\L\1/g'):0.1.0  # modelCache: model-cache
  key=$( (echo "$BASE_KEY"; cat "$ROOT/module/images/$name/Dockerfile" "$ROOT/module/images/constraints.txt" \
           "$ROOT"/dist/*.whl) | sha256sum | cut -c1-16)
  manifest+=("$name $CACHE/$name-$key.oci.tar")
  if [ -f "$CACHE/$name-$key.oci.tar" ]; then log "$tag: cached ($key)"; continue; fi
  log "$tag: buildah bud"
  buildah bud -q --layers --build-arg "BASE=$BASE" -f "$ROOT/module/images/$name/Dockerfile" -t "$tag" "$ROOT" \
    >/dev/null
  buildah push -q "$tag" "oci-archive:$CACHE/$name-$key.oci.tar:$tag"
  log "$tag: $(du -h "$CACHE/$name-$key.oci.tar" | cut -f1) → $CACHE/$name-$key.oci.tar"
done
if [ -n "${ISVC_IMAGES_MANIFEST:-}" ]; then
  printf '%s\n' "${manifest[@]}" > "$ISVC_IMAGES_MANIFEST"
fi
