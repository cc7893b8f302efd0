package keys

import "context"

// keyBlock is one shard's encoded keys (count of them), as captured.
type keyBlock struct {
	count int
	buf   []byte
}

// capture gathers every shard's keys.
func (s *Service) capture(ctx context.Context) ([]keyBlock, int, error) {
	replies := make(chan captureReply, len(s.shards))
	for _, pid := range s.shards {
		// Through the courier: behind every commit notice posted before
		// the barrier's Append returned (see Snapshot).
		s.courier.post(pid, capture{reply: replies})
	}
	var blocks []keyBlock
	total := 0
	for range s.shards {
		r, err := await(ctx, replies)
		if err != nil {
			return nil, 0, err
		}
		blocks = append(blocks, keyBlock{count: r.count, buf: r.buf})
		total += r.count
		var live []byte
		n := 0
		for range r.more {
			b, err := await(ctx, r.live)
			if err != nil {
				return nil, 0, err
			}
			if b != nil {
				live = append(live, b...)
				n++
			}
		}
		blocks = append(blocks, keyBlock{count: n, buf: live})
		total += n
	}
	return blocks, total, nil
}
