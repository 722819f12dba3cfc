package snapshot

import (
	"testing"

	"github.com/kpcastream/kpcastream/codec"
)

// TestList lists a pipeline's keys, inline and in the object store, with
// keys that need encoding decoded, and leaves other pipelines' keys out.
func TestList(t *testing.T) {
	e := newEnv(t, Config{MaxInline: 4096})
	ctx := t.Context()
	small := testSnap("p.a b", 3, 4)
	big := testSnap("p.big", 5, 40) // 1600 floats: above MaxInline
	for _, s := range []*codec.Snapshot{small, big, testSnap("q.x", 1, 4)} {
		if _, err := e.store.Save(ctx, s.Key, s, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.store.List(ctx, "p.")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "p.a b" || got[1].Key != "p.big" {
		t.Fatalf("List(p.) = %+v", got)
	}
	encSmall, _ := codec.EncodeSnapshot(small)
	encBig, _ := codec.EncodeSnapshot(big)
	if got[0].Bytes != len(encSmall) || got[0].Object != "" || got[0].Revision == 0 || got[0].Created.IsZero() {
		t.Errorf("inline entry %+v (want %d bytes)", got[0], len(encSmall))
	}
	if got[1].Bytes != len(encBig) || got[1].Object == "" {
		t.Errorf("object entry %+v (want %d bytes)", got[1], len(encBig))
	}
	if err := e.store.Delete(ctx, "p.big", 0); err != nil {
		t.Fatal(err)
	}
	if got, err := e.store.List(ctx, "p."); err != nil || len(got) != 1 {
		t.Errorf("after a delete: %+v, %v", got, err)
	}
	if got, err := e.store.List(ctx, "none."); err != nil || len(got) != 0 {
		t.Errorf("no keys: %+v, %v", got, err)
	}
}
