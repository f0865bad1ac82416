# The README's two set-up commands are `go run ./examples/quickstart` and `make test`.
.PHONY: test quickstart envtest generate lint

# Builds (or reuses) the envtest control-plane binaries, then runs every
# test, the integration tests against a real kube-apiserver and etcd included.
test:
	KUBEBUILDER_ASSETS="$$(bash hack/envtest-assets.sh)" go test -race -count=1 -timeout 30m ./...

quickstart:
	go run ./examples/quickstart

envtest:
	bash hack/envtest-assets.sh

# Regenerates deep copies and CRDs from backend/kube/api, and the backend's
# Role (config/rbac/role.yaml) from the markers in backend/kube/rbac.go, with
# controller-gen (run through go run at a pinned version, so it is not in
# go.mod).
generate:
	go generate ./backend/kube ./backend/kube/api/...

# vet and staticcheck (at the version hack/staticcheck.sh pins).
lint:
	go vet ./...
	bash hack/staticcheck.sh
