package cli

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/storage"
)

// KubeConnector connects to the Kubernetes backend with kubectl's
// kubeconfig flags: the rest config they make (impersonating --as, so that
// the API server's RBAC applies to that user), the platform namespace (-n,
// else the context's), and an observer client (dlc.WithObserver) over it.
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
}

// Connect opens a session: the backend, an observer client over it, and
// the user (KubeUser).
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
	user, err := KubeUser(k.Flags)
	if err != nil {
		return nil, err
	}
	o := k.Backend
	o.Namespace = ns
	if k.COSRegion != "" && o.Render.WorkingDir == nil {
		cos, err := storage.NewCOSClient(storage.COSOptions{Region: k.COSRegion})
		if err != nil {
			return nil, fmt.Errorf("COS: %w", err)
		}
		o.Render.WorkingDir = kube.COSWorkingDir(cos, storage.WorkingDirOptions{})
	}
	be, err := kube.New(ctx, cfg, o)
	if err != nil {
		return nil, fmt.Errorf("platform namespace %s: %w", ns, err)
	}
	opts := append([]dlc.Option{dlc.WithBackend(be), dlc.WithObserver()}, k.Options...)
	c, err := dlc.New(opts...)
	if err != nil {
		be.Close()
		return nil, err
	}
	return &Session{Client: c, User: user, Close: func() error {
		err := c.Close()
		be.Close()
		return err
	}}, nil
}

// KubeUser returns who the calls act as: --as when set, else the name of
// the kubeconfig's user (--user, else the current context's). It is the
// name the platform's authorizer is asked about and records as creator;
// the API server authenticates the credentials themselves.
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
