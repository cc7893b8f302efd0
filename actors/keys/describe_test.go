package keys

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// TestDescribeRecordShowsNoSecret: what a repair reports of a lost record
// names it (type, ids, email, a key's name), even with a flipped byte, and
// never shows a hash, a sealed key or a password hash.
func TestDescribeRecordShowsNoSecret(t *testing.T) {
	id, owner := uuid.New(), uuid.New()
	var h hash
	for i := range h {
		h[i] = 0xa0 + byte(i)
	}
	var sealed sealedKey
	for i := range sealed {
		sealed[i] = 0x5c
	}
	key := keyCreated{rec: keyRecord{id: id, owner: owner, name: "ci", hash: h, sealed: sealed}}.record()
	// An accounts user record (type 2) as actors/accounts writes it.
	userJSON, err := json.Marshal(map[string]any{"v": 1, "id": id, "email": "dev@example.com", "role": "user", "plan": "",
		"license_active": false, "created_at": 0, "password_hash": "$argon2id$v=19$secret-hash"})
	if err != nil {
		t.Fatal(err)
	}
	user := wal.Record{Type: 2, Data: userJSON}
	flipped := []byte(strings.Replace(string(user.Data), `"role"`, `"ro\x00e"`, 1))
	tests := []struct {
		name  string
		rec   wal.Record
		want  []string
		never []string
	}{
		{name: "key created", rec: key, want: []string{"key created", "key id " + id.String(), "owner " + owner.String(), `name "ci"`},
			never: []string{hex.EncodeToString(h[:]), string(h[:8]), string(sealed[:8])}},
		{name: "key created, cut short", rec: wal.Record{Type: recKeyCreated, Data: key.Data[:20]}, want: []string{"key created"},
			never: []string{"key id"}},
		{name: "user", rec: user, want: []string{"user", `id "` + id.String(), `email "dev@example.com"`, `role "user"`},
			never: []string{"argon2id", "secret-hash"}},
		{name: "user, a byte flipped", rec: wal.Record{Type: 2, Data: flipped}, want: []string{`email "dev@example.com"`},
			never: []string{"argon2id", "role"}},
		{name: "extension", rec: wal.Record{Type: 200, Data: []byte(`{"kind":"token","id":"t1","hash":"abc"}`)},
			want: []string{"extension record type 200", `kind "token"`, `id "t1"`}, never: []string{"abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accounts := func(t wal.Type, _ []byte) (string, []string, bool) { return "user", nil, t == 2 } // as actors/accounts names it
			got := actors.DescribeRecord(tt.rec.Type, tt.rec.Data, DescribeRecord, accounts)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("DescribeRecord() = %q, want it to contain %q", got, w)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(got, n) {
					t.Errorf("DescribeRecord() = %q shows %q", got, n)
				}
			}
		})
	}
}
