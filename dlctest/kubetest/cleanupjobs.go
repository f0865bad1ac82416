package kubetest

import (
	"context"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RedisCleanupJobs plays the Job controller for the one kind of Job
// KubeRay makes: the Redis-cleanup Job of a RayCluster with GCS fault
// tolerance (see [ControlPlane.StartRedisCleanupJobs]). KubeRay holds the
// deletion of such a RayCluster with its finalizer
// ray.io/gcs-ft-redis-cleanup-finalizer until that Job has finished, and
// an envtest control plane runs no Jobs (the kube-controller-manager of
// [ControlPlane.StartControllers] runs no Job controller), so without a
// stand-in the RayCluster is never gone.
//
// It looks only at Jobs labelled as KubeRay labels them
// (ray.io/node-type=redis-cleanup and a ray.io/cluster), and:
//
//   - marks each such Job that has not finished as complete, in its status
//     as the Job controller writes it once its one pod has succeeded:
//     startTime and completionTime, succeeded 1, active 0, and the
//     conditions SuccessCriteriaMet and then Complete true (reason
//     CompletionsReached), which is what KubeRay's utils.IsJobFinished
//     reads. No pod is made: nothing cleans Redis;
//   - deletes such a Job once the RayCluster that controls it (its owner
//     reference) is gone, as the garbage collector does.
//
// Nothing else is touched; [RedisCleanupJobs.Completed] counts the Jobs
// completed.
type RedisCleanupJobs struct {
	*standIn

	mu        sync.Mutex
	completed int
}

// redisCleanupSelector picks the Jobs KubeRay makes to clean a RayCluster's
// storage namespace in Redis (common.RayClusterRedisCleanupJobAssociationOptions).
var redisCleanupSelector = labels.SelectorFromSet(labels.Set{utils.RayNodeTypeLabelKey: string(rayv1.RedisCleanupNode)})

// StartRedisCleanupJobs starts the Job controller stand-in for KubeRay's
// Redis-cleanup Jobs ([RedisCleanupJobs]) in the given namespaces (all
// namespaces when none are given) and stops it when t's test ends.
// [ControlPlane.StartRayLoop] starts one.
//
//	cp.StartKubeRay(t, kubetest.KubeRayOptions{Namespaces: []string{ns}})
//	cp.StartKubelet(t, ns)
//	cp.StartRedisCleanupJobs(t, ns)
//	// a RayCluster with gcsFaultToleranceOptions, deleted, is gone
func (cp *ControlPlane) StartRedisCleanupJobs(t TestingT, namespaces ...string) *RedisCleanupJobs {
	t.Helper()
	j, err := startRedisCleanupJobs(cp, namespaces)
	if err != nil {
		t.Fatalf("dlctest: Redis-cleanup Jobs: %v", err)
		return nil
	}
	t.Cleanup(j.stop)
	return j
}

func startRedisCleanupJobs(cp *ControlPlane, namespaces []string) (*RedisCleanupJobs, error) {
	si, err := newStandIn(cp, "dlctest-redis-cleanup-jobs", namespaces, map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Label: redisCleanupSelector},
	})
	if err != nil {
		return nil, err
	}
	j := &RedisCleanupJobs{standIn: si}
	err = j.handle(&batchv1.Job{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    j.add,
		UpdateFunc: func(_, obj any) { j.add(obj) },
	})
	if err == nil {
		// A RayCluster that goes takes its cleanup Job with it.
		err = j.handle(&rayv1.RayCluster{}, toolscache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if rc, ok := obj.(*rayv1.RayCluster); ok {
					j.enqueueOf(si.ctx, rc)
				}
			},
		})
	}
	if err != nil {
		si.cancel()
		return nil, err
	}
	if err := j.run("the Job and RayCluster informers", j.sync); err != nil {
		return nil, err
	}
	return j, nil
}

// enqueueOf queues the cleanup Jobs of a RayCluster, from the cache.
func (j *RedisCleanupJobs) enqueueOf(ctx context.Context, rc *rayv1.RayCluster) {
	var l batchv1.JobList
	if err := j.cache.List(ctx, &l, client.InNamespace(rc.Namespace),
		client.MatchingLabels{utils.RayClusterLabelKey: rc.Name, utils.RayNodeTypeLabelKey: string(rayv1.RedisCleanupNode)}); err != nil {
		return
	}
	for _, job := range l.Items {
		j.queue.Add(types.NamespacedName{Namespace: job.Namespace, Name: job.Name})
	}
}

// Completed reports how many Redis-cleanup Jobs the stand-in has marked
// complete.
func (j *RedisCleanupJobs) Completed() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.completed
}

// sync brings one Job forward: it completes, or goes with its RayCluster.
func (j *RedisCleanupJobs) sync(ctx context.Context, key types.NamespacedName) error {
	var job batchv1.Job
	if err := j.client.Get(ctx, key, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !redisCleanupSelector.Matches(labels.Set(job.Labels)) || job.Labels[utils.RayClusterLabelKey] == "" || job.DeletionTimestamp != nil {
		return nil
	}
	if owner := metav1.GetControllerOf(&job); owner != nil && owner.Kind == "RayCluster" {
		var rc rayv1.RayCluster
		err := j.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: owner.Name}, &rc)
		if apierrors.IsNotFound(err) || (err == nil && rc.UID != owner.UID) {
			err := j.client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &job.UID})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return err
		}
		if err != nil {
			return err
		}
	}
	if _, finished := utils.IsJobFinished(&job); finished {
		return nil
	}
	completeJob(&job)
	err := j.client.Status().Update(ctx, &job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		j.mu.Lock()
		j.completed++
		j.mu.Unlock()
	}
	return err // a conflict is retried from a fresh read
}

// completeJob writes the status the Job controller writes when a Job's
// one pod has succeeded. The API server checks it (completionTime with
// Complete, Complete only after SuccessCriteriaMet, no active pods).
func completeJob(job *batchv1.Job) {
	now := metav1.Now()
	st := &job.Status
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.CompletionTime = &now
	st.Active, st.Succeeded = 0, 1
	st.Ready, st.Terminating = ptr.To[int32](0), ptr.To[int32](0)
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	for _, c := range []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete} {
		st.Conditions = append(st.Conditions, batchv1.JobCondition{
			Type: c, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached,
			Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now,
		})
	}
}
