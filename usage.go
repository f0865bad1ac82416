package dlc

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/usage"
)

// Usage reports what ran in [q.From, q.To) (package usage): for every
// cluster, standing or on-demand, the intervals in which Ray ran its
// pods, as the client's meters recorded them, counted for their part in
// the span, filtered by q.Filter, grouped by q.GroupBy and priced by
// q.Prices. A cluster's current interval counts until now: nothing its
// meter has seen has changed since it began (a change closes it when the
// change was; a report made later may count less of it). With an authorizer, a report counts only the clusters ctx's
// user may describe (dlc:DescribeCluster on the cluster as it was billed:
// its resource group, cluster groups, creator and tags). A bad query is ErrInvalid
// (rule U1) and reads nothing.
func (c *Client) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	recs, err := c.e.UsageRecords(ctx, q.From, q.To)
	if err != nil {
		return nil, err
	}
	recs, err = keepFiltered(&filter{g: c.gate(), ctx: ctx, act: auth.DescribeCluster, decided: map[string]bool{}}, recs,
		func(r usage.Record) auth.Resource {
			return auth.Resource{Kind: auth.KindCluster, ID: r.Cluster, ResourceGroup: r.ResourceGroup,
				ClusterGroups: slices.Clone(r.ClusterGroups), Creator: r.Creator, Tags: maps.Clone(r.Tags)}
		})
	if err != nil {
		return nil, err
	}
	return usage.Aggregate(recs, q, nil)
}

// WithUsageCompaction has the usage records of each UTC day older than
// after (at least an hour; 0, the default, never) added up into one
// record per cluster, day and whom it bills, and the day's records
// deleted: the store then holds a record per cluster and day, however
// often its clusters changed. A report over a span that cuts a compacted
// day counts the part of it in proportion (the day's sums are exact).
// A record closed after its day was compacted (an interval that ran for
// longer than after) is kept as it is.
func WithUsageCompaction(after time.Duration) Option {
	return Option{platform.WithUsageCompaction(after)}
}

// WithMeteringInterval sets how often a running cluster's current usage
// interval is written to the store (at least a second; an hour by
// default): the report's view of a cluster that keeps running is at most
// that old, and, should every client be down when a cluster stops, the
// time since it was last written is not billed. Every change of what Ray
// runs, and of whom it is billed to, closes the interval at once.
func WithMeteringInterval(d time.Duration) Option { return Option{platform.WithMeteringInterval(d)} }
