package v1alpha1_test

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/quota"
)

// TestPendingHoldsStoredBefore: a ResourceGroup stored by an earlier
// version (its pending holds objects) decodes as the API machinery decodes
// it for an informer, and its holds read as the account's.
func TestPendingHoldsStoredBefore(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	stored := `{"apiVersion":"dlc.aidlc.io/v1alpha1","kind":"ResourceGroup","metadata":{"name":"rg","namespace":"ns"},
		"spec":{"package":"pkg","capacity":{"milliCPU":64000,"memory":0,"gpu":0}},
		"status":{"reserved":{"milliCPU":8000,"memory":0,"gpu":1},"seq":7,"pending":{
			"old":{"resources":{"milliCPU":8000,"memory":0,"gpu":1},"since":"2026-12-02T10:11:12.5Z","generation":3,"seq":7},
			"new":"0,0,0,4,8,2026-12-02T10:11:13Z"}}}`
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(stored), nil, nil)
	if err != nil {
		t.Fatalf("decoding as an informer would: %v", err)
	}
	st, err := json.Marshal(obj.(*v1alpha1.ResourceGroup).Status)
	if err != nil {
		t.Fatal(err)
	}
	var a quota.Account
	if err := json.Unmarshal(st, &a); err != nil {
		t.Fatalf("the status as the account: %v (%s)", err, st)
	}
	want := map[string]quota.Hold{
		"old": {Resources: quota.Resources{MilliCPU: 8000, GPU: 1}, Since: time.Date(2026, 12, 2, 10, 11, 12, 5e8, time.UTC), Generation: 3, Seq: 7},
		"new": {Since: time.Date(2026, 12, 2, 10, 11, 13, 0, time.UTC), Generation: 4, Seq: 8},
	}
	for holder, h := range want {
		if !a.Pending[holder].Same(h) {
			t.Errorf("%s read as %+v, want %+v", holder, a.Pending[holder], h)
		}
	}
	// Written again, every hold is a string.
	out, err := json.Marshal(a.Pending)
	if err != nil {
		t.Fatal(err)
	}
	var strs map[string]string
	if err := json.Unmarshal(out, &strs); err != nil || len(strs) != 2 {
		t.Errorf("written again: %s (%v)", out, err)
	}
}
