package platform

import (
	"context"
	"errors"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// TemplateService is the compute-environment templates of an Engine (C6).
type TemplateService struct{ c *Engine }

// Templates returns the client's templates.
func (c *Engine) Templates() *TemplateService { return &TemplateService{c} }

// Save saves a template under its name (C6), replacing one of the same
// name. Clusters and on-demand jobs start from a copy of it:
// cluster.Builder.FromTemplate, job.Builder.FromTemplate.
func (s *TemplateService) Save(ctx context.Context, t *cluster.Template) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	if t == nil {
		return nilInput("template", "a cluster template")
	}
	if err := t.Problems(c.cat).ToError(); err != nil {
		return err
	}
	t = t.DeepCopy()
	version, exists := "", false
	if d, ok := c.cache.Get(kindTemplate, t.Name); ok {
		version, exists = d.Version, true
	}
	for attempt := 0; ; attempt++ {
		var err error
		if exists {
			_, err = c.acc.update(ctx, kindTemplate, t.Name, version, nil, t)
		} else {
			_, err = c.acc.create(ctx, kindTemplate, t.Name, nil, t)
		}
		if err == nil || !(errors.Is(err, errs.ErrConflict) || errs.IsNotFound(err)) || attempt >= conflictRetries {
			return err
		}
		_, v, ferr := fresh[cluster.Template](ctx, c.acc, kindTemplate, t.Name)
		switch {
		case errs.IsNotFound(ferr):
			version, exists = "", false
		case ferr != nil:
			return ferr
		default:
			version, exists = v, true
		}
	}
}

// Get returns a copy of the template called name.
func (s *TemplateService) Get(ctx context.Context, name string) (*cluster.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, _, err := get[cluster.Template](ctx, s.c.acc, kindTemplate, "template", name)
	return t, err
}

// List returns every template, by name.
func (s *TemplateService) List(ctx context.Context) ([]*cluster.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return list[cluster.Template](s.c.acc, kindTemplate, nil, nil)
}

// Delete deletes a template; what was started from it keeps its copy.
func (s *TemplateService) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return notFoundAs(s.c.store.Delete(ctx, kindTemplate, name, ""), "template", name)
}
