// Package dlc is an embeddable SDK that does, in process, what a managed
// Ray platform ("AI DLC") does: it validates job configurations and
// compute clusters against every product rule, keeps their state,
// schedules runs onto clusters, cluster groups or on-demand clusters
// queued inside a resource group's quota, provisions Ray through KubeRay,
// and handles job packages in Tencent COS.
//
// Start with the builders:
//
//	spec, err := dlc.NewCluster("训练集群_01").
//		Groups("grp-1").
//		Resources("pkg-1", "rg-1").
//		Image("ray-2.46.0-py310-cpu").
//		Head("head", "cu.4c16g").
//		WorkerGroup("cpu", "cu.8c32g", 1, 4).
//		Build()
//
// Build and Validate report every problem at once; each is an
// *errs.FieldError (aliased here as FieldError) with its field path and
// the ID of the rule it breaks, which package rules resolves (the
// catalog is in docs/rules.md), and the whole error is errors.Is
// ErrInvalid.
package dlc

import (
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// The typed errors every package of the SDK returns; test them with
// errors.Is. They are the same values as those of package errs.
var (
	ErrNotFound = errs.ErrNotFound // the object does not exist
	ErrConflict = errs.ErrConflict // a stale write, or a name already taken
	ErrInvalid  = errs.ErrInvalid  // the input breaks a rule
	ErrState    = errs.ErrState    // the operation is not allowed in the current state
	ErrQuota    = errs.ErrQuota    // the resource group cannot allocate it
	// ErrUnavailable: the backend could not answer now; retry the call.
	ErrUnavailable = errs.ErrUnavailable
)

// FieldError is one validation problem: a field path, a rule ID and a
// detail. Use errors.As to get one, Fields to get them all.
type FieldError = errs.FieldError

// StateError says that an operation is not allowed in an object's state
// and which states would allow it.
type StateError = errs.StateError

// Fields returns every *FieldError inside err.
func Fields(err error) []*FieldError { return errs.Fields(err) }

// NewCluster starts building a compute cluster spec called name (C1).
func NewCluster(name string) *cluster.Builder { return cluster.NewBuilder(name) }

// NewJob starts building a job config called name (J1).
func NewJob(name string) *job.Builder { return job.NewBuilder(name) }
