// Package dlchttp serves a dlc.Client over HTTP: what a platform team
// that embeds dlc in a service would otherwise write by hand.
//
//	h, err := dlchttp.New(client, dlchttp.Options{Authenticator: myAuth})
//	...
//	http.ListenAndServe(":8080", h)
//
// The handler is REST and JSON under /v1/, on the standard library's
// http.ServeMux with method patterns:
//
//   - every service of the client: clusters (with start, hibernate,
//     autoscale, clone, details, events and plans), cluster groups (members,
//     rename, policy), templates, job configs (clone, events, schedule
//     suspend and resume, next ticks, runs and their plan), runs (stop,
//     pending, logs, events) and resource groups (register, pending);
//     actions are POSTs to a sub-resource: POST /v1/clusters/{id}/start;
//   - lists a page at a time (limit and continue) where the SDK pages,
//     with its filters as query parameters; an unknown query parameter is
//     refused;
//   - optimistic concurrency with ETag and If-Match: a cluster's and a job
//     config's stored version is their strong ETag, and a PUT needs
//     If-Match (428 without, 412 when stale);
//   - every error of the SDK as a status and an Error body: ErrInvalid is
//     422 with every field error (path, rule, type, detail, bad value),
//     ErrNotFound 404, ErrConflict 409, ErrState and ErrQuota 409 with
//     their detail, ErrForbidden 403, ErrUnavailable 503 with Retry-After,
//     anything else 500 with nothing of its cause;
//   - server-sent events for watches (GET /v1/watch/clusters,
//     /v1/watch/runs) and a run's log follow (GET /v1/runs/{id}/logs/follow),
//     flushed per event, with heartbeats, bounded in time;
//   - request bodies bounded (413) and read strictly (an unknown field is
//     400); cluster specs, job configs, templates and group policies also
//     as YAML (Content-Type: application/yaml), read by the SDK's strict
//     decoders;
//   - its OpenAPI 3 document at GET /v1/openapi.json, made from the same
//     route table that registers the routes.
//
// Who sent a request is the Options.Authenticator's to say; the handler
// puts that user into the request's context (auth.NewContext) and decides
// nothing about permissions: the client's authorizer (dlc.WithAuthorizer)
// does. InsecureHeaderAuthenticator, which believes a header, is for tests
// and development only.
//
// docs/http.md in the repository lists every route.
package dlchttp
