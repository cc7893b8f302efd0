package httpapi

import (
	"cmp"
	"context"
	"slices"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/cluster"
)

// The operators' view of cluster mode (issue 22): GET /api/cluster,
// GET /api/cluster/keys/{id}, and the membership part of /health.

// ClusterView is what the HTTP layer reads of this node's cluster
// membership (a *cluster.Node). All methods are safe for concurrent use
// and answer from memory, without a round trip to etcd.
type ClusterView interface {
	// ID is this node's id.
	ID() string
	// Live reports whether the node holds an etcd lease it knows to be
	// valid: a member in good standing.
	Live() bool
	// Members are the nodes etcd lists as live, by id.
	Members() []cluster.Member
	// Owners is every shard's owner and epoch ("" and 0 when none).
	Owners() []cluster.ShardOwner
	// ShardOf is the shard of a key id.
	ShardOf(id string) int
	// Owner is shard's owner as this node last heard it.
	Owner(shard int) (node, addr string, epoch int64, ok bool)
}

var _ ClusterView = (*cluster.Node)(nil)

// WithCluster turns on cluster mode's routes and /health's membership
// check, reading v (cmd wires the *cluster.Node). Without it the server
// is a single node: the cluster routes answer 404 and /health does not
// mention the cluster.
func WithCluster(v ClusterView) Option { return func(s *Server) { s.cluster = v } }

// errClusterOff answers the cluster routes of a single node.
var errClusterOff = &apiError{fasthttp.StatusNotFound, codeNotFound,
	"cluster mode is off: this node runs alone (start every node with --etcd-endpoints to turn it on)"}

// notMember is /health's reason while the node has no valid lease.
const notMember = "not a member in good standing: this node's etcd lease lapsed or was lost " +
	"(cut off from etcd, paused, or rejoining); it serves no shard until it holds a lease again"

type (
	clusterBody struct {
		Node    string              `json:"node"`
		Members []clusterMemberView `json:"members"`
		Shards  []clusterShardView  `json:"shards"`
	}
	clusterMemberView struct {
		ID    string `json:"id"`
		Addr  string `json:"addr"`
		Alive bool   `json:"alive"`
	}
	clusterShardView struct {
		Shard int    `json:"shard"`
		Owner string `json:"owner"`
		Epoch int64  `json:"epoch"`
	}
	clusterKeyBody struct {
		KeyID string `json:"keyId"`
		Shard int    `json:"shard"`
		Owner string `json:"owner"`
		Epoch int64  `json:"epoch"`
	}
	// clusterHealth is /health's membership part in cluster mode.
	clusterHealth struct {
		Node   string `json:"node"`
		Member bool   `json:"member"`
	}
)

// getCluster: GET /api/cluster (admin). The members are those etcd lists
// (alive), and this node always, alive only while its lease is valid:
// a node cut off from etcd still answers for itself.
func (s *Server) getCluster(_ context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	c := s.cluster
	if c == nil {
		return errClusterOff
	}
	self, live := c.ID(), c.Live()
	ms := c.Members()
	out := clusterBody{Node: self, Members: make([]clusterMemberView, 0, len(ms)+1)}
	listed := false
	for _, m := range ms {
		alive := true
		if m.ID == self {
			listed, alive = true, live
		}
		out.Members = append(out.Members, clusterMemberView{ID: m.ID, Addr: m.Addr, Alive: alive})
	}
	if !listed {
		// Its member key went with its lease: the address is unknown
		// here (etcd held it), so it is "".
		out.Members = append(out.Members, clusterMemberView{ID: self, Alive: live})
		slices.SortFunc(out.Members, func(a, b clusterMemberView) int { return cmp.Compare(a.ID, b.ID) })
	}
	owners := c.Owners()
	out.Shards = make([]clusterShardView, len(owners))
	for i, o := range owners {
		out.Shards[i] = clusterShardView{Shard: o.Shard, Owner: o.Owner, Epoch: o.Epoch}
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

// getClusterKey: GET /api/cluster/keys/{id} (admin). The shard is a
// function of the id, so any well-formed key id answers, whether or not
// such a key exists: where it lives, or would.
func (s *Server) getClusterKey(_ context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	c := s.cluster
	if c == nil {
		return errClusterOff
	}
	id, ok := pathID(rc)
	if !ok {
		return invalidField("id", "must be a key id (a UUID in its 36-character form)")
	}
	// The canonical (lower-case) form, which the key actors shard by.
	keyID := id.String()
	shard := c.ShardOf(keyID)
	owner, _, epoch, _ := c.Owner(shard)
	writeJSON(rc, fasthttp.StatusOK, clusterKeyBody{KeyID: keyID, Shard: shard, Owner: owner, Epoch: epoch})
	return nil
}

// clusterHealthCheck is /health's membership part: nil on a single node,
// and whether this node is a member in good standing. A change is logged
// once, when a probe sees it.
func (s *Server) clusterHealthCheck() *clusterHealth {
	c := s.cluster
	if c == nil {
		return nil
	}
	h := &clusterHealth{Node: c.ID(), Member: c.Live()}
	if lost := !h.Member; s.notMember.Swap(lost) != lost {
		if lost {
			s.lg.Warn("health check failing: not a cluster member in good standing", "node", h.Node)
		} else {
			s.lg.Info("health check passing: a cluster member in good standing again", "node", h.Node)
		}
	}
	return h
}
