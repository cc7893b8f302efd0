package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/webhook"
)

// ChannelStore is what channel instances need from the gateway. Safe for
// concurrent use.
type ChannelStore interface {
	CreateChannel(ctx context.Context, in gateway.ChannelInput) (gateway.ChannelInstance, error)
	UpdateChannel(ctx context.Context, ref string, in gateway.ChannelInput) (gateway.ChannelInstance, error)
	GetChannel(ctx context.Context, ref string) (gateway.ChannelInstance, error)
	ListChannels(ctx context.Context) ([]gateway.ChannelInstance, error)
	DeleteChannel(ctx context.Context, ref string) error
}

var _ ChannelStore = (*gateway.Gateway)(nil)

type channelList struct {
	Data []gateway.ChannelInstance `json:"data"`
}

func (s *Server) listChannels(ctx context.Context, c Caller, _ None) (channelList, error) {
	cs, err := s.d.Channels.ListChannels(ctx)
	return channelList{Data: shownAll(c, cs)}, err
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

func (s *Server) getChannel(ctx context.Context, c Caller, in idIn) (gateway.ChannelInstance, error) {
	ch, err := s.d.Channels.GetChannel(ctx, in.ID)
	return shown(c, ch), err
}

func (s *Server) updateChannel(ctx context.Context, _ Caller, in channelUpdateIn) (gateway.ChannelInstance, error) {
	return s.d.Channels.UpdateChannel(ctx, in.ID, in.ChannelInput)
}

func (s *Server) deleteChannel(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, s.d.Channels.DeleteChannel(ctx, in.ID)
}

// The webhook channel (actors/gateway/webhook). A sender POSTs to
// /v1/channels/{id}/inbound
//
//	{"sender_id": "u-42", "message": "hello"}
//
// with X-Gatehouse-Timestamp (Unix seconds) and X-Gatehouse-Signature:
// "sha256=" + hex(HMAC-SHA256(credentials.secret, timestamp + "." + body)).
// A timestamp more than webhook.Skew away from the gateway's clock, a bad
// signature, or a signature seen before (a replay) is 401 and runs
// nothing. The instance's agent then runs for the sender (their session
// "wh:<instance id>:<sender_id>" keeps the conversation): the answer is
// {"reply", "run_id", "session_key"}, or, for an async instance, 202 at
// once and the same body POSTed to config.callback_url, signed the same
// way, retried with backoff. An async instance holds at most
// gateway.webhook_max_in_flight messages until their callbacks are
// delivered or abandoned; beyond it a message is 429 RESOURCE_EXHAUSTED
// with Retry-After (webhook.ErrBusy) and runs nothing.

// Webhooks is the webhook channel: verification, turns, callbacks. Safe
// for concurrent use.
type Webhooks interface {
	// Verify checks an inbound request: gateway.ErrNotFound,
	// webhook.ErrUnauthorized.
	Verify(ctx context.Context, ref, timestamp, signature string, body []byte) (webhook.Inbound, error)
	// Deliver runs the sender's turn (or accepts it, async).
	Deliver(ctx context.Context, in webhook.Inbound, sender, message string) (webhook.Outcome, error)
}

var _ Webhooks = (*webhook.Service)(nil)

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

func (s *Server) inbound(ctx context.Context, _ Caller, in inboundIn) (Body, error) {
	v, err := s.d.Webhooks.Verify(ctx, in.ID, in.Timestamp, in.Signature, in.Body)
	if err != nil {
		return Body{}, resource(err, errNotFound, nil)
	}
	var msg inboundMsg
	if err := decodeJSON(in.Body, &msg); err != nil {
		return Body{}, err
	}
	out, err := s.d.Webhooks.Deliver(ctx, v, msg.SenderID, msg.Message)
	switch {
	case err != nil:
		return Body{}, err
	case out.Accepted:
		return jsonBody(http.StatusAccepted, out), nil
	}
	return jsonBody(http.StatusOK, out), nil
}

func jsonBody(status int, v any) Body {
	b, _ := json.Marshal(v) // plain structs: never fails
	return Body{Status: status, ContentType: "application/json", Data: append(b, '\n')}
}

// WebhookCode is the callback's error code of a failed async turn: the
// envelope's code, as a synchronous answer would carry it.
func WebhookCode(err error) string {
	e, _ := classify(err)
	return e.code
}
