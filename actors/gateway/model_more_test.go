package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The commands of TestLiveEqualsRestore over the kinds the first model
// left out: sessions and their turns (record 73), shares, user files,
// skills with their versions and grants (blobs), media and memory
// deletes; with their model.

var (
	sessKeys   = []string{"s0", "s1", "s2", "s3", "s4"}
	skillNames = []string{"Skill Alpha", "Skill Beta", "Skill Gamma"}
)

type mSession struct {
	agent              uuid.UUID
	user               string
	msgs               int
	prompt, completion int64
}

type mMemory struct {
	user  string
	agent uuid.UUID
}

type mSkill struct {
	id     uuid.UUID
	slug   string
	latest int
}

// dropAgent deletes agent id with what goes with it (sessions, memory,
// skill grants; user files, tools and MCP grants are not modelled).
func (m *model) dropAgent(id uuid.UUID) {
	delete(m.agents, id)
	for k, s := range m.sessions {
		if s.agent == id {
			delete(m.sessions, k)
		}
	}
	for k, e := range m.memory {
		if e.agent == id {
			delete(m.memory, k)
		}
	}
	for g := range m.grants {
		if g[1] == id {
			delete(m.grants, g)
		}
	}
}

// stepMore runs one of the commands of this file; x is in 0..46.
func (p *prop) stepMore(x int) {
	switch {
	case x < 11:
		p.turn()
	case x < 16:
		p.sessionOp()
	case x < 20:
		p.share()
	case x < 23:
		p.putUserFile()
	case x < 27:
		p.uploadSkill()
	case x < 32:
		p.grantSkill()
	case x < 36:
		p.toggleOrDeleteSkill()
	case x < 38:
		p.putMedia()
	case x < 41:
		p.deleteMemory()
	case x < 45:
		p.mcpOps()
	case x < 47:
		p.revokeMCP()
	default:
		p.budgetOp()
	}
}

// turn begins a turn (BeginTurn or QueueTurn) and ends it.
func (p *prop) turn() {
	key, user := pick(p, sessKeys), pick(p, users)
	agentRef := ""
	if p.r.IntN(4) > 0 {
		agentRef = p.ref(p.anyAgent())
	}
	s := p.m.sessions[sessionName(user, key)]
	ref := agentRef
	if ref == "" && s != nil {
		ref = s.agent.String()
	}
	a := p.m.agent(ref)
	var want error
	switch {
	case a == nil || !a.visibleTo(user): // keys are per user: another's "s" is not this one
		want = ErrNotFound
	case s != nil && s.agent != a.id:
		want = ErrInvalid
	}
	var turn Turn
	var err error
	if p.r.IntN(2) == 0 {
		turn, err = p.gw.BeginTurn(ctx(p.t), key, agentRef, user, "ws", func() {})
	} else {
		turn, err = p.gw.QueueTurn(key, agentRef, user, "http", nil)(ctx(p.t))
	}
	if !p.expect(fmt.Sprintf("BeginTurn %s agent %q by %s", key, agentRef, user), err, want) {
		return
	}
	if s == nil {
		s = &mSession{agent: a.id, user: user}
		p.m.sessions[sessionName(user, key)] = s
	}
	if turn.AgentID != s.agent || len(turn.Session.Messages) != s.msgs {
		p.t.Fatalf("BeginTurn %s = agent %s, %d messages; the model expects agent %s, %d", key, turn.AgentID, len(turn.Session.Messages), s.agent, s.msgs)
	}
	res := TurnResult{User: "q", Assistant: "a", PromptTokens: int64(1 + p.r.IntN(9)), CompletionTokens: int64(p.r.IntN(9)), Failed: p.r.IntN(5) == 0}
	got, err := p.gw.EndTurn(ctx(p.t), user, key, res)
	if err != nil {
		p.t.Fatalf("EndTurn %s = %v", key, err)
	}
	added := 2 // the user's message and the answer
	if res.Failed {
		added = 1
	}
	s.msgs = min(s.msgs+added, MaxSessionMessages)
	s.prompt += res.PromptTokens
	s.completion += res.CompletionTokens
	p.checkSession(sessionName(user, key), got)
}

// checkSession compares a session's counts with the model's.
func (p *prop) checkSession(key string, got Session) {
	p.t.Helper()
	s := p.m.sessions[key]
	if got.MessageCount != s.msgs || got.PromptTokens != s.prompt || got.CompletionTokens != s.completion {
		p.t.Fatalf("session %s = %d messages, %d+%d tokens; the model expects %d, %d+%d", key,
			got.MessageCount, got.PromptTokens, got.CompletionTokens, s.msgs, s.prompt, s.completion)
	}
}

func (p *prop) sessionOp() {
	key, user, admin := pick(p, sessKeys), pick(p, users), p.r.IntN(4) == 0
	op := pick(p, []string{"get", "get", "patch", "reset", "delete"})
	s := p.m.sessions[sessionName(user, key)]
	var want error
	if s == nil { // admin with a user acts in that user's namespace
		want = ErrNotFound
	}
	var label *string
	if op == "patch" {
		label = ptr(pick(p, []string{"", "work", "home"}))
	}
	got, err := p.gw.SessionOp(p.actx(), op, key, user, admin, label)
	if !p.expect(fmt.Sprintf("SessionOp %s %s by %s (admin %v)", op, key, user, admin), err, want) {
		return
	}
	switch op {
	case "reset":
		s.msgs, s.prompt, s.completion = 0, 0, 0
	case "delete":
		delete(p.m.sessions, sessionName(user, key))
		return
	}
	p.checkSession(sessionName(user, key), got)
}

func (p *prop) share() {
	user, ref, target := pick(p, users), p.ref(p.anyAgent()), pick(p, users)
	remove := p.r.IntN(3) == 0
	a, want := p.ownedAgent(ref, user)
	switch {
	case !remove && target == user:
		want = ErrInvalid // checked before the agent
	case want != nil:
	case remove && !slices.Contains(a.shared, target):
		want = ErrNotFound
	}
	var err error
	if remove {
		err = p.gw.UnshareAgent(p.actx(), user, ref, target)
	} else {
		_, err = p.gw.ShareAgent(p.actx(), user, ref, Share{UserID: target, Role: pick(p, []ShareRole{"", ShareUser, ShareOperator})})
	}
	if !p.expect(fmt.Sprintf("ShareAgent %s with %s by %s (remove %v)", ref, target, user, remove), err, want) {
		return
	}
	if remove {
		a.shared = sortedUnique(slices.DeleteFunc(slices.Clone(a.shared), func(u string) bool { return u == target }))
	} else {
		a.shared = sortedUnique(append(slices.Clone(a.shared), target))
	}
}

func (p *prop) putUserFile() {
	caller, ref := pick(p, users), p.ref(p.anyAgent())
	user := caller
	if p.r.IntN(5) == 0 {
		user = pick(p, users)
	}
	var want error
	switch a := p.m.agent(ref); {
	case a == nil || !a.visibleTo(caller):
		want = ErrNotFound
	case user != caller:
		want = ErrForbidden
	}
	_, err := p.gw.PutUserFile(p.actx(), caller, ref, user, UserFileName, fmt.Sprintf("I am %s, %d.", user, p.r.IntN(100)))
	p.expect("PutUserFile "+ref+" by "+caller, err, want)
}

// skillZip is a skill archive named name.
func (p *prop) skillZip(name string) []byte {
	md := fmt.Sprintf("---\nname: %s\ndescription: does %d things\ntags: [t%d]\n---\n# %s\n", name, p.r.IntN(10), p.r.IntN(3), name)
	return makeZip(p.t, zentry{name: "SKILL.md", body: md}, zentry{name: "scripts/run.sh", body: "echo " + name, mode: 0o755})
}

func (p *prop) uploadSkill() {
	name := pick(p, skillNames)
	got, err := p.gw.UploadSkill(p.actx(), p.skillZip(name), pick(p, users))
	if err != nil {
		p.t.Fatalf("UploadSkill %s = %v", name, err)
	}
	s := p.m.skills[name]
	if s == nil {
		s = &mSkill{id: got.ID, slug: got.Slug}
		p.m.skills[name] = s
	}
	s.latest++
	if got.ID != s.id || got.Version != s.latest {
		p.t.Fatalf("UploadSkill %s = %s version %d; the model expects %s version %d", name, got.ID, got.Version, s.id, s.latest)
	}
}

// anySkill is a skill of the model or one that does not exist, and a ref
// (slug or id) to it.
func (p *prop) anySkill() (*mSkill, string) {
	s := p.m.skills[pick(p, skillNames)]
	switch {
	case s == nil:
		return nil, "skill-nope"
	case p.r.IntN(2) == 0:
		return s, s.id.String()
	}
	return s, s.slug
}

func (p *prop) grantSkill() {
	s, ref := p.anySkill()
	agentRef := p.ref(p.anyAgent())
	a := p.m.agent(agentRef)
	revoke := p.r.IntN(3) == 0
	var want error
	switch {
	case s == nil, a == nil:
		want = ErrNotFound
	case revoke && !p.m.grants[[2]uuid.UUID{s.id, a.id}]:
		want = ErrNotFound
	}
	var err error
	if revoke {
		err = p.gw.RevokeSkill(p.actx(), ref, agentRef)
	} else {
		v := 0
		if s != nil && p.r.IntN(2) == 0 {
			v = 1 + p.r.IntN(s.latest)
		}
		err = p.gw.GrantSkill(p.actx(), ref, agentRef, v)
	}
	if p.expect(fmt.Sprintf("GrantSkill %s to %s (revoke %v)", ref, agentRef, revoke), err, want) {
		if revoke {
			delete(p.m.grants, [2]uuid.UUID{s.id, a.id})
		} else {
			p.m.grants[[2]uuid.UUID{s.id, a.id}] = true
		}
	}
}

func (p *prop) toggleOrDeleteSkill() {
	s, ref := p.anySkill()
	var want error
	if s == nil {
		want = ErrNotFound
	}
	if p.r.IntN(2) == 0 {
		_, err := p.gw.ToggleSkill(p.actx(), ref)
		p.expect("ToggleSkill "+ref, err, want)
		return
	}
	if !p.expect("DeleteSkill "+ref, p.gw.DeleteSkill(p.actx(), ref), want) {
		return
	}
	for name, ms := range p.m.skills {
		if ms == s {
			delete(p.m.skills, name)
		}
	}
	for g := range p.m.grants {
		if g[0] == s.id {
			delete(p.m.grants, g)
		}
	}
}

func (p *prop) putMedia() {
	body := strings.Repeat(pick(p, []string{"hello ", "\x89PNG\r\n\x1a\n"}), 1+p.r.IntN(50))
	m, err := p.gw.PutMedia(p.actx(), strings.NewReader(body), 1<<20, pick(p, []string{"a.txt", "", "b.png"}), pick(p, users))
	if err != nil {
		p.t.Fatalf("PutMedia = %v", err)
	}
	if got, err := p.gw.GetMedia(ctx(p.t), m.ID); err != nil || got.ID != m.ID {
		p.t.Fatalf("GetMedia(%s) = %v, %v", m.ID, got.ID, err)
	}
}

func (p *prop) deleteMemory() {
	var id uuid.UUID
	e, ok := anyOf(p, p.m.memory)
	for i := range id {
		id[i] = byte(p.r.Uint32())
	}
	var want error = ErrNotFound
	if ok && p.r.IntN(5) > 0 {
		for k, v := range p.m.memory {
			if v == e {
				id = k
			}
		}
		want = nil
	}
	user := pick(p, append([]string{""}, users...))
	if want == nil && user != "" && e.user != user {
		want = ErrNotFound
	}
	if p.expect(fmt.Sprintf("DeleteMemory %s by %q", id, user), p.gw.DeleteMemory(p.actx(), id, user), want) {
		delete(p.m.memory, id)
	}
}

func (p *prop) revokeMCP() {
	name := fmt.Sprintf("mcp%d", p.r.IntN(3))
	err := p.gw.RevokeMCP(p.actx(), name, GrantUser, pick(p, users))
	if err != nil && !errors.Is(err, ErrNotFound) {
		p.t.Fatalf("RevokeMCP = %v", err)
	}
}

// checkSessions compares every modelled session with the live one.
func (p *prop) checkSessions(c context.Context) {
	p.t.Helper()
	for _, u := range users {
		ss, total, err := p.gw.ListSessions(c, SessionFilter{UserID: u, Limit: 200}, false)
		if err != nil {
			p.t.Fatal(err)
		}
		var got, want []string
		for _, s := range ss {
			got = append(got, fmt.Sprintf("%s agent %s: %d messages, %d+%d tokens", s.Key, s.AgentID, s.MessageCount, s.PromptTokens, s.CompletionTokens))
		}
		for k, s := range p.m.sessions {
			if s.user == u {
				_, key, _ := strings.Cut(k, "\x00")
				want = append(want, fmt.Sprintf("%s agent %s: %d messages, %d+%d tokens", key, s.agent, s.msgs, s.prompt, s.completion))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if total != len(want) || !slices.Equal(got, want) {
			p.t.Errorf("%s's sessions differ from the model:\nlive  %q\nmodel %q", u, got, want)
		}
	}
}
