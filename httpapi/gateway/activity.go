package gateway

import (
	"context"
	"time"

	"gatehouse/actors/gateway"
)

// ActivityStore is what the activity log needs from the gateway. Safe for
// concurrent use.
type ActivityStore interface {
	Activity(ctx context.Context, f gateway.ActivityFilter) ([]gateway.Activity, int, error)
}

var _ ActivityStore = (*gateway.Gateway)(nil)

// activityIn is GET /v1/activity.
type activityIn struct {
	ActorType  string `query:"actor_type" json:"-"`
	ActorID    string `query:"actor_id" json:"-"`
	Action     string `query:"action" json:"-"`
	EntityType string `query:"entity_type" json:"-"`
	EntityID   string `query:"entity_id" json:"-"`
	UserID     string `query:"user_id" json:"-"`
	From       string `query:"from" json:"-"`
	To         string `query:"to" json:"-"`
	Limit      int    `query:"limit" json:"-"`
	Offset     int    `query:"offset" json:"-"`
}

type activityPage struct {
	Data   []gateway.Activity `json:"data"`
	Total  int                `json:"total"`
	Limit  int                `json:"limit"`
	Offset int                `json:"offset"`
}

func (s *Server) listActivity(ctx context.Context, _ Caller, in activityIn) (activityPage, error) {
	switch {
	case in.Limit < 0 || in.Limit > maxTracePage:
		return activityPage{}, errInvalid("limit must be in 1..200")
	case in.Offset < 0:
		return activityPage{}, errInvalid("offset must be >= 0")
	}
	if in.Limit == 0 {
		in.Limit = defTracePage
	}
	f := gateway.ActivityFilter{ActorType: in.ActorType, ActorID: in.ActorID, Action: in.Action, EntityType: in.EntityType,
		EntityID: in.EntityID, UserID: in.UserID, Limit: in.Limit, Offset: in.Offset}
	for _, t := range []struct {
		raw, name string
		dst       *time.Time
	}{{in.From, "from", &f.From}, {in.To, "to", &f.To}} {
		if t.raw == "" {
			continue
		}
		var err error
		if *t.dst, err = time.Parse(time.RFC3339, t.raw); err != nil {
			return activityPage{}, errInvalid(t.name + " must be an RFC 3339 time")
		}
	}
	as, total, err := s.d.Activity.Activity(ctx, f)
	if err != nil {
		return activityPage{}, err
	}
	if as == nil {
		as = []gateway.Activity{}
	}
	return activityPage{Data: as, Total: total, Limit: in.Limit, Offset: in.Offset}, nil
}
