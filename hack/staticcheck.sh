#!/usr/bin/env bash
# staticcheck.sh runs staticcheck at a pinned version over the module. The
# binary is built from the Go module proxy into a versioned cache
# directory outside the work tree (never in go.mod), and reused after.
set -euo pipefail
VERSION="${STATICCHECK_VERSION:-v0.8.2}" # staticcheck 2026.2.2
cache_root="${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}"
bin_dir="${cache_root}/dlc/staticcheck/${VERSION}"
if [[ ! -x "${bin_dir}/staticcheck" ]]; then
	echo "staticcheck.sh: building staticcheck ${VERSION}" >&2
	GOBIN="${bin_dir}" GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@${VERSION}"
fi
cd "$(dirname "$0")/.."
"${bin_dir}/staticcheck" ./...
