package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
)

// Skew is how far a webhook's timestamp may be from the clock.
const Skew = 5 * time.Minute

// Headers of a signed request, inbound and callback alike.
const (
	HeaderTimestamp = "X-Gatehouse-Timestamp"
	HeaderSignature = "X-Gatehouse-Signature"
)

// Sign is the signature of body at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// verify checks the timestamp, the signature and that the signature is
// new; any failure is ErrUnauthorized.
func (s *Service) verify(instance, secret, timestamp, sig string, body []byte) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrUnauthorized
	}
	now := s.clock.Now()
	if d := now.Sub(time.Unix(ts, 0)); d > Skew || d < -Skew {
		return ErrUnauthorized
	}
	want := Sign(secret, ts, body)
	if secret == "" || !hmac.Equal([]byte(want), []byte(sig)) {
		return ErrUnauthorized
	}
	if !s.replays.first(instance+"|"+sig, now) {
		return ErrUnauthorized
	}
	return nil
}

// replayCache remembers the signatures of the last 2×Skew, so a captured
// request cannot be sent again while its timestamp is still accepted.
// Bounded: beyond maxReplays entries the oldest go.
type replayCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

const maxReplays = 100_000

func newReplayCache() *replayCache { return &replayCache{seen: map[string]time.Time{}} }

// first records sig at now and reports whether it was not seen before.
func (c *replayCache) first(sig string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[sig]; ok {
		return false
	}
	if len(c.seen) >= maxReplays {
		for k, at := range c.seen {
			if now.Sub(at) > 2*Skew || len(c.seen) >= maxReplays {
				delete(c.seen, k)
			}
		}
	}
	c.seen[sig] = now
	return true
}
