package dlctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/errs"
)

// EditStored edits a stored document behind the platform's back, as
// someone with edit rights on the store (kubectl edit, a GitOps tool)
// would: it reads kind/id ("cluster", "run", "resourcegroup", …) from
// the store, lets edit change its JSON content and its labels, and writes
// it back with the version read, again on a conflict (at most 16 times).
func EditStored(ctx context.Context, s dlc.Store, kind, id string, edit func(data map[string]any, labels map[string]string)) error {
	for attempt := 0; ; attempt++ {
		d, err := s.Get(ctx, kind, id)
		if err != nil {
			return err
		}
		var data map[string]any
		dec := json.NewDecoder(bytes.NewReader(d.Data))
		dec.UseNumber() // int64 amounts stay exact
		if err := dec.Decode(&data); err != nil {
			return fmt.Errorf("dlctest: %s %s: %w", kind, id, err)
		}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		edit(data, d.Labels)
		if d.Data, err = json.Marshal(data); err != nil {
			return err
		}
		_, err = s.Update(ctx, d)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= 16 {
			return err
		}
	}
}

// Object returns the JSON object at key in m, made if absent.
func Object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}
