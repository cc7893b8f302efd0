package gateway

import (
	"context"

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
	var err error
	if in.Limit, err = pageBounds(in.Limit, in.Offset); err != nil {
		return activityPage{}, err
	}
	f := gateway.ActivityFilter{ActorType: in.ActorType, ActorID: in.ActorID, Action: in.Action, EntityType: in.EntityType,
		EntityID: in.EntityID, UserID: in.UserID, Limit: in.Limit, Offset: in.Offset}
	if f.From, f.To, err = parseTimes(in.From, in.To); err != nil {
		return activityPage{}, err
	}
	as, total, err := s.d.Activity.Activity(ctx, f)
	if err != nil {
		return activityPage{}, err
	}
	return activityPage{Data: nonNil(as), Total: total, Limit: in.Limit, Offset: in.Offset}, nil
}
