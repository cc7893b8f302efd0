package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/listener"
)

// The WebSocket RPC on /ws, on the gateway's port. Frames are JSON text
// messages:
//
//	request  {"type":"req","id":"1","method":"agents.list","params":{...}}
//	response {"type":"res","id":"1","ok":true,"payload":...}
//	         {"type":"res","id":"1","ok":false,"error":{code,message,type,retryable,retryAfterMs}}
//	event    {"type":"event","event":"chunk","id":"1","payload":...,"seq":7}
//
// The first request must be connect {token, user_id?, locale?}; anything
// else, or a bad token, answers UNAUTHORIZED and closes. The token is
// authenticated again before every later request (recheck): a key
// revoked or expired since connect answers UNAUTHORIZED and closes 1008.
// Every other method is a route of the table (its RPC name), run by
// Dispatch with the caller the connect established: the same rate limit,
// scope and user binding as over HTTP. A route that streams over SSE
// streams here as event frames carrying the request's id, then its
// response; a route that answers raw bytes answers {content_type, body}
// with body in base64 (wsBody).

// WebSocket limits (documented in docs/gateway.md).
const (
	wsMaxFrame       = 512 << 10        // bytes per incoming message
	wsPingEvery      = 30 * time.Second // server pings
	wsIdleTimeout    = 60 * time.Second // silence (no frame, no pong) before closing
	wsConnectTimeout = 10 * time.Second // for the connect request
	wsSendQueue      = 256              // frames queued for a slow reader before it is cut off
	wsInflight       = 8                // requests one connection may run at once
	wsConnsPerCred   = 16               // open connections per credential
	wsProtocol       = 1
)

var errWSConnect = newError(fasthttp.StatusUnauthorized, codeUnauthorized, msgWSConnectFirst)

// wsFrame is every frame, both directions.
type wsFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	OK      *bool           `json:"ok,omitempty"`
	Payload any             `json:"payload,omitempty"`
	Error   *ErrorDetail    `json:"error,omitempty"`
	Event   string          `json:"event,omitempty"`
	Seq     uint64          `json:"seq,omitempty"`
}

type wsConnectParams struct {
	Token  string `json:"token"`
	UserID string `json:"user_id"`
	Locale string `json:"locale"`
}

// wsHello answers connect.
type wsHello struct {
	Protocol int      `json:"protocol"`
	Role     string   `json:"role"` // admin (trusted backend) or user
	UserID   string   `json:"user_id"`
	Scopes   []string `json:"scopes"`
	Server   struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
}

// wsHub tracks open connections: per-credential counts and, for a
// graceful shutdown, every connection. Connection bookkeeping only: no
// key state lives here.
type wsHub struct {
	mu      sync.Mutex
	perCred map[string]int
	conns   map[*wsConn]struct{}
	closed  bool
}

func (h *wsHub) add(c *wsConn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.perCred[c.cred] >= wsConnsPerCred {
		return false
	}
	if h.perCred == nil {
		h.perCred, h.conns = map[string]int{}, map[*wsConn]struct{}{}
	}
	h.perCred[c.cred]++
	h.conns[c] = struct{}{}
	return true
}

func (h *wsHub) remove(c *wsConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.conns[c]; !ok {
		return
	}
	delete(h.conns, c)
	if h.perCred[c.cred]--; h.perCred[c.cred] <= 0 {
		delete(h.perCred, c.cred)
	}
}

// shutdown tells every connection the server is going away (a shutdown
// event, then close 1001) and refuses new ones.
func (h *wsHub) shutdown() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*wsConn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.event("", "shutdown", map[string]string{"reason": "server shutting down"})
		c.close(websocket.CloseGoingAway, "server shutting down")
	}
}

// wsConn is one connection: a reader (the handler's goroutine), a writer
// goroutine fed by a bounded queue, and up to wsInflight requests.
type wsConn struct {
	s      *Server
	ws     *websocket.Conn
	c      Caller
	cred   string
	token  []byte // the connect token, authenticated again before each request
	lang   int
	out    chan []byte
	done   chan struct{}
	once   sync.Once
	seq    atomic.Uint64
	slots  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeCode   int    // set once, by close, before done is closed
	closeReason string //
	writerDone  chan struct{}

	// mounted, when set, is a socket whose caller another listener
	// authenticated at the upgrade (Mount): no connect, and its recheck
	// instead of the token's.
	mounted *wsMounted
}

// wsMounted is the caller of a mounted socket and how to check, before
// each request, that its authentication still holds.
type wsMounted struct {
	c       Caller
	recheck func(context.Context) error
}

var wsUpgrader = websocket.FastHTTPUpgrader{
	HandshakeTimeout: 10 * time.Second,
	// CheckOrigin nil: a browser page may connect only from this host's
	// own origin (clients that send no Origin are not browsers).
}

// serveWS upgrades GET /ws. The connection outlives the handler.
func (s *Server) serveWS(rc *fasthttp.RequestCtx) {
	lang, ip := langOf(rc), rc.RemoteIP().String()
	if s.cfg.Token == "" && !loopbackHost(string(rc.Host())) {
		s.writeError(rc, lang, errOpenModeHost) // open mode: this machine only
		return
	}
	s.upgradeWS(rc, lang, ip, nil)
}

// upgradeWS upgrades rc to a WebSocket and runs its session; mounted is
// nil on the gateway's own /ws.
func (s *Server) upgradeWS(rc *fasthttp.RequestCtx, lang int, ip string, mounted *wsMounted) {
	err := wsUpgrader.Upgrade(rc, func(ws *websocket.Conn) {
		listener.Hijacked(ws.UnderlyingConn())
		s.wsSession(ws, lang, ip, mounted)
	})
	if err != nil {
		s.lg.Debug("websocket upgrade refused", "err", err)
	}
}

// wsSession runs one connection to its end.
func (s *Server) wsSession(ws *websocket.Conn, lang int, ip string, mounted *wsMounted) {
	ws.SetReadLimit(wsMaxFrame)
	ctx, cancel := context.WithCancel(context.Background())
	w := &wsConn{s: s, ws: ws, lang: lang, out: make(chan []byte, wsSendQueue), done: make(chan struct{}),
		slots: make(chan struct{}, wsInflight), ctx: ctx, cancel: cancel, writerDone: make(chan struct{}), mounted: mounted}
	go w.writer()
	defer func() {
		cancel()
		w.wg.Wait()
		w.close(websocket.CloseNormalClosure, "")
		<-w.writerDone // fasthttp closes the socket once this handler returns
		s.ws.remove(w)
	}()
	if !w.handshake(ip) {
		return
	}
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(wsIdleTimeout)) })
	for {
		_ = ws.SetReadDeadline(time.Now().Add(wsIdleTimeout))
		f, ok := w.read()
		if !ok {
			return
		}
		if f.Type != "req" || f.Method == "" {
			w.respond(f.ID, nil, errInvalid(`a frame must be {"type":"req","id":…,"method":…}`))
			continue
		}
		if err := w.recheck(); err != nil {
			w.respond(f.ID, nil, err)
			if errors.Is(err, errTokenInvalid) {
				w.close(websocket.ClosePolicyViolation, "credential revoked or expired")
				return
			}
			continue
		}
		select {
		case w.slots <- struct{}{}:
		default:
			w.respond(f.ID, nil, errRateLimited)
			continue
		}
		run := func() { w.call(f) }
		if f.Method == "chat.send" {
			run = w.queueChatSend(f) // queued here, in frame order
		}
		w.wg.Add(1)
		go func() {
			defer func() { <-w.slots; w.wg.Done() }()
			run()
		}()
	}
}

// read returns the next request frame; false when the connection is over
// (closed, silent too long, a frame over the limit, not JSON).
func (w *wsConn) read() (wsFrame, bool) {
	var f wsFrame
	mt, b, err := w.ws.ReadMessage()
	if err != nil {
		if errors.Is(err, websocket.ErrReadLimit) {
			w.close(websocket.CloseMessageTooBig, fmt.Sprintf("frames are limited to %d bytes", wsMaxFrame))
		}
		return f, false
	}
	if mt != websocket.TextMessage || json.Unmarshal(b, &f) != nil {
		w.close(websocket.CloseUnsupportedData, "frames are JSON text")
		return f, false
	}
	return f, true
}

// handshake reads the connect request and establishes the caller. A
// mounted socket's caller is established already: it needs no connect
// (status answers the hello).
func (w *wsConn) handshake(ip string) bool {
	if w.mounted != nil {
		w.c = w.mounted.c
		w.c.IP, w.c.Channel = ip, "ws"
		w.cred = credentialOf(w.c)
		if !w.s.ws.add(w) {
			w.close(websocket.CloseTryAgainLater, "too many connections")
			return false
		}
		return true
	}
	_ = w.ws.SetReadDeadline(time.Now().Add(wsConnectTimeout))
	f, ok := w.read()
	if !ok {
		return false
	}
	if f.Type != "req" || f.Method != "connect" {
		w.respond(f.ID, nil, errWSConnect)
		w.close(websocket.ClosePolicyViolation, "connect first")
		return false
	}
	var p wsConnectParams
	if len(f.Params) > 0 && json.Unmarshal(f.Params, &p) != nil {
		w.respond(f.ID, nil, errJSON("connect params must be {token, user_id?, locale?}"))
		w.close(websocket.ClosePolicyViolation, "bad connect")
		return false
	}
	if p.Locale != "" {
		w.lang = parseLang(p.Locale)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.RequestTimeout)
	defer cancel()
	c, err := w.s.authenticate(ctx, []byte(p.Token))
	w.s.countAuthFailure(err)
	if err == nil && p.UserID != "" && !printable(p.UserID, 255) {
		err = errBadHeader("user_id")
	}
	if err == nil {
		err = bindUser(&c, p.UserID)
	}
	if err != nil {
		w.respond(f.ID, nil, err)
		w.close(websocket.ClosePolicyViolation, "unauthorized")
		return false
	}
	c.IP, c.Channel = ip, "ws"
	w.c, w.cred, w.token = c, credentialOf(c), []byte(p.Token)
	if !w.s.ws.add(w) {
		w.respond(f.ID, nil, errTooManyConns)
		w.close(websocket.CloseTryAgainLater, "too many connections")
		return false
	}
	w.respond(f.ID, w.hello(), nil)
	return true
}

// recheck authenticates the connect token again, before each request, as
// HTTP does on every request: a key revoked or expired since connect is
// errTokenInvalid (the caller answers the request with it and closes
// 1008). Any other error (the key actors did not answer in time) fails
// this request only. The gateway token is Config.Token, read once when
// the server is built: it cannot change while the server runs, so for it
// this is a constant-time compare that holds for the connection's life.
// The key is a hash lookup on the key actors, as on HTTP's hot path.
func (w *wsConn) recheck() error {
	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.RequestTimeout)
	defer cancel()
	if w.mounted != nil {
		if err := w.mounted.recheck(ctx); err != nil {
			w.s.lg.Debug("mounted websocket: authentication ended", "err", err)
			return errTokenInvalid
		}
		return nil
	}
	c, err := w.s.authenticate(ctx, w.token)
	if err == nil && (c.KeyID != w.c.KeyID || c.Open != w.c.Open) {
		err = errTokenInvalid // not the credential connect established (cannot happen: the same token)
	}
	w.s.countAuthFailure(err)
	return err
}

// credentialOf names the credential for the per-credential cap.
func credentialOf(c Caller) string {
	switch {
	case c.KeyID != uuid.Nil:
		return "key:" + c.KeyID.String()
	case c.Open:
		return "ip:" + c.IP
	case c.Console:
		return "console:" + c.UserID
	}
	return "token"
}

func (w *wsConn) hello() wsHello {
	h := wsHello{Protocol: wsProtocol, Role: "user", UserID: w.c.UserID, Scopes: []string{}}
	if w.c.Trusted() {
		h.Role = "admin"
	}
	if w.c.Admin {
		h.Scopes = []string{"operator.admin", "operator.write", "operator.read"}
	}
	for _, sc := range w.c.Scopes {
		h.Scopes = append(h.Scopes, string(sc))
	}
	h.Server.Name, h.Server.Version = "gatehouse", "1"
	return h
}

// call runs one request: a WebSocket-only method, or a route by its RPC
// name through Dispatch.
func (w *wsConn) call(f wsFrame) {
	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.RequestTimeout)
	defer cancel()
	// A run answered in one piece outlives the request timeout but not the
	// socket (runContext): life ends with the socket or with this call, so
	// nothing stays registered on a long-lived socket.
	life, endLife := context.WithCancelCause(w.ctx)
	defer endLife(errCallDone)
	ctx = context.WithValue(ctx, socketLifeKey{}, life)
	switch f.Method {
	case "connect":
		w.respond(f.ID, nil, errInvalid("already connected"))
		return
	case "status":
		w.respond(f.ID, w.hello(), nil)
		return
	}
	if need, ok := wsSessionMethods[f.Method]; ok {
		w.wsSessionCall(ctx, f, need)
		return
	}
	out, err := w.s.Dispatch(ctx, w.c, f.Method, f.Params)
	if err != nil {
		w.respond(f.ID, nil, err)
		return
	}
	switch v := out.(type) {
	case Events:
		// A run is bounded by its agent's time limit, not the request's.
		sctx, scancel := context.WithCancel(w.ctx)
		defer scancel()
		v(sctx, &wsStream{w: w, id: f.ID, cancel: scancel, method: f.Method})
		w.respond(f.ID, map[string]bool{"done": true}, nil)
	case None:
		w.respond(f.ID, nil, nil)
	case Body:
		b, err := w.body(v)
		w.respond(f.ID, b, err)
	default:
		w.respond(f.ID, v, nil)
	}
}

// wsBody is the payload of a method whose HTTP answer is raw bytes
// (files.get, media.get, skills.files.get): the type and the bytes, in
// base64 (encoding/json's []byte: standard alphabet, padded), as
// params.body of an upload.
type wsBody struct {
	ContentType string `json:"content_type"`
	Body        []byte `json:"body"`
}

// body reads v whole, at most MaxUploadBytes (larger files are for
// HTTP, with Range), and closes its stream.
func (w *wsConn) body(v Body) (wsBody, error) {
	if v.Stream == nil {
		return wsBody{ContentType: v.ContentType, Body: v.Data}, nil
	}
	if c, ok := v.Stream.(io.Closer); ok {
		defer c.Close()
	}
	limit := int64(w.s.cfg.MaxUploadBytes)
	errBig := newError(fasthttp.StatusRequestEntityTooLarge, codeInvalid, msgInvalid,
		fmt.Sprintf("over the WebSocket RPC a file is at most %d bytes: GET it over HTTP (Range)", limit))
	if v.Size > limit {
		return wsBody{}, errBig
	}
	b, err := io.ReadAll(io.LimitReader(v.Stream, limit+1))
	switch {
	case err != nil:
		return wsBody{}, fmt.Errorf("read body: %w", err)
	case int64(len(b)) > limit:
		return wsBody{}, errBig
	}
	return wsBody{ContentType: v.ContentType, Body: b}, nil
}

// respond sends the response frame of request id: payload, or err mapped
// as on HTTP, in the connection's language.
func (w *wsConn) respond(id string, payload any, err error) {
	ok := err == nil
	f := wsFrame{Type: "res", ID: id, OK: &ok, Payload: payload}
	if err != nil {
		_, d := w.s.mapError(err, w.lang, "WS", "/ws")
		f.Payload, f.Error = nil, &d
	}
	w.send(f)
}

// event sends an event frame (id: the request it belongs to, if any).
func (w *wsConn) event(id, name string, payload any) error {
	return w.send(wsFrame{Type: "event", ID: id, Event: name, Payload: payload, Seq: w.seq.Add(1)})
}

// send queues a frame. A reader too slow to keep the queue from filling is
// disconnected rather than buffered without bound.
func (w *wsConn) send(f wsFrame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	select {
	case <-w.done:
		return errClientGone
	default:
	}
	select {
	case w.out <- b:
		return nil
	case <-w.done:
		return errClientGone
	default:
		w.s.lg.Warn("websocket client too slow, disconnecting", "queued", len(w.out))
		w.close(websocket.ClosePolicyViolation, "too slow")
		return errClientGone
	}
}

var errClientGone = errors.New("gateway: websocket client gone")

// writer is the connection's only writer of data frames: it writes queued
// frames and pings until close, then the frames still queued (best
// effort), the close frame and closes the socket.
func (w *wsConn) writer() {
	defer close(w.writerDone)
	tick := time.NewTicker(wsPingEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			w.finish()
			return
		default:
		}
		select {
		case b := <-w.out:
			_ = w.ws.SetWriteDeadline(time.Now().Add(wsIdleTimeout))
			if w.ws.WriteMessage(websocket.TextMessage, b) != nil {
				w.close(websocket.CloseAbnormalClosure, "")
			}
		case <-tick.C:
			if w.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsIdleTimeout)) != nil {
				w.close(websocket.CloseAbnormalClosure, "")
			}
		case <-w.done:
		}
	}
}

func (w *wsConn) finish() {
	if w.closeCode != websocket.CloseAbnormalClosure {
		for drained := false; !drained; {
			select {
			case b := <-w.out:
				_ = w.ws.SetWriteDeadline(time.Now().Add(time.Second))
				_ = w.ws.WriteMessage(websocket.TextMessage, b)
			default:
				drained = true
			}
		}
		msg := websocket.FormatCloseMessage(w.closeCode, w.closeReason)
		_ = w.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	}
	_ = w.ws.Close()
}

// close ends the connection once, from any goroutine: the writer sends
// what is queued, then a close frame with code, then closes the socket
// (which also ends the reader).
func (w *wsConn) close(code int, reason string) {
	w.once.Do(func() {
		// The credential's slot is free before the client can read the
		// close frame: a client that reconnects at once is not refused.
		w.s.ws.remove(w)
		w.closeCode, w.closeReason = code, reason
		close(w.done)
		w.cancel()
	})
}

// wsStream is the WebSocket transport of a route's stream: each event a
// frame carrying the request's id.
type wsStream struct {
	w      *wsConn
	id     string
	cancel context.CancelFunc
	method string
}

func (st *wsStream) Send(event string, data any) error {
	if raw, ok := data.(Raw); ok {
		data = string(raw)
	}
	if event == "" {
		event = "chunk"
	}
	if err := st.w.event(st.id, event, data); err != nil {
		st.cancel()
		return err
	}
	return nil
}

func (st *wsStream) Ping() error {
	select {
	case <-st.w.done:
		st.cancel()
		return errClientGone
	default:
		return nil // the connection's writer pings on its own
	}
}

// Error is the WebSocket mapper.
func (st *wsStream) Error(err error) ErrorDetail {
	_, d := st.w.s.mapError(err, st.w.lang, "WS", strings.TrimSpace(st.method))
	return d
}
