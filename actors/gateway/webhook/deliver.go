package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// Outcome is a delivered message's answer (and an async callback's body).
type Outcome struct {
	Reply      string `json:"reply,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	SessionKey string `json:"session_key"`
	Accepted   bool   `json:"accepted,omitempty"`
	InstanceID string `json:"instance_id"`
	SenderID   string `json:"sender_id"`
}

// callbackBody is what an async instance's callback receives.
type callbackBody struct {
	Outcome
	Error string `json:"error,omitempty"`
}

// Deliver runs in's agent for sender on message, as a turn of the
// sender's session, and returns the answer; for an async instance it
// returns at once (Accepted) and POSTs the outcome to the callback URL.
// Errors: gateway.ErrInvalid (a bad sender or an empty message), ErrBusy
// (an async instance with MaxInFlight messages in flight: nothing runs),
// the turn's (runtime's errors) with the Outcome so far.
func (s *Service) Deliver(ctx context.Context, in Inbound, sender, message string) (Outcome, error) {
	switch {
	case sender == "" || len(sender) > maxSenderID || !gateway.ValidUserID(sender):
		return Outcome{}, fmt.Errorf("sender_id: 1-%d printable characters: %w", maxSenderID, gateway.ErrInvalid)
	case message == "":
		return Outcome{}, fmt.Errorf("message: required: %w", gateway.ErrInvalid)
	}
	c := in.Instance
	out := Outcome{SessionKey: "wh:" + c.ID.String() + ":" + sender, InstanceID: c.ID.String(), SenderID: sender}
	if !gateway.WebhookConfigOf(c).Async {
		return s.turn(ctx, c, out, message)
	}
	if err := s.admit(c.ID, c.Name); err != nil {
		return Outcome{}, err
	}
	s.bg.Add(1)
	go func(out Outcome) {
		defer s.bg.Done()
		defer s.done(c.ID) // the slot is held until the callback is delivered or abandoned
		res, err := s.turn(s.bgCtx, c, out, message)
		s.callback(c, in.secret, res, err)
	}(out)
	out.Accepted = true
	return out, nil
}

// turn runs one turn of the sender's session with the instance's agent.
func (s *Service) turn(ctx context.Context, c gateway.ChannelInstance, out Outcome, message string) (Outcome, error) {
	// The sender acts in its instance's namespace, never as a gateway user
	// of the same name (their memory, USER.md, grants and sessions).
	p := gateway.Principal{User: gateway.ChannelUser(c.ID, out.SenderID), BoundAgent: c.AgentID}
	res, err := s.turns.Turn(ctx, p, agentrun.TurnRequest{
		Agent: c.AgentID.String(), SessionKey: out.SessionKey, Endpoint: "channels.inbound", Channel: "webhook",
		Messages: []agentrun.Message{{Role: "user", Content: message}},
	})
	out.RunID = res.RunID
	if err != nil {
		return out, err
	}
	out.Reply = res.Content
	return out, nil
}

// callback POSTs an async turn's outcome to the instance's callback URL,
// signed like inbound requests, retrying failures (a network error or a
// non-2xx answer) with doubling waits, CallbackAttempts times in all.
func (s *Service) callback(c gateway.ChannelInstance, secret string, out Outcome, turnErr error) {
	body := callbackBody{Outcome: out}
	if turnErr != nil {
		body.Error = "INTERNAL"
		if s.cfg.Code != nil {
			body.Error = s.cfg.Code(turnErr)
		}
	}
	b, _ := json.Marshal(body) // plain strings: never fails
	url := gateway.WebhookConfigOf(c).CallbackURL
	wait := s.cfg.CallbackRetry
	for attempt := 1; attempt <= s.cfg.CallbackAttempts; attempt++ {
		err := s.post(url, secret, b)
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

var callbackClient = &http.Client{}

// post sends one signed callback.
func (s *Service) post(url, secret string, body []byte) error {
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.CallbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("callback request: %w", err)
	}
	ts := s.clock.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	resp, err := callbackClient.Do(req)
	if err != nil {
		return fmt.Errorf("post callback: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("callback answered %d", resp.StatusCode)
	}
	return nil
}
