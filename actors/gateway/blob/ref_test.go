package blob

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	valid := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"lowercase hex", valid, true},
		{"zero", strings.Repeat("0", 64), true},
		{"uppercase", strings.ToUpper(valid), false},
		{"empty", "", false},
		{"short", valid[:63], false},
		{"long", valid + "0", false},
		{"not hex", strings.Repeat("zz", 32), false},
		{"space", " " + valid[1:], false},
		{"multibyte", "é" + valid[2:], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRef(tt.in)
			if !tt.ok {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("ParseRef(%q) = %s, %v, want ErrCorrupt", tt.in, r, err)
				}
				return
			}
			if err != nil || r.String() != tt.in {
				t.Errorf("ParseRef(%q) = %s, %v, want it back", tt.in, r, err)
			}
		})
	}
}

func TestRefJSON(t *testing.T) {
	type record struct {
		Blob Ref   `json:"blob"`
		Size int64 `json:"size"`
	}
	in := record{Blob: sha256.Sum256([]byte("x")), Size: 1}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"blob":"` + in.Blob.String() + `","size":1}`
	if string(b) != want {
		t.Errorf("json.Marshal() = %s, want %s", b, want)
	}
	var out record
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("json.Unmarshal() = %+v, %v, want %+v", out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"blob":"ab"}`), &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("json.Unmarshal(short ref) = %v, want ErrCorrupt", err)
	}
	if (Ref{}).IsZero() != true || in.Blob.IsZero() {
		t.Error("IsZero() is wrong")
	}
}

// FuzzParseRef: never panics; either round-trips exactly or returns
// ErrCorrupt.
func FuzzParseRef(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add(strings.Repeat("AB", 32))
	f.Add("")
	f.Add(strings.Repeat("zz", 32))
	f.Add(strings.Repeat("0", 63) + "\x00")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseRef(%q) = %v, want ErrCorrupt", s, err)
			}
			var u Ref
			if uerr := u.UnmarshalText([]byte(s)); !errors.Is(uerr, ErrCorrupt) || !u.IsZero() {
				t.Fatalf("UnmarshalText(%q) = %v, left %s; want ErrCorrupt and no change", s, uerr, u)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("ParseRef(%q).String() = %q, want the input", s, r)
		}
		if b, _ := r.MarshalText(); string(b) != s {
			t.Fatalf("MarshalText() = %q, want %q", b, s)
		}
	})
}
