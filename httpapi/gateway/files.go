package gateway

import (
	"bytes"
	"cmp"
	"context"
	"net/http"
	"strings"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/workspace"
)

// Workspace files: what an agent's custom tools write in its workspace,
// listed, served and deleted through actors/gateway/workspace (os.Root:
// no path leaves the workspace). Request paths with dot segments,
// encoded dots or slashes, backslashes or NUL are refused here, before
// routing (checkFilePath), which would normalise them away.

// Workspaces reads and deletes workspace files under the policy. Safe
// for concurrent use.
type Workspaces interface {
	// List: workspace.ErrAgentNotFound.
	List(ctx context.Context, p gateway.Principal, ref, prefix string, max int) (workspace.List, error)
	// Open: workspace.ErrBadPath, ErrAgentNotFound, gateway.ErrNotFound.
	Open(ctx context.Context, p gateway.Principal, file string) (*workspace.File, error)
	// Remove: also gateway.ErrForbidden, gateway.ErrInUse.
	Remove(ctx context.Context, p gateway.Principal, file string) error
}

var _ Workspaces = (*workspace.Service)(nil)

// maxListedFiles bounds GET /v1/files.
const maxListedFiles = 10_000

var errBadFilePath = newError(400, codeInvalid, msgInvalid, "path: a relative path inside the agent's workspace (no .., no encoded dots or slashes, no NUL)")

// fileRoutes are the prefixes whose paths name workspace files.
var fileRoutes = [][]byte{[]byte("/v1/files/"), []byte("/v1/storage/")}

// checkFilePath refuses, before routing (which would normalise it away),
// a workspace-file path that tries to leave the workspace.
func checkFilePath(raw []byte) error {
	for _, p := range fileRoutes {
		rest, ok := bytes.CutPrefix(raw, p)
		if !ok {
			continue
		}
		low := bytes.ToLower(rest)
		for _, bad := range []string{"%2e", "%2f", "%5c", "%00", "\\", "\x00", "//"} {
			if bytes.Contains(low, []byte(bad)) {
				return errBadFilePath
			}
		}
		for _, seg := range bytes.Split(rest, []byte("/")) {
			if string(seg) == ".." || string(seg) == "." {
				return errBadFilePath
			}
		}
	}
	return nil
}

type filesIn struct {
	AgentID string `query:"agent_id" json:"-"`
	Prefix  string `query:"prefix" json:"-"`
}

func (s *Server) listFiles(ctx context.Context, c Caller, in filesIn) (workspace.List, error) {
	ref := cmp.Or(in.AgentID, c.AgentID)
	if ref == "" {
		return workspace.List{}, errInvalid("agent_id: required (or X-Gateway-Agent-Id)")
	}
	return s.d.Workspaces.List(ctx, c.principal(), ref, in.Prefix, maxListedFiles)
}

type fileIn struct {
	Path  string `path:"path" json:"-"`
	Range string `header:"Range" json:"-"`
}

// getFile serves a workspace file: a content type from its name (or its
// bytes), inline only when allow-listed (else an attachment), nosniff,
// Content-Length, one byte range.
func (s *Server) getFile(ctx context.Context, c Caller, in fileIn) (Body, error) {
	f, err := s.d.Workspaces.Open(ctx, c.principal(), in.Path)
	if err != nil {
		return Body{}, err
	}
	ctype := f.ContentType
	h := map[string]string{"X-Content-Type-Options": "nosniff", "Accept-Ranges": "bytes", "Cache-Control": "private, no-cache",
		"Last-Modified": f.Info.ModTime().UTC().Format(http.TimeFormat)}
	if !inline(ctype) {
		h["Content-Disposition"] = "attachment"
		ctype = "application/octet-stream"
	}
	return serveRange(f.File, f.Info.Size(), ctype, in.Range, h)
}

// inline reports whether ctype may be shown in a browser from the
// gateway's origin (media types; never HTML or scripts).
func inline(ctype string) bool {
	base, _, _ := strings.Cut(ctype, ";")
	for _, t := range gateway.MediaTypes {
		if b, _, _ := strings.Cut(t, ";"); b == base {
			return true
		}
	}
	return base == "application/json" || base == "text/csv" || base == "text/markdown"
}

// deleteFile deletes a workspace file (or an empty directory): the
// agent's owner, or a trusted caller.
func (s *Server) deleteFile(ctx context.Context, c Caller, in fileIn) (None, error) {
	return None{}, s.d.Workspaces.Remove(ctx, c.principal(), in.Path)
}
