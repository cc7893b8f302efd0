package gateway

import (
	"encoding/json"
	"testing"
)

func FuzzParseLang(f *testing.F) {
	for _, s := range []string{"", "vi-VN,vi;q=0.9", "zh;q=0.5, en;q=0.6", "*", "en;q=abc", ";;,,q="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if l := parseLang(h); l < langEN || l > langZH {
			t.Fatalf("parseLang(%q) = %d", h, l)
		}
	})
}

func FuzzMsgContent(f *testing.F) {
	for _, s := range []string{`"hi"`, `[{"type":"text","text":"a"}]`, `5`, `null`, `[1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b string) {
		var c msgContent
		_ = json.Unmarshal([]byte(b), &c) // never panics
		var in respInput
		_ = json.Unmarshal([]byte(b), &in)
	})
}
