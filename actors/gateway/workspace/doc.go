// Package workspace gives access to agents' workspace files (what their
// custom tools write under <data_dir>/workspaces/<agent id>): list, open
// and delete, under the gateway's policy (a caller sees the workspaces
// of the agents it may see; only the owner or a trusted backend
// deletes). Every access goes through os.Root, so no path (.., symlinks
// that leave the workspace) reaches outside it.
//
// # Usage
//
//	ws := workspace.New(g) // g: *gateway.Gateway
//	list, err := ws.List(ctx, p, "researcher", "reports/", 10_000)
//	f, err := ws.Open(ctx, p, "researcher/reports/q3.csv") // ErrBadPath, gateway.ErrNotFound
//	defer f.Close()
//	err = ws.Remove(ctx, p, "researcher/reports/q3.csv") // gateway.ErrForbidden for a non-owner
//
// # Concurrency and ownership
//
// A Service is safe for concurrent use and holds no open files; an
// opened File belongs to its caller, who closes it. Files change under
// the tools that write them: a listing is a moment's view.
package workspace
