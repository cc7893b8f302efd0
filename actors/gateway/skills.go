package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/blob"
	"gatehouse/actors/gateway/systemskills"
)

// Skills: ZIP archives holding a SKILL.md (YAML front matter: name,
// description, tags) and files, uploaded in versions, enabled or disabled,
// granted to agents (a pinned version, or the latest). An agent's runs get
// their granted, enabled skills: names and descriptions in the system
// prompt, and the skill_read built-in to read a SKILL.md or file. System
// skills ship inside the binary (package systemskills): always enabled,
// never deleted.

// Skill is a skill as the API shows it.
type Skill struct {
	ID          uuid.UUID `json:"id"`
	Slug        string    `json:"slug"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Tags        []string  `json:"tags"`
	Visibility  string    `json:"visibility"` // public or private
	Enabled     bool      `json:"enabled"`
	System      bool      `json:"system"`
	Version     int       `json:"version"` // the latest
	CreatedBy   string    `json:"created_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// SkillVersion is one uploaded version.
type SkillVersion struct {
	Version    int       `json:"version"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	UploadedBy string    `json:"uploaded_by"`
	CreatedAt  time.Time `json:"created_at"`
	Files      int       `json:"files"`
}

// SkillInput changes a skill's metadata (nil: kept).
type SkillInput struct {
	Description *string  `json:"description"`
	Tags        []string `json:"tags"`
	Visibility  *string  `json:"visibility"`
}

// AgentSkill is a skill with an agent's grant.
type AgentSkill struct {
	Skill
	Granted        bool `json:"granted"`
	GrantedVersion int  `json:"granted_version"` // 0: the latest
}

type skillRec struct {
	ID          uuid.UUID `json:"id"`
	Slug        string    `json:"slug"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Tags        []string  `json:"tags,omitempty"`
	Visibility  string    `json:"visibility"`
	Enabled     bool      `json:"enabled"`
	Latest      int       `json:"latest"`
	CreatedBy   string    `json:"created_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (s *skillRec) ref() (kind, uuid.UUID) { return kindSkill, s.ID }
func (s *skillRec) view() Skill {
	return Skill{ID: s.ID, Slug: s.Slug, Name: s.Name, Description: s.Description, Tags: orEmpty(s.Tags), Visibility: s.Visibility,
		Enabled: s.Enabled, Version: s.Latest, CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

type skillVersionRec struct {
	ID         uuid.UUID   `json:"id"`
	SkillID    uuid.UUID   `json:"skill_id"`
	Version    int         `json:"version"`
	Ref        blob.Ref    `json:"ref"`
	Size       int64       `json:"size"`
	Root       string      `json:"root,omitempty"`
	Files      []SkillFile `json:"files"`
	SkillMD    string      `json:"skill_md"`
	UploadedBy string      `json:"uploaded_by,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
}

func (v *skillVersionRec) ref() (kind, uuid.UUID) { return kindSkillVersion, v.ID }
func (v *skillVersionRec) blobRefs() []blob.Ref   { return []blob.Ref{v.Ref} }
func (v *skillVersionRec) view() SkillVersion {
	return SkillVersion{Version: v.Version, Size: v.Size, SHA256: v.Ref.String(), UploadedBy: v.UploadedBy, CreatedAt: v.CreatedAt, Files: len(v.Files)}
}

type skillGrantRec struct {
	ID        uuid.UUID `json:"id"`
	SkillID   uuid.UUID `json:"skill_id"`
	AgentID   uuid.UUID `json:"agent_id"`
	Version   int       `json:"version,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (g *skillGrantRec) ref() (kind, uuid.UUID) { return kindSkillGrant, g.ID }

var skillNS = uuid.MustParse("2c0e7f1a-5b3d-4c8e-9f60-7a1b2c3d4e5f")

func skillVersionID(skill uuid.UUID, v int) uuid.UUID {
	return uuid.NewSHA1(skillNS, fmt.Appendf(nil, "version\x00%s\x00%d", skill, v))
}

func skillGrantID(skill, agent uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(skillNS, []byte("grant\x00"+skill.String()+"\x00"+agent.String()))
}

// systemSkill is a skill of the binary.
type systemSkill struct {
	skill Skill
	root  string // its directory in systemskills.FS
	md    string
	files []SkillFile
}

var systemSkillsOnce = sync.OnceValue(loadSystemSkills)

func loadSystemSkills() []systemSkill {
	dirs, _ := fs.ReadDir(systemskills.FS, ".")
	var out []systemSkill
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		md, err := fs.ReadFile(systemskills.FS, d.Name()+"/SKILL.md")
		if err != nil {
			continue
		}
		fm, err := frontMatterOf(string(md))
		if err != nil {
			continue
		}
		s := systemSkill{root: d.Name(), md: string(md)}
		_ = fs.WalkDir(systemskills.FS, d.Name(), func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == d.Name() {
				return nil
			}
			fi, _ := e.Info()
			s.files = append(s.files, SkillFile{Path: strings.TrimPrefix(p, d.Name()+"/"), Size: fi.Size(), IsDir: e.IsDir()})
			return nil
		})
		slug := slugOf(fm.Name)
		s.skill = Skill{ID: uuid.NewSHA1(skillNS, []byte("system\x00"+slug)), Slug: slug, Name: fm.Name, Description: fm.Description,
			Tags: orEmpty(fm.Tags), Visibility: "public", Enabled: true, System: true, Version: 1}
		out = append(out, s)
	}
	return out
}

func systemSkillByRef(ref string) (systemSkill, bool) {
	for _, s := range systemSkillsOnce() {
		if s.skill.Slug == ref || s.skill.ID.String() == ref {
			return s, true
		}
	}
	return systemSkill{}, false
}

// SkillFilter selects skills; nil fields match everything.
type SkillFilter struct {
	Enabled, System *bool
	Tag, Search     string
	// Viewer is who lists: a private skill is listed only to its uploader
	// and to EveryUser (a trusted backend).
	Viewer string
}

func (f SkillFilter) matches(s Skill) bool {
	q := strings.ToLower(f.Search)
	return (f.Enabled == nil || s.Enabled == *f.Enabled) && (f.System == nil || s.System == *f.System) &&
		(f.Tag == "" || slices.Contains(s.Tags, f.Tag)) &&
		(q == "" || strings.Contains(strings.ToLower(s.Name+" "+s.Slug+" "+s.Description), q))
}

// RunSkill is a skill a run has, with the version it reads.
type RunSkill struct {
	Slug, Name, Description string
	System                  bool
	Version                 int
}

// visibleTo reports whether viewer may see s: a public skill anyone, a
// private one its uploader and trusted backends (EveryUser); to anyone
// else it does not exist.
func (s *skillRec) visibleTo(viewer string) bool {
	return s.Visibility != "private" || viewer == EveryUser || viewer != "" && viewer == s.CreatedBy
}

// grantableTo reports whether s may be granted to (and run by) agent a: a
// private skill only to its uploader's agents.
func (s *skillRec) grantableTo(a *agentRec) bool {
	return s.Visibility != "private" || s.CreatedBy != "" && a.OwnerID == s.CreatedBy
}

// visibleSkill finds an uploaded skill viewer may see; ErrNotFound.
func (r regView) visibleSkill(ref, viewer string) (*skillRec, error) {
	s, ok := r.part.skills.get(ref)
	if !ok || !s.visibleTo(viewer) {
		return nil, ErrNotFound
	}
	return s, nil
}

func (r regView) getSkill(ref, viewer string) (Skill, error) {
	if s, ok := systemSkillByRef(ref); ok {
		return s.skill, nil
	}
	s, err := r.visibleSkill(ref, viewer)
	if err != nil {
		return Skill{}, err
	}
	return s.view(), nil
}

// listSkills lists the skills matching f, system skills included, by slug.
func (r regView) listSkills(f SkillFilter) []Skill {
	var out []Skill
	for _, s := range systemSkillsOnce() {
		if f.matches(s.skill) {
			out = append(out, s.skill)
		}
	}
	for _, s := range r.part.skills.rows {
		if v := s.view(); f.matches(v) && s.visibleTo(f.Viewer) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

func (r regView) skillVersions(ref, viewer string) ([]SkillVersion, error) {
	if sys, ok := systemSkillByRef(ref); ok {
		return []SkillVersion{{Version: 1, Files: len(sys.files)}}, nil
	}
	s, err := r.visibleSkill(ref, viewer)
	if err != nil {
		return nil, err
	}
	var out []SkillVersion
	for v := s.Latest; v >= 1; v-- {
		if ver, ok := r.part.skillVersions.rows[skillVersionID(s.ID, v)]; ok {
			out = append(out, ver.view())
		}
	}
	return out, nil
}

func (r regView) skillVersion(ref string, v int, viewer string) (*skillVersionRec, error) {
	s, err := r.visibleSkill(ref, viewer)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		v = s.Latest
	}
	ver, ok := r.part.skillVersions.rows[skillVersionID(s.ID, v)]
	if !ok {
		return nil, ErrNotFound
	}
	return ver, nil
}

func (r *registry) putSkill(rec *skillRec, sv *skillVersionRec) (Skill, error) {
	slug := rec.Slug
	if _, ok := systemSkillByRef(slug); ok {
		return Skill{}, fmt.Errorf("skill %q is a system skill: %w", slug, ErrExists)
	}
	now := r.clock.Now().UTC()
	s := *rec
	if cur, ok := r.part.skills.named(slug); ok {
		s = *cur
		s.Name, s.Description, s.Tags = rec.Name, rec.Description, rec.Tags
	} else {
		s.CreatedAt, s.Enabled, s.Visibility = now, true, "public"
	}
	s.Latest++
	s.UpdatedAt = now
	ver := *sv
	ver.SkillID, ver.Version, ver.ID, ver.CreatedAt = s.ID, s.Latest, skillVersionID(s.ID, s.Latest), now
	au := audit{action: "skill.upload", entityType: string(kindSkill), entityID: s.ID.String(),
		summary: fmt.Sprintf("uploaded version %d of skill %q (%d bytes)", s.Latest, s.Slug, ver.Size)}
	if err := r.commit(au, entitySaved{&s}, entitySaved{&ver}); err != nil {
		return Skill{}, fmt.Errorf("log skill: %w", err)
	}
	return s.view(), nil
}

// ownSkill is a copy of uploaded skill ref to change, its UpdatedAt now;
// ErrForbidden for a system skill.
func (r *registry) ownSkill(ref string) (skillRec, error) {
	if _, ok := systemSkillByRef(ref); ok {
		return skillRec{}, fmt.Errorf("system skills cannot be changed: %w", ErrForbidden)
	}
	cur, ok := r.part.skills.get(ref)
	if !ok {
		return skillRec{}, ErrNotFound
	}
	s := *cur
	s.UpdatedAt = r.clock.Now().UTC()
	return s, nil
}

// saveSkill commits a changed skill.
func (r *registry) saveSkill(au audit, s skillRec) (Skill, error) {
	if err := r.commit(au, entitySaved{&s}); err != nil {
		return Skill{}, fmt.Errorf("log skill: %w", err)
	}
	return s.view(), nil
}

func (r *registry) updateSkill(ref string, in SkillInput) (Skill, error) {
	s, err := r.ownSkill(ref)
	if err != nil {
		return Skill{}, err
	}
	if in.Description != nil {
		s.Description = *in.Description
	}
	if in.Tags != nil {
		s.Tags = slices.Clone(in.Tags)
	}
	if in.Visibility != nil {
		if v := *in.Visibility; v != "public" && v != "private" {
			return Skill{}, fmt.Errorf("visibility: public or private: %w", ErrInvalid)
		}
		s.Visibility = *in.Visibility
	}
	return r.saveSkill(audit{action: "skill.update", entityType: string(kindSkill), entityID: s.ID.String(), summary: fmt.Sprintf("updated skill %q", s.Slug)}, s)
}

func (r *registry) toggleSkill(ref string) (Skill, error) {
	s, err := r.ownSkill(ref)
	if err != nil {
		return Skill{}, err
	}
	s.Enabled = !s.Enabled
	return r.saveSkill(audit{action: "skill.toggle", entityType: string(kindSkill), entityID: s.ID.String(), summary: fmt.Sprintf("skill %q enabled: %v", s.Slug, s.Enabled)}, s)
}

// deleteSkill deletes a skill with its versions and grants.
func (r *registry) deleteSkill(ref string) error {
	s, err := r.ownSkill(ref)
	if err != nil {
		return err
	}
	evs := []event{entityDeleted{kind: kindSkill, id: s.ID}}
	for v := 1; v <= s.Latest; v++ {
		if _, ok := r.part.skillVersions.rows[skillVersionID(s.ID, v)]; ok {
			evs = append(evs, entityDeleted{kind: kindSkillVersion, id: skillVersionID(s.ID, v)})
		}
	}
	evs = r.part.skillGrants.deletes(evs, func(g *skillGrantRec) bool { return g.SkillID == s.ID })
	au := audit{action: "skill.delete", entityType: string(kindSkill), entityID: s.ID.String(), summary: fmt.Sprintf("deleted skill %q", s.Slug)}
	if err := r.commit(au, evs...); err != nil {
		return fmt.Errorf("log skill delete: %w", err)
	}
	return nil
}

// skillGrantOf resolves a grant's skill (its id and latest version) and
// agent; ErrNotFound for either.
func (r *registry) skillGrantOf(ref, agent string) (sid uuid.UUID, latest int, a *agentRec, err error) {
	var up *skillRec
	if s, ok := systemSkillByRef(ref); ok {
		sid, latest = s.skill.ID, 1
	} else if s, ok := r.part.skills.get(ref); ok {
		sid, latest, up = s.ID, s.Latest, s
	} else {
		return uuid.Nil, 0, nil, ErrNotFound
	}
	a, ok := r.part.agents.get(agent)
	if !ok {
		return uuid.Nil, 0, nil, fmt.Errorf("agent_id: agent %q: %w", agent, ErrNotFound)
	}
	if up != nil && !up.grantableTo(a) {
		return uuid.Nil, 0, nil, fmt.Errorf("agent_id: skill %q is private: only its uploader's agents get it: %w", up.Slug, ErrInvalid)
	}
	return sid, latest, a, nil
}

func (r *registry) grantSkill(ref, agent string, v int) error {
	sid, latest, a, err := r.skillGrantOf(ref, agent)
	if err != nil {
		return err
	}
	if v < 0 || v > latest {
		return fmt.Errorf("version: 1..%d, or none for the latest: %w", latest, ErrInvalid)
	}
	g := skillGrantRec{ID: skillGrantID(sid, a.ID), SkillID: sid, AgentID: a.ID, Version: v, CreatedAt: r.clock.Now().UTC()}
	au := audit{action: "skill.grant", entityType: string(kindSkill), entityID: sid.String(), summary: fmt.Sprintf("granted a skill to agent %q (version %d, 0: latest)", a.AgentKey, v)}
	if err := r.commit(au, entitySaved{&g}); err != nil {
		return fmt.Errorf("log skill grant: %w", err)
	}
	return nil
}

func (r *registry) revokeSkill(ref, agent string) error {
	sid, _, a, err := r.skillGrantOf(ref, agent)
	if err != nil {
		return err
	}
	id := skillGrantID(sid, a.ID)
	if _, ok := r.part.skillGrants.rows[id]; !ok {
		return ErrNotFound
	}
	au := audit{action: "skill.revoke", entityType: string(kindSkill), entityID: sid.String(), summary: fmt.Sprintf("revoked a skill from agent %q", a.AgentKey)}
	if err := r.commit(au, entityDeleted{kind: kindSkillGrant, id: id}); err != nil {
		return fmt.Errorf("log skill grant: %w", err)
	}
	return nil
}

func (r regView) agentSkills(ref, viewer string) ([]AgentSkill, error) {
	a, ok := r.part.agents.get(ref)
	if !ok {
		return nil, ErrNotFound
	}
	var out []AgentSkill
	add := func(s Skill) {
		as := AgentSkill{Skill: s}
		if g, ok := r.part.skillGrants.rows[skillGrantID(s.ID, a.ID)]; ok {
			as.Granted, as.GrantedVersion = true, g.Version
		}
		out = append(out, as)
	}
	for _, s := range systemSkillsOnce() {
		add(s.skill)
	}
	for _, s := range r.part.skills.rows {
		if s.visibleTo(viewer) {
			add(s.view())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out, nil
}

// runSkills are agent's granted, enabled skills.
func (r regView) runSkills(agent uuid.UUID) []RunSkill {
	var out []RunSkill
	for _, g := range r.part.skillGrants.rows {
		if g.AgentID != agent {
			continue
		}
		for _, sys := range systemSkillsOnce() {
			if sys.skill.ID == g.SkillID {
				out = append(out, RunSkill{Slug: sys.skill.Slug, Name: sys.skill.Name, Description: sys.skill.Description, System: true, Version: 1})
			}
		}
		if s, ok := r.part.skills.rows[g.SkillID]; ok && s.Enabled && s.grantableTo(r.part.agents.rows[agent]) {
			v := g.Version
			if v == 0 {
				v = s.Latest
			}
			out = append(out, RunSkill{Slug: s.Slug, Name: s.Name, Description: s.Description, Version: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// UploadSkill validates a skill archive (at most MaxSkillZip bytes) and
// stores it: a new skill, or a new version of the skill with its slug.
// ErrInvalid names the problem; ErrExists: a system skill's slug.
func (g *Gateway) UploadSkill(ctx context.Context, zipData []byte, user string) (Skill, error) {
	if g.blobs == nil {
		return Skill{}, fmt.Errorf("skills: no blob store: %w", ErrDisabled)
	}
	if len(zipData) > MaxSkillZip {
		return Skill{}, fmt.Errorf("file: over %d bytes: %w", MaxSkillZip, ErrTooLarge)
	}
	ps, err := parseSkillZip(zipData)
	if err != nil {
		return Skill{}, err
	}
	slug := slugOf(ps.name)
	if slug == "" {
		return Skill{}, skillErr("the name %q makes no slug", ps.name)
	}
	ref, size, err := g.blobs.Put(ctx, bytes.NewReader(zipData), MaxSkillZip)
	if err != nil {
		return Skill{}, fmt.Errorf("skills: %w", err)
	}
	defer g.blobs.Release(ref)
	rec := &skillRec{ID: g.newID(kindSkill), Slug: slug, Name: ps.name, Description: ps.description, Tags: ps.tags, CreatedBy: user}
	ver := &skillVersionRec{Ref: ref, Size: size, Root: ps.root, Files: ps.files, SkillMD: ps.skillMD, UploadedBy: user}
	return call(ctx, g, func(r *registry) (Skill, error) { return r.putSkill(rec, ver) })
}

// GetSkill finds a skill viewer may see (a user, EveryUser for a trusted
// backend: see skillRec.visibleTo) by id or slug; ErrNotFound.
func (g *Gateway) GetSkill(ctx context.Context, viewer, ref string) (Skill, error) {
	return read(ctx, g, func(r regView) (Skill, error) { return r.getSkill(ref, viewer) })
}

// ListSkills lists the skills matching f, system skills included, by slug.
func (g *Gateway) ListSkills(ctx context.Context, f SkillFilter) ([]Skill, error) {
	return read(ctx, g, func(r regView) ([]Skill, error) { return r.listSkills(f), nil })
}

// UpdateSkill changes a skill's metadata; ErrForbidden for a system skill.
func (g *Gateway) UpdateSkill(ctx context.Context, ref string, in SkillInput) (Skill, error) {
	return call(ctx, g, func(r *registry) (Skill, error) { return r.updateSkill(ref, in) })
}

// ToggleSkill enables or disables a skill; ErrForbidden for a system skill.
func (g *Gateway) ToggleSkill(ctx context.Context, ref string) (Skill, error) {
	return call(ctx, g, func(r *registry) (Skill, error) { return r.toggleSkill(ref) })
}

// DeleteSkill deletes a skill with its versions and grants; ErrForbidden
// for a system skill.
func (g *Gateway) DeleteSkill(ctx context.Context, ref string) error {
	return do(ctx, g, func(r *registry) error { return r.deleteSkill(ref) })
}

// SkillVersions lists the versions of a skill viewer may see, newest
// first.
func (g *Gateway) SkillVersions(ctx context.Context, viewer, ref string) ([]SkillVersion, error) {
	return read(ctx, g, func(r regView) ([]SkillVersion, error) { return r.skillVersions(ref, viewer) })
}

// skillVersion is an uploaded skill's version (0: the latest); ErrNotFound.
func (g *Gateway) skillVersion(ctx context.Context, viewer, ref string, version int) (*skillVersionRec, error) {
	return read(ctx, g, func(r regView) (*skillVersionRec, error) { return r.skillVersion(ref, version, viewer) })
}

// SkillFiles lists the files of a skill's version (0: the latest), for
// viewer.
func (g *Gateway) SkillFiles(ctx context.Context, viewer, ref string, version int) ([]SkillFile, error) {
	if s, ok := systemSkillByRef(ref); ok {
		return s.files, nil
	}
	ver, err := g.skillVersion(ctx, viewer, ref, version)
	if err != nil {
		return nil, err
	}
	return ver.Files, nil
}

// ReadSkillFile returns one file of a skill's version (0: the latest), for
// viewer (a run reads its granted skills as EveryUser); "" or SKILL.md
// reads the SKILL.md. ErrNotFound.
func (g *Gateway) ReadSkillFile(ctx context.Context, viewer, ref string, version int, file string) ([]byte, error) {
	file = strings.TrimPrefix(path.Clean("/"+file), "/")
	if s, ok := systemSkillByRef(ref); ok {
		if file == "" || file == "." {
			return []byte(s.md), nil
		}
		b, err := fs.ReadFile(systemskills.FS, s.root+"/"+file)
		if err != nil {
			return nil, ErrNotFound
		}
		return b, nil
	}
	ver, err := g.skillVersion(ctx, viewer, ref, version)
	if err != nil {
		return nil, err
	}
	if file == "" || file == "." || file == "SKILL.md" {
		return []byte(ver.SkillMD), nil
	}
	if g.blobs == nil {
		return nil, fmt.Errorf("skills: no blob store: %w", ErrDisabled)
	}
	rd, err := g.blobs.Open(ctx, ver.Ref)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	return skillFileFrom(data, ver.Root, file)
}

// GrantSkill grants a skill to an agent, pinned to version (0: latest).
func (g *Gateway) GrantSkill(ctx context.Context, ref, agent string, version int) error {
	return do(ctx, g, func(r *registry) error { return r.grantSkill(ref, agent, version) })
}

// RevokeSkill removes an agent's grant; ErrNotFound.
func (g *Gateway) RevokeSkill(ctx context.Context, ref, agent string) error {
	return do(ctx, g, func(r *registry) error { return r.revokeSkill(ref, agent) })
}

// AgentSkills lists every skill viewer may see with agent ref's grant
// status.
func (g *Gateway) AgentSkills(ctx context.Context, viewer, agent string) ([]AgentSkill, error) {
	return read(ctx, g, func(r regView) ([]AgentSkill, error) { return r.agentSkills(agent, viewer) })
}

// RunSkills are the granted, enabled skills a run of agent gets.
func (g *Gateway) RunSkills(ctx context.Context, agent uuid.UUID) ([]RunSkill, error) {
	return read(ctx, g, func(r regView) ([]RunSkill, error) { return r.runSkills(agent), nil })
}
