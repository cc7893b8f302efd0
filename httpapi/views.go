package httpapi

import (
	"github.com/google/uuid"

	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
)

// The JSON shapes of responses. Field names are the seed's, exactly.

// sessionUserView is the user of login and me.
type sessionUserView struct {
	ID            uuid.UUID     `json:"id"`
	Email         string        `json:"email"`
	Role          accounts.Role `json:"role"`
	Plan          accounts.Plan `json:"plan"`
	LicenseActive bool          `json:"licenseActive"`
}

func newSessionUserView(u accounts.User) sessionUserView {
	return sessionUserView{ID: u.ID, Email: u.Email, Role: u.Role, Plan: u.Plan, LicenseActive: u.LicenseActive}
}

// userView is a user of the admin endpoints.
type userView struct {
	ID            uuid.UUID     `json:"id"`
	Email         string        `json:"email"`
	Role          accounts.Role `json:"role"`
	Plan          accounts.Plan `json:"plan"`
	LicenseActive bool          `json:"licenseActive"`
	CreatedAt     isoTime       `json:"createdAt"`
	// KeyRateLimit is the limit of the keys the user creates: an admin's
	// (PATCH /api/users/{id}, or a PATCH of one of the user's keys), null
	// for their plan's.
	KeyRateLimit *int64 `json:"keyRateLimit"`
}

func newUserView(u accounts.User) userView {
	v := userView{
		ID: u.ID, Email: u.Email, Role: u.Role, Plan: u.Plan,
		LicenseActive: u.LicenseActive, CreatedAt: isoTime(u.CreatedAt),
	}
	if u.KeyRateLimit > 0 {
		v.KeyRateLimit = &u.KeyRateLimit
	}
	return v
}

// keyListView is one entry of GET /api/keys.
type keyListView struct {
	ID         uuid.UUID `json:"id"`
	Name       string    `json:"name"`
	Prefix     string    `json:"prefix"`
	KeyPreview string    `json:"keyPreview"`
	RateLimit  int64     `json:"rateLimit"`
	IsActive   bool      `json:"isActive"`
	LastUsedAt isoTime   `json:"lastUsedAt"`
	UsageCount int64     `json:"usageCount"`
	ExpiresAt  isoTime   `json:"expiresAt"`
	CreatedAt  isoTime   `json:"createdAt"`
	// Ours, for the console's status column: the last rotation and the
	// end of the previous secret's grace period.
	RotatedAt         isoTime `json:"rotatedAt"`
	GracePeriodEndsAt isoTime `json:"gracePeriodEndsAt"`
	// Services (ours, issue 23): the services the key may reach; absent
	// when it reaches every service.
	Services []string `json:"services,omitempty"`
}

func newKeyListView(k keys.KeyInfo) keyListView {
	return keyListView{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, KeyPreview: k.Preview, RateLimit: k.RateLimit,
		IsActive: k.IsActive, LastUsedAt: isoTime(k.LastUsedAt), UsageCount: k.UsageCount,
		ExpiresAt: isoTime(k.ExpiresAt), CreatedAt: isoTime(k.CreatedAt),
		RotatedAt: isoTime(k.RotatedAt), GracePeriodEndsAt: isoTime(k.GraceEndsAt),
	}
}

// keyDetailView is the key of GET and PATCH /api/keys/{id}.
type keyDetailView struct {
	ID                uuid.UUID `json:"id"`
	Name              string    `json:"name"`
	Prefix            string    `json:"prefix"`
	RateLimit         int64     `json:"rateLimit"`
	IsActive          bool      `json:"isActive"`
	RotatedAt         isoTime   `json:"rotatedAt"`
	GracePeriodEndsAt isoTime   `json:"gracePeriodEndsAt"`
	LastUsedAt        isoTime   `json:"lastUsedAt"`
	UsageCount        int64     `json:"usageCount"`
	ExpiresAt         isoTime   `json:"expiresAt"`
	CreatedAt         isoTime   `json:"createdAt"`
	Services          []string  `json:"services,omitempty"`
}

func newKeyDetailView(k keys.KeyInfo) keyDetailView {
	return keyDetailView{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, RateLimit: k.RateLimit, IsActive: k.IsActive,
		RotatedAt: isoTime(k.RotatedAt), GracePeriodEndsAt: isoTime(k.GraceEndsAt),
		LastUsedAt: isoTime(k.LastUsedAt), UsageCount: k.UsageCount,
		ExpiresAt: isoTime(k.ExpiresAt), CreatedAt: isoTime(k.CreatedAt),
	}
}

type createdKeyBody struct {
	ID      uuid.UUID `json:"id"`
	Key     string    `json:"key"`
	Name    string    `json:"name"`
	Message string    `json:"message"`
}

type rotatedKeyBody struct {
	Key              string `json:"key"`
	Message          string `json:"message"`
	GracePeriodHours int64  `json:"gracePeriodHours"`
}

type successBody struct {
	Success bool   `json:"success"`
	Message string `json:"message,omitempty"`
}

type dayView struct {
	Date  string `json:"date"`
	Count int64  `json:"count"`
}

type limitView struct {
	Limit       int64 `json:"limit"`
	Used        int64 `json:"used"`
	Remaining   int64 `json:"remaining"`
	WindowHours int   `json:"windowHours"`
	// ResetAt (ours): when the oldest counted request leaves the sliding
	// window, null when the window is empty.
	ResetAt isoTime `json:"resetAt"`
}

type usageBody struct {
	DailyUsage      []dayView `json:"dailyUsage"`
	TotalUsageCount int64     `json:"totalUsageCount"`
	RateLimit       limitView `json:"rateLimit"`
}

func newUsageBody(u keys.Usage) usageBody {
	days := make([]dayView, len(u.Daily))
	for i, d := range u.Daily {
		days[i] = dayView{Date: d.Date, Count: d.Count}
	}
	return usageBody{
		DailyUsage:      days,
		TotalUsageCount: u.Total,
		RateLimit:       limitView{Limit: u.Limit, Used: u.Used, Remaining: u.Remaining, WindowHours: 1, ResetAt: isoTime(u.ResetAt)},
	}
}

// validateBody is the answer of POST /api/keys/validate, both 200 and 401.
type validateBody struct {
	Valid     bool       `json:"valid"`
	UserID    *uuid.UUID `json:"userId,omitempty"`
	RateLimit *int64     `json:"rateLimit,omitempty"`
	IsActive  *bool      `json:"isActive,omitempty"`
	Error     string     `json:"error,omitempty"`
}

type keysBody struct {
	Keys []keyListView `json:"keys"`
}

type keyBody struct {
	Key keyDetailView `json:"key"`
}

type usersBody struct {
	Users []userView `json:"users"`
}

type sessionUserBody struct {
	User sessionUserView `json:"user"`
}

type healthBody struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Cluster is set in cluster mode only.
	Cluster *clusterHealth `json:"cluster,omitempty"`
}
