package kube

// RBAC: what the backend needs on the API server, and no more. The markers
// below are the source of the Role config/rbac/role.yaml, named
// dlc-backend, which controller-gen writes (go generate in this directory,
// or make generate; hack/check-generated.sh fails when the committed file is
// stale). Every marker names a namespace, so the result is a namespaced Role
// rather than a ClusterRole: the backend works in one namespace and needs
// nothing cluster-wide. The namespace written here, dlc-system, is a
// placeholder: config/kustomization.yaml sets the namespace everything is
// installed into, Role included.
//
// Installing the CRDs (InstallCRDs, or kubectl apply -k config) needs
// cluster-scoped rights and is an administrator's step, not the backend's.
//
// The go:generate line scans this package alone (paths=., not ./..., so
// nothing below it such as api/v1alpha1): controller-gen v0.23.0 takes
// directories, not files. A marker in another file of the package would
// count too; keep them all here.

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 rbac:roleName=dlc-backend paths=. output:rbac:artifacts:config=../../config/rbac

// dlc.aidlc.io: the store (NewStore) keeps every domain object as one of
// the SDK's own kinds: it watches them through informers, creates,
// updates (a compare-and-swap on the resourceVersion) and deletes them, and
// writes their status subresource separately. Its own bookkeeping (name
// claims, the members sharing the work, settled reservations) is
// StoreEntries, which nothing else writes: no role aggregated to edit or
// admin names them, and the admission policy dlc-store refuses every
// writer of the SDK's kinds but this identity in the enforced namespaces.
//
// +kubebuilder:rbac:groups=dlc.aidlc.io,namespace=dlc-system,resources=computeclusters;clustergroups;clustertemplates;jobconfigs;runs;resourcegroups;storeentries,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=dlc.aidlc.io,namespace=dlc-system,resources=computeclusters/status;clustergroups/status;clustertemplates/status;jobconfigs/status;runs/status;resourcegroups/status,verbs=get;update;patch

// ray.io: the provisioner applies RayClusters and RayJobs rendered by
// RenderRayCluster and RenderRayJob (server-side apply is a patch, which
// creates the object when it is missing), watches them for their status and
// deletes them. KubeRay makes their pods with its own rights: the
// admission policies of config/admission hold what this identity writes to
// the shapes the renderers make (no privileges, Secrets, tokens or exposed
// heads), and the namespace's Pod Security label (restricted) the pods.
//
// +kubebuilder:rbac:groups=ray.io,namespace=dlc-system,resources=rayclusters;rayjobs,verbs=get;list;watch;create;update;patch;delete

// Core Pods and Services: a cluster's pods are read (never written: KubeRay
// makes them) to tell why it is not ready, and its head Service to reach
// the head. services/proxy is the Ray Jobs REST API through the API
// server's service proxy (ServiceProxyURL): GET is get (a job's status and
// logs), POST is create (submit, stop).
//
// +kubebuilder:rbac:groups="",namespace=dlc-system,resources=pods;services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=dlc-system,resources=services/proxy,verbs=get;create

// Events, core and events.k8s.io: Kubernetes Events about our objects
// (created, or patched when the recorder aggregates a repeated one).
//
// +kubebuilder:rbac:groups="";events.k8s.io,namespace=dlc-system,resources=events,verbs=create;patch

// ResourceQuotas: a resource group with a namespace of its own
// (Options.GroupNamespaces) has the ResourceQuota GroupQuotaName there,
// which the backend keeps equal to its capacity (get, create, update). No
// marker here: the backend's own namespace has none, and only
// config/rbac/group's Role grants it (TestGroupRoleMatchesTheBackendRole).

// NetworkPolicies: one per resource group, applied (server-side apply:
// patch, create the first time) when Options.NetworkPolicy is set; never
// read back, so no get, list or watch.
//
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=dlc-system,resources=networkpolicies,verbs=create;patch
