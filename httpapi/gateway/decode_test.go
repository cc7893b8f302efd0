package gateway

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"gatehouse/httpapi/listener"
)

// TestDecodeJSONMatchesDecodeObject: decodeJSON (json.Unmarshal in place
// when it can) accepts and decodes exactly what the listener's
// DecodeObject does, and fails with the same error.
func TestDecodeJSONMatchesDecodeObject(t *testing.T) {
	bodies := []string{
		`{"model":"agent:a","messages":[{"role":"user","content":"hi"}]}`,
		"  \n{\"model\":\"m\",\"stream\":true}\t\r\n ",
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}`,
		`{"messages":[{"role":"user","content":"caf\u00e9 \"q\" \\ é"}]}`,
		`{"messages":[{"role":"user","content":5}]}`,
		`{"stream":"yes"}`,
		`{"model":1}`,
		`{"model":"m"} {"model":"n"}`,
		`{"model":"m"}x`,
		`{"model":"m"`,
		`{"model":"m",}`,
		`[{"model":"m"}]`,
		`"model"`,
		``,
		"   ",
		"{\"model\":\"\xff\"}",
		`{"model":"m","unknown":{"a":[1,2,{"b":null}]}}`,
		`{"messages":null,"user":"u","stream_options":{"include_usage":true}}`,
	}
	for _, b := range bodies {
		var got, want chatReq
		gotErr := decodeJSON([]byte(b), &got)
		wantErr := decodeErr(listener.DecodeObject([]byte(b), &want))
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%q: error %v, DecodeObject's %v", b, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decoded %+v, DecodeObject %+v", b, got, want)
		}
	}
}

// TestDecodeJSONInPlace: a megabyte chat message is decoded without
// copying the body into a decoder's buffer first (issue 35): what is
// allocated is about the message itself, and the message keeps nothing
// of the request's buffer.
func TestDecodeJSONInPlace(t *testing.T) {
	const size = 1 << 20
	body := []byte(`{"model":"agent:a","messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
	var req chatReq
	if err := decodeJSON(body, &req); err != nil || len(req.Messages) != 1 || len(req.Messages[0].Content) != size {
		t.Fatalf("decode: %v, %d messages", err, len(req.Messages))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	const runs = 4
	runtime.ReadMemStats(&before)
	for range runs {
		req = chatReq{}
		if err := decodeJSON(body, &req); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > size*3/2 {
		t.Errorf("decoding a %d-byte message allocated %d bytes, want at most 1.5x the message", size, per)
	}
	for i := range body { // the request's buffer reused by fasthttp
		body[i] = 'y'
	}
	if c := string(req.Messages[0].Content); strings.Count(c, "x") != size {
		t.Error("the decoded message refers to the request's buffer")
	}
}

// BenchmarkDecodeChat1MiB: a chat request with a 1 MiB message, decoded
// by decodeJSON (in place) and by DecodeObject as before (issue 35).
func BenchmarkDecodeChat1MiB(b *testing.B) {
	body := []byte(`{"model":"agent:a","messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte, any) error
	}{
		{"in-place", decodeJSON},
		{"DecodeObject", func(b []byte, dst any) error { return decodeErr(listener.DecodeObject(b, dst)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var req chatReq
				if err := bc.decode(body, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
