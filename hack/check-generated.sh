#!/usr/bin/env bash
# Regenerates what controller-gen makes from backend/kube/api (deep copies,
# CRDs in backend/kube/crds and their copy in config/crd/bases) and from the
# RBAC markers in backend/kube/rbac.go (config/rbac/role.yaml), and fails
# when the committed files differ: run `make generate` and commit. It also
# fails when config/crd/kustomization.yaml does not list exactly the CRDs in
# config/crd/bases. And it regenerates docs/rules.md from package rules.
set -euo pipefail
cd "$(dirname "$0")/.."
go generate ./backend/kube ./backend/kube/api/... ./rules
paths=(backend/kube/api/v1alpha1/zz_generated.deepcopy.go backend/kube/crds config/crd config/rbac docs/rules.md)
if ! git diff --exit-code -- "${paths[@]}" || [ -n "$(git status --porcelain --untracked-files=all -- "${paths[@]}")" ]; then
  echo "generated files are stale: run make generate and commit the result" >&2
  git status --short -- "${paths[@]}" >&2
  exit 1
fi
listed=$(sed -n 's/^- \(bases\/.*\.yaml\)$/\1/p' config/crd/kustomization.yaml | sort)
present=$(cd config/crd && ls bases/*.yaml | sort)
if [ "$listed" != "$present" ]; then
  echo "config/crd/kustomization.yaml does not list exactly the CRDs in config/crd/bases:" >&2
  diff <(echo "$listed") <(echo "$present") >&2 || true
  exit 1
fi
echo "generated files: up to date"
