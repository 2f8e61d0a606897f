//go:build linux

// Command linkemu runs the lossy-link laboratory: it creates network
// namespaces <prefix>a and <prefix>b joined by a veth pair, with the
// emulated link between 10.99.0.1 (a) and 10.99.0.2 (b), impairs the
// packets with the chosen profile until SIGINT or SIGTERM, then prints
// the packet counts and removes everything. Needs root.
//
//	linkemu -profile cellular [-prefix ql] [-seed 1]
//
// It prints "LINKEMU ready" once the link carries packets;
// scripts/lossy-bench.sh waits for that line.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
)

func main() {
	profile := flag.String("profile", "lan", "link profile: "+strings.Join(linkemu.ProfileNames(), ", "))
	prefix := flag.String("prefix", "ql", "namespace and interface name prefix (at most 10 characters)")
	seed := flag.Uint64("seed", 1, "seed of the impairment RNGs")
	flag.Parse()
	if err := run(*profile, *prefix, *seed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(profile, prefix string, seed uint64) error {
	p, err := linkemu.Lookup(profile)
	if err != nil {
		return err
	}
	if len(prefix) > 10 {
		return fmt.Errorf("linkemu: prefix %q is longer than 10 characters", prefix)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lab, err := linkemu.Start(ctx, prefix, p, seed, log)
	if err != nil {
		return err
	}
	defer lab.Close()
	fmt.Printf("LINKEMU ready profile=%s ns_a=%s ns_b=%s addr_a=%s addr_b=%s (%s)\n", p.Name, lab.NsA, lab.NsB, lab.AddrA, lab.AddrB, p.Note)
	<-ctx.Done()
	a, b := lab.Stats()
	fmt.Printf("LINKEMU stats profile=%s a_to_b=%d/%d/%d b_to_a=%d/%d/%d (packets/dropped/delivered)\n", p.Name,
		a.Packets, a.Dropped, a.Delivered, b.Packets, b.Dropped, b.Delivered)
	return nil
}
