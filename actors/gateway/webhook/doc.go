// Package webhook is the gateway's webhook channel below any transport:
// it verifies an inbound request (timestamp within Skew, HMAC-SHA256
// signature with the instance's secret, never seen before), runs the
// instance's agent for the sender as a turn of their session
// ("wh:<instance id>:<sender_id>"), and, for an async instance, delivers
// the outcome to its callback URL, signed the same way, retrying with
// doubling waits.
//
// # Usage
//
//	wh, err := webhook.New(webhook.DefaultConfig(), g, rt, lg) // g: *gateway.Gateway, rt: *agentrun.Runtime
//	defer wh.Close(ctx) // before rt.Close: abandons pending callbacks
//	in, err := wh.Verify(ctx, instanceRef, timestamp, signature, body) // ErrUnauthorized
//	out, err := wh.Deliver(ctx, in, senderID, message)                  // out.Accepted for async
//
// # Signature
//
//	X-Gatehouse-Timestamp: <Unix seconds>
//	X-Gatehouse-Signature: "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// # Concurrency and ownership
//
// A Service is safe for concurrent use. It owns its async turns and
// their callbacks: Close cancels them and waits for them until its
// context ends. Each instance has at most Config.MaxInFlight async
// messages in flight, each from its acceptance until its callback is
// delivered or abandoned (so the callback retries are bounded by the same
// number); beyond it Deliver is ErrBusy and runs nothing. The replay cache is in memory and bounded; a restart
// forgets it, which the timestamp window makes harmless beyond Skew.
package webhook
