// Package clusterit tests the actors' cluster mode end to end in one
// process: several actors.Systems on real embedded etcd members, each with
// its own replicated-log writer and cluster node, forwarding admissions to
// each other through an in-process stand-in for the transport (the
// transport itself has its own tests, between processes). It has no
// non-test code.
package clusterit
