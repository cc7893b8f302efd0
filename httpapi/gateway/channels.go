package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
)

// ChannelStore is what channel instances need from the gateway. Safe for
// concurrent use.
type ChannelStore interface {
	CreateChannel(ctx context.Context, in gateway.ChannelInput) (gateway.ChannelInstance, error)
	UpdateChannel(ctx context.Context, ref string, in gateway.ChannelInput) (gateway.ChannelInstance, error)
	GetChannel(ctx context.Context, ref string) (gateway.ChannelInstance, error)
	ListChannels(ctx context.Context) ([]gateway.ChannelInstance, error)
	DeleteChannel(ctx context.Context, ref string) error
	// ChannelCredentials opens an instance's credentials (to verify and
	// sign its traffic only).
	ChannelCredentials(ctx context.Context, ref string) (gateway.ChannelInstance, map[string]string, error)
	QueueChannelTurn(key string, agent uuid.UUID, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (gateway.Turn, error)
}

var _ ChannelStore = (*gateway.Gateway)(nil)

type channelList struct {
	Data []gateway.ChannelInstance `json:"data"`
}

func (s *Server) listChannels(ctx context.Context, _ Caller, _ None) (channelList, error) {
	cs, err := s.d.Channels.ListChannels(ctx)
	return channelList{Data: cs}, err
}

type channelCreateIn struct {
	gateway.ChannelInput
}

func (s *Server) createChannel(ctx context.Context, _ Caller, in channelCreateIn) (gateway.ChannelInstance, error) {
	return s.d.Channels.CreateChannel(ctx, in.ChannelInput)
}

type channelUpdateIn struct {
	ID string `path:"id" json:"-"`
	gateway.ChannelInput
}

func (s *Server) getChannel(ctx context.Context, _ Caller, in idIn) (gateway.ChannelInstance, error) {
	return s.d.Channels.GetChannel(ctx, in.ID)
}

func (s *Server) updateChannel(ctx context.Context, _ Caller, in channelUpdateIn) (gateway.ChannelInstance, error) {
	return s.d.Channels.UpdateChannel(ctx, in.ID, in.ChannelInput)
}

func (s *Server) deleteChannel(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, s.d.Channels.DeleteChannel(ctx, in.ID)
}

// The webhook channel. A sender POSTs to /v1/channels/{id}/inbound
//
//	{"sender_id": "u-42", "message": "hello"}
//
// with X-Gatehouse-Timestamp (Unix seconds) and X-Gatehouse-Signature:
// "sha256=" + hex(HMAC-SHA256(credentials.secret, timestamp + "." + body)).
// A timestamp more than WebhookSkew away from the gateway's clock, a bad
// signature, or a signature seen before (a replay) is 401 and runs
// nothing. The instance's agent then runs for the sender (their session
// "wh:<instance id>:<sender_id>" keeps the conversation): the answer is
// {"reply", "run_id", "session_key"}, or, for an async instance, 202 at
// once and the same body POSTed to config.callback_url, signed the same
// way, retried with backoff.

// WebhookSkew is how far a webhook's timestamp may be from the clock.
const WebhookSkew = 5 * time.Minute

// Webhook headers.
const (
	HeaderTimestamp = "X-Gatehouse-Timestamp"
	HeaderSignature = "X-Gatehouse-Signature"
)

const maxSenderID = 80

// SignWebhook is the signature of body at ts with secret.
func SignWebhook(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

type inboundIn struct {
	ID        string `path:"id" json:"-"`
	Timestamp string `header:"X-Gatehouse-Timestamp" json:"-"`
	Signature string `header:"X-Gatehouse-Signature" json:"-"`
	Body      []byte `body:"application/json" json:"-"`
}

type inboundMsg struct {
	SenderID string `json:"sender_id"`
	Message  string `json:"message"`
}

type inboundOut struct {
	Reply      string `json:"reply,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	SessionKey string `json:"session_key"`
	Accepted   bool   `json:"accepted,omitempty"`
	InstanceID string `json:"instance_id"`
	SenderID   string `json:"sender_id"`
}

func (s *Server) inbound(ctx context.Context, _ Caller, in inboundIn) (Body, error) {
	c, creds, err := s.d.Channels.ChannelCredentials(ctx, in.ID)
	if err != nil || !c.Enabled || c.ChannelType != gateway.ChannelWebhook {
		if err != nil && !errors.Is(err, gateway.ErrNotFound) {
			return Body{}, err
		}
		return Body{}, errNotFound
	}
	if err := s.verifyWebhook(c, creds["secret"], in); err != nil {
		return Body{}, err
	}
	var msg inboundMsg
	if err := decodeJSON(in.Body, &msg); err != nil {
		return Body{}, err
	}
	switch {
	case msg.SenderID == "" || len(msg.SenderID) > maxSenderID || !gateway.ValidUserID(msg.SenderID):
		return Body{}, errInvalid(fmt.Sprintf("sender_id: 1-%d printable characters", maxSenderID))
	case msg.Message == "":
		return Body{}, errInvalid("message: required")
	}
	out := inboundOut{SessionKey: "wh:" + c.ID.String() + ":" + msg.SenderID, InstanceID: c.ID.String(), SenderID: msg.SenderID}
	if gateway.WebhookConfigOf(c).Async {
		s.bg.Add(1)
		go func(out inboundOut) {
			defer s.bg.Done()
			res := s.channelTurn(s.bgCtx, c, out, msg)
			s.callback(c, creds["secret"], res)
		}(out)
		out.Accepted = true
		return jsonBody(http.StatusAccepted, out), nil
	}
	res := s.channelTurn(ctx, c, out, msg)
	if res.err != nil {
		return Body{}, res.err
	}
	return jsonBody(http.StatusOK, res.out), nil
}

func jsonBody(status int, v any) Body {
	b, _ := json.Marshal(v) // plain structs: never fails
	return Body{Status: status, ContentType: "application/json", Data: b}
}

// verifyWebhook checks the timestamp, the signature and that the
// signature is new.
func (s *Server) verifyWebhook(c gateway.ChannelInstance, secret string, in inboundIn) error {
	ts, err := strconv.ParseInt(in.Timestamp, 10, 64)
	if err != nil {
		return errWebhookAuth
	}
	now := s.d.Runs.Now()
	if d := now.Sub(time.Unix(ts, 0)); d > WebhookSkew || d < -WebhookSkew {
		return errWebhookAuth
	}
	want := SignWebhook(secret, ts, in.Body)
	if secret == "" || !hmac.Equal([]byte(want), []byte(in.Signature)) {
		return errWebhookAuth
	}
	if !s.replays.first(c.ID.String()+"|"+in.Signature, now) {
		return errWebhookAuth
	}
	return nil
}

var errWebhookAuth = newError(401, codeUnauthorized, msgWebhookAuth)

type turnOutcome struct {
	out inboundOut
	err error
}

// channelTurn runs one turn of the sender's session.
func (s *Server) channelTurn(ctx context.Context, c gateway.ChannelInstance, out inboundOut, msg inboundMsg) turnOutcome {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	turn, err := s.d.Channels.QueueChannelTurn(out.SessionKey, c.AgentID, msg.SenderID, "webhook", cancel)(runCtx)
	if err != nil {
		return turnOutcome{err: resource(err, errAgentNotFound, nil)}
	}
	rn, err := s.d.Runner.Prepare(runCtx, runtime.Request{
		Agent: c.AgentID.String(), User: msg.SenderID, Endpoint: "channels.inbound", Channel: "webhook",
		SessionKey: out.SessionKey, Messages: turnMessages(turn, msg.Message),
	})
	if err != nil {
		s.endTurn(ctx, out.SessionKey, msg.Message, runtime.Result{}, err)
		return turnOutcome{err: err}
	}
	res, err := s.d.Runner.Execute(runCtx, rn, nil)
	s.endTurn(ctx, out.SessionKey, msg.Message, res, err)
	out.RunID = rn.ID
	if err != nil {
		return turnOutcome{out: out, err: err}
	}
	out.Reply = res.Content
	return turnOutcome{out: out}
}

// callbackBody is what an async instance's callback receives.
type callbackBody struct {
	inboundOut
	Error string `json:"error,omitempty"`
}

// callback POSTs an async turn's outcome to the instance's callback URL,
// signed like inbound requests, retrying failures (a network error or a
// non-2xx answer) with doubling waits, CallbackAttempts times in all.
func (s *Server) callback(c gateway.ChannelInstance, secret string, res turnOutcome) {
	body := callbackBody{inboundOut: res.out}
	if res.err != nil {
		e, _ := classify(res.err)
		body.Error = e.code
	}
	b, _ := json.Marshal(body)
	url := gateway.WebhookConfigOf(c).CallbackURL
	wait := s.cfg.CallbackRetry
	for attempt := 1; attempt <= s.cfg.CallbackAttempts; attempt++ {
		err := s.postCallback(url, secret, b)
		if err == nil {
			return
		}
		s.lg.Warn("webhook callback failed", "instance", c.Name, "attempt", attempt, "err", err)
		if attempt == s.cfg.CallbackAttempts {
			break
		}
		select {
		case <-s.bgCtx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
	s.lg.Error("webhook callback abandoned", "instance", c.Name, "attempts", s.cfg.CallbackAttempts)
}

var callbackClient = &http.Client{Timeout: 10 * time.Second}

func (s *Server) postCallback(url, secret string, body []byte) error {
	ctx, cancel := context.WithTimeout(s.bgCtx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := s.d.Runs.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, SignWebhook(secret, ts, body))
	resp, err := callbackClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("callback answered %d", resp.StatusCode)
	}
	return nil
}

// replayCache remembers the webhook signatures of the last 2×WebhookSkew,
// so a captured request cannot be sent again while its timestamp is
// still accepted. Bounded: beyond maxReplays entries the oldest go.
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
			if now.Sub(at) > 2*WebhookSkew || len(c.seen) >= maxReplays {
				delete(c.seen, k)
			}
		}
	}
	c.seen[sig] = now
	return true
}
