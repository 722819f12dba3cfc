package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Values of Config.OnLeaseHeld.
const (
	// LeaseWait waits as a hot standby until the holder's lease ends.
	LeaseWait = "wait"
	// LeaseFail makes Run return an error when a live instance holds the lease.
	LeaseFail = "fail"
)

// lease is this process's claim on one JetStream pipeline's durable
// consumer: the key "lease.<stream>.<durable>" of the checkpoint bucket,
// holding the owner's id, rewritten by compare-and-set on its revision every
// LeaseTTL/3. Another instance that sees the same revision for a whole
// LeaseTTL (measured on its own clock, so clock skew does not matter) takes
// the lease over with a compare-and-set on that revision; only one can
// win. The owner deletes the key when Run returns.
type lease struct {
	pipe *pipeline
	key  string
	rev  uint64 // owned by the renewing goroutine once acquired
	lost atomic.Bool
}

// leaseValue is the JSON value of a lease key.
type leaseValue struct {
	Owner   string    `json:"owner"`
	Renewed time.Time `json:"renewed"` // the owner's clock; informative only
}

func leaseKey(pc PipelineConfig) string {
	return "lease." + pc.Input.Stream + "." + pc.Input.Durable
}

// newInstanceID returns "<host>/<pid>/<random>", unique per Processor.
func newInstanceID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (p *Processor) leaseBytes() []byte {
	b, _ := json.Marshal(leaseValue{Owner: p.id, Renewed: time.Now().UTC()})
	return b
}

func leaseOwner(v []byte) string {
	var lv leaseValue
	if json.Unmarshal(v, &lv) != nil || lv.Owner == "" {
		return fmt.Sprintf("unknown (%q)", v)
	}
	return lv.Owner
}

// acquire takes the lease of pl's consumer. While another live instance
// holds it, it waits as a standby (LeaseWait) or fails (LeaseFail). It
// returns ctx's error when ctx ends first.
func (p *Processor) acquire(ctx context.Context, pl *pipeline) (*lease, error) {
	pc := pl.cfg
	l := &lease{pipe: pl, key: leaseKey(pc)}
	ttl := p.cfg.LeaseTTL
	poll := max(ttl/5, 10*time.Millisecond)
	var firstRev, seenRev uint64
	var seenAt time.Time
	log := p.log.With(zap.String("pipeline", pc.Name), zap.String("stream", pc.Input.Stream), zap.String("consumer", pc.Input.Durable))
	for {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.SnapshotTimeout)
		e, err := p.ckpt.Get(cctx, l.key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, cerr := p.ckpt.Create(cctx, l.key, p.leaseBytes())
			if cerr == nil {
				cancel()
				l.rev = rev
				log.Info("lease acquired", zap.String("owner", p.id))
				return l, nil
			}
			if !errors.Is(cerr, jetstream.ErrKeyExists) && ctx.Err() == nil {
				log.Warn("create lease; retrying", zap.Error(cerr))
			}
		case err != nil:
			if ctx.Err() == nil {
				log.Warn("read lease; retrying", zap.Error(err))
			}
		case e.Revision() != seenRev:
			if firstRev == 0 {
				firstRev = e.Revision()
				log.Info("consumer held by another instance; standing by until its lease ends",
					zap.String("holder", leaseOwner(e.Value())), zap.Duration("lease_ttl", ttl), zap.String("on_lease_held", p.cfg.OnLeaseHeld))
			} else if p.cfg.OnLeaseHeld == LeaseFail {
				cancel()
				return nil, fmt.Errorf("processor: pipeline %s: consumer %s of stream %s is held by a live instance (%s, lease renewed within lease_ttl %v); on_lease_held is fail",
					pc.Name, pc.Input.Durable, pc.Input.Stream, leaseOwner(e.Value()), ttl)
			}
			seenRev, seenAt = e.Revision(), time.Now()
		case time.Since(seenAt) >= ttl:
			// Not renewed for a whole TTL: the holder is gone. Take over;
			// if another standby was faster, the revision moved and we
			// keep waiting.
			rev, uerr := p.ckpt.Update(cctx, l.key, p.leaseBytes(), seenRev)
			if uerr == nil {
				cancel()
				l.rev = rev
				log.Warn("lease taken over from an instance that stopped renewing it", zap.String("holder", leaseOwner(e.Value())),
					zap.String("owner", p.id), zap.Duration("lease_ttl", ttl))
				return l, nil
			}
			if !isRevisionMismatch(uerr) && ctx.Err() == nil {
				log.Warn("take over lease; retrying", zap.Error(uerr))
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func isRevisionMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// renew rewrites l every LeaseTTL/3 until stop is closed. When another
// instance has taken the lease over, it marks l lost, sends the error to
// lostCh and returns.
func (p *Processor) renew(l *lease, stop <-chan struct{}, lostCh chan<- error) {
	pc := l.pipe.cfg
	every := max(p.cfg.LeaseTTL/3, 5*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	failing := time.Time{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(every, p.cfg.SnapshotTimeout))
		rev, err := p.ckpt.Update(ctx, l.key, p.leaseBytes(), l.rev)
		if err != nil && isRevisionMismatch(err) {
			// A renewal whose reply was lost may have landed: adopt it if
			// the key still names us.
			e, gerr := p.ckpt.Get(ctx, l.key)
			switch {
			case gerr == nil && leaseOwner(e.Value()) == p.id:
				rev, err = e.Revision(), nil
			case gerr == nil || errors.Is(gerr, jetstream.ErrKeyNotFound):
				cancel()
				holder := "nobody (deleted)"
				if gerr == nil {
					holder = leaseOwner(e.Value())
				}
				l.lost.Store(true)
				lostCh <- fmt.Errorf("processor: pipeline %s: lease of consumer %s lost to %s (not renewed within lease_ttl %v); stopping",
					pc.Name, pc.Input.Durable, holder, p.cfg.LeaseTTL)
				return
			}
		}
		cancel()
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
			}
			p.log.Warn("renew lease; retrying", zap.String("pipeline", pc.Name), zap.Duration("failing_for", time.Since(failing)), zap.Error(err))
			continue
		}
		failing = time.Time{}
		l.rev = rev
	}
}

// leases are the leases held by Run, with their renewing goroutines.
type leases struct {
	held []*lease
	stop chan struct{}
	lost chan error
	wg   sync.WaitGroup
}

// acquireLeases takes the lease of every JetStream pipeline in turn,
// renewing each from the moment it is held.
func (p *Processor) acquireLeases(ctx context.Context, ls *leases) error {
	for _, pl := range p.pipes {
		if pl.track == nil {
			continue
		}
		l, err := p.acquire(ctx, pl)
		if err != nil {
			return err
		}
		pl.lease = l
		ls.held = append(ls.held, l)
		ls.wg.Add(1)
		go func() { defer ls.wg.Done(); p.renew(l, ls.stop, ls.lost) }()
	}
	return nil
}

// releaseLeases stops the renewals and deletes the leases still held, so a
// standby takes over at once.
func (p *Processor) releaseLeases(ls *leases) {
	close(ls.stop)
	ls.wg.Wait()
	for _, l := range ls.held {
		if l.lost.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
		if err := p.ckpt.Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil {
			p.log.Warn("release lease (a standby takes over after lease_ttl)", zap.String("pipeline", l.pipe.cfg.Name), zap.Error(err))
		}
		cancel()
	}
}
