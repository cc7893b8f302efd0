package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// ErrBadPath is a path that is not a relative path inside an agent's
// workspace.
var ErrBadPath = errors.New("workspace: bad path")

// ErrAgentNotFound: no agent the caller may see has the id or agent_key.
var ErrAgentNotFound = errors.New("workspace: agent not found")

// Agents is what workspaces need from the registry. Safe for concurrent
// use.
type Agents interface {
	// GetAgent returns agent ref as user sees it ("": any agent);
	// gateway.ErrNotFound for a stranger's.
	GetAgent(ctx context.Context, user, ref string) (gateway.Agent, error)
	// WorkspaceOf is agent's workspace directory ("" for none).
	WorkspaceOf(agent uuid.UUID) string
}

var _ Agents = (*gateway.Gateway)(nil)

// Service reads and deletes workspace files.
type Service struct{ agents Agents }

// New returns the workspace files of agents.
func New(agents Agents) *Service { return &Service{agents: agents} }

// FileInfo is one listed file.
type FileInfo struct {
	Path        string    `json:"path"` // <agent_key>/<path in the workspace>
	Size        int64     `json:"size"`
	Modified    time.Time `json:"modified"`
	ContentType string    `json:"content_type"`
}

// List is a workspace's files under a prefix.
type List struct {
	Data      []FileInfo `json:"data"`
	Total     int        `json:"total"`
	Truncated bool       `json:"truncated,omitempty"`
}

// File is an opened workspace file; its caller closes it.
type File struct {
	*os.File
	Info        fs.FileInfo
	ContentType string // from its name, else its first bytes
}

// List lists the regular files of agent ref's workspace whose paths
// start with prefix, at most max of them (Total counts them all).
// Errors: ErrAgentNotFound, the file system's.
func (s *Service) List(ctx context.Context, p gateway.Principal, ref, prefix string, max int) (List, error) {
	a, root, err := s.open(ctx, p, ref)
	if err != nil {
		return List{}, err
	}
	defer root.Close()
	prefix = strings.TrimPrefix(prefix, "/")
	out := List{Data: []FileInfo{}}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.HasPrefix(rel, prefix) {
			return nil
		}
		out.Total++
		if len(out.Data) >= max {
			out.Truncated = true
			return nil
		}
		if fi, err := d.Info(); err == nil {
			out.Data = append(out.Data, FileInfo{Path: a.AgentKey + "/" + rel, Size: fi.Size(), Modified: fi.ModTime().UTC(),
				ContentType: ContentType(rel, nil)})
		}
		return nil
	})
	if err != nil {
		return List{}, fmt.Errorf("list workspace of %s: %w", a.AgentKey, err)
	}
	return out, nil
}

// testHookBeforeOpen, when set (tests only), runs between Open's Stat and
// its open(2): a test swaps the file there.
var testHookBeforeOpen func(rel string)

// Open opens file "<agent>/<path>" for reading. Anything but a regular
// file (a directory, a FIFO, a device, a socket) is refused without
// being opened. Errors: ErrBadPath, ErrAgentNotFound,
// gateway.ErrNotFound (no such regular file).
func (s *Service) Open(ctx context.Context, p gateway.Principal, file string) (*File, error) {
	_, root, rel, err := s.file(ctx, p, file)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// A FIFO (or a device) blocks open(2) until a writer comes, pinning
	// an OS thread per request: only a regular file is opened, and
	// without blocking, in case it was replaced between Stat and Open.
	if fi, err := root.Stat(rel); err != nil {
		return nil, fileError(err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file: %w", file, gateway.ErrNotFound)
	}
	if testHookBeforeOpen != nil {
		testHookBeforeOpen(rel)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file: %w", file, gateway.ErrNotFound)
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind %s: %w", file, err)
	}
	return &File{File: f, Info: fi, ContentType: ContentType(rel, head[:n])}, nil
}

// Remove deletes file "<agent>/<path>" (or an empty directory): the
// agent's owner, or a trusted backend (gateway.ErrForbidden). Errors:
// also ErrBadPath, ErrAgentNotFound, gateway.ErrNotFound,
// gateway.ErrInUse (a directory that is not empty).
func (s *Service) Remove(ctx context.Context, p gateway.Principal, file string) error {
	a, root, rel, err := s.file(ctx, p, file)
	if err != nil {
		return err
	}
	defer root.Close()
	if !p.MayDeleteFile(&a) {
		return fmt.Errorf("delete %s: owner only: %w", file, gateway.ErrForbidden)
	}
	if fi, err := root.Lstat(rel); err != nil {
		return fileError(err)
	} else if fi.Mode()&fs.ModeSymlink != 0 || fi.IsDir() && rel == "." {
		return ErrBadPath
	}
	if err := root.Remove(rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", file, gateway.ErrNotFound)
		}
		return fmt.Errorf("a directory must be empty to be deleted: %w", gateway.ErrInUse)
	}
	return nil
}

// open resolves agent ref, if p may see it, and opens its workspace.
func (s *Service) open(ctx context.Context, p gateway.Principal, ref string) (gateway.Agent, *os.Root, error) {
	a, err := s.agents.GetAgent(ctx, p.ReaderOf(), ref)
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		return a, nil, fmt.Errorf("%w: %q", ErrAgentNotFound, ref)
	case err != nil:
		return a, nil, fmt.Errorf("workspace agent %q: %w", ref, err)
	}
	dir := s.agents.WorkspaceOf(a.ID)
	if dir == "" {
		return a, nil, fmt.Errorf("agent %s has no workspace: %w", a.AgentKey, gateway.ErrNotFound)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return a, nil, fmt.Errorf("workspace of %s: %w", a.AgentKey, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return a, nil, fmt.Errorf("workspace of %s: %w", a.AgentKey, err)
	}
	return a, root, nil
}

// file resolves "<agent>/<rel>" to its agent, its workspace and rel.
func (s *Service) file(ctx context.Context, p gateway.Principal, file string) (gateway.Agent, *os.Root, string, error) {
	agent, rel, ok := strings.Cut(strings.TrimPrefix(file, "/"), "/")
	if !ok || agent == "" || rel == "" || !filepath.IsLocal(rel) || strings.ContainsRune(rel, 0) {
		return gateway.Agent{}, nil, "", ErrBadPath
	}
	a, root, err := s.open(ctx, p, agent)
	return a, root, rel, err
}

// fileError maps an os.Root error: a path that escapes the workspace is
// a bad path; anything else (missing, unreadable) is not found.
func fileError(err error) error {
	if strings.Contains(err.Error(), "path escapes") {
		return ErrBadPath
	}
	return fmt.Errorf("%w: %w", gateway.ErrNotFound, err)
}

// ContentType is a file's type from its name, else from head.
func ContentType(name string, head []byte) string {
	t := mime.TypeByExtension(path.Ext(name))
	if t == "" {
		t = http.DetectContentType(head)
	}
	return t
}
