package dlc

import (
	"context"
	"github.com/aidlc/dlc/auth"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/platform"
)

// Templates returns the client's templates.
func (c *Client) Templates() *TemplateService { return &TemplateService{c.e.Templates(), c.gate()} }

// TemplateService is the compute-environment templates of a Client (C6).
type TemplateService struct {
	s *platform.TemplateService
	g gate
}

// Save saves a template under its name (C6), replacing one of the same
// name. Clusters and on-demand jobs start from a copy of it:
// cluster.Builder.FromTemplate, job.Builder.FromTemplate.
func (s *TemplateService) Save(ctx context.Context, t *cluster.Template) error {
	if t != nil {
		if err := s.g.allow(ctx, auth.SaveTemplate, templateResource(t.Name)); err != nil {
			return err
		}
	}
	return s.s.Save(ctx, t)
}

// Get returns a copy of the template called name.
func (s *TemplateService) Get(ctx context.Context, name string) (*cluster.Template, error) {
	if err := s.g.allow(ctx, auth.DescribeTemplate, templateResource(name)); err != nil {
		return nil, err
	}
	return s.s.Get(ctx, name)
}

// List returns every template, by name.
func (s *TemplateService) List(ctx context.Context) ([]*cluster.Template, error) {
	ts, err := s.s.List(ctx)
	if err != nil {
		return nil, err
	}
	return keepAllowed(ctx, s.g, auth.DescribeTemplate, ts, func(t *cluster.Template) auth.Resource { return templateResource(t.Name) })
}

// Delete deletes a template; what was started from it keeps its copy.
func (s *TemplateService) Delete(ctx context.Context, name string) error {
	if err := s.g.allow(ctx, auth.DeleteTemplate, templateResource(name)); err != nil {
		return err
	}
	return s.s.Delete(ctx, name)
}
