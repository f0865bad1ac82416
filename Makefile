# The README's two set-up commands are `go run ./examples/quickstart` and `make test`.
.PHONY: test quickstart envtest generate lint scale soak

# Builds (or reuses) the envtest control-plane binaries, then runs every
# test, the integration tests against a real kube-apiserver and etcd included.
test:
	KUBEBUILDER_ASSETS="$$(bash hack/envtest-assets.sh)" go test -race -count=1 -timeout 30m ./...

# The scale test (not in CI; docs/scale.md): DLC_SCALE clusters
# and as many runs through DLC_SCALE_REPLICAS clients on envtest with Ray in
# the loop, printing its figures as tables. Without -race: it measures. The
# other DLC_SCALE_* variables pass through the environment; the test bounds
# itself by DLC_SCALE_DEADLINE (20m), SCALE_TIMEOUT is go test's backstop.
DLC_SCALE ?= 200
SCALE_TIMEOUT ?= 3h
scale:
	DLC_SCALE=$(DLC_SCALE) KUBEBUILDER_ASSETS="$$(bash hack/envtest-assets.sh)" go test -run '^TestScale$$' -v -count=1 -timeout $(SCALE_TIMEOUT) ./backend/kube/scale

# The soak (not in CI; docs/scale.md, "A soak"): DLC_SOAK of job configs on
# minute schedules through two replica processes on envtest with Ray in the
# loop, a replica killed and started again every few minutes, a row of heaps,
# stored objects, writes and invariants every minute and a flat verdict at
# the end. Without -race: it measures. The other DLC_SOAK_* variables pass
# through the environment (go doc ./backend/kube/soak); SOAK_TIMEOUT is go
# test's backstop.
DLC_SOAK ?= 1h
SOAK_TIMEOUT ?= $(DLC_SOAK)30m
soak:
	DLC_SOAK=$(DLC_SOAK) KUBEBUILDER_ASSETS="$$(bash hack/envtest-assets.sh)" go test -run '^TestSoak$$' -v -count=1 -timeout $(SOAK_TIMEOUT) ./backend/kube/soak

quickstart:
	go run ./examples/quickstart

envtest:
	bash hack/envtest-assets.sh

# Regenerates deep copies and CRDs from backend/kube/api, and the backend's
# Role (config/rbac/role.yaml) from the markers in backend/kube/rbac.go, with
# controller-gen (run through go run at a pinned version, so it is not in
# go.mod); and docs/rules.md from the rule catalog of package rules.
generate:
	go generate ./backend/kube ./backend/kube/api/... ./rules

# vet and staticcheck (at the version hack/staticcheck.sh pins).
lint:
	go vet ./...
	bash hack/staticcheck.sh
