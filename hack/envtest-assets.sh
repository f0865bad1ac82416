#!/usr/bin/env bash
# envtest-assets.sh builds the kube-apiserver and etcd binaries that
# sigs.k8s.io/controller-runtime/pkg/envtest needs, and the
# kube-controller-manager whose resourcequota and garbagecollector
# controllers dlctest/kubetest runs beside them, from the Go module proxy,
# into a versioned cache directory outside the work tree, and prints that
# directory on stdout (and nothing else), so that
#
#     export KUBEBUILDER_ASSETS="$(bash hack/envtest-assets.sh)"
#
# works. Progress goes to stderr. When every binary already exists it does
# nothing and returns at once; otherwise it builds those missing.
#
# The binaries are built in a throw-away module of their own (never in the
# SDK's go.mod: k8s.io/kubernetes must not become a dependency of the SDK).
# k8s.io/kubernetes points its staging modules at ./staging/src/k8s.io/X, which
# does not exist in the module zip, so every such replace becomes
# k8s.io/X => k8s.io/X v$STAGING_VERSION.
#
# Environment:
#   DLC_ENVTEST_DIR   where the binaries go (default: the cache dir below)
#   K8S_VERSION       k8s.io/kubernetes version (default 1.37.2)
#   ETCD_VERSION      go.etcd.io/etcd/server/v3 version (default 3.7.0)
#
# A cold build takes several minutes (measured here: about 12 on 2 cores with
# empty Go caches, downloads included) and needs the Go
# module proxy; it writes into a temporary directory and moves each finished
# binary into place with a rename, so an interrupted build never leaves a
# partial binary behind that looks done.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.0}"
STAGING_VERSION="0.${K8S_VERSION#*.}" # 1.37.2 -> 0.37.2

cache_root="${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}"
bin_dir="${DLC_ENVTEST_DIR:-${cache_root}/dlc/envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}/bin}"

have_binaries() {
	[[ -x "${bin_dir}/kube-apiserver" && -x "${bin_dir}/etcd" && -x "${bin_dir}/kube-controller-manager" ]]
}

if have_binaries; then
	printf '%s\n' "${bin_dir}"
	exit 0
fi

log() { printf 'envtest-assets: %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || {
	log "go is not on PATH"
	exit 1
}

mkdir -p "${bin_dir}"
parent="$(cd "${bin_dir}/.." && pwd)"

# One build at a time per cache directory; a second caller waits and then
# finds the binaries already there.
if command -v flock >/dev/null 2>&1; then
	exec 9>"${parent}/.envtest-assets.lock"
	if ! flock -n 9; then
		log "another build is running for ${bin_dir}; waiting for it"
		flock 9
	fi
	if have_binaries; then
		printf '%s\n' "${bin_dir}"
		exit 0
	fi
fi

# The work directory sits next to bin/ so the final mv is a rename on the same
# file system.
work="$(mktemp -d "${parent}/.build.XXXXXX")"
cleanup() { rm -rf "${work}"; }
trap cleanup EXIT

start=${SECONDS}
log "building what is missing of kube-apiserver and kube-controller-manager v${K8S_VERSION} and etcd v${ETCD_VERSION} into ${bin_dir} (takes several minutes)"

# Everything below runs inside the throw-away module; never let the caller's
# work tree (a go.work, or GOFLAGS=-mod=vendor/readonly) leak into it.
cd "${work}"
export GOWORK=off
export GOFLAGS=-mod=mod
export GO111MODULE=on
export CGO_ENABLED="${CGO_ENABLED:-0}"

go mod init dlc.local/envtest-assets # its one line of chatter goes to stderr

log "reading k8s.io/kubernetes@v${K8S_VERSION}'s go.mod"
k8s_gomod="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" |
	sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "${k8s_gomod}" || ! -f "${k8s_gomod}" ]]; then
	log "could not download k8s.io/kubernetes@v${K8S_VERSION}'s go.mod"
	exit 1
fi

staging=()
while IFS= read -r mod; do
	staging+=("${mod}")
done < <(grep -oE 'k8s\.io/[A-Za-z0-9._-]+[[:space:]]+=>[[:space:]]+\./staging/src/k8s\.io/[A-Za-z0-9._-]+' "${k8s_gomod}" |
	awk '{print $1}' | sort -u)
if ((${#staging[@]} == 0)); then
	log "found no staging replaces in ${k8s_gomod}; has the layout changed?"
	exit 1
fi
log "replacing ${#staging[@]} staging modules with v${STAGING_VERSION}"

edits=(
	"-require=k8s.io/kubernetes@v${K8S_VERSION}"
	"-require=go.etcd.io/etcd/server/v3@v${ETCD_VERSION}"
)
for mod in "${staging[@]}"; do
	edits+=("-replace=${mod}=${mod}@v${STAGING_VERSION}")
done
go mod edit "${edits[@]}"

# tools.go lists the three commands so that `go mod tidy` keeps (and sums)
# everything they need.
cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
EOF

log "resolving modules (go mod tidy)"
go mod tidy >&2

ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION}"
ldflags+=" -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*}"
minor="${K8S_VERSION#*.}"
ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

mkdir -p out
# Each binary is built only when missing, and moved into place by an atomic
# rename; callers require all three, so no caller ever sees a half-finished
# set as done.
if [[ ! -x "${bin_dir}/etcd" ]]; then
	log "go build etcd"
	go build -trimpath -ldflags="-s -w" -o out/etcd "go.etcd.io/etcd/server/v3"
	mv -f out/etcd "${bin_dir}/etcd"
fi
for cmd in kube-controller-manager kube-apiserver; do
	if [[ ! -x "${bin_dir}/${cmd}" ]]; then
		log "go build ${cmd}"
		go build -trimpath -ldflags="${ldflags}" -o "out/${cmd}" "k8s.io/kubernetes/cmd/${cmd}"
		mv -f "out/${cmd}" "${bin_dir}/${cmd}"
	fi
done

log "done in $((SECONDS - start))s: ${bin_dir}"
printf '%s\n' "${bin_dir}"
