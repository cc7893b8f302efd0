package clusterit_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

// maxRate is the highest limit a key may have.
const maxRate = 1_000_000_000

// BenchmarkAdmit compares, in one run, admissions on a single node (bbolt
// WAL), on a cluster node that owns the key (reserving quota in etcd as it
// goes), and on a node that forwards to the owner (through an in-process
// stand-in for the transport: the network's cost is BenchmarkForward's in
// actors/cluster/transport). The key's limit is the highest there is, so
// nothing is refused; "reservations/op" is the etcd writes a key makes
// per admission (a chunk is limit/100 tokens). One etcd member runs in the
// process in every case (idle in the single-node one): three would spend
// the cores replicating every usage flush among themselves, which a real
// deployment does on other machines.
func BenchmarkAdmit(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		newFleetOf(b, 1) // idle etcd members in this process, as in the other cases
		n := actorstest.New(b)
		n.Config.FlushInterval = flushInterval // as the fleet's nodes
		// As the fleet's nodes too: the wall clock (a fake one never moves
		// the window on) and appends durable on disk (etcd fsyncs).
		n.RealClock, n.Sync = true, true
		s := n.Start()
		u, err := s.CreateUser(ctx(b), accounts.NewUser{Email: "a@example.com", Password: "correct horse", Plan: accounts.PlanStandard, LicenseActive: true})
		if err != nil {
			b.Fatal(err)
		}
		k, secret, err := s.CreateKey(ctx(b), keys.NewKey{Owner: s.KeyOwner(u), Name: "k"})
		if err != nil {
			b.Fatal(err)
		}
		limit := int64(maxRate)
		if _, err := s.UpdateKey(ctx(b), k.ID, keys.KeyPatch{RateLimit: &limit}); err != nil {
			b.Fatal(err)
		}
		runAdmit(b, s, secret)
	})
	b.Run("owned", func(b *testing.B) {
		f := newFleetOf(b, 1)
		reg := prometheus.NewRegistry()
		a := f.startWith("a", reg)
		waitOwners(b, a)
		_, secret := newKey(b, a, maxRate)
		runAdmit(b, a.sys, secret)
		b.ReportMetric(counter(b, reg, "gatehouse_cluster_reservations_total")/float64(b.N), "reservations/op")
	})
	b.Run("forwarded", func(b *testing.B) {
		f := newFleetOf(b, 1)
		a, c := f.start("a"), f.start("b")
		waitOwners(b, a, c)
		var secret string
		for {
			k, s := newKey(b, a, maxRate)
			if ownerOf(b, k, a, c) == c {
				secret = s
				break
			}
		}
		runAdmit(b, a.sys, secret)
	})
}

func runAdmit(b *testing.B, s actorstest.System, secret string) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := s.Authorize(context.Background(), []byte(secret)); r.Err != nil {
				b.Error(r.Err)
				return
			}
		}
	})
}

func counter(b *testing.B, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += metricValue(m)
			}
		}
	}
	return sum
}

func metricValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
}
