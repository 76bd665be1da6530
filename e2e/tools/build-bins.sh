#!/usr/bin/env bash
# Build the local control-plane binaries from the Go module proxy at pinned versions.
# Idempotent: each component has a stamp file recording its pin; a matching stamp means nothing to do,
# so changing one pin rebuilds that component alone.
# Output: $ISVC_BIN_DIR (default ~/.cache/isvc-testbed/bin) with etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok, helm, untt, kwok-stages.yaml, isvc-rulecheck
# (tools/rulecheck: the alert rules checked with Prometheus's own packages, pinned in its go.mod/go.sum), and the
# metrics path an order's autoscaler reads (e2e/isvc_testbed/monitoring.py): prometheus (Kubernetes service
# discovery only) and prometheus-adapter, each from its pinned Go module.
# `build-bins.sh realnode` adds the real node's parts (`nox -s realnode`): kubelet (same module, version, tags and
# ldflags as the control plane), containerd v2 with containerd-shim-runc-v2 and ctr, isvc-dra-plugin (the fake
# GPU DRA driver's kubelet plugin, e2e/tools/dra-plugin, pinned by its go.mod/go.sum), plus the Debian
# packages it runs with (runc, CNI plugins, umoci, iptables, iproute2) when they are missing, and llama.cpp's
# `llama-server` (CPU only, statically linked) from the llama.cpp vendored in the `llama-cpp-python` sdist on
# PyPI, pinned by version and hash: the runtime the real node serves a tiny model with.
set -euo pipefail

K8S=${ISVC_K8S_VERSION:-1.36.3}
ETCD=${ISVC_ETCD_VERSION:-3.6.16}
KWOK=${ISVC_KWOK_VERSION:-0.8.0}
HELM=${ISVC_HELM_VERSION:-3.22.0}
UNTT=${ISVC_HELM_UNITTEST_VERSION:-1.0.3}
CONTAINERD=${ISVC_CONTAINERD_VERSION:-2.4.2}
# Prometheus 3.16.0 (its Go module is versioned v0.316.0) and kubernetes-sigs/prometheus-adapter: the metrics
# path an order's autoscaler reads on the real node (e2e/isvc_testbed/monitoring.py)
PROMETHEUS=${ISVC_PROMETHEUS_VERSION:-0.316.0}
PROMETHEUS_ADAPTER=${ISVC_PROMETHEUS_ADAPTER_VERSION:-0.12.0}
# llama-cpp-python's sdist (it vendors llama.cpp under vendor/llama.cpp); the hash is PyPI's for that file
LLAMACPP=${ISVC_LLAMA_CPP_PYTHON_VERSION:-0.3.36}
LLAMACPP_SHA256=${ISVC_LLAMA_CPP_PYTHON_SHA256:-832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e}
# -O1: a third less compile time than Release's -O3, and a tiny model needs no speed
LLAMACPP_CMAKE=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG"
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DBUILD_SHARED_LIBS=OFF -DCMAKE_EXE_LINKER_FLAGS=-static
  -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_LLGUIDANCE=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
CACHE=${ISVC_CACHE_DIR:-$HOME/.cache/isvc-testbed}
BIN=${ISVC_BIN_DIR:-$CACHE/bin}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
mkdir -p "$BIN" "$CACHE"
start=$(date +%s)
log() { echo "[build-bins +$(( $(date +%s) - start ))s] $*"; }

build_k8s() {
  local w="$CACHE/k8s-wrapper-$K8S" staging="v0.${K8S#1.}" kjson minor commit date ldf p
  mkdir -p "$w"
  kjson=$(cd /tmp && go mod download -json "k8s.io/kubernetes@v$K8S")
  if [[ ! -f "$w/go.mod" ]]; then
    python3 - "$K8S" "$staging" "$kjson" > "$w/go.mod" <<'PY'
import json, re, sys
k8s, staging, info = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
src = open(info["GoMod"]).read()
mods = sorted(set(re.findall(r'^\s*(?:replace\s+)?(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/', src, re.M)))
go_line = re.search(r'^go (\S+)', src, re.M).group(1)
gd = re.search(r'^godebug\s*\(.*?^\)|^godebug [^\n(]+$', src, re.M | re.S)
print("module local.test/isvc-control-plane-bins\n")
print(f"go {go_line}\n")
if gd:
    print(gd.group(0) + "\n")
print(f"require k8s.io/kubernetes v{k8s}\n")
print("replace (")
for m in mods:
    print(f"\t{m} => {m} {staging}")
print(")")
PY
  fi
  minor=$(echo "$K8S" | cut -d. -f2)
  # `go mod download -json` names the .info file (Version, Time, sometimes Origin) instead of inlining it
  commit=$(echo "$kjson" | python3 -c 'import json,sys;i=json.load(open(json.load(sys.stdin)["Info"]));print((i.get("Origin") or {}).get("Hash","unknown"))')
  date=$(echo "$kjson" | python3 -c 'import json,sys;i=json.load(open(json.load(sys.stdin)["Info"]));print(i["Time"][:19]+"Z")')
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitCommit=$commit -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  (cd "$w" && go build -mod=mod -trimpath -pgo=off -tags=selinux,notest,grpcnotrace \
      -ldflags="$ldf" -o "$BIN/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl)
}

# The wrapper module and ldflags of build_k8s, for the kubelet alone (only the real node needs it).
build_kubelet() {
  build_k8s_one k8s.io/kubernetes/cmd/kubelet
}

build_k8s_one() {
  local w="$CACHE/k8s-wrapper-$K8S" kjson minor commit date ldf p
  [[ -f "$w/go.mod" ]] || build_k8s  # writes the wrapper's go.mod (and the control plane, same pin)
  kjson=$(cd /tmp && go mod download -json "k8s.io/kubernetes@v$K8S")
  minor=$(echo "$K8S" | cut -d. -f2)
  commit=$(echo "$kjson" | python3 -c 'import json,sys;i=json.load(open(json.load(sys.stdin)["Info"]));print((i.get("Origin") or {}).get("Hash","unknown"))')
  date=$(echo "$kjson" | python3 -c 'import json,sys;i=json.load(open(json.load(sys.stdin)["Info"]));print(i["Time"][:19]+"Z")')
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitCommit=$commit -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  (cd "$w" && go build -mod=mod -trimpath -pgo=off -tags=selinux,notest,grpcnotrace \
      -ldflags="$ldf" -o "$BIN/" "$@")
}

build_containerd() {
  local dir t mod=github.com/containerd/containerd/v2
  dir=$(cd /tmp && go mod download -json "$mod@v$CONTAINERD" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  t=$(mktemp -d)
  cp -r "$dir/." "$t" && chmod -R u+w "$t"
  (cd "$t" && go build -mod=mod -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X $mod/version.Version=v$CONTAINERD -X $mod/version.Package=$mod" \
      -o "$BIN/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr)
  rm -rf "$t"
}

# A module's source from the proxy into a writable temporary copy (its own go.mod and go.sum pin the build).
module_copy() {
  local dir t
  dir=$(cd /tmp && go mod download -json "$1" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  t=$(mktemp -d)
  cp -r "$dir/." "$t" && chmod -R u+w "$t"
  echo "$t"
}

# Prometheus with Kubernetes service discovery alone (remove_all_sd keeps file, http and static; README.md of
# the module, "Building with specific service discoveries"), without the web UI's assets (no builtinassets).
build_prometheus() {
  local t v=github.com/prometheus/common/version
  t=$(module_copy "github.com/prometheus/prometheus@v$PROMETHEUS")
  # the module ships a go.work of its own (web/ui, documentation/examples): build the module alone
  (cd "$t" && GOWORK=off go build -mod=mod -trimpath -tags "remove_all_sd,enable_kubernetes_sd" \
      -ldflags "-s -w -X $v.Version=$(cat VERSION) -X $v.Branch=v$PROMETHEUS" -o "$BIN/prometheus" ./cmd/prometheus)
  rm -rf "$t"
}

# The custom metrics API server (cmd/adapter) of kubernetes-sigs/prometheus-adapter: what Deckhouse's
# prometheus-metrics-adapter module runs, and what the HPA controller reads through the aggregation layer.
build_prometheus_adapter() {
  local t
  t=$(module_copy "sigs.k8s.io/prometheus-adapter@v$PROMETHEUS_ADAPTER")
  (cd "$t" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/prometheus-adapter" ./cmd/adapter)
  rm -rf "$t"
}

# The alert-rule checker (tools/rulecheck), pinned by its go.mod and go.sum; rebuilt when its sources change.
build_rulecheck() {
  (cd "$ROOT/tools/rulecheck" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$BIN/isvc-rulecheck" .)
}

# The real node's sandbox process (e2e/tools/pause): no registry.k8s.io/pause is ever pulled.
build_pause() {
  (cd "$(dirname "$0")/pause" && go build -trimpath -ldflags "-s -w" -o "$BIN/isvc-pause" .)
}

# llama.cpp's server from the pinned llama-cpp-python sdist: pip checks the file against the pinned hash, cmake
# builds the llama-server target alone (-j2), statically linked, without OpenMP, OpenSSL or the web UI (whose
# prebuilt assets would be downloaded from outside: LLAMA_USE_PREBUILT_UI=OFF), so the image is one file.
build_llamacpp() {
  local t src
  t=$(mktemp -d)
  printf 'llama-cpp-python==%s --hash=sha256:%s\n' "$LLAMACPP" "$LLAMACPP_SHA256" > "$t/requirements.txt"
  "${PIP:-pip}" download --quiet --no-deps --no-binary :all: --require-hashes -r "$t/requirements.txt" -d "$t"
  tar -C "$t" -xzf "$t/llama_cpp_python-$LLAMACPP.tar.gz"
  src="$t/llama_cpp_python-$LLAMACPP/vendor/llama.cpp"
  cmake -S "$src" -B "$t/build" "${LLAMACPP_CMAKE[@]}" >/dev/null
  cmake --build "$t/build" --target llama-server -j2 >/dev/null
  install -m 0755 "$t/build/bin/llama-server" "$BIN/llama-server"
  rm -rf "$t"
}

# The fake GPU DRA driver's kubelet plugin (e2e/tools/dra-plugin): k8s.io/dynamic-resource-allocation at the
# Kubernetes pin's staging version, fixed by its go.mod and go.sum; rebuilt when its sources change.
build_draplugin() {
  (cd "$(dirname "$0")/dra-plugin" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$BIN/isvc-dra-plugin" .)
}

# The Debian packages the real node runs with; installed only when one is missing (needs root and apt).
apt_realnode() {
  local need=() p
  for p in runc containernetworking-plugins umoci iptables iproute2 busybox-static cmake g++ make; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if (( ${#need[@]} )); then
    log "apt-get install ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
}

build_etcd() {
  local w="$CACHE/etcd-wrapper-$ETCD"
  mkdir -p "$w"
  [[ -f "$w/go.mod" ]] || printf 'module local.test/isvc-etcd-bin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD" > "$w/go.mod"
  (cd "$w" && go build -mod=mod -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD" \
      -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  GOBIN="$BIN" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$K8S" \
    "sigs.k8s.io/kwok/cmd/kwok@v$KWOK"
  local kw
  kw="$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK/kustomize/stage"
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
      echo '---'; cat "$kw/$f"
    done
  } > "$BIN/kwok-stages.yaml"
}

build_helm() {
  local minor
  minor=$(echo "$K8S" | cut -d. -f2)
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=v$HELM \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@v$HELM"
}

build_untt() {
  local dir t
  dir=$(cd /tmp && go mod download -json "github.com/helm-unittest/helm-unittest@v$UNTT" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  t=$(mktemp -d)
  cp -r "$dir/." "$t" && chmod -R u+w "$t"
  (cd "$t" && go build -trimpath -ldflags "-s -w -X github.com/helm-unittest/helm-unittest/internal/build.version=$UNTT" \
      -o "$BIN/untt" ./cmd/helm-unittest)
  rm -rf "$t"
}

pin_of() {
  case $1 in
    kubelet) echo "$K8S" ;;
    draplugin) (cd "$(dirname "$0")/dra-plugin" && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) \
                  | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16) ;;
    llamacpp) echo "$LLAMACPP-$(echo "${LLAMACPP_CMAKE[*]}" | sha256sum | cut -c1-12)" ;;
    containerd) echo "$CONTAINERD" ;; prometheus) echo "$PROMETHEUS" ;;
    prometheus_adapter) echo "$PROMETHEUS_ADAPTER" ;; pause) sha256sum "$(dirname "$0")/pause/main.go" | cut -c1-16 ;;
    rulecheck) (cd "$ROOT/tools/rulecheck" && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' ! -name '*_test.go' \) \
                  | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16) ;;
    etcd) echo "$ETCD" ;; kwok) echo "$KWOK" ;; helm) echo "$HELM-k8s$K8S" ;; untt) echo "$UNTT" ;; k8s) echo "$K8S" ;;
  esac
}

# Two sessions at once (say `nox -s e2e` beside `nox -s chart`) build one component at a time, not both
# into the same directory: the second waits here, then finds the stamps the first wrote.
exec 9>"$CACHE/.build.lock"
flock 9

only=${1:-all}
steps=(etcd kwok helm untt rulecheck k8s prometheus prometheus_adapter)
if [[ "$only" == realnode ]]; then
  apt_realnode
  steps+=(pause kubelet containerd draplugin llamacpp)
elif [[ "$only" != all && " ${steps[*]} " != *" $only "* ]]; then
  steps+=("$only")  # one real-node part by name, e.g. `build-bins.sh llamacpp`
fi
for step in "${steps[@]}"; do
  if [[ "$only" == all || "$only" == realnode || "$only" == "$step" ]]; then
    stamp="$BIN/.stamp-$step"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$(pin_of "$step")" ]]; then
      log "$step $(pin_of "$step") up to date"
      continue
    fi
    log "building $step $(pin_of "$step")"
    "build_$step"
    pin_of "$step" > "$stamp"
    log "built $step"
  fi
done
log "binaries ready in $BIN"
