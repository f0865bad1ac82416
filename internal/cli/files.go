package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// MaxFileSize bounds a file that -f reads; MaxDocuments the YAML documents
// in it. Each document is bounded again by the strict parsers
// (cluster.MaxDocumentSize).
const (
	MaxFileSize  = 4 << 20
	MaxDocuments = 100
)

// The kinds of document -f reads.
const (
	kindCluster  = "cluster"
	kindJob      = "job"
	kindTemplate = "template"
)

// document is one object read from a file.
type document struct {
	source   string // "file.yaml" or "file.yaml#2"
	kind     string
	cluster  *cluster.Spec
	job      *job.Config
	template *cluster.Template
}

func (d *document) name() string {
	switch d.kind {
	case kindCluster:
		return d.cluster.Name
	case kindJob:
		return d.job.Name
	default:
		return d.template.Name
	}
}

// readFile reads path ("-": in), at most MaxFileSize bytes.
func readFile(path string, in io.Reader) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no file: give -f FILE (or -f - for standard input)")
	}
	var r io.Reader = in
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, errs.ErrInvalid, MaxFileSize)
	}
	return b, nil
}

// splitDocuments splits YAML at lines that are "---".
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if strings.TrimRight(string(line), " \r\n") == "---" {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	docs = append(docs, cur)
	var out [][]byte
	for _, d := range docs {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		out = append(out, line...)
	}
	return out
}

// The top-level fields that tell the kinds apart.
var (
	jobOnly     = []string{"onDemand", "cluster", "group", "package", "entrypoint", "runtimeEnv", "schedule", "activeDeadlineSeconds", "backoffLimit"}
	clusterOnly = []string{"groups", "priority", "resourcePackage", "resourceGroup", "mounts", "advanced", "idleTimeoutSeconds", "rayToken", "tags"}
)

// kindOf guesses a document's kind from its top-level fields: a job
// config's (entrypoint, package, …), else a cluster's (resourceGroup,
// groups, …), else a template (name, description and an environment).
func kindOf(doc []byte) (string, error) {
	var top map[string]any
	if err := yaml.Unmarshal(doc, &top); err != nil {
		return "", fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	if top == nil {
		return "", fmt.Errorf("%w: the document is not a mapping", errs.ErrInvalid)
	}
	_, id := top["id"]
	_, spec := top["spec"]
	_, config := top["config"]
	if id && (spec || config) {
		// An object as get -o yaml prints it (a cluster with its spec, a
		// job config's record with its config): not what create and apply
		// read.
		return "", fmt.Errorf("%w: this is an object as \"get -o yaml\" prints it; create and apply read a spec or a config (the part under spec: or config:)", errs.ErrInvalid)
	}
	for _, k := range jobOnly {
		if _, ok := top[k]; ok {
			return kindJob, nil
		}
	}
	for _, k := range clusterOnly {
		if _, ok := top[k]; ok {
			return kindCluster, nil
		}
	}
	return kindTemplate, nil
}

// readDocuments reads every document of path, decoded strictly by the
// SDK's parsers; kind, when set, is every document's kind.
func readDocuments(path, kind string, in io.Reader) ([]*document, error) {
	b, err := readFile(path, in)
	if err != nil {
		return nil, err
	}
	raw := splitDocuments(b)
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: %w: no document", path, errs.ErrInvalid)
	}
	if len(raw) > MaxDocuments {
		return nil, fmt.Errorf("%s: %w: more than %d documents", path, errs.ErrInvalid, MaxDocuments)
	}
	var docs []*document
	for i, r := range raw {
		src := path
		if path == "-" {
			src = "<stdin>"
		}
		if len(raw) > 1 {
			src = fmt.Sprintf("%s#%d", src, i+1)
		}
		d := &document{source: src, kind: kind}
		if len(r) > cluster.MaxDocumentSize {
			return nil, fmt.Errorf("%s: %w: a document larger than %d bytes", src, errs.ErrInvalid, cluster.MaxDocumentSize)
		}
		if d.kind == "" {
			if d.kind, err = kindOf(r); err != nil {
				return nil, wrap(src, err)
			}
		}
		switch d.kind {
		case kindCluster:
			d.cluster, err = cluster.UnmarshalYAML(r)
		case kindJob:
			d.job, err = job.UnmarshalYAML(r)
		case kindTemplate:
			d.template, err = cluster.UnmarshalTemplateYAML(r)
		default:
			return nil, fmt.Errorf("unknown kind %q: use cluster, job or template", d.kind)
		}
		if err != nil {
			return nil, wrap(src, err)
		}
		docs = append(docs, d)
	}
	return docs, nil
}
