package transport

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoService answers its request reversed; "fail" is answered with an
// error, "slow" after 300 ms.
func echoService(ctx context.Context, req []byte) ([]byte, error) {
	switch string(req) {
	case "fail":
		return nil, errors.New("asked to fail")
	case "slow":
		time.Sleep(300 * time.Millisecond)
	}
	out := make([]byte, len(req))
	for i, b := range req {
		out[len(req)-1-i] = b
	}
	return out, nil
}

func TestCall(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for _, tc := range []struct {
		name    string
		service string
		req     []byte
		timeout time.Duration
		want    []byte
		err     error
		errText string
	}{
		{"answer", "echo", []byte("abc"), time.Second, []byte("cba"), nil, ""},
		{"empty request", "echo", nil, time.Second, []byte{}, nil, ""},
		{"1 MiB each way", "echo", big, 5 * time.Second, reversed(big), nil, ""},
		{"handler error", "echo", []byte("fail"), time.Second, nil, ErrRemote, "asked to fail"},
		{"slower than the timeout", "echo", []byte("slow"), 100 * time.Millisecond, nil, ErrCall, ""},
		{"no such service", "nothing", []byte("x"), 200 * time.Millisecond, nil, ErrCall, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := local.Call(ctx, ownerAddr, tc.service, tc.req, tc.timeout)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Call = %v, want %v", err, tc.err)
			}
			if tc.errText != "" && !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("Call error %q does not carry %q", err, tc.errText)
			}
			if tc.err == nil && !bytes.Equal(got, tc.want) {
				t.Fatalf("Call = %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// TestCallConcurrentChunks: many 256 KiB answers in flight at once (one
// batch of protoactor's may hold several) all arrive intact.
func TestCallConcurrentChunks(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := bytes.Repeat([]byte{byte(i)}, 256<<10)
			got, err := local.Call(context.Background(), ownerAddr, "echo", req, 10*time.Second)
			if err != nil || !bytes.Equal(got, req) {
				t.Errorf("call %d: %d bytes, %v", i, len(got), err)
			}
		}()
	}
	wg.Wait()
}

func reversed(b []byte) []byte {
	out, _ := echoService(context.Background(), b)
	return out
}
