// Package watch is what a watch of the platform's objects tells
// (Clusters().Watch, Runs().Watch): each change of a selected object as
// an event, as client-go's watch names them.
//
// A watch tells of the changes to one kind of object as its client's
// cache sees them (the store's watch), the way an informer's handlers
// are told: level-triggered, never blocking the store. Changes the
// caller has not read yet are merged per object, so a slow reader misses
// none and gets each object as it last is.
package watch

import (
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// EventType says what became of an object in a watch event: Added,
// Modified or Deleted.
type EventType string

// Event types, as client-go's watch names them.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// ClusterEvent is a change of a cluster, as a watch tells it.
type ClusterEvent struct {
	Type EventType
	ID   string
	// Cluster is the cluster as the client's cache has it when the event
	// is read (changes not read yet are merged: it is the latest); nil
	// for Deleted.
	Cluster *cluster.Cluster
}

// ClusterOptions selects the clusters a watch tells of.
type ClusterOptions struct {
	IDs     []string // only these clusters; none: every one
	Initial bool     // first tell every selected cluster the cache has, as Added
}

// RunEvent is a change of a run, as a watch tells it.
type RunEvent struct {
	Type EventType
	ID   string
	// Run is the run as the client's cache has it when the event is read
	// (the latest); nil for Deleted.
	Run *job.Run
}

// RunOptions selects the runs a watch tells of.
type RunOptions struct {
	IDs     []string // only these runs; none: every one
	JobID   string   // only the runs of this job config; "": of every one
	Initial bool     // first tell every selected run the cache has, as Added
}
