package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// `gatehouse etcd member list|add|remove`: etcd's membership changes
// through clientv3's Cluster API (etcdctl member list/add/remove), so
// that a member can be replaced with nothing but this binary.

func runEtcdMember(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	subs := map[string]func([]string) error{}
	for _, sub := range []string{"list", "add", "remove"} {
		subs[sub] = func(args []string) error { return runMemberOp(ctx, sub, args, getenv, stdout, stderr) }
	}
	return runOperation("etcd member", args, stdout, subs)
}

// runMemberOp is `gatehouse etcd member sub`, with args after sub.
func runMemberOp(ctx context.Context, sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd member "+sub, args, stdout, stderr)
	endpoints := fs.String("endpoints", etcdEndpoints(getenv), "etcd client URLs, comma-separated (env GATEHOUSE_ETCD_ENDPOINTS)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the change")
	var peer *string
	if sub == "add" {
		peer = fs.String("listen-peer", "", "host:port where the other members will reach the new one (its gatehouse etcd --listen-peer)")
	}
	pos, err := parseOperands("etcd member "+sub, fs, args, map[string][]string{"add": {"NAME"}, "remove": {"NAME"}}[sub]...)
	if err != nil {
		return err
	}
	var peerURL string
	if sub == "add" {
		if !nodeIDRe.MatchString(pos[0]) {
			return fmt.Errorf("member name %q: must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", pos[0])
		}
		u, err := memberURL("--listen-peer", *peer)
		if err != nil {
			return err
		}
		peerURL = u.String()
	}
	eps := splitList(*endpoints)
	if len(eps) == 0 {
		return errors.New("--endpoints: none given")
	}
	acc, err := etcdAccessFromEnv(getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cli, err := clientv3.New(acc.config(ctx, eps))
	if err != nil {
		return fmt.Errorf("etcd client for %s: %w", *endpoints, err)
	}
	defer cli.Close()
	switch sub {
	case "list":
		return memberList(ctx, cli, stdout)
	case "add":
		return memberAdd(ctx, cli, pos[0], peerURL, stdout)
	default:
		return memberRemove(ctx, cli, pos[0], stdout)
	}
}

func memberList(ctx context.Context, cli *clientv3.Client, stdout io.Writer) error {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd member list: %w", err)
	}
	ms := slices.SortedFunc(slices.Values(resp.Members), func(a, b *etcdserverpb.Member) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range ms {
		name := m.Name
		if name == "" {
			name = "(not started)"
		}
		fmt.Fprintf(stdout, "%x %s peer=%s client=%s\n", m.ID, name, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","))
	}
	return nil
}

// memberAdd adds member name at peerURL and prints how to start it: with
// every member in --initial-cluster and --initial-cluster-state existing.
func memberAdd(ctx context.Context, cli *clientv3.Client, name, peerURL string, stdout io.Writer) error {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd member add: %w", err)
	}
	for _, m := range list.Members {
		if m.Name == name {
			return fmt.Errorf("etcd member add: a member is named %s already (%x)", name, m.ID)
		}
		if slices.Contains(m.PeerURLs, peerURL) {
			return fmt.Errorf("etcd member add: member %s (%x) has the peer URL %s already", m.Name, m.ID, peerURL)
		}
	}
	resp, err := cli.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return fmt.Errorf("etcd member add %s: %w", peerURL, err)
	}
	var initial []string
	for _, m := range resp.Members {
		n := m.Name
		if m.ID == resp.Member.ID {
			n = name
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, n+"="+u)
		}
	}
	slices.Sort(initial)
	fmt.Fprintf(stdout, "added member %s (%x) at %s; start it now (until it runs, the cluster counts it in its quorum):\n", name, resp.Member.ID, peerURL)
	fmt.Fprintf(stdout, "gatehouse etcd --name %s --data-dir %s.etcd --listen-peer %s --listen-client HOST:PORT --initial-cluster-state existing --initial-cluster %s\n",
		name, name, strings.TrimPrefix(peerURL, "http://"), strings.Join(initial, ","))
	return nil
}

// memberRemove removes the member named (or of hex id) who.
func memberRemove(ctx context.Context, cli *clientv3.Client, who string, stdout io.Writer) error {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd member remove: %w", err)
	}
	var id uint64
	var found []string
	for _, m := range list.Members {
		if m.Name == who || strconv.FormatUint(m.ID, 16) == strings.ToLower(who) {
			id = m.ID
			found = append(found, fmt.Sprintf("%s (%x)", m.Name, m.ID))
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("etcd member remove: no member named %s (gatehouse etcd member list)", who)
	case 1:
	default:
		return fmt.Errorf("etcd member remove: %s names several members: %s; give the id", who, strings.Join(found, ", "))
	}
	if _, err := cli.MemberRemove(ctx, id); err != nil {
		return fmt.Errorf("etcd member remove %s: %w", found[0], err)
	}
	fmt.Fprintf(stdout, "removed member %s; stop its process and delete its data dir\n", found[0])
	return nil
}
