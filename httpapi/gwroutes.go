package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// gwRoute is the one way to declare a gateway endpoint: the router, the
// auth wrapper and the OpenAPI document are all built from these.
type gwRoute struct {
	Method, Path string
	// Scope is the least scope an API key needs (the gateway token has all).
	Scope gateway.Scope
	// Public skips authentication (only /health).
	Public bool
	// NeedUser requires X-Gateway-User-Id.
	NeedUser bool
	// QueryToken also accepts ?token= (media and file-serving endpoints).
	QueryToken bool
	Summary    string
	Tag        string
	// Request and Response are values of the JSON body types (nil: none).
	Request, Response any
	// Status is the success status (0: 200).
	Status int
	// Stream: with "stream": true the answer is text/event-stream.
	Stream bool
	// Content is the success content type when it is not JSON.
	Content string
	Handler gwHandler
}

// gwRoutes declares every route the gateway serves.
func (s *GatewayServer) gwRoutes() []gwRoute {
	get, post, put, del := fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodDelete
	read, write, admin := gateway.ScopeRead, gateway.ScopeWrite, gateway.ScopeAdmin
	return []gwRoute{
		{Method: get, Path: "/health", Public: true, Tag: "system", Summary: "Liveness probe (no authentication)", Response: healthView{}, Handler: s.health},
		{Method: get, Path: "/metrics", Scope: read, Tag: "system", Summary: "Prometheus metrics", Content: "text/plain", Handler: s.metrics},
		{Method: get, Path: "/docs", Scope: read, QueryToken: true, Tag: "docs", Summary: "Interactive API documentation (OpenAPI viewer)", Content: "text/html", Handler: s.docsPage},
		{Method: get, Path: "/docs/openapi.json", Scope: read, QueryToken: true, Tag: "docs", Summary: "This OpenAPI 3.1 document", Content: "application/json", Handler: s.docsSpec},
		{Method: get, Path: "/docs/assets/{file}", Scope: read, QueryToken: true, Tag: "docs", Summary: "A file of the bundled viewer", Content: "application/octet-stream", Handler: s.docsAsset},

		{Method: get, Path: "/v1/api-keys", Scope: admin, Tag: "api-keys", Summary: "List API keys (masked)", Response: apiKeyList{}, Handler: s.listAPIKeys},
		{Method: post, Path: "/v1/api-keys", Scope: admin, Tag: "api-keys", Summary: "Create an API key; the raw key is returned once", Request: apiKeyCreateReq{}, Response: apiKeyCreated{}, Status: fasthttp.StatusCreated, Handler: s.createAPIKey},
		{Method: del, Path: "/v1/api-keys/{id}", Scope: admin, Tag: "api-keys", Summary: "Revoke an API key at once", Status: fasthttp.StatusNoContent, Handler: s.revokeAPIKey},

		{Method: get, Path: "/v1/providers", Scope: read, Tag: "providers", Summary: "List LLM providers", Response: providerList{}, Handler: s.listProviders},
		{Method: post, Path: "/v1/providers", Scope: admin, Tag: "providers", Summary: "Create a provider", Request: providerReq{}, Response: providerView{}, Status: fasthttp.StatusCreated, Handler: s.createProvider},
		{Method: get, Path: "/v1/providers/{id}", Scope: read, Tag: "providers", Summary: "Get a provider by id or name", Response: providerView{}, Handler: s.getProvider},
		{Method: put, Path: "/v1/providers/{id}", Scope: admin, Tag: "providers", Summary: "Update a provider (absent fields keep their value)", Request: providerReq{}, Response: providerView{}, Handler: s.updateProvider},
		{Method: del, Path: "/v1/providers/{id}", Scope: admin, Tag: "providers", Summary: "Delete a provider no agent uses", Status: fasthttp.StatusNoContent, Handler: s.deleteProvider},

		{Method: get, Path: "/v1/agents", Scope: read, NeedUser: true, Tag: "agents", Summary: "List agents the user owns or that are shared with them", Response: agentList{}, Handler: s.listAgents},
		{Method: post, Path: "/v1/agents", Scope: write, NeedUser: true, Tag: "agents", Summary: "Create an agent owned by the user", Request: agentReq{}, Response: agentView{}, Status: fasthttp.StatusCreated, Handler: s.createAgent},
		{Method: get, Path: "/v1/agents/{id}", Scope: read, NeedUser: true, Tag: "agents", Summary: "Get an agent by id or agent_key", Response: agentView{}, Handler: s.getAgent},
		{Method: put, Path: "/v1/agents/{id}", Scope: write, NeedUser: true, Tag: "agents", Summary: "Update an agent (owner only)", Request: agentReq{}, Response: agentView{}, Handler: s.updateAgent},
		{Method: del, Path: "/v1/agents/{id}", Scope: write, NeedUser: true, Tag: "agents", Summary: "Delete an agent (owner only)", Status: fasthttp.StatusNoContent, Handler: s.deleteAgent},
		{Method: post, Path: "/v1/agents/{id}/wake", Scope: write, NeedUser: true, Tag: "agents", Summary: "Run the agent once on a message", Request: wakeReq{}, Response: wakeResp{}, Handler: s.wake},

		{Method: post, Path: "/v1/chat/completions", Scope: write, Tag: "chat", Summary: "OpenAI-compatible chat completion with an agent", Request: chatReq{}, Response: chatResp{}, Stream: true, Handler: s.chatCompletions},
		{Method: post, Path: "/v1/responses", Scope: write, Tag: "chat", Summary: "Responses-style run of an agent", Request: respReq{}, Response: respObject{}, Stream: true, Handler: s.responses},
	}
}

// decode reads the body, exactly one JSON object, into dst.
func decode(r *gwReq, dst any) error {
	body := bytes.TrimSpace(r.rc.Request.Body())
	if len(body) == 0 {
		return errGWJSON("empty body")
	}
	if body[0] != '{' {
		return errGWJSON("body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errGWInvalid(te.Field + " must be " + jsonKind(te.Type.Kind().String()))
		}
		var ie invalidContent
		if errors.As(err, &ie) {
			return errGWInvalid(string(ie))
		}
		return errGWJSON(err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errGWJSON("trailing data after the object")
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "a number"
}

// param returns a path parameter as a string.
func param(r *gwReq, name string) string {
	v, _ := r.rc.UserValue(name).(string)
	return v
}

type healthView struct {
	Status string `json:"status"`
}

func (s *GatewayServer) health(r *gwReq) error {
	writeJSON(r.rc, fasthttp.StatusOK, healthView{Status: "ok"})
	return nil
}
