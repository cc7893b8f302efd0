package cluster

// crash stops the node's loops without releasing anything, as kill -9
// would: its lease runs out on etcd's clock.
func (n *Node) crash() {
	n.deadline.Store(0)
	n.stop()
}

// partition stops (or resumes) the node's keepalives while everything
// else runs: a node cut off from etcd, or paused past its lease.
func (n *Node) partition(on bool) { n.mute.Store(on) }
