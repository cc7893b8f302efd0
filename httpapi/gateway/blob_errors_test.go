package gateway

import (
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway/blob"
)

// TestBlobUnavailableIs503: an upload no second cluster node took, or a
// missing blob no node sent, answers 503 UNAVAILABLE with its own message,
// not an internal error.
func TestBlobUnavailableIs503(t *testing.T) {
	err := fmt.Errorf("skills: %w", fmt.Errorf("replica: no other cluster member took a copy: %w", blob.ErrUnavailable))
	e, unexpected := classify(err)
	if unexpected || e.status != fasthttp.StatusServiceUnavailable || e.code != codeUnavailable || e.msg != msgBlobUnavailable {
		t.Fatalf("classify(%v) = %+v (unexpected %v); want 503 %s %s", err, e, unexpected, codeUnavailable, msgBlobUnavailable)
	}
}
