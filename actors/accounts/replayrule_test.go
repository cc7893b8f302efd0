package accounts_test

import (
	"bytes"
	"testing"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// TestReplayRule (actors.Extension's rule): the accounts' section cut
// after any record j of a history holding every record type they write,
// restored and followed by every record after any k <= j, equals the
// section of the whole history; and the offline image of the whole
// history equals what the live accounts capture.
func TestReplayRule(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	c := ctx(t)
	a := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	b := mustUser(t, s, "b@example.com", accounts.PlanPremium, true)
	var tokens []string
	for _, email := range []string{"a@example.com", "a@example.com", "b@example.com", "b@example.com"} {
		_, sess, err := s.Login(c, email, "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, sess.Token)
	}
	if err := s.Logout(c, tokens[0]); err != nil { // session delete
		t.Fatal(err)
	}
	plan, pw := accounts.PlanStandard, "another horse"
	if _, err := s.UpdateUser(c, b.ID, accounts.UserPatch{Plan: &plan}); err != nil { // user put
		t.Fatal(err)
	}
	if _, err := s.UpdateUser(c, a.ID, accounts.UserPatch{Password: &pw}); err != nil { // user put + its sessions' deletes
		t.Fatal(err)
	}
	if err := s.LogoutAll(c, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Login(c, "a@example.com", pw); err != nil { // a session that lasts
		t.Fatal(err)
	}
	live, err := s.Service.Capture(c)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		seq uint64
		r   wal.Record
	}
	var recs []rec
	types := map[wal.Type]bool{}
	if err := n.Log.Replay(0, func(seq uint64, r wal.Record) error {
		if s.Service.Owns(r.Type) {
			recs = append(recs, rec{seq, wal.Record{Type: r.Type, Data: bytes.Clone(r.Data)}})
			types[r.Type] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(types) != 3 {
		t.Fatalf("the history holds record types %v, want all three of the accounts'", types)
	}
	section := func(from []byte, rs []rec) []byte {
		t.Helper()
		im := s.Service.OfflineImage()
		if err := im.Restore(from); err != nil {
			t.Fatal(err)
		}
		for _, x := range rs {
			if err := im.Apply(x.seq, x.r); err != nil {
				t.Fatal(err)
			}
		}
		b, err := im.Section()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	whole := section(nil, recs)
	if !bytes.Equal(whole, live) {
		t.Errorf("offline image of the whole history differs from the live capture (%d vs %d bytes)", len(whole), len(live))
	}
	for j := range len(recs) + 1 {
		cut := section(nil, recs[:j])
		for k := 0; k <= j; k++ {
			if got := section(cut, recs[k:]); !bytes.Equal(got, whole) {
				t.Fatalf("section cut after record %d, replayed from record %d: differs from the whole history's", j, k)
			}
		}
	}
}
