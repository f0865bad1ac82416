package kube

import (
	"net/url"

	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

var _ backend.Planner = (*Provisioner)(nil)

// PlanCluster returns the RayCluster that ApplyCluster would apply for
// standing cluster c, rendered as ApplyCluster renders it and checked by
// KubeRay's own validation (ValidateRayClusterSpec, which its operator
// runs): what a create applies, before the owner reference to the
// ComputeCluster (which does not exist yet) and before what a change of a
// running cluster carries over from the applied one (the autoscaler's
// replicas). It reads and writes nothing.
func (p *Provisioner) PlanCluster(c *cluster.Cluster) ([]backend.Manifest, error) {
	rc, err := RenderRayCluster(c, p.renderIn(liveGroup(c)))
	if err != nil {
		return nil, err
	}
	if err := rayutils.ValidateRayClusterSpec(&rc.Spec, rc.Annotations); err != nil {
		return nil, errs.Invalid("rayCluster", "", rc.Name, "KubeRay refuses the rendered RayCluster: "+err.Error())
	}
	return []backend.Manifest{{Kind: "RayCluster", Name: rc.Name, Object: rc}}, nil
}

// PlanRun returns what placing run r writes: for an on-demand run, the
// RayJob of its cluster c (RenderTemporary, checked by KubeRay's
// ValidateRayJobSpec); for a run on cluster c, the Ray Jobs API request
// SubmitRun would send to its head. It reads and writes nothing.
//
// A plan is shown to users: the package's URL in it is not the one the run
// will get. The backend's WorkingDir is asked all the same (a package it
// cannot serve fails the plan as it would fail the run), and what it
// returned is shown without its query, where a presigned URL keeps its
// signature, with a placeholder saying when the real one is made
// (PlanSignature).
func (p *Provisioner) PlanRun(r *job.Run, c *cluster.Cluster) ([]backend.Manifest, error) {
	rg := ""
	if od := r.Config.OnDemand; od != nil {
		rg = od.ResourceGroup
	} else if c != nil {
		rg = liveGroup(c)
	}
	o := p.renderIn(rg)
	if real := o.WorkingDir; real != nil {
		o.WorkingDir = func(u PackageUse) (string, error) {
			dir, err := real(u)
			if err != nil || rayWorkingDirProblem(dir) != "" {
				return dir, err // refused as the run would be, by workingDir
			}
			return withoutSignature(dir), nil
		}
	}
	if r.Config.OnDemand != nil {
		rj, err := RenderTemporary(c, r, o)
		if err != nil {
			return nil, err
		}
		if err := rayutils.ValidateRayJobSpec(rj); err != nil {
			return nil, errs.Invalid("rayJob", "", rj.Name, "KubeRay refuses the rendered RayJob: "+err.Error())
		}
		return []backend.Manifest{{Kind: "RayJob", Name: rj.Name, Object: rj}}, nil
	}
	req, err := RunRequest(r, o)
	if err != nil {
		return nil, err
	}
	return []backend.Manifest{{Kind: "RayJobRequest", Name: r.ID, Object: req}}, nil
}

// PlanSignature is the query a plan shows in place of a package URL's:
// the URL, and its signature, are made when the run is submitted.
const PlanSignature = "dlc-presigned-when-submitted"

// withoutSignature is dir with PlanSignature for its query, if it had one.
func withoutSignature(dir string) string {
	u, err := url.Parse(dir)
	if err != nil || (u.RawQuery == "" && u.User == nil) {
		return dir
	}
	u.User, u.RawQuery, u.Fragment = nil, PlanSignature, ""
	return u.String()
}
