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
		w.objAt[s.obj] = w.now // put before the commit
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

// errCorrupt is a snapshot whose manifest names an object not found.
const errCorrupt simErr = "corrupt snapshot: manifest points to missing object"

// objectAttempts and objectPause are snapshot.Store's: Load reads a
// manifest's object again while it is not found, pausing attempt × 20 ms.
const (
	objectAttempts = 10
	objectPause    = 20 * time.Millisecond
)

// storeLoad is Store.Load of key by member m: the entry (a read behind,
// stale.go), then a manifest's object, read again while not found — its
// info is a direct get of the object bucket, which a replica that has not
// applied the object's put yet answers not found. reply gets the entry,
// errNotFound, errCorrupt with the entry (its revision), or another
// error. An object found deleted is a violation: the key's next owner
// would fail it, or reset it and lose its state.
func (w *world) storeLoad(m *member, key string, timeout time.Duration, reply func(any, error)) {
	deadline := w.now + timeout
	left := func() time.Duration { return max(deadline-w.now, time.Millisecond) }
	w.call(m, svcSnap, timeout, 0, func() (any, error) {
		if s := w.snapRead(key); s != nil {
			return *s, nil
		}
		return nil, errNotFound
	}, func(v any, err error) {
		if err != nil || v.(snapEntry).obj == 0 {
			reply(v, err)
			return
		}
		s := v.(snapEntry)
		var get func(attempt int)
		get = func(attempt int) {
			w.call(m, svcSnap, left(), 0, func() (any, error) {
				if !w.objs[s.obj] || w.objAt[s.obj] > w.now-w.readLag() {
					return nil, errNotFound
				}
				return nil, nil
			}, func(_ any, oerr error) {
				switch {
				case oerr == nil:
					reply(s, nil)
				case oerr == errNotFound && attempt < objectAttempts:
					m.after(time.Duration(attempt)*objectPause, func() { get(attempt + 1) })
				case oerr == errNotFound:
					if !w.objs[s.obj] && !w.corrupt[s.obj] {
						w.corrupt[s.obj] = true
						w.violate("the snapshot of key %s (rev %d, epoch %d) names object %d, which was deleted", key, s.rev, s.epoch, s.obj)
					}
					reply(s, errCorrupt)
				default:
					reply(nil, oerr)
				}
			})
		}
		get(1)
	})
}
