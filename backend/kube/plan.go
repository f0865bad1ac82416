package kube

import (
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
	rc, err := RenderRayCluster(c, p.render)
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
func (p *Provisioner) PlanRun(r *job.Run, c *cluster.Cluster) ([]backend.Manifest, error) {
	if r.Config.OnDemand != nil {
		rj, err := RenderTemporary(c, r, p.render)
		if err != nil {
			return nil, err
		}
		if err := rayutils.ValidateRayJobSpec(rj); err != nil {
			return nil, errs.Invalid("rayJob", "", rj.Name, "KubeRay refuses the rendered RayJob: "+err.Error())
		}
		return []backend.Manifest{{Kind: "RayJob", Name: rj.Name, Object: rj}}, nil
	}
	req, err := RunRequest(r, p.render)
	if err != nil {
		return nil, err
	}
	return []backend.Manifest{{Kind: "RayJobRequest", Name: r.ID, Object: req}}, nil
}
