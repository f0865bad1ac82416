package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Lists are served from the cache's decoded objects: filtered on what the
// cache indexes first (a job's runs, a cluster's, a state), then on the
// objects themselves, ordered, and only the page returned is copied. A
// page ends at Limit objects and hands back a token naming the last one;
// the next page is what sorts after it, so a page is never shifted by
// objects created or deleted between the calls.

// pageKey orders a list: by at (zero for lists by id alone), then id.
type pageKey struct {
	At time.Time `json:"a,omitzero"`
	ID string    `json:"i"`
}

func (k pageKey) after(o pageKey) bool {
	if !k.At.Equal(o.At) {
		return k.At.After(o.At)
	}
	return k.ID > o.ID
}

func (k pageKey) token() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseContinue reads a continue token; "" is the first page.
func parseContinue(tok string) (*pageKey, error) {
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	var k pageKey
	if err == nil && len(b) <= 1024 {
		err = json.Unmarshal(b, &k)
	}
	if err != nil || k.ID == "" || len(b) > 1024 {
		return nil, errs.List{errs.Invalid("continue", "", tok, "not a continue token of this list")}.ToError()
	}
	return &k, nil
}

// page orders the objects that match by key, skips those up to the
// token, and returns at most limit (0: all) of the rest that keep (nil:
// every one) keeps, with the next page's token when more remain. keep is
// asked in list order, only until the page is full and one more is kept,
// and with no lock held: it may be the caller's authorizer.
func page[T any](objs []*T, versions []string, match, keep func(*T) bool, key func(*T) pageKey, limit int, from *pageKey) (out []*T, outVersions []string, next string) {
	idx := make([]int, 0, len(objs))
	for i, o := range objs {
		if match(o) && (from == nil || key(o).after(*from)) {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpKeys(key(objs[a]), key(objs[b])) })
	for _, i := range idx {
		if keep != nil && !keep(objs[i]) {
			continue
		}
		if limit > 0 && len(out) == limit {
			next = key(out[len(out)-1]).token()
			break
		}
		out, outVersions = append(out, objs[i]), append(outVersions, versions[i])
	}
	return out, outVersions, next
}

// pageFrom checks a list call's context and limit, and reads its continue
// token: where its page starts (nil: the first page).
func pageFrom(ctx context.Context, limit int, cont string) (*pageKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, errs.List{errs.Invalid("limit", "", limit, "a limit is not negative")}.ToError()
	}
	return parseContinue(cont)
}

// ListPage returns one page of the runs opts selects, in submission order
// (then by id), at most opts.Limit of them, and the token of the next
// page. A bad token or limit is ErrInvalid.
//
// keep (nil: every run) is asked of each run that opts selects, in list
// order and with no lock held, until the page is full: a run it refuses
// is not listed, and the page is still full (package dlc passes its
// authorizer here).
func (s *RunService) ListPage(ctx context.Context, opts job.RunListOptions, keep func(*job.Run) bool) (*job.RunPage, error) {
	from, err := pageFrom(ctx, opts.Limit, opts.Continue)
	if err != nil {
		return nil, err
	}
	match := func(r *job.Run) bool {
		return (len(opts.States) == 0 || slices.Contains(opts.States, r.State)) &&
			(opts.ClusterID == "" || r.ClusterID == opts.ClusterID) &&
			(opts.Creator == "" || r.Creator == opts.Creator) &&
			(opts.SubmittedAfter.IsZero() || r.SubmittedAt.After(opts.SubmittedAfter)) &&
			cluster.HasTags(r.Config.Tags, opts.Tags)
	}
	if opts.JobID != "" {
		return s.c.jobRunsPage(opts.JobID, from, opts.Limit, match, keep)
	}
	sel := map[string]string{}
	if opts.ClusterID != "" {
		sel[labelOn] = opts.ClusterID
	}
	if len(opts.States) == 1 {
		sel[labelState] = string(opts.States[0])
	}
	runs, versions, err := cachedObjects[job.Run](s.c.acc, kindRun, sel)
	if err != nil {
		return nil, err
	}
	items, itemVersions, next := page(runs, versions, match, keep, func(r *job.Run) pageKey { return pageKey{r.SubmittedAt, r.ID} }, opts.Limit, from)
	return s.c.runPage(items, itemVersions, next), nil
}

// jobRunsPage is a page of one job config's runs: read in list order from
// the index of its runs (runOrder), from the token on, a chunk of keys at
// a time (match and keep are asked with no lock held), until the page is
// full, so that it costs what the page and the runs it skips cost.
func (c *Engine) jobRunsPage(jobID string, from *pageKey, limit int, match, keep func(*job.Run) bool) (*job.RunPage, error) {
	var items []*job.Run
	var versions []string
	var next string
	const chunk = 256
	for {
		keys := c.order.keys(jobID, from, chunk)
		for _, k := range keys {
			d, ok := c.cache.Get(kindRun, k.ID)
			if !ok {
				continue // deleted meanwhile
			}
			r, _, err := sharedObject[job.Run](c.acc, d)
			if err != nil {
				return nil, err
			}
			if !match(r) || (keep != nil && !keep(r)) {
				continue
			}
			if limit > 0 && len(items) == limit {
				last := items[len(items)-1]
				next = pageKey{last.SubmittedAt, last.ID}.token()
				return c.runPage(items, versions, next), nil
			}
			items, versions = append(items, r), append(versions, d.Version)
		}
		if len(keys) < chunk {
			return c.runPage(items, versions, next), nil
		}
		from = &keys[len(keys)-1]
	}
}

// runPage copies a page of runs out of the cache.
func (c *Engine) runPage(items []*job.Run, versions []string, next string) *job.RunPage {
	out := &job.RunPage{Items: make([]*job.Run, len(items)), Continue: next}
	for i, r := range items {
		r = r.DeepCopy()
		r.Version = versions[i]
		c.runs.rederive(r)
		out.Items[i] = r
	}
	return out
}

// ListPage returns one page of the clusters opts selects, by id, at most
// opts.Limit of them, and the token of the next page. A bad token, limit
// or kind is ErrInvalid.
//
// keep (nil: every cluster) is asked as RunService.ListPage's is.
func (s *ClusterService) ListPage(ctx context.Context, opts cluster.ListOptions, keep func(*cluster.Cluster) bool) (*cluster.Page, error) {
	from, err := pageFrom(ctx, opts.Limit, opts.Continue)
	if err != nil {
		return nil, err
	}
	sel := map[string]string{}
	switch opts.Kind {
	case "", cluster.KindStanding:
	case cluster.KindOnDemand:
		sel[labelTemporary] = "1"
	default:
		return nil, errs.List{errs.NotSupported("kind", "", opts.Kind, []string{cluster.KindStanding, cluster.KindOnDemand})}.ToError()
	}
	if opts.Group != "" {
		sel[labelMemberOf+opts.Group] = "1"
	}
	if len(opts.States) == 1 {
		sel[labelState] = string(opts.States[0])
	}
	cls, versions, err := cachedObjects[cluster.Cluster](s.c.acc, kindCluster, sel)
	if err != nil {
		return nil, err
	}
	match := func(cl *cluster.Cluster) bool {
		return (len(opts.States) == 0 || slices.Contains(opts.States, cl.State)) &&
			(opts.Creator == "" || cl.Creator == opts.Creator) &&
			(opts.ResourceGroup == "" || cl.Spec.ResourceGroup == opts.ResourceGroup) &&
			(opts.Kind != cluster.KindStanding || !cl.Temporary) &&
			(opts.CreatedAfter.IsZero() || cl.CreatedAt.After(opts.CreatedAfter)) &&
			cluster.HasTags(cl.Spec.Tags, opts.Tags)
	}
	items, itemVersions, next := page(cls, versions, match, keep, func(cl *cluster.Cluster) pageKey { return pageKey{ID: cl.ID} }, opts.Limit, from)
	out := &cluster.Page{Items: make([]*cluster.Cluster, len(items)), Continue: next}
	for i, cl := range items {
		cl = cl.DeepCopy()
		cl.Version = itemVersions[i]
		out.Items[i] = cl
	}
	return out, nil
}
