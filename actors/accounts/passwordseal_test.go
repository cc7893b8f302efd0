package accounts_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/argon2"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// dataDirHolds reports which files under dir hold needle.
func dataDirHolds(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var in []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			in = append(in, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestPasswordHashSealed: a user's argon2id hash is sealed with the
// master key in its records and snapshots (the same records go to etcd
// in cluster mode): wal.db and snap/ hold no "$argon2id$", and the user
// logs in, before and after a restart, and after a password change.
func TestPasswordHashSealed(t *testing.T) {
	n := actorstest.New(t)
	sys := n.Start()
	ctx := actorstest.Ctx(t)
	u, err := sys.CreateUser(ctx, accounts.NewUser{Email: "sealed@example.com", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sys.Login(ctx, "sealed@example.com", "correct horse battery"); err != nil {
		t.Fatalf("Login = %v", err)
	}
	np := "another horse battery"
	if _, err := sys.UpdateUser(ctx, u.ID, accounts.UserPatch{Password: &np}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	if in := dataDirHolds(t, n.Dir, []byte("$argon2id$")); len(in) != 0 {
		t.Errorf("a password hash in plaintext in %v", in)
	}
	sys = n.Start()
	if _, _, err := sys.Login(ctx, "sealed@example.com", np); err != nil {
		t.Fatalf("Login after a restart = %v", err)
	}
	if _, _, err := sys.Login(ctx, "sealed@example.com", "correct horse battery"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Fatalf("Login with the old password = %v, want ErrBadCredentials", err)
	}
}

// TestLegacyPlainPasswordHashLogsIn: a user record written before hashes
// were sealed (a plain PHC string) still decodes and its user logs in.
func TestLegacyPlainPasswordHashLogsIn(t *testing.T) {
	n := actorstest.New(t)
	n.Start()
	salt := []byte("0123456789abcdef")
	sum := argon2.IDKey([]byte("legacy password"), salt, 2, 19*1024, 1, 32)
	b64 := base64.RawStdEncoding
	phc := fmt.Sprintf("$argon2id$v=%d$m=19456,t=2,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(sum))
	id := uuid.MustParse("11111111-2222-4333-8444-555555555555")
	rec := fmt.Sprintf(`{"id":%q,"email":"legacy@example.com","role":"user","plan":"standard","license_active":true,"created_at":%d,"password_hash":%q}`,
		id, time.Now().Unix(), phc)
	if _, err := n.Log.Append(wal.Record{Type: 2, Data: []byte(rec)}); err != nil {
		t.Fatal(err)
	}
	sys := n.Restart()
	ctx := actorstest.Ctx(t)
	u, _, err := sys.Login(ctx, "legacy@example.com", "legacy password")
	if err != nil || u.ID != id {
		t.Fatalf("Login of a legacy user = %s, %v; want %s", u.ID, err, id)
	}
	if _, _, err := sys.Login(ctx, "legacy@example.com", "wrong password"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Fatalf("Login with a wrong password = %v, want ErrBadCredentials", err)
	}
}
