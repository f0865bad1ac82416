package dlchttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// openAPI writes the OpenAPI 3 document of the route table: every route
// with its parameters, headers, body and answers, and the schemas of the
// bodies, made from their Go types as encoding/json writes them.
func openAPI(routes []*route, o Options) ([]byte, error) {
	g := &schemas{defs: map[string]any{}, names: map[reflect.Type]string{}}
	errRef := g.of(reflect.TypeFor[Error]())
	paths := map[string]map[string]any{}
	for _, rt := range routes {
		op := map[string]any{
			"operationId": rt.id,
			"summary":     rt.summary,
			"tags":        []string{rt.tag},
		}
		var params []any
		for _, name := range pathParams(rt.path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true,
				"schema": map[string]any{"type": "string"}})
		}
		for _, p := range rt.query {
			s := paramSchema(p.typ)
			if p.repeated {
				s = map[string]any{"type": "array", "items": s}
			}
			q := map[string]any{"name": p.name, "in": "query", "required": p.required, "description": p.desc, "schema": s}
			if p.repeated {
				q["style"], q["explode"] = "form", true
			}
			params = append(params, q)
		}
		for _, p := range rt.headers {
			params = append(params, map[string]any{"name": p.name, "in": "header", "required": p.required,
				"description": p.desc, "schema": paramSchema(p.typ)})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.body != nil {
			s := g.of(reflect.TypeOf(rt.body.schema))
			content := map[string]any{mediaJSON: map[string]any{"schema": s}}
			if rt.body.yaml {
				content[mediaYAML] = map[string]any{"schema": s}
			}
			op["requestBody"] = map[string]any{"required": true, "description": rt.body.desc, "content": content}
		}
		success := map[string]any{"description": http.StatusText(rt.status)}
		switch {
		case rt.stream:
			success["description"] = "a text/event-stream: each event's data is JSON of this schema; an \"end\" event closes a stream the server ends; comments are heartbeats"
			success["content"] = map[string]any{"text/event-stream": map[string]any{"schema": g.of(reflect.TypeOf(rt.result))}}
		case rt.public:
			success["content"] = map[string]any{mediaJSON: map[string]any{"schema": map[string]any{"type": "object"}}}
		case rt.result != nil:
			success["content"] = map[string]any{mediaJSON: map[string]any{"schema": g.of(reflect.TypeOf(rt.result))}}
		}
		if rt.etag {
			success["headers"] = map[string]any{"ETag": map[string]any{"description": "the object's stored version, for If-Match", "schema": map[string]any{"type": "string"}}}
		}
		if rt.status == http.StatusCreated {
			h, _ := success["headers"].(map[string]any)
			if h == nil {
				h = map[string]any{}
			}
			h["Location"] = map[string]any{"description": "the new object's path", "schema": map[string]any{"type": "string"}}
			success["headers"] = h
		}
		responses := map[string]any{strconv.Itoa(rt.status): success}
		for _, code := range rt.errors {
			e := map[string]any{"description": errorDescription(code), "content": map[string]any{mediaJSON: map[string]any{"schema": errRef}}}
			if code == http.StatusServiceUnavailable {
				e["headers"] = map[string]any{"Retry-After": map[string]any{"description": "seconds to wait before a retry", "schema": map[string]any{"type": "integer"}}}
			}
			responses[strconv.Itoa(code)] = e
		}
		op["responses"] = responses
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		m := strings.ToLower(rt.method)
		if _, dup := paths[rt.path][m]; dup {
			return nil, fmt.Errorf("route %s %s twice", rt.method, rt.path)
		}
		paths[rt.path][m] = op
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "dlc",
			"version": "v1",
			"description": "The dlc platform over HTTP (package github.com/aidlc/dlc/dlchttp): REST and JSON, " +
				"server-sent events for watches and log follow. Every request but this document's is authenticated by the " +
				"server's Authenticator; what a user may do is the platform's authorizer's decision. Errors are an Error body. " +
				fmt.Sprintf("Bodies are at most %d bytes; a list's page has at most %d items.", o.MaxBodyBytes, o.MaxPageSize),
		},
		"paths":      paths,
		"components": map[string]any{"schemas": g.defs},
	}
	return json.MarshalIndent(doc, "", "  ")
}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// pathParams returns the wildcards of a pattern's path, which OpenAPI's
// path templates write as Go's mux does.
func pathParams(path string) []string {
	var out []string
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		out = append(out, m[1])
	}
	return out
}

func paramSchema(typ string) map[string]any {
	if typ == "date-time" {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	return map[string]any{"type": typ}
}

func errorDescription(code int) string {
	switch code {
	case 400:
		return "bad request: a query parameter, or a body that is not JSON (YAML) of the route's shape (unknown fields are refused)"
	case 401:
		return "unauthenticated"
	case 403:
		return "forbidden by the platform's authorizer (detail in forbidden)"
	case 404:
		return "not found"
	case 409:
		return "conflict (code conflict), not allowed in the object's state (code state, detail in state) or quota exceeded (code quota, detail in quota)"
	case 412:
		return "If-Match does not name the stored version"
	case 413:
		return "the body is too large"
	case 415:
		return "a Content-Type the route does not read"
	case 422:
		return "invalid: every problem in fields, each with its path and product rule"
	case 428:
		return "If-Match is required"
	case 500:
		return "internal error (the cause is logged, not sent)"
	case 503:
		return "the platform cannot answer now: retry after Retry-After"
	}
	return http.StatusText(code)
}

// schemas makes JSON schemas of Go types, named ones into components.
type schemas struct {
	defs  map[string]any
	names map[reflect.Type]string
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	unsafeName   = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// of returns t's schema: a $ref for a named struct.
func (g *schemas) of(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durationType:
		return map[string]any{"type": "integer", "format": "int64", "description": "nanoseconds"}
	case t == rawType:
		return map[string]any{}
	case t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()):
		return map[string]any{} // what its MarshalJSON writes
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name, ok := g.names[t]
		if !ok {
			name = g.name(t)
			g.names[t] = name
			g.defs[name] = map[string]any{} // a recursive type refers to itself
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int64, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	}
	return map[string]any{} // an interface: any JSON
}

// name names a type's component: its package's last element and its
// name, generics' brackets made safe ("dlchttp.page_cluster.Cluster_").
func (g *schemas) name(t reflect.Type) string {
	s := t.String()
	if i := strings.IndexByte(s, '['); i >= 0 {
		args := s[i+1 : len(s)-1]
		if j := strings.LastIndexByte(args, '/'); j >= 0 {
			args = args[j+1:]
		}
		s = s[:i] + "_" + args
	}
	s = unsafeName.ReplaceAllString(s, "_")
	base, n := s, 2
	for {
		if _, taken := g.defs[s]; !taken {
			return s
		}
		s = base + strconv.Itoa(n)
		n++
	}
}

// object is a struct's schema: its fields as encoding/json names them,
// embedded structs' fields inline.
func (g *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	g.fields(t, props)
	return map[string]any{"type": "object", "properties": props}
}

func (g *schemas) fields(t reflect.Type, props map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.of(f.Type)
	}
}
