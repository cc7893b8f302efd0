package gateway

import (
	"context"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"gatehouse/actors/gateway"
)

// SkillStore is what skills need from the gateway. Safe for concurrent use.
type SkillStore interface {
	UploadSkill(ctx context.Context, zip []byte, user string) (gateway.Skill, error)
	GetSkill(ctx context.Context, viewer, ref string) (gateway.Skill, error)
	ListSkills(ctx context.Context, f gateway.SkillFilter) ([]gateway.Skill, error)
	UpdateSkill(ctx context.Context, ref string, in gateway.SkillInput) (gateway.Skill, error)
	ToggleSkill(ctx context.Context, ref string) (gateway.Skill, error)
	DeleteSkill(ctx context.Context, ref string) error
	SkillVersions(ctx context.Context, viewer, ref string) ([]gateway.SkillVersion, error)
	SkillFiles(ctx context.Context, viewer, ref string, version int) ([]gateway.SkillFile, error)
	ReadSkillFile(ctx context.Context, viewer, ref string, version int, file string) ([]byte, error)
	GrantSkill(ctx context.Context, ref, agent string, version int) error
	RevokeSkill(ctx context.Context, ref, agent string) error
	AgentSkills(ctx context.Context, viewer, agent string) ([]gateway.AgentSkill, error)
}

var _ SkillStore = (*gateway.Gateway)(nil)

var (
	errSystemSkill = newError(403, codeUnauthorized, msgInvalid, "system skills ship with the gateway: they cannot be changed, toggled or deleted")
)

// skillErr names the refusal to change a system skill.
func skillErr(err error) error {
	if errors.Is(err, gateway.ErrForbidden) {
		return errSystemSkill
	}
	return err
}

type skillsIn struct {
	Enabled string `query:"enabled" json:"-"`
	System  string `query:"system" json:"-"`
	Tag     string `query:"tag" json:"-"`
	Search  string `query:"search" json:"-"`
}

type skillList struct {
	Data []gateway.Skill `json:"data"`
}

func optBool(name, v string) (*bool, error) {
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, errInvalid(name + " must be true or false")
	}
	return &b, nil
}

func (s *Server) listSkills(ctx context.Context, c Caller, in skillsIn) (skillList, error) {
	f := gateway.SkillFilter{Tag: in.Tag, Search: in.Search, Viewer: c.principal().ReaderOf()}
	var err error
	if f.Enabled, err = optBool("enabled", in.Enabled); err != nil {
		return skillList{}, err
	}
	if f.System, err = optBool("system", in.System); err != nil {
		return skillList{}, err
	}
	l, err := s.d.Skills.ListSkills(ctx, f)
	return skillList{Data: nonNil(l)}, err
}

// uploadSkill reads the multipart field file, at most 20 MB (413 beyond,
// without reading more), and stores it as a skill or a new version.
func (s *Server) uploadSkill(ctx context.Context, c Caller, in uploadIn) (gateway.Skill, error) {
	if in.Body == nil {
		return gateway.Skill{}, errInvalid("file: required (multipart/form-data field \"file\", a ZIP)")
	}
	r, _, err := in.file()
	if err != nil {
		return gateway.Skill{}, err
	}
	data, err := io.ReadAll(io.LimitReader(r, gateway.MaxSkillZip+1))
	if err != nil {
		return gateway.Skill{}, errInvalid("file: the upload broke off")
	}
	if len(data) > gateway.MaxSkillZip {
		return gateway.Skill{}, errTooLarge
	}
	return s.d.Skills.UploadSkill(ctx, data, c.UserID)
}

func (s *Server) getSkill(ctx context.Context, c Caller, in idIn) (gateway.Skill, error) {
	sk, err := s.d.Skills.GetSkill(ctx, c.principal().ReaderOf(), in.ID)
	return sk, skillErr(err)
}

type skillUpdateIn struct {
	ID string `path:"id" json:"-"`
	gateway.SkillInput
}

func (s *Server) updateSkill(ctx context.Context, _ Caller, in skillUpdateIn) (gateway.Skill, error) {
	sk, err := s.d.Skills.UpdateSkill(ctx, in.ID, in.SkillInput)
	return sk, skillErr(err)
}

func (s *Server) toggleSkill(ctx context.Context, _ Caller, in idIn) (gateway.Skill, error) {
	sk, err := s.d.Skills.ToggleSkill(ctx, in.ID)
	return sk, skillErr(err)
}

func (s *Server) deleteSkill(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, skillErr(s.d.Skills.DeleteSkill(ctx, in.ID))
}

type versionList struct {
	Data []gateway.SkillVersion `json:"data"`
}

func (s *Server) skillVersions(ctx context.Context, c Caller, in idIn) (versionList, error) {
	v, err := s.d.Skills.SkillVersions(ctx, c.principal().ReaderOf(), in.ID)
	return versionList{Data: v}, skillErr(err)
}

type skillFilesIn struct {
	ID      string `path:"id" json:"-"`
	Version int    `query:"version" json:"-"`
}

type skillFileList struct {
	Data []gateway.SkillFile `json:"data"`
}

func (s *Server) skillFiles(ctx context.Context, c Caller, in skillFilesIn) (skillFileList, error) {
	f, err := s.d.Skills.SkillFiles(ctx, c.principal().ReaderOf(), in.ID, in.Version)
	return skillFileList{Data: nonNil(f)}, skillErr(err)
}

type skillFileIn struct {
	ID      string `path:"id" json:"-"`
	Path    string `path:"path" json:"-"`
	Version int    `query:"version" json:"-"`
}

// skillFile serves one file of a skill version: text as text/plain,
// anything else as an attachment; nosniff.
func (s *Server) skillFile(ctx context.Context, c Caller, in skillFileIn) (Body, error) {
	b, err := s.d.Skills.ReadSkillFile(ctx, c.principal().ReaderOf(), in.ID, in.Version, in.Path)
	if err != nil {
		return Body{}, skillErr(err)
	}
	h := map[string]string{"X-Content-Type-Options": "nosniff"}
	ct := "text/plain; charset=utf-8"
	if !utf8.Valid(b) {
		ct, h["Content-Disposition"] = "application/octet-stream", "attachment"
	}
	return Body{ContentType: ct, Header: h, Data: b}, nil
}

type skillGrantIn struct {
	ID      string `path:"id" json:"-"`
	AgentID string `json:"agent_id"`
	Version int    `json:"version"`
}

type grantOK struct {
	SkillID string `json:"skill_id"`
	AgentID string `json:"agent_id"`
	Version int    `json:"version"`
}

func (s *Server) grantSkill(ctx context.Context, _ Caller, in skillGrantIn) (grantOK, error) {
	if in.AgentID == "" {
		return grantOK{}, errInvalid("agent_id: required")
	}
	err := skillErr(s.d.Skills.GrantSkill(ctx, in.ID, in.AgentID, in.Version))
	return grantOK{SkillID: in.ID, AgentID: in.AgentID, Version: in.Version}, err
}

type skillRevokeIn struct {
	ID      string `path:"id" json:"-"`
	AgentID string `path:"agentID" json:"-"`
}

func (s *Server) revokeSkill(ctx context.Context, _ Caller, in skillRevokeIn) (None, error) {
	return None{}, skillErr(s.d.Skills.RevokeSkill(ctx, in.ID, in.AgentID))
}

type agentSkillList struct {
	Data []gateway.AgentSkill `json:"data"`
}

func (s *Server) agentSkills(ctx context.Context, c Caller, in idIn) (agentSkillList, error) {
	if _, err := s.visibleAgent(ctx, c, in.ID); err != nil {
		return agentSkillList{}, err
	}
	l, err := s.d.Skills.AgentSkills(ctx, c.principal().ReaderOf(), in.ID)
	return agentSkillList{Data: l}, resource(err, errAgentNotFound, nil)
}
