package etcdlog

import clientv3 "go.etcd.io/etcd/client/v3"

func clientRangeAll() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

// SetChunk sets the size of a snapshot chunk (tests write many small ones).
func (s *Snapshots) SetChunk(n int) { s.chunk = n }
