package dlc

import (
	"context"
	"encoding/json"
)

type requestKey struct{}

// WithRequestID returns a context whose SaveJob and Run calls are
// idempotent under id: a retried call with the same request id returns
// what the first one made instead of making another (so job.Submit can be
// retried after a lost reply without starting a job twice).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestKey{}, id)
}

// RequestIDFrom returns the request id of ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestKey{}).(string)
	return id
}

const kindRequest = "request"

// recall returns the id that an earlier call of op under ctx's request id
// made, if there was one. The caller holds c.mu.
func (c *Client) recall(ctx context.Context, op string) (string, bool) {
	req := RequestIDFrom(ctx)
	if req == "" {
		return "", false
	}
	d, err := c.be.Get(ctx, kindRequest, op+"/"+req)
	if err != nil {
		return "", false
	}
	var id string
	if json.Unmarshal(d.Data, &id) != nil {
		return "", false
	}
	return id, true
}

// remember records that op under ctx's request id made id.
func (c *Client) remember(ctx context.Context, op, id string) {
	if req := RequestIDFrom(ctx); req != "" {
		_, _ = save(context.WithoutCancel(ctx), c.be, kindRequest, op+"/"+req, 0, id)
	}
}
