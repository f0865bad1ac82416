package dlc

import (
	"context"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/platform"
)

// Templates returns the client's templates.
func (c *Client) Templates() *TemplateService { return &TemplateService{c.e.Templates()} }

// TemplateService is the compute-environment templates of a Client (C6).
type TemplateService struct{ s *platform.TemplateService }

// Save saves a template under its name (C6), replacing one of the same
// name. Clusters and on-demand jobs start from a copy of it:
// cluster.Builder.FromTemplate, job.Builder.FromTemplate.
func (s *TemplateService) Save(ctx context.Context, t *cluster.Template) error {
	return s.s.Save(ctx, t)
}

// Get returns a copy of the template called name.
func (s *TemplateService) Get(ctx context.Context, name string) (*cluster.Template, error) {
	return s.s.Get(ctx, name)
}

// List returns every template, by name.
func (s *TemplateService) List(ctx context.Context) ([]*cluster.Template, error) {
	return s.s.List(ctx)
}

// Delete deletes a template; what was started from it keeps its copy.
func (s *TemplateService) Delete(ctx context.Context, name string) error {
	return s.s.Delete(ctx, name)
}
