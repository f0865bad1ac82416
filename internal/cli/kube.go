package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/storage"
)

// KubeConnector connects to the Kubernetes backend with kubectl's
// kubeconfig flags: the rest config they make (impersonating --as, so that
// the API server's RBAC applies to that user), the platform namespace (-n,
// else the context's), and an observer client (dlc.WithObserver) over it.
// The calls act as the user the API server authenticates (WhoAmI), with
// their groups.
type KubeConnector struct {
	// Flags are the kubeconfig flags; required.
	Flags *genericclioptions.ConfigFlags
	// Backend is the base of the backend's options; its Namespace is
	// replaced by the flags'. The zero value is the defaults (Ray's
	// dashboard through the API server's service proxy).
	Backend kube.Options
	// Options are more client options (dlc.WithCatalogs, say).
	Options []dlc.Option
	// COSRegion, when set and Backend.Render.WorkingDir is not, signs job
	// packages in COS (kube.COSWorkingDir) with the credentials of the
	// environment (TENCENTCLOUD_SECRET_ID, TENCENTCLOUD_SECRET_KEY): what
	// a plan of a run needs to render its RayJob or Jobs API request.
	// cmd/kubectl-dlc sets it from $DLC_COS_REGION.
	COSRegion string
	// LogsLocation, with COSRegion, is where the platform keeps runs'
	// whole logs in COS (dlc.WithLogsLocation "cos://<bucket>/<prefix>",
	// as its clients are configured): logs then reads an ended run's whole
	// log from there once its cluster is gone, with the credentials of the
	// environment. cmd/kubectl-dlc sets it from $DLC_LOGS_LOCATION.
	LogsLocation string
	// SyncTimeout bounds how long Connect waits for the API server's
	// answer who the user is, and then for the backend's first read of the
	// store; 0 means DefaultSyncTimeout. (Credentials the API server's
	// RBAC refuses fail sooner: the backend asks why its lists do not come
	// after 2 s, and again 2 s later.)
	SyncTimeout time.Duration
}

// DefaultSyncTimeout is KubeConnector's SyncTimeout when it is 0.
const DefaultSyncTimeout = 30 * time.Second

// Connect opens a session: the backend, an observer client over it, and
// the user (WhoAmI; KubeUser when the API server cannot say).
func (k KubeConnector) Connect(ctx context.Context) (*Session, error) {
	if k.Flags == nil {
		return nil, errors.New("no kubeconfig flags")
	}
	cfg, err := k.Flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := k.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// The timeout bounds every call until the session is open: the
	// question who the user is, and the backend's first read.
	timeout := k.SyncTimeout
	if timeout <= 0 {
		timeout = DefaultSyncTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	user, groups, err := WhoAmI(wctx, cfg)
	cancel()
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		// An API server that does not serve the question (before
		// Kubernetes 1.28): the kubeconfig's name for the credentials.
		// Any other failure is an error: acting under a label anyone can
		// write is not the fallback of a refusal or an outage.
		user, err = KubeUser(k.Flags)
		groups = nil
	}
	if err != nil {
		return nil, err
	}
	o := k.Backend
	o.Namespace = ns
	var more []dlc.Option
	if k.COSRegion != "" {
		cos, err := storage.NewCOSClient(storage.COSOptions{Region: k.COSRegion})
		if err != nil {
			return nil, fmt.Errorf("COS: %w", err)
		}
		if o.Render.WorkingDir == nil {
			o.Render.WorkingDir = kube.COSWorkingDir(cos, storage.WorkingDirOptions{})
		}
		if k.LogsLocation != "" {
			more = append(more, dlc.WithCOS(cos), dlc.WithLogsLocation(k.LogsLocation))
		}
	}
	// The backend's informers live on bctx, as long as the session; a
	// sync that takes longer than the bound is given up.
	bctx, stop := context.WithCancel(ctx)
	timer := time.AfterFunc(timeout, stop)
	be, err := kube.New(bctx, cfg, o)
	if !timer.Stop() {
		if err == nil {
			be.Close()
			err = bctx.Err()
		}
		stop()
		return nil, fmt.Errorf("platform namespace %s: not read within %v (may %s list dlc.aidlc.io objects there?): %w", ns, timeout, user, err)
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("platform namespace %s: %w", ns, err)
	}
	opts := append(append([]dlc.Option{dlc.WithBackend(be), dlc.WithObserver()}, more...), k.Options...)
	c, err := dlc.New(opts...)
	if err != nil {
		be.Close()
		stop()
		return nil, err
	}
	return &Session{Client: c, User: user, Groups: groups, Close: func() error {
		err := c.Close()
		be.Close()
		stop()
		return err
	}}, nil
}

// WhoAmI asks the API server who the credentials of cfg are, after
// impersonation (--as): a SelfSubjectReview, as "kubectl auth whoami" does.
// The name it returns is the one the API server's RBAC decides for.
func WhoAmI(ctx context.Context, cfg *rest.Config) (user string, groups []string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("who am I: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", nil, errors.New("who am I: the API server named no user")
	}
	return r.Status.UserInfo.Username, r.Status.UserInfo.Groups, nil
}

// KubeUser returns the kubeconfig's name for the user, which Connect falls
// back to when the API server cannot say who the credentials are (WhoAmI):
// --as when set, else the name of the kubeconfig's user entry (--user, else
// the current context's). That name is the kubeconfig's label, not an
// authenticated identity; the API server still authenticates the
// credentials, and its RBAC decides what they may do.
func KubeUser(f *genericclioptions.ConfigFlags) (string, error) {
	if f.Impersonate != nil && *f.Impersonate != "" {
		return *f.Impersonate, nil
	}
	if f.AuthInfoName != nil && *f.AuthInfoName != "" {
		return *f.AuthInfoName, nil
	}
	raw, err := f.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	name := raw.CurrentContext
	if f.Context != nil && *f.Context != "" {
		name = *f.Context
	}
	c, ok := raw.Contexts[name]
	if !ok || c.AuthInfo == "" {
		return "", fmt.Errorf("kubeconfig: context %q names no user; set --user or --as", name)
	}
	return c.AuthInfo, nil
}
