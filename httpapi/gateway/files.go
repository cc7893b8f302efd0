package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// Workspace files: what an agent's custom tools write in its workspace
// (<data_dir>/workspaces/<agent id>), listed, served and deleted here.
// Every access goes through os.Root, so no path (.., symlinks that leave
// the workspace) reaches outside it; request paths with dot segments,
// encoded dots or slashes, backslashes or NUL are refused before routing
// (checkFilePath).

// Workspaces locates agents' workspaces.
type Workspaces interface {
	WorkspaceOf(agent uuid.UUID) string
}

var _ Workspaces = (*gateway.Gateway)(nil)

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

// fileInfo is one listed file.
type fileInfo struct {
	Path        string    `json:"path"` // <agent_key>/<path in the workspace>
	Size        int64     `json:"size"`
	Modified    time.Time `json:"modified"`
	ContentType string    `json:"content_type"`
}

type filesIn struct {
	AgentID string `query:"agent_id" json:"-"`
	Prefix  string `query:"prefix" json:"-"`
}

type workspaceList struct {
	Data      []fileInfo `json:"data"`
	Total     int        `json:"total"`
	Truncated bool       `json:"truncated,omitempty"`
}

// visibleAgent returns agent ref if c may see it: any agent for a trusted
// caller, else one c's user may use (a stranger's: errAgentNotFound).
func (s *Server) visibleAgent(ctx context.Context, c Caller, ref string) (gateway.Agent, error) {
	user := c.UserID
	if seesAll(c) {
		user = ""
	}
	a, err := s.d.Agents.GetAgent(ctx, user, ref)
	return a, resource(err, errAgentNotFound, nil)
}

// workspaceAgent resolves the agent whose workspace the caller reads: one
// they may use (trusted callers: any).
func (s *Server) workspaceAgent(ctx context.Context, c Caller, ref string) (gateway.Agent, *os.Root, error) {
	if ref == "" {
		ref = c.AgentID
	}
	if ref == "" {
		return gateway.Agent{}, nil, errInvalid("agent_id: required (or X-Gateway-Agent-Id)")
	}
	a, err := s.visibleAgent(ctx, c, ref)
	if err != nil {
		return gateway.Agent{}, nil, err
	}
	dir := s.d.Workspaces.WorkspaceOf(a.ID)
	if dir == "" {
		return a, nil, errNotFound
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return a, nil, err
	}
	root, err := os.OpenRoot(dir)
	return a, root, err
}

func contentTypeOf(name string, head []byte) string {
	t := mime.TypeByExtension(path.Ext(name))
	if t == "" {
		t = http.DetectContentType(head)
	}
	return t
}

func (s *Server) listFiles(ctx context.Context, c Caller, in filesIn) (workspaceList, error) {
	a, root, err := s.workspaceAgent(ctx, c, in.AgentID)
	if err != nil {
		return workspaceList{}, err
	}
	defer root.Close()
	prefix := strings.TrimPrefix(in.Prefix, "/")
	out := workspaceList{Data: []fileInfo{}}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.HasPrefix(p, prefix) {
			return nil
		}
		out.Total++
		if len(out.Data) >= maxListedFiles {
			out.Truncated = true
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		out.Data = append(out.Data, fileInfo{Path: a.AgentKey + "/" + p, Size: fi.Size(), Modified: fi.ModTime().UTC(),
			ContentType: contentTypeOf(p, nil)})
		return nil
	})
	return out, err
}

type fileIn struct {
	Path  string `path:"path" json:"-"`
	Range string `header:"Range" json:"-"`
}

// splitFilePath is "<agent>/<rel>".
func splitFilePath(p string) (agent, rel string, err error) {
	agent, rel, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !ok || agent == "" || rel == "" || !filepath.IsLocal(rel) || strings.ContainsRune(rel, 0) {
		return "", "", errBadFilePath
	}
	return agent, rel, nil
}

// workspaceFile resolves a file path "<agent>/<rel>" to its agent, the
// agent's workspace and rel.
func (s *Server) workspaceFile(ctx context.Context, c Caller, p string) (gateway.Agent, *os.Root, string, error) {
	agent, rel, err := splitFilePath(p)
	if err != nil {
		return gateway.Agent{}, nil, "", err
	}
	a, root, err := s.workspaceAgent(ctx, c, agent)
	return a, root, rel, err
}

// getFile serves a workspace file: a content type from its name (or its
// bytes), inline only when allow-listed (else an attachment), nosniff,
// Content-Length, one byte range.
func (s *Server) getFile(ctx context.Context, c Caller, in fileIn) (Body, error) {
	_, root, rel, err := s.workspaceFile(ctx, c, in.Path)
	if err != nil {
		return Body{}, err
	}
	f, err := root.Open(rel)
	root.Close()
	if err != nil {
		return Body{}, fileError(err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return Body{}, errNotFound
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return Body{}, err
	}
	ctype := contentTypeOf(rel, head[:n])
	h := map[string]string{"X-Content-Type-Options": "nosniff", "Accept-Ranges": "bytes", "Cache-Control": "private, no-cache",
		"Last-Modified": fi.ModTime().UTC().Format(http.TimeFormat)}
	if !inline(ctype) {
		h["Content-Disposition"] = "attachment"
		ctype = "application/octet-stream"
	}
	return serveRange(f, fi.Size(), ctype, in.Range, h)
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

// fileError maps an os.Root error: a path that escapes the workspace is
// a bad path; anything else (missing, unreadable) is not found.
func fileError(err error) error {
	if strings.Contains(err.Error(), "path escapes") {
		return errBadFilePath
	}
	return errNotFound
}

// deleteFile deletes a workspace file (or an empty directory): the
// agent's owner, or a trusted caller.
func (s *Server) deleteFile(ctx context.Context, c Caller, in fileIn) (None, error) {
	a, root, rel, err := s.workspaceFile(ctx, c, in.Path)
	if err != nil {
		return None{}, err
	}
	defer root.Close()
	if !seesAll(c) && a.OwnerID != c.UserID {
		return None{}, errOwnerOnly
	}
	if fi, err := root.Lstat(rel); err != nil {
		return None{}, fileError(err)
	} else if fi.Mode()&fs.ModeSymlink != 0 || fi.IsDir() && rel == "." {
		return None{}, errBadFilePath
	}
	if err := root.Remove(rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return None{}, errNotFound
		}
		return None{}, newError(fasthttp.StatusPreconditionFailed, codePrecondition, msgInUse, "a directory must be empty to be deleted")
	}
	return None{}, nil
}
