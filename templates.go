package dlc

import (
	"context"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// SaveTemplate saves a compute-environment template under its name (C6),
// replacing one of the same name. Clusters and on-demand jobs start from
// a copy of it: cluster.Builder.FromTemplate, job.Builder.FromTemplate.
func (c *Client) SaveTemplate(ctx context.Context, t *cluster.Template) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.Problems(c.cat).ToError(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, v, err := load[cluster.Template](ctx, c.be, kindTemplate, t.Name)
	if err != nil && !errs.IsNotFound(err) {
		return err
	}
	if _, err := save(ctx, c.be, kindTemplate, t.Name, v, t.DeepCopy()); err != nil {
		return err
	}
	c.event(ctx, kindTemplate+"/"+t.Name, "user", "save", "")
	return nil
}

// Template returns a copy of the template called name.
func (c *Client) Template(ctx context.Context, name string) (*cluster.Template, error) {
	t, _, err := load[cluster.Template](ctx, c.be, kindTemplate, name)
	if err != nil {
		return nil, notFoundAs(err, "template", name)
	}
	return t, nil
}

// ListTemplates returns every template, by name.
func (c *Client) ListTemplates(ctx context.Context) ([]*cluster.Template, error) {
	all, _, err := loadAll[cluster.Template](ctx, c.be, kindTemplate)
	return all, err
}

// DeleteTemplate deletes a template; what was started from it keeps its copy.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.be.Delete(ctx, kindTemplate, name, 0); err != nil {
		return notFoundAs(err, "template", name)
	}
	return nil
}
