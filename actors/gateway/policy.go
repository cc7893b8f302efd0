package gateway

import (
	"strings"

	"github.com/google/uuid"
)

// Policy: who may run, read and manage what, in one place. Every
// transport builds a Principal from its credential; the domain's
// operations ask these questions before they touch anything else (the
// agent runtime's Turn asks MayRun before a run's tools, skills or MCP
// servers are resolved, so a refused caller costs nothing but the lookup
// of the agent). The registry applies the same rules to what it returns
// for a user (GetAgent, ListAgents: owned or shared).

// Principal is who a domain operation acts for, as the transport
// authenticated it.
type Principal struct {
	// User is the user acted for ("" for none).
	User string
	// Trusted is a trusted backend (the gateway token, open mode, an
	// operator.admin key): it may act for any user.
	Trusted bool
	// BoundAgent, when set, is the agent a channel instance binds: its
	// senders may run it without its being shared with them.
	BoundAgent uuid.UUID
	// KeyID is the gateway API key that authenticated the call
	// (uuid.Nil: the gateway token, open mode, a console session): its
	// budgets bind the call's runs.
	KeyID uuid.UUID
}

// MayRun reports whether p may run agent a: its user must own it or
// have it shared with them, or it is the agent of p's channel instance;
// only a trusted backend acting for nobody may run any agent. A refused
// caller is told the agent does not exist, so ids do not leak.
func (p Principal) MayRun(a *Agent) bool {
	switch {
	case p.BoundAgent != uuid.Nil:
		return a.ID == p.BoundAgent
	case p.User == "":
		return p.Trusted
	}
	return a.CanUse(p.User)
}

// SeesAll reports whether p may read every user's records (runs,
// delegations, media, workspaces): trusted backends only.
func (p Principal) SeesAll() bool { return p.Trusted }

// MayRead reports whether p may read a record of user owner (a run, a
// delegation, a memory entry); anyone else is told it does not exist.
func (p Principal) MayRead(owner string) bool {
	return p.SeesAll() || (p.User != "" && owner == p.User)
}

// MayReadMedia reports whether p may read a media file uploaded by
// owner: its uploader's (a user), every one for a trusted backend; a file
// uploaded for no user is the operators' alone.
func (p Principal) MayReadMedia(owner string) bool {
	return p.SeesAll() || owner != "" && owner == p.User
}

// AdminsSessions reports whether p sees and manages every session: a
// trusted backend acting for nobody. Anyone else, their user's only.
func (p Principal) AdminsSessions() bool { return p.Trusted && p.User == "" }

// MayManage reports whether p may change agent a's configuration through
// it (regenerate its prompt): its owner or a user it is shared with as
// operator.
func (p Principal) MayManage(a *Agent) bool {
	return p.User != "" && (a.OwnerID == p.User || IsOperator(a, p.User))
}

// MayDeleteFile reports whether p may delete a file of agent a's
// workspace: its owner, or a trusted backend.
func (p Principal) MayDeleteFile(a *Agent) bool {
	return p.SeesAll() || a.OwnerID == p.User
}

// EveryUser, as the user a read acts for, sees every user's agents: what
// a trusted backend reads through (ReaderOf). It is not a valid user id
// (ValidUserID refuses control characters), so no credential or header
// can name it. The empty user sees no agent: an empty user never skips a
// check.
const EveryUser = "\x00every user"

// channelUserPrefix starts the user a channel instance's sender acts as.
const channelUserPrefix = "channel:"

// ChannelUser is the user that sender of channel instance acts as:
// "channel:<instance id>:<sender>", a namespace of its own. A webhook's
// sender_id is chosen by whoever signs the message, so it must never name
// a gateway user (their memory, USER.md, MCP grants, traces, sessions);
// and no API key can be bound to a user of this namespace
// (IsChannelUser), so no gateway caller acts as a sender either, except a
// trusted backend, which may act as anyone.
func ChannelUser(instance uuid.UUID, sender string) string {
	return channelUserPrefix + instance.String() + ":" + sender
}

// IsChannelUser reports whether u is a channel sender's user.
func IsChannelUser(u string) bool { return strings.HasPrefix(u, channelUserPrefix) }

// ReaderOf is the user whose view p reads agents through: EveryUser for
// a trusted backend, else p's user ("" sees nothing).
func (p Principal) ReaderOf() string {
	if p.SeesAll() {
		return EveryUser
	}
	return p.User
}

// AgentReader is the user p lists and gets agents as on the agent routes:
// its user (a trusted backend acting for one sees what that user sees),
// EveryUser for a trusted backend acting for nobody, "" (no agent) for a
// credential bound to no user. ReaderOf is the wider view of the routes
// that read an agent's records (a trusted backend: every agent).
func (p Principal) AgentReader() string {
	if p.User == "" && p.Trusted {
		return EveryUser
	}
	return p.User
}

// IsOperator reports whether a is shared with user as operator.
func IsOperator(a *Agent, user string) bool {
	for _, sh := range a.Shares {
		if sh.UserID == user && sh.Role == ShareOperator {
			return true
		}
	}
	return false
}
