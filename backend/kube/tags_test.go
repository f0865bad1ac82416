package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidlc/dlc/backend/kube"
)

// TestTagLabel: every tag becomes a valid label, kept as it is where a
// label can hold it, and two different tags never share a label.
func TestTagLabel(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, key, value string
		wantKey, wantVal string // "" : not pinned, only checked valid
	}{
		{"plain", "team", "nlp", kube.TagLabelPrefix + "team", "nlp"},
		{"empty value", "env", "", kube.TagLabelPrefix + "env", ""},
		{"dots and underscores", "cost_center.v2", "cc-1024", kube.TagLabelPrefix + "cost_center.v2", "cc-1024"},
		{"chinese value", "team", "推荐", kube.TagLabelPrefix + "team", ""},
		{"chinese key", "项目", "大模型", "", ""},
		{"a slash in the key", "example.com/team", "a", "", "a"},
		{"spaces", "cost center", "team a", "", ""},
		{"too long", long, long, "", ""},
		{"ends not alphanumeric", "-team-", "_x_", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, v := kube.TagLabel(tc.key, tc.value)
			if errs := validation.IsQualifiedName(k); len(errs) != 0 {
				t.Errorf("key %q: %v", k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
				t.Errorf("value %q: %v", v, errs)
			}
			if tc.wantKey != "" && k != tc.wantKey {
				t.Errorf("key %q, want %q", k, tc.wantKey)
			}
			if tc.wantVal != "" && v != tc.wantVal {
				t.Errorf("value %q, want %q", v, tc.wantVal)
			}
			if k2, v2 := kube.TagLabel(tc.key, tc.value); k2 != k || v2 != v {
				t.Errorf("not deterministic: %q=%q, then %q=%q", k, v, k2, v2)
			}
		})
	}
	// Tags that a label cannot hold apart stay apart.
	seen := map[string]string{}
	_, spaced := kube.TagLabel("k", "a b")
	_, han := kube.TagLabel("k", "推荐")
	for _, s := range []string{"a b", "a-b", "a/b", "a.b", "推荐", "推荐a", "大模型", "", long, long + "y", spaced, han} {
		_, v := kube.TagLabel("k", s)
		if other, ok := seen[v]; ok {
			t.Errorf("%q and %q share the label value %q", other, s, v)
		}
		seen[v] = s
	}
}

// TestTagsOnRenderedObjects: a cluster's tags are labels on its RayCluster
// and every pod template, and the originals are in the KeyTags annotation
// of the RayCluster; an on-demand run's config's tags, on its RayJob and
// pod templates, and the annotation on the RayJob.
func TestTagsOnRenderedObjects(t *testing.T) {
	for _, rc := range renderCases() {
		var tags map[string]string
		if rc.cluster != nil {
			tags = rc.cluster.Spec.Tags
		} else {
			tags = rc.run.Config.Tags
		}
		if len(tags) == 0 {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			obj := rc.render(t, "team-a")
			var spec *rayv1.RayClusterSpec
			switch o := obj.(type) {
			case *rayv1.RayCluster:
				spec = &o.Spec
			case *rayv1.RayJob:
				spec = o.Spec.RayClusterSpec
			}
			metas := map[string]struct{ labels, annotations map[string]string }{
				"object": {obj.GetLabels(), obj.GetAnnotations()},
				"head":   {spec.HeadGroupSpec.Template.Labels, spec.HeadGroupSpec.Template.Annotations},
			}
			for _, w := range spec.WorkerGroupSpecs {
				metas["worker "+w.GroupName] = struct{ labels, annotations map[string]string }{w.Template.Labels, w.Template.Annotations}
			}
			for where, m := range metas {
				for k, v := range kube.TagSelector(tags) {
					if m.labels[k] != v {
						t.Errorf("%s: label %s=%q, want %q", where, k, m.labels[k], v)
					}
				}
				if where != "object" {
					// The originals are on the object alone: a copy on every
					// pod template would take a tenth of etcd's limit.
					if a, ok := m.annotations[kube.KeyTags]; ok {
						t.Errorf("%s: annotation %s=%q, want it on the object only", where, kube.KeyTags, a)
					}
					continue
				}
				var got map[string]string
				if err := json.Unmarshal([]byte(m.annotations[kube.KeyTags]), &got); err != nil || len(got) != len(tags) {
					t.Errorf("%s: annotation %s=%q (%v), want the %d tags", where, kube.KeyTags, m.annotations[kube.KeyTags], err, len(tags))
				}
				for k, v := range tags {
					if got[k] != v {
						t.Errorf("%s: annotation's %q=%q, want %q", where, k, got[k], v)
					}
				}
			}
		})
	}
}
