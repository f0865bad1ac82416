package dlchttp

import (
	"net/http"
	"net/url"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/plan"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// routes is the route table: every route the handler serves, in the
// order docs/http.md lists them.
func routes() []*route {
	return guarded([]*route{
		// Clusters.
		{method: "GET", path: "/v1/clusters", id: "listClusters", tag: "clusters", summary: "List clusters, a page at a time",
			query: []param{pLimit, pContinue,
				{name: "state", typ: "string", repeated: true, desc: "only clusters in this state (repeat for more)"},
				{name: "creator", typ: "string", desc: "only clusters this user created"},
				{name: "resourceGroup", typ: "string", desc: "only clusters in this resource group"},
				{name: "group", typ: "string", desc: "only members of this cluster group"},
				{name: "kind", typ: "string", desc: `"standing" or "on-demand"; none: both`},
				{name: "createdAfter", typ: "date-time", desc: "only clusters created after this time"},
				pTag},
			status: 200, result: page[*cluster.Cluster]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				q := query{r.URL.Query()}
				var o dlc.ClusterListOptions
				var err error
				if o.Limit, o.Continue, err = h.page(q); err != nil {
					return err
				}
				if o.States, err = clusterStates(q); err != nil {
					return err
				}
				if o.CreatedAfter, err = q.time("createdAfter"); err != nil {
					return err
				}
				if o.Tags, err = q.tags("tag"); err != nil {
					return err
				}
				o.Creator, o.ResourceGroup, o.Group, o.Kind = q.Get("creator"), q.Get("resourceGroup"), q.Get("group"), q.Get("kind")
				if o.Kind != "" && o.Kind != cluster.KindStanding && o.Kind != cluster.KindOnDemand {
					return badParam("kind", `want "standing" or "on-demand"`)
				}
				p, err := h.c.Clusters().ListPage(r.Context(), o)
				if err != nil {
					return err
				}
				return ok(w, page[*cluster.Cluster]{Items: p.Items, Continue: p.Continue})
			}},
		{method: "POST", path: "/v1/clusters", id: "createCluster", tag: "clusters", summary: "Create a cluster from its spec (JSON or YAML)",
			headers: []param{hIdem}, body: &body{schema: cluster.Spec{}, yaml: true, desc: "the cluster spec"},
			status: 201, result: &cluster.Cluster{}, etag: true, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				key, err := idempotencyKey(r)
				if err != nil {
					return err
				}
				spec, err := decodeSpec(r)
				if err != nil {
					return err
				}
				cl, err := h.c.Clusters().Create(r.Context(), spec, dlc.ClusterCreateOptions{RequestID: key})
				if err != nil {
					return err
				}
				return created(w, clusterLocation(cl.ID), cl.Version, cl)
			}},
		{method: "POST", path: "/v1/clusters/plan", id: "planCreateCluster", tag: "clusters", summary: "Say what creating a cluster would do, writing nothing",
			body: &body{schema: cluster.Spec{}, yaml: true, desc: "the cluster spec"}, status: 200, result: &plan.Plan{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				spec, err := decodeSpec(r)
				if err != nil {
					return err
				}
				p, err := h.c.Clusters().PlanCreate(r.Context(), spec)
				if err != nil {
					return err
				}
				return ok(w, p)
			}},
		{method: "GET", path: "/v1/clusters/{id}", id: "getCluster", tag: "clusters", summary: "Get a cluster, with its version as ETag",
			status: 200, result: &cluster.Cluster{}, etag: true, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				cl, err := h.c.Clusters().Get(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				setETag(w, cl.Version)
				return ok(w, cl)
			}},
		{method: "PUT", path: "/v1/clusters/{id}", id: "updateCluster", tag: "clusters", summary: "Replace a cluster's spec (If-Match required)",
			headers: []param{hIfMatch}, body: &body{schema: cluster.Spec{}, yaml: true, desc: "the new spec"},
			status: 200, result: editResult{}, etag: true, errors: eUpdate,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				id := pathID(r)
				current := h.clusterVersion(r, id)
				version, onConflict, err := precondition(r, true, current)
				if err != nil {
					return err
				}
				spec, err := decodeSpec(r)
				if err != nil {
					return err
				}
				res, err := h.c.Clusters().Update(r.Context(), &cluster.Cluster{ID: id, Spec: *spec, Version: version})
				if err != nil {
					return onConflict(err)
				}
				setETag(w, res.Cluster.Version)
				return ok(w, editResult{Cluster: res.Cluster, Applied: nonNil(res.Applied), NeedsRestart: nonNil(res.NeedsRestart)})
			}},
		{method: "POST", path: "/v1/clusters/{id}/plan", id: "planUpdateCluster", tag: "clusters", summary: "Say what replacing a cluster's spec would do, writing nothing (If-Match honoured)",
			headers: []param{{name: "If-Match", typ: "string", desc: "the ETag the update would be made against; none: the stored version"}},
			body:    &body{schema: cluster.Spec{}, yaml: true, desc: "the new spec"}, status: 200, result: &plan.Plan{}, errors: ePlan,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				id := pathID(r)
				current := h.clusterVersion(r, id)
				version, onConflict, err := precondition(r, false, current)
				if err != nil {
					return err
				}
				spec, err := decodeSpec(r)
				if err != nil {
					return err
				}
				p, err := h.c.Clusters().PlanUpdate(r.Context(), &cluster.Cluster{ID: id, Spec: *spec, Version: version})
				if err != nil {
					return onConflict(err)
				}
				return ok(w, p)
			}},
		{method: "DELETE", path: "/v1/clusters/{id}", id: "deleteCluster", guard: clusterVersion, tag: "clusters", summary: "Delete a cluster (it is deleting until Ray releases it)",
			query: []param{pForce}, status: 202, errors: append([]int{400}, eAction...),
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				force, err := query{r.URL.Query()}.bool("force")
				if err != nil {
					return err
				}
				if err := h.c.Clusters().Delete(r.Context(), pathID(r), dlc.DeleteOptions{Force: force}); err != nil {
					return err
				}
				return noContent(w, http.StatusAccepted)
			}},
		{method: "POST", path: "/v1/clusters/{id}/start", id: "startCluster", guard: clusterVersion, tag: "clusters", summary: "Start a cluster (reserves its quota)",
			status: 200, result: &cluster.Cluster{}, etag: true, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return clusterResult(w)(h.c.Clusters().Start(r.Context(), pathID(r)))
			}},
		{method: "POST", path: "/v1/clusters/{id}/start/plan", id: "planStartCluster", tag: "clusters", summary: "Say what starting a cluster would do, writing nothing",
			status: 200, result: &plan.Plan{}, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				p, err := h.c.Clusters().PlanStart(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, p)
			}},
		{method: "POST", path: "/v1/clusters/{id}/hibernate", id: "hibernateCluster", guard: clusterVersion, tag: "clusters", summary: "Hibernate a cluster (releases its compute)",
			query: []param{pForce}, status: 200, result: &cluster.Cluster{}, etag: true, errors: append([]int{400}, eAction...),
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				force, err := query{r.URL.Query()}.bool("force")
				if err != nil {
					return err
				}
				return clusterResult(w)(h.c.Clusters().Hibernate(r.Context(), pathID(r), dlc.HibernateOptions{Force: force}))
			}},
		{method: "POST", path: "/v1/clusters/{id}/autoscale", id: "autoscaleCluster", tag: "clusters", summary: "Ask for a worker group's size, as Ray's autoscaler does",
			body: &body{schema: autoscaleBody{}, desc: "the worker group and the workers asked for"}, status: 200, result: autoscaleResult{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b autoscaleBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				res, err := h.c.Clusters().Autoscale(r.Context(), pathID(r), b.Group, b.Replicas)
				if err != nil {
					return err
				}
				return ok(w, autoscaleResult{Asked: res.Asked, Granted: res.Granted, QuotaRefused: res.QuotaRefused, Reason: res.Reason})
			}},
		{method: "POST", path: "/v1/clusters/{id}/clone", id: "cloneCluster", tag: "clusters", summary: "Copy a cluster's spec into a new cluster",
			body: &body{schema: nameBody{}, desc: "the new cluster's name"}, status: 201, result: &cluster.Cluster{}, etag: true, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b nameBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				cl, err := h.c.Clusters().Clone(r.Context(), pathID(r), b.Name)
				if err != nil {
					return err
				}
				return created(w, clusterLocation(cl.ID), cl.Version, cl)
			}},
		{method: "GET", path: "/v1/clusters/{id}/details", id: "clusterDetails", tag: "clusters", summary: "A cluster's details page: reservation, history, log, pods, dashboard",
			status: 200, result: &cluster.Details{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				d, err := h.c.Clusters().Details(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, d)
			}},
		{method: "GET", path: "/v1/clusters/{id}/events", id: "clusterEvents", tag: "clusters", summary: "A cluster's operation and event log, oldest first",
			status: 200, result: page[event.Event]{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return eventsResult(w)(h.c.Clusters().Events(r.Context(), pathID(r)))
			}},
		{method: "GET", path: "/v1/watch/clusters", id: "watchClusters", tag: "clusters", summary: "Server-sent events: every change of the selected clusters",
			query:  []param{{name: "id", typ: "string", repeated: true, desc: "only this cluster (repeat for more); none: every one"}, pInitial},
			status: 200, result: clusterEvent{}, stream: true, errors: []int{400, 401, 403, 500, 503},
			serve: (*Handler).watchClusters},

		// Cluster groups.
		{method: "GET", path: "/v1/groups", id: "listGroups", tag: "groups", summary: "List cluster groups",
			status: 200, result: page[*group.Group]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				gs, err := h.c.Groups().List(r.Context())
				if err != nil {
					return err
				}
				return ok(w, page[*group.Group]{Items: nonNil(gs)})
			}},
		{method: "POST", path: "/v1/groups", id: "createGroup", tag: "groups", summary: "Create a cluster group",
			body: &body{schema: groupBody{}, desc: "the name and, optionally, the scheduling policy"}, status: 201, result: &group.Group{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b groupBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				var o dlc.GroupCreateOptions
				if b.Scheduling != nil {
					o.Scheduling = *b.Scheduling
				}
				g, err := h.c.Groups().Create(r.Context(), b.Name, o)
				if err != nil {
					return err
				}
				return created(w, "/v1/groups/"+url.PathEscape(g.ID), "", g)
			}},
		{method: "GET", path: "/v1/groups/{id}", id: "getGroup", tag: "groups", summary: "Get a cluster group",
			status: 200, result: &group.Group{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				g, err := h.c.Groups().Get(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, g)
			}},
		{method: "DELETE", path: "/v1/groups/{id}", id: "deleteGroup", tag: "groups", summary: "Delete a cluster group, moving its clusters into the target group",
			query:  []param{{name: "target", typ: "string", required: true, desc: "the group the members move into"}},
			status: 204, errors: append([]int{400, 422}, eAction...),
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				if err := h.c.Groups().Delete(r.Context(), pathID(r), r.URL.Query().Get("target")); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},
		{method: "GET", path: "/v1/groups/{id}/members", id: "groupMembers", tag: "groups", summary: "The clusters in a group",
			status: 200, result: page[*cluster.Cluster]{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				cs, err := h.c.Groups().Members(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, page[*cluster.Cluster]{Items: nonNil(cs)})
			}},
		{method: "POST", path: "/v1/groups/{id}/members/add", id: "addGroupMembers", tag: "groups", summary: "Put clusters into a group (all or none)",
			body: &body{schema: membersBody{}, desc: "the clusters"}, status: 204, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b membersBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				if err := h.c.Groups().AddMembers(r.Context(), pathID(r), b.Clusters...); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},
		{method: "POST", path: "/v1/groups/{id}/members/remove", id: "removeGroupMembers", tag: "groups", summary: "Take clusters out of a group",
			body: &body{schema: membersBody{}, desc: "the clusters"}, status: 204, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b membersBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				if err := h.c.Groups().RemoveMembers(r.Context(), pathID(r), b.Clusters...); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},
		{method: "POST", path: "/v1/groups/{id}/rename", id: "renameGroup", tag: "groups", summary: "Rename a cluster group",
			body: &body{schema: nameBody{}, desc: "the new name"}, status: 200, result: &group.Group{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b nameBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				g, err := h.c.Groups().Rename(r.Context(), pathID(r), b.Name)
				if err != nil {
					return err
				}
				return ok(w, g)
			}},
		{method: "PUT", path: "/v1/groups/{id}/policy", id: "setGroupPolicy", tag: "groups", summary: "Set a group's scheduling policy (JSON or YAML)",
			body: &body{schema: group.Scheduling{}, yaml: true, desc: "the policy and, for ordered-failover, the order"}, status: 200, result: &group.Group{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				s := new(group.Scheduling)
				if err := decode(r, s, func(b []byte) error {
					v, err := group.UnmarshalSchedulingYAML(b)
					if err == nil {
						s = v
					}
					return err
				}); err != nil {
					return err
				}
				g, err := h.c.Groups().SetPolicy(r.Context(), pathID(r), *s)
				if err != nil {
					return err
				}
				return ok(w, g)
			}},

		// Templates.
		{method: "GET", path: "/v1/templates", id: "listTemplates", tag: "templates", summary: "List compute-environment templates",
			status: 200, result: page[*cluster.Template]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				ts, err := h.c.Templates().List(r.Context())
				if err != nil {
					return err
				}
				return ok(w, page[*cluster.Template]{Items: nonNil(ts)})
			}},
		{method: "GET", path: "/v1/templates/{id}", id: "getTemplate", tag: "templates", summary: "Get a template by name",
			status: 200, result: &cluster.Template{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				t, err := h.c.Templates().Get(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, t)
			}},
		{method: "PUT", path: "/v1/templates/{id}", id: "saveTemplate", tag: "templates", summary: "Save a template under its name, replacing one of that name (JSON or YAML)",
			body: &body{schema: cluster.Template{}, yaml: true, desc: "the template; its name is the path's, or empty"}, status: 200, result: &cluster.Template{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				t := new(cluster.Template)
				if err := decode(r, t, func(b []byte) error {
					v, err := cluster.UnmarshalTemplateYAML(b)
					if err == nil {
						t = v
					}
					return err
				}); err != nil {
					return err
				}
				name := pathID(r)
				if t.Name == "" {
					t.Name = name
				} else if t.Name != name {
					return nameMismatch(t.Name, name)
				}
				if err := h.c.Templates().Save(r.Context(), t); err != nil {
					return err
				}
				saved, err := h.c.Templates().Get(r.Context(), name)
				if err != nil {
					return err
				}
				return ok(w, saved)
			}},
		{method: "DELETE", path: "/v1/templates/{id}", id: "deleteTemplate", tag: "templates", summary: "Delete a template",
			status: 204, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				if err := h.c.Templates().Delete(r.Context(), pathID(r)); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},

		// Job configs.
		{method: "GET", path: "/v1/jobs", id: "listJobs", tag: "jobs", summary: "List job configs, a page at a time",
			query: []param{pLimit, pContinue,
				{name: "creator", typ: "string", desc: "only configs this user created"},
				{name: "mode", typ: "string", desc: `"onDemand", "cluster" or "group"`},
				{name: "resource", typ: "string", desc: "only configs on this cluster, cluster group or resource group"},
				{name: "nameContains", typ: "string", desc: "only configs whose name contains this"},
				{name: "createdAfter", typ: "date-time", desc: "only configs created after this time"},
				pTag},
			status: 200, result: page[job.ListEntry]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				q := query{r.URL.Query()}
				var o dlc.JobListOptions
				var err error
				if o.Limit, o.Continue, err = h.page(q); err != nil {
					return err
				}
				if o.CreatedAfter, err = q.time("createdAfter"); err != nil {
					return err
				}
				if o.Tags, err = q.tags("tag"); err != nil {
					return err
				}
				o.Creator, o.Mode, o.Resource, o.NameContains = q.Get("creator"), job.Mode(q.Get("mode")), q.Get("resource"), q.Get("nameContains")
				switch o.Mode {
				case "", job.OnDemandMode, job.ClusterMode, job.GroupMode:
				default:
					return badParam("mode", `want "onDemand", "cluster" or "group"`)
				}
				p, err := h.c.Jobs().ListPage(r.Context(), o)
				if err != nil {
					return err
				}
				return ok(w, page[job.ListEntry]{Items: nonNil(p.Items), Continue: p.Continue})
			}},
		{method: "POST", path: "/v1/jobs", id: "createJob", tag: "jobs", summary: "Save a job config (JSON or YAML)",
			headers: []param{hIdem}, body: &body{schema: job.Config{}, yaml: true, desc: "the job config"},
			status: 201, result: &job.Record{}, etag: true, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				key, err := idempotencyKey(r)
				if err != nil {
					return err
				}
				cfg, err := h.decodeConfig(r)
				if err != nil {
					return err
				}
				rec, err := h.c.Jobs().Create(r.Context(), cfg, dlc.SaveOptions{RequestID: key})
				if err != nil {
					return err
				}
				return created(w, "/v1/jobs/"+url.PathEscape(rec.ID), rec.Version, rec)
			}},
		{method: "GET", path: "/v1/jobs/{id}", id: "getJob", tag: "jobs", summary: "Get a job config, with its version as ETag",
			status: 200, result: &job.Record{}, etag: true, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return recordResult(w)(h.c.Jobs().Get(r.Context(), pathID(r)))
			}},
		{method: "PUT", path: "/v1/jobs/{id}", id: "updateJob", tag: "jobs", summary: "Save a new revision of a job config (If-Match required)",
			headers: []param{hIfMatch}, body: &body{schema: job.Config{}, yaml: true, desc: "the new config"},
			status: 200, result: &job.Record{}, etag: true, errors: eUpdate,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				id := pathID(r)
				version, onConflict, err := precondition(r, true, jobVersion(h, r))
				if err != nil {
					return err
				}
				cfg, err := h.decodeConfig(r)
				if err != nil {
					return err
				}
				rec, err := h.c.Jobs().Update(r.Context(), &job.Record{ID: id, Config: *cfg, Version: version})
				if err != nil {
					return onConflict(err)
				}
				return recordResult(w)(rec, nil)
			}},
		{method: "DELETE", path: "/v1/jobs/{id}", id: "deleteJob", guard: jobVersion, tag: "jobs", summary: "Delete a job config (refused while a run of it has not ended)",
			status: 204, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				if err := h.c.Jobs().Delete(r.Context(), pathID(r)); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},
		{method: "POST", path: "/v1/jobs/{id}/clone", id: "cloneJob", tag: "jobs", summary: `Save a copy of a job config (an empty name gives "<name> (copy)")`,
			body: &body{schema: nameBody{}, desc: "the copy's name"}, status: 201, result: &job.Record{}, etag: true, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b nameBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				rec, err := h.c.Jobs().Clone(r.Context(), pathID(r), b.Name)
				if err != nil {
					return err
				}
				return created(w, "/v1/jobs/"+url.PathEscape(rec.ID), rec.Version, rec)
			}},
		{method: "GET", path: "/v1/jobs/{id}/events", id: "jobEvents", tag: "jobs", summary: "A job config's operation log, oldest first",
			status: 200, result: page[event.Event]{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return eventsResult(w)(h.c.Jobs().Events(r.Context(), pathID(r)))
			}},
		{method: "POST", path: "/v1/jobs/{id}/schedule/suspend", id: "suspendJobSchedule", guard: jobVersion, tag: "jobs", summary: "Suspend a job config's schedule",
			status: 200, result: &job.Record{}, etag: true, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return recordResult(w)(h.c.Jobs().SuspendSchedule(r.Context(), pathID(r)))
			}},
		{method: "POST", path: "/v1/jobs/{id}/schedule/resume", id: "resumeJobSchedule", guard: jobVersion, tag: "jobs", summary: "Resume a suspended schedule (its ticks count from now)",
			status: 200, result: &job.Record{}, etag: true, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return recordResult(w)(h.c.Jobs().ResumeSchedule(r.Context(), pathID(r)))
			}},
		{method: "GET", path: "/v1/jobs/{id}/schedule/next", id: "jobNextTicks", tag: "jobs", summary: "The next times a job config's schedule fires",
			query:  []param{{name: "n", typ: "integer", desc: "how many (1–100, default 5)"}},
			status: 200, result: ticksResult{}, errors: append([]int{400}, eAction...),
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				n, err := query{r.URL.Query()}.int("n", defaultNextTicks, 1, maxNextTicks)
				if err != nil {
					return err
				}
				ts, err := h.c.Jobs().NextTicks(r.Context(), pathID(r), n)
				if err != nil {
					return err
				}
				return ok(w, ticksResult{Times: nonNil(ts)})
			}},
		{method: "POST", path: "/v1/jobs/{id}/runs", id: "createRun", tag: "runs", summary: "Start a run of a job config's current revision",
			headers: []param{hIdem}, status: 201, result: &job.Run{}, errors: append([]int{400}, eAction...),
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				key, err := idempotencyKey(r)
				if err != nil {
					return err
				}
				run, err := h.c.Runs().Create(r.Context(), pathID(r), dlc.RunOptions{RequestID: key})
				if err != nil {
					return err
				}
				return created(w, "/v1/runs/"+url.PathEscape(run.ID), "", run)
			}},
		{method: "POST", path: "/v1/jobs/{id}/runs/plan", id: "planRun", tag: "runs", summary: "Say what starting a run would do, writing nothing",
			status: 200, result: &plan.Plan{}, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				p, err := h.c.Jobs().PlanRun(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, p)
			}},

		// Runs.
		{method: "GET", path: "/v1/runs", id: "listRuns", tag: "runs", summary: "List runs in submission order, a page at a time",
			query: []param{pLimit, pContinue,
				{name: "job", typ: "string", desc: "only this job config's runs"},
				{name: "cluster", typ: "string", desc: "only the runs placed on this cluster"},
				{name: "state", typ: "string", repeated: true, desc: "only runs in this state (repeat for more)"},
				{name: "creator", typ: "string", desc: "only runs this user created"},
				{name: "submittedAfter", typ: "date-time", desc: "only runs submitted after this time"},
				pTag},
			status: 200, result: page[*job.Run]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				q := query{r.URL.Query()}
				var o dlc.RunListOptions
				var err error
				if o.Limit, o.Continue, err = h.page(q); err != nil {
					return err
				}
				if o.States, err = runStates(q); err != nil {
					return err
				}
				if o.SubmittedAfter, err = q.time("submittedAfter"); err != nil {
					return err
				}
				if o.Tags, err = q.tags("tag"); err != nil {
					return err
				}
				o.JobID, o.ClusterID, o.Creator = q.Get("job"), q.Get("cluster"), q.Get("creator")
				p, err := h.c.Runs().ListPage(r.Context(), o)
				if err != nil {
					return err
				}
				return ok(w, page[*job.Run]{Items: nonNil(p.Items), Continue: p.Continue})
			}},
		{method: "GET", path: "/v1/runs/{id}", id: "getRun", tag: "runs", summary: "Get a run",
			status: 200, result: &job.Run{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				run, err := h.c.Runs().Get(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, run)
			}},
		{method: "POST", path: "/v1/runs/{id}/stop", id: "stopRun", tag: "runs", summary: "Stop a run that has not ended",
			status: 200, result: &job.Run{}, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				run, err := h.c.Runs().Stop(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, run)
			}},
		{method: "GET", path: "/v1/runs/{id}/pending", id: "runPending", tag: "runs", summary: "Why and where a waiting run waits (409 state once it no longer waits)",
			status: 200, result: &job.Pending{}, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				p, err := h.c.Runs().Pending(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, p)
			}},
		{method: "GET", path: "/v1/runs/{id}/logs", id: "runLogs", tag: "runs", summary: "What a run has logged so far",
			status: 200, result: logsResult{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				lines, err := h.c.Runs().Logs(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, logsResult{Lines: nonNil(lines)})
			}},
		{method: "GET", path: "/v1/runs/{id}/logs/follow", id: "followRunLogs", tag: "runs", summary: "Server-sent events: a run's log lines as they come, until it ends",
			headers: []param{{name: "Last-Event-ID", typ: "integer", desc: "the id of the last line a client got, when it reconnects: the lines after it"}},
			status:  200, result: "", stream: true, errors: eRead,
			serve: (*Handler).followLogs},
		{method: "GET", path: "/v1/runs/{id}/events", id: "runEvents", tag: "runs", summary: "A run's event log, oldest first",
			status: 200, result: page[event.Event]{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				return eventsResult(w)(h.c.Runs().Events(r.Context(), pathID(r)))
			}},
		{method: "GET", path: "/v1/watch/runs", id: "watchRuns", tag: "runs", summary: "Server-sent events: every change of the selected runs",
			query: []param{{name: "id", typ: "string", repeated: true, desc: "only this run (repeat for more); none: every one"},
				{name: "job", typ: "string", desc: "only the runs of this job config"}, pInitial},
			status: 200, result: runEvent{}, stream: true, errors: []int{400, 401, 403, 500, 503},
			serve: (*Handler).watchRuns},

		// Resource groups.
		{method: "GET", path: "/v1/resourcegroups", id: "listResourceGroups", tag: "resourcegroups", summary: "Every resource group's capacity and reservations",
			status: 200, result: page[quota.Usage]{}, errors: eList,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				us, err := h.c.ResourceGroups().List(r.Context())
				if err != nil {
					return err
				}
				return ok(w, page[quota.Usage]{Items: nonNil(us)})
			}},
		{method: "GET", path: "/v1/resourcegroups/{id}", id: "getResourceGroup", tag: "resourcegroups", summary: "A resource group's capacity, reservations and what it can still allocate",
			status: 200, result: quota.Usage{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				u, err := h.c.ResourceGroups().Get(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, u)
			}},
		{method: "PUT", path: "/v1/resourcegroups/{id}", id: "registerResourceGroup", tag: "resourcegroups", summary: "Register a resource group, or change its capacity",
			body: &body{schema: registerBody{}, desc: "its resource package and capacity"}, status: 200, result: quota.Usage{}, errors: eBody,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				var b registerBody
				if err := decode(r, &b, nil); err != nil {
					return err
				}
				u, err := h.c.ResourceGroups().Register(r.Context(), quota.Group{ID: pathID(r), Package: b.Package, Capacity: b.Capacity})
				if err != nil {
					return err
				}
				return ok(w, u)
			}},
		{method: "DELETE", path: "/v1/resourcegroups/{id}", id: "deleteResourceGroup", tag: "resourcegroups", summary: "Delete a resource group (409 state while anything holds quota or queues in it)",
			status: 204, errors: eAction,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				if err := h.c.ResourceGroups().Delete(r.Context(), pathID(r)); err != nil {
					return err
				}
				return noContent(w, http.StatusNoContent)
			}},
		{method: "GET", path: "/v1/resourcegroups/{id}/pending", id: "resourceGroupPending", tag: "resourcegroups", summary: "The runs waiting in a resource group's queue, in admission order",
			status: 200, result: page[job.Pending]{}, errors: eRead,
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				ps, err := h.c.ResourceGroups().Pending(r.Context(), pathID(r))
				if err != nil {
					return err
				}
				return ok(w, page[job.Pending]{Items: nonNil(ps)})
			}},

		// Usage.
		{method: "POST", path: "/v1/usage", id: "usageReport", tag: "usage", summary: "A usage report: what clusters ran in a span, grouped and priced (only the clusters the user may describe)",
			query:  []param{{name: "format", typ: "string", desc: "json (the default) or csv"}},
			body:   &body{schema: usage.Query{}, desc: "the span [from, to), the grouping (resourceGroup, resourcePackage, creator, cluster, job or tag:<key>), a filter and a price list"},
			status: 200, result: usage.Report{}, errors: []int{400, 401, 403, 413, 415, 422, 500, 503},
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				format := r.URL.Query().Get("format")
				if format != "" && format != "json" && format != "csv" {
					return httpError(http.StatusBadRequest, CodeBadRequest, "format must be json or csv")
				}
				var q usage.Query
				if err := decode(r, &q, nil); err != nil {
					return err
				}
				rep, err := h.c.Usage(r.Context(), q)
				if err != nil {
					return err
				}
				if format == "csv" {
					w.Header().Set("Content-Type", "text/csv; charset=utf-8")
					w.WriteHeader(http.StatusOK)
					return rep.WriteCSV(w)
				}
				return ok(w, rep)
			}},

		// The document.
		{method: "GET", path: "/v1/openapi.json", id: "openAPI", tag: "meta", summary: "This API's OpenAPI 3 document",
			status: 200, result: map[string]any{}, public: true, errors: []int{500},
			serve: func(h *Handler, w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(h.openapi)
				return nil
			}},
	})
}
