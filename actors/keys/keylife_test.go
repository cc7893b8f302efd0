package keys_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
	"gatehouse/wal"
)

// TestRevokeDestroysCiphertext (issue 14): once a key is revoked and a
// snapshot taken, its AES-GCM ciphertext is in no WAL record and no
// snapshot file.
func TestRevokeDestroysCiphertext(t *testing.T) {
	n := actorstest.New(t)
	sys := n.Start()
	ctx := actorstest.Ctx(t)
	u := mustUser(t, sys, "a@example.com", accounts.PlanStandard, true)
	k, _ := mustKey(t, sys, u, "k")
	var sealed []byte
	if err := n.Log.Replay(0, func(_ uint64, r wal.Record) error {
		if s, ok := keys.SealedOfCreated(r); ok {
			sealed = bytes.Clone(s)
		}
		return nil
	}); err != nil || len(sealed) == 0 {
		t.Fatalf("no key-created record: %v", err)
	}
	if err := sys.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// The WAL's records (its file may keep freed pages until bbolt reuses
	// them: documented) and every snapshot file.
	first, err := n.Log.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first > 0 { // 0: the snapshot left the WAL empty
		if err := n.Log.Replay(first-1, func(seq uint64, r wal.Record) error {
			if bytes.Contains(r.Data, sealed) {
				t.Errorf("WAL record %d still holds the revoked key's ciphertext", seq)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	n.Stop()
	err = filepath.WalkDir(filepath.Join(n.Dir, "snap"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, sealed) {
			t.Errorf("%s still holds the revoked key's ciphertext", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKeyLimit (issue 14): a user holds at most their plan's number of
// keys; deleting one frees a slot; the count is exact after a restart.
func TestKeyLimit(t *testing.T) {
	n := actorstest.New(t, actorstest.WithAccounts(func(c *accounts.Config) {
		c.MaxKeys = map[accounts.Plan]int{accounts.PlanStandard: 2, accounts.PlanPremium: 3}
	}))
	sys := n.Start()
	ctx := actorstest.Ctx(t)
	u := mustUser(t, sys, "a@example.com", accounts.PlanStandard, true)
	var ids []keys.KeyInfo
	for i := range 2 {
		k, _ := mustKey(t, sys, u, fmt.Sprint("k", i))
		ids = append(ids, k)
	}
	if _, _, err := sys.CreateKey(ctx, keys.NewKey{Owner: sys.KeyOwner(u), Name: "third"}); !errors.Is(err, keys.ErrKeyLimit) {
		t.Fatalf("third key = %v, want ErrKeyLimit", err)
	}
	if err := sys.DeleteKey(ctx, ids[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sys.CreateKey(ctx, keys.NewKey{Owner: sys.KeyOwner(u), Name: "again"}); err != nil {
		t.Fatalf("after a delete = %v", err)
	}
	sys = n.Restart()
	if _, _, err := sys.CreateKey(ctx, keys.NewKey{Owner: sys.KeyOwner(u), Name: "after restart"}); !errors.Is(err, keys.ErrKeyLimit) {
		t.Errorf("after restart = %v, want ErrKeyLimit (2 keys held)", err)
	}
}
