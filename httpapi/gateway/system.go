package gateway

import (
	"context"
	"net/http"
)

type healthView struct {
	Status string `json:"status"`
}

func (s *Server) health(context.Context, Caller, None) (healthView, error) {
	if s.d.Health != nil {
		if err := s.d.Health(); err != nil {
			return healthView{}, err
		}
	}
	return healthView{Status: "ok"}, nil
}

// metricsIn carries the headers that choose the exposition format and
// its compression.
type metricsIn struct {
	Accept   string `header:"Accept" json:"-"`
	Encoding string `header:"Accept-Encoding" json:"-"`
}

// metrics answers what the listener's Prometheus handler answers.
func (s *Server) metrics(_ context.Context, _ Caller, in metricsIn) (Body, error) {
	h := http.Header{}
	if in.Accept != "" {
		h.Set("Accept", in.Accept)
	}
	if in.Encoding != "" {
		h.Set("Accept-Encoding", in.Encoding)
	}
	status, header, data := s.l.Metrics(h)
	b := Body{ContentType: header.Get("Content-Type"), Data: data, Status: status, Header: map[string]string{}}
	for k := range header {
		if k != "Content-Type" && k != "Content-Length" {
			b.Header[k] = header.Get(k)
		}
	}
	return b, nil
}
