package keys_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

// Shards and key actors run inline on their senders and never wait for
// the disk: while one key's command is being committed (slowly here), the
// shard keeps authorizing its other keys and the key itself, reads are
// answered, and a second command on the key waits its turn and applies
// after the first.
func TestSlowCommitBlocksNoOne(t *testing.T) {
	n := actorstest.New(t, actorstest.WithKeys(func(c *keys.Config) { c.Shards = 1 }))
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k1, sec1 := mustKey(t, s, u, "one")
	_, sec2 := mustKey(t, s, u, "two")
	authN(t, s, sec1, 1) // both key actors live
	authN(t, s, sec2, 1)

	const commit = 400 * time.Millisecond
	entered := make(chan struct{}, 16)
	n.Log.SetFaultHook(func() error {
		entered <- struct{}{}
		time.Sleep(commit)
		return nil
	})
	var wg sync.WaitGroup
	var revokeErr, renameErr error
	var renamed keys.KeyInfo
	wg.Add(2)
	go func() {
		defer wg.Done()
		revokeErr = s.RevokeKey(ctx(t), k1.ID)
	}()
	<-entered // the revocation is being committed
	go func() {
		defer wg.Done()
		name := "renamed"
		renamed, renameErr = s.UpdateKey(ctx(t), k1.ID, keys.KeyPatch{Name: &name})
	}()

	start := time.Now()
	for range 100 {
		for _, sec := range []string{sec1, sec2} {
			if r := s.Authorize(ctx(t), []byte(sec)); r.Err != nil {
				t.Fatalf("Authorize during the commit: %v", r.Err)
			}
		}
	}
	if _, err := s.KeyUsage(ctx(t), k1.ID, 1); err != nil {
		t.Fatalf("KeyUsage during the commit: %v", err)
	}
	if took := time.Since(start); took >= commit/2 {
		t.Errorf("200 authorizations and a read took %v during a %v commit: they waited for it", took, commit)
	}
	wg.Wait()
	n.Log.SetFaultHook(nil)
	if revokeErr != nil || renameErr != nil {
		t.Fatalf("RevokeKey = %v, UpdateKey = %v", revokeErr, renameErr)
	}
	// The rename was validated after the revocation applied: it keeps it.
	if renamed.Name != "renamed" || renamed.IsActive {
		t.Errorf("after revoke then rename: name %q active %v, want renamed, inactive", renamed.Name, renamed.IsActive)
	}
	if r := s.Authorize(ctx(t), []byte(sec1)); !errors.Is(r.Err, keys.ErrKeyRevoked) {
		t.Errorf("Authorize after the revocation = %v, want ErrKeyRevoked", r.Err)
	}
	if r := s.Authorize(ctx(t), []byte(sec2)); r.Err != nil {
		t.Errorf("Authorize of the other key = %v", r.Err)
	}
}
