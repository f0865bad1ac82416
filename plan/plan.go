// Package plan is what an operation would do, found without writing
// anything (Clusters().PlanCreate, PlanStart and PlanUpdate,
// Jobs().PlanRun): the objects the backend would write, the quota the
// operation reserves beside what its resource group holds, whether it
// fits now, and where an on-demand run that does not would wait.
package plan

import (
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Plan is what an operation would do.
type Plan struct {
	// Operation names it: "create cluster", "start cluster", "run job".
	Operation string `json:"operation"`
	// Cluster is the cluster as the operation would store it (a create,
	// a start), or the on-demand cluster a run would get, or the cluster
	// a run on a cluster would go to as it is now.
	Cluster *cluster.Cluster `json:"cluster,omitempty"`
	// Run is the run a job's run would store (its id is not the one a
	// real run gets).
	Run *job.Run `json:"run,omitempty"`
	// Manifests are what the backend would write (on Kubernetes the
	// RayCluster or RayJob as it would apply it, checked by KubeRay's own
	// validation, or the Ray Jobs API request of a run on a cluster); on a
	// backend that cannot say, a summary: the cluster as stored.
	Manifests []backend.Manifest `json:"manifests,omitempty"`
	// Quota is the reservation the operation makes; nil when it makes
	// none (a run on an existing cluster: the cluster holds the quota, C15).
	Quota *Quota `json:"quota,omitempty"`
	// Position and Ahead are where an on-demand run that does not fit now
	// would wait in its resource group's queue: 1-based, behind Ahead
	// runs of a priority as high or higher.
	Position int `json:"position,omitempty"`
	Ahead    int `json:"ahead,omitempty"`
	// Notes say what else is worth knowing: an autoscaling maximum the
	// whole quota could never reach, a run on a cluster that is not
	// running (it would wait, J18).
	Notes []string `json:"notes,omitempty"`
}

// Quota is an operation's effect on its resource group's quota.
type Quota struct {
	ResourceGroup string          `json:"resourceGroup"`
	Capacity      quota.Resources `json:"capacity"`
	// Needs is what the operation reserves; for a create, what its start
	// will reserve (a create itself reserves nothing).
	Needs quota.Resources `json:"needs"`
	// ReservedBefore and ReservedAfter are the group's reservations now
	// and once the operation has reserved (the same for a create).
	ReservedBefore quota.Resources `json:"reservedBefore"`
	ReservedAfter  quota.Resources `json:"reservedAfter"`
	// Allocatable is what the group can allocate now.
	Allocatable quota.Resources `json:"allocatable"`
	// Fits says whether Needs fits Allocatable now; Lacks says it in words.
	Fits  bool   `json:"fits"`
	Lacks string `json:"lacks,omitempty"`
}
