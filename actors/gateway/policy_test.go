package gateway

import (
	"testing"

	"github.com/google/uuid"
)

func TestPrincipalPolicy(t *testing.T) {
	a := &Agent{ID: uuid.New(), OwnerID: "alice", SharedWith: []string{"bob", "olga"},
		Shares: []Share{{UserID: "bob", Role: ShareUser}, {UserID: "olga", Role: ShareOperator}}}
	tests := []struct {
		name                          string
		p                             Principal
		run, manage, del, sees, admin bool
	}{
		{"owner", Principal{User: "alice"}, true, true, true, false, false},
		{"shared user", Principal{User: "bob"}, true, false, false, false, false},
		{"shared operator", Principal{User: "olga"}, true, true, false, false, false},
		{"stranger", Principal{User: "mallory"}, false, false, false, false, false},
		{"stranger with an admin key", Principal{User: "mallory", Trusted: true}, false, false, true, true, false},
		{"trusted backend for nobody", Principal{Trusted: true}, true, false, true, true, true},
		{"nobody, untrusted", Principal{}, false, false, false, false, false},
		{"the instance's sender", Principal{User: "u-1", BoundAgent: a.ID}, true, false, false, false, false},
		{"another instance's sender", Principal{User: "alice", BoundAgent: uuid.New()}, false, true, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []bool{tt.p.MayRun(a), tt.p.MayManage(a), tt.p.MayDeleteFile(a), tt.p.SeesAll(), tt.p.AdminsSessions()}
			want := []bool{tt.run, tt.manage, tt.del, tt.sees, tt.admin}
			names := []string{"MayRun", "MayManage", "MayDeleteFile", "SeesAll", "AdminsSessions"}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s() = %v, want %v", names[i], got[i], want[i])
				}
			}
		})
	}
	if p := (Principal{User: "bob"}); !p.MayRead("bob") || p.MayRead("alice") || (Principal{}).MayRead("") {
		t.Error("MayRead: a user reads their own records only; nobody untrusted reads none")
	}
	if p := (Principal{User: "bob"}); !p.MayReadMedia("bob") || p.MayReadMedia("") || p.MayReadMedia("alice") || (Principal{}).MayReadMedia("") || !(Principal{Trusted: true}).MayReadMedia("alice") {
		t.Error("MayReadMedia: one's own; every one for a trusted backend; one uploaded for no user the operators' alone")
	}
	if (Principal{Trusted: true, User: "x"}).ReaderOf() != EveryUser || (Principal{User: "x"}).ReaderOf() != "x" || (Principal{}).ReaderOf() != "" {
		t.Error("ReaderOf: every agent for a trusted backend, else the user's (none for no user)")
	}
}
