package listener

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

var bearerScheme = []byte("bearer ")

// Bearer returns the token of the request's Authorization header when its
// scheme is Bearer (case-insensitive), surrounding white space trimmed.
// sent reports whether an Authorization header was present at all, so
// that a caller can tell "no credentials" (nil, false) from "another
// scheme or an empty token" (nil, true). The token aliases the request's
// memory: copy it before it outlives the handler. It allocates nothing.
func Bearer(h *fasthttp.RequestHeader) (token []byte, sent bool) {
	auth := h.Peek(fasthttp.HeaderAuthorization)
	if len(auth) == 0 {
		return nil, false
	}
	if len(auth) > len(bearerScheme) && bytes.EqualFold(auth[:len(bearerScheme)], bearerScheme) {
		if tok := bytes.TrimSpace(auth[len(bearerScheme):]); len(tok) > 0 {
			return tok, true
		}
	}
	return nil, true
}
