package llmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// recTB records the stub's complaints instead of failing the test.
type recTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recTB) Helper() {}

func (r *recTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, format)
}

func (r *recTB) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

// bedrockPost sends body to path, SigV4-signed with creds (session token
// included) at when.
func bedrockPost(t *testing.T, url, body string, creds aws.Credentials, when time.Time) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "bedrock", BedrockRegion, when); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var testCreds = aws.Credentials{AccessKeyID: BedrockAccessKey, SecretAccessKey: BedrockSecret}

// TestBedrockStubRefuses: the stub refuses (and reports) requests that
// break the Converse API's rules, and accepts a correct one.
func TestBedrockStubRefuses(t *testing.T) {
	tool := `"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}]}`
	tests := []struct {
		name, body string
		bad        bool
	}{
		{"valid", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, false},
		{"valid tool loop", `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}}]}],` + tool + `}`, false},
		{"starts with assistant", `{"messages":[{"role":"assistant","content":[{"text":"hi"}]}]}`, true},
		{"two user turns", `{"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"user","content":[{"text":"b"}]}]}`, true},
		{"blank text", `{"messages":[{"role":"user","content":[{"text":"  "}]}]}`, true},
		{"unknown field", `{"messages":[{"role":"user","content":[{"text":"a"}]}],"max_tokens":5}`, true},
		{"toolUse without toolConfig", `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}}]}]}`, true},
		{"toolResult with a wrong id", `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t2","content":[{"text":"ok"}]}}]}],` + tool + `}`, true},
		{"toolResult missing", `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"text":"and?"}]}],` + tool + `}`, true},
		{"two members in a block", `{"messages":[{"role":"user","content":[{"text":"hi","cachePoint":{"type":"default"}}]}]}`, true},
		{"maxTokens 0", `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":0}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &recTB{TB: t}
			b := NewBedrock(rt)
			resp := bedrockPost(t, b.URL+"/model/m/converse", tt.body, testCreds, time.Now().UTC())
			if tt.bad != rt.failed() || tt.bad != (resp.StatusCode == 400) {
				t.Errorf("stub reported %v, answered %d; want refused=%v", rt.errs, resp.StatusCode, tt.bad)
			}
		})
	}
}

// TestBedrockStubSignature: a wrong secret, a changed body, a missing
// or foreign session token and an old date are refused with 403.
func TestBedrockStubSignature(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	tests := []struct {
		name   string
		creds  aws.Credentials
		when   time.Time
		mutate func(*http.Request)
		typ    string
	}{
		{"valid", testCreds, time.Now().UTC(), nil, ""},
		{"valid with session token", aws.Credentials{AccessKeyID: "ASIAX", SecretAccessKey: "s", SessionToken: "tok"}, time.Now().UTC(), nil, ""},
		{"wrong secret", aws.Credentials{AccessKeyID: BedrockAccessKey, SecretAccessKey: "nope"}, time.Now().UTC(), nil, "InvalidSignatureException"},
		{"missing session token", aws.Credentials{AccessKeyID: "ASIAX", SecretAccessKey: "s"}, time.Now().UTC(), nil, "UnrecognizedClientException"},
		{"unknown key", aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "s"}, time.Now().UTC(), nil, "UnrecognizedClientException"},
		{"expired", testCreds, time.Now().UTC().Add(-time.Hour), nil, "InvalidSignatureException"},
		{"changed path", testCreds, time.Now().UTC(), func(r *http.Request) { r.URL.Path = "/model/other/converse" }, "InvalidSignatureException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &recTB{TB: t}
			b := NewBedrock(rt)
			b.AddKey("ASIAX", "s", "tok")
			req, _ := http.NewRequest(http.MethodPost, b.URL+"/model/m/converse", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			sum := sha256.Sum256([]byte(body))
			if err := v4.NewSigner().SignHTTP(context.Background(), tt.creds, req, hex.EncodeToString(sum[:]), "bedrock", BedrockRegion, tt.when); err != nil {
				t.Fatal(err)
			}
			if tt.mutate != nil {
				tt.mutate(req)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			got := strings.SplitN(resp.Header.Get("X-Amzn-ErrorType"), ":", 2)[0]
			if got != tt.typ || (tt.typ == "") != (resp.StatusCode == 200) {
				t.Errorf("answer %d %q %s, want type %q", resp.StatusCode, got, buf.String(), tt.typ)
			}
			if tt.typ != "" && !strings.Contains(buf.String(), `"message"`) {
				t.Errorf("error body %s lacks message", buf.String())
			}
		})
	}
}

// TestBedrockStubThinkingSentBack: a reasoning block the stub signed
// beside a tool call must come back in the next request.
func TestBedrockStubThinkingSentBack(t *testing.T) {
	rt := &recTB{TB: t}
	b := NewBedrock(rt)
	b.Push(Reply{Thinking: "hmm", ToolCalls: []Call{{ID: "t1", Name: "f"}}}, Reply{Text: "done"})
	tool := `"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}]}`
	bedrockPost(t, b.URL+"/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]}],`+tool+`}`, testCreds, time.Now().UTC())
	resp := bedrockPost(t, b.URL+"/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}}]}],`+tool+`}`, testCreds, time.Now().UTC())
	if !rt.failed() || resp.StatusCode != 400 {
		t.Errorf("stub accepted a tool loop without its signed reasoning block (%d)", resp.StatusCode)
	}
}

// TestBedrockResignVectors: the stub's verification reproduces the AWS
// SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case,
// post-vanilla), so it checks signatures as AWS computes them, not only
// as the SDK's signer does.
func TestBedrockResignVectors(t *testing.T) {
	const scope = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="
	tests := []struct {
		name, method, uri, sig string
	}{
		{"get-vanilla", "GET", "/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{"post-vanilla", "POST", "/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
	}
	when := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := http.NewRequest(tt.method, "http://example.amazonaws.com"+tt.uri, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.RequestURI = tt.uri
			r.Header.Set("X-Amz-Date", "20150830T123600Z")
			r.Header.Set("Authorization", scope+tt.sig)
			a, err := parseBedrockAuth(r.Header.Get("Authorization"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := resignBedrock(r, a, nil, aws.Credentials{AccessKeyID: BedrockAccessKey, SecretAccessKey: BedrockSecret}, when)
			if err != nil || got != scope+tt.sig {
				t.Errorf("resignBedrock = %q, %v; want %q", got, err, scope+tt.sig)
			}
		})
	}
}
