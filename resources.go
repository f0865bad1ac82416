package dlc

import (
	"context"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// RegisterResourceGroup adds a resource group with its allocatable
// capacity inside a resource package, or changes its capacity (never
// below what is reserved).
func (c *Client) RegisterResourceGroup(ctx context.Context, g quota.Group) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ledger.Register(g); err != nil {
		return err
	}
	c.dispatchLocked(ctx)
	return nil
}

// ResourceGroup returns a resource group's capacity, reservations and what
// it can still allocate.
func (c *Client) ResourceGroup(ctx context.Context, id string) (quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return quota.Usage{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.ledger.Lookup(id)
	if !ok {
		return quota.Usage{}, errs.NotFound("resource group", id)
	}
	return u, nil
}

// ResourceGroups returns every resource group's usage.
func (c *Client) ResourceGroups(ctx context.Context) ([]quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ledger.Groups(), nil
}

// CheckQuota verifies the ledger's invariants (reservations add up, never
// negative, never over capacity); for tests and audits.
func (c *Client) CheckQuota() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ledger.Check()
}
