package gateway

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// contentOracle is msgContent.UnmarshalJSON as it was before its fast
// path: every content decoded by encoding/json.
func contentOracle(b []byte) (msgContent, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return msgContent(s), nil
	}
	var parts []struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", invalidContent("content must be a string or an array of text parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Text != nil {
			sb.WriteString(*p.Text)
		}
	}
	return msgContent(sb.String()), nil
}

// TestMsgContentMatchesOracle: a content taken by the fast path is what
// encoding/json makes of it, for strings with and without escapes,
// invalid UTF-8 (replaced, as encoding/json does), and the part arrays.
// Only JSON the decoder accepts reaches UnmarshalJSON: no raw control
// characters.
func TestMsgContentMatchesOracle(t *testing.T) {
	pieces := []string{"a", "é", "日本", "\\n", "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", " ", "\xff", "\xc3", "\xe2\x82", "<", "&", "\\t", "\\u0001"}
	check := func(raw string) {
		t.Helper()
		var got msgContent
		gotErr := got.UnmarshalJSON([]byte(raw))
		want, wantErr := contentOracle([]byte(raw))
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("UnmarshalJSON(%q) = %q, %v; encoding/json gives %q, %v", raw, got, gotErr, want, wantErr)
		}
	}
	for _, raw := range []string{`""`, `"plain"`, `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, `"\xff\xfe"`} {
		check(raw)
	}
	rng := rand.New(rand.NewPCG(35, 3))
	for range 20_000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		check(b.String())
	}
}

// TestHeavyDecodeWaits: a chat request of a heavy body waits for a
// decoding slot while every slot is taken, and runs once one is given
// back; a small body does not wait.
func TestHeavyDecodeWaits(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":0}`, "")
	heavy := `{"model":"gateway:default","messages":[{"role":"user","content":"` + strings.Repeat("word ", heavyBody/5+1) + `"}]}`
	small := `{"model":"gateway:default","messages":[{"role":"user","content":"hi"}]}`
	for range cap(heavySlots) {
		heavySlots <- struct{}{}
	}
	taken := true
	defer func() {
		if taken {
			for range cap(heavySlots) {
				<-heavySlots
			}
		}
	}()
	e.must(200, "POST", "/v1/chat/completions", gwToken, small, "X-Gateway-User-Id", "alice")
	done := make(chan gwResp, 1)
	go func() { done <- e.do("POST", "/v1/chat/completions", gwToken, heavy, "X-Gateway-User-Id", "alice") }()
	select {
	case r := <-done:
		t.Fatalf("a heavy body was decoded while every slot was taken: %d", r.status)
	case <-time.After(300 * time.Millisecond):
	}
	<-heavySlots
	for range cap(heavySlots) - 1 {
		<-heavySlots
	}
	taken = false
	select {
	case r := <-done:
		if r.status != 200 {
			t.Fatalf("heavy chat = %d %s", r.status, r.raw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the heavy chat did not run once the slots were free")
	}
}
