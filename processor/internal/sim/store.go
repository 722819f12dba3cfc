package sim

import "time"

// The snapshot store's client (snapshot.Store): a snapshot larger than
// max_inline is written as an object first, then a manifest naming it is
// committed by compare-and-set; when the commit's outcome is unknown (no
// answer in time) Save reads the entry back (committed) — a read that a
// replica behind may answer (stale.go) — and deletes the object only if
// the entry read is newer than the commit's revision and names another.
// A run draws whether its snapshots are large (manifests) or inline.

// cleanupTimeout is snapshot.cleanupTimeout: the read back's own bound.
const cleanupTimeout = 5 * time.Second

// storeSave saves s as key's snapshot on rev for member m (Store.Save),
// then answers reply with the new revision or the error.
func (w *world) storeSave(m *member, key string, s snapEntry, rev uint64, timeout, slow time.Duration, reply func(any, error)) {
	if w.manifests {
		w.objNext++
		s.obj = w.objNext
		w.objs[s.obj] = true
	}
	// Half the answers lost are lost with their connection (a server
	// killed): the client learns it at once, and the read back may
	// reach a replica that has not applied the commit yet.
	cut := w.chance(0.5)
	w.callOn(m, svcSnap, timeout, slow, cut, func() (any, error) {
		return w.snapSave(key, s, rev)
	}, func(v any, err error) {
		if err == errLinkLost {
			err = errTimeout // what the store's caller makes of it (the model has no connections)
		}
		if err != errTimeout || s.obj == 0 {
			reply(v, err)
			return
		}
		w.call(m, svcSnap, cleanupTimeout, 0, func() (any, error) {
			if e := w.snapRead(key); e != nil {
				return *e, nil
			}
			return nil, errNotFound
		}, func(v any, rerr error) {
			if rerr == nil && v.(snapEntry).obj == s.obj {
				reply(v.(snapEntry).rev, nil)
				return
			}
			if rerr == nil && rev != 0 && v.(snapEntry).rev > rev {
				delete(w.objs, s.obj) // not committed, or replaced since
			}
			reply(nil, errTimeout)
		})
	})
}

// errCorrupt is a snapshot whose manifest names an object that is gone.
const errCorrupt simErr = "corrupt snapshot: manifest points to missing object"

// snapLoad is a Load of key's snapshot (a read behind, stale.go): a
// manifest whose object is gone is corrupt — the key's next owner would
// fail it, or reset it and lose its state: a violation.
func (w *world) snapLoad(key string) (any, error) {
	s := w.snapRead(key)
	if s == nil {
		return nil, errNotFound
	}
	if s.obj != 0 && !w.objs[s.obj] {
		if !w.corrupt[s.obj] {
			w.corrupt[s.obj] = true
			w.violate("the snapshot of key %s (rev %d, epoch %d) names object %d, which was deleted", key, s.rev, s.epoch, s.obj)
		}
		return nil, errCorrupt
	}
	return *s, nil
}
