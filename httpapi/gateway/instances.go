package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"gatehouse/actors/gateway"
)

// InstanceStore is what the instances routes need. Safe for concurrent use.
type InstanceStore interface {
	// Instances errors: ErrNotFound (a stranger).
	Instances(ctx context.Context, caller, ref string) ([]gateway.Instance, error)
	// UserFiles errors: ErrNotFound, ErrForbidden (another user's files,
	// for anyone but the agent's owner and operators).
	UserFiles(ctx context.Context, caller, ref, user string) ([]gateway.ContextFile, error)
	// PutUserFile errors: ErrNotFound, ErrForbidden (not the caller's own
	// file, or not USER.md), ErrInvalid (too large, not UTF-8).
	PutUserFile(ctx context.Context, caller, ref, user, name, content string) ([]gateway.ContextFile, error)
}

var _ InstanceStore = (*gateway.Gateway)(nil)

type instanceList struct {
	Data []gateway.Instance `json:"data"`
}

type fileList struct {
	Data []gateway.ContextFile `json:"data"`
}

type instanceFilesIn struct {
	ID     string `path:"id" json:"-"`
	UserID string `path:"userID" json:"-"`
}

// userFileIn is PUT .../files/{fileName}: the body is the file's text
// (any content type), or JSON {"content": "..."}.
type userFileIn struct {
	ID       string `path:"id" json:"-"`
	UserID   string `path:"userID" json:"-"`
	FileName string `path:"fileName" json:"-"`
	Data     []byte `body:"text/markdown" json:"-"`
}

func (s *Server) listInstances(ctx context.Context, c Caller, in idIn) (instanceList, error) {
	is, err := s.d.Instances.Instances(ctx, c.UserID, in.ID)
	if err != nil {
		return instanceList{}, resource(err, errAgentNotFound, nil)
	}
	return instanceList{Data: is}, nil
}

func (s *Server) listInstanceFiles(ctx context.Context, c Caller, in instanceFilesIn) (fileList, error) {
	fs, err := s.d.Instances.UserFiles(ctx, c.UserID, in.ID, in.UserID)
	if err != nil {
		return fileList{}, resource(err, errAgentNotFound, nil)
	}
	return fileList{Data: fs}, nil
}

func (s *Server) putInstanceFile(ctx context.Context, c Caller, in userFileIn) (fileList, error) {
	content := string(in.Data)
	if t := strings.TrimSpace(content); strings.HasPrefix(t, "{") {
		var body struct {
			Content *string `json:"content"`
		}
		if err := json.Unmarshal([]byte(t), &body); err == nil && body.Content != nil {
			content = *body.Content
		}
	}
	fs, err := s.d.Instances.PutUserFile(ctx, c.UserID, in.ID, in.UserID, in.FileName, content)
	if errors.Is(err, gateway.ErrForbidden) {
		return fileList{}, errUserFileOnly
	}
	if err != nil {
		return fileList{}, resource(err, errAgentNotFound, nil)
	}
	return fileList{Data: fs}, nil
}
