package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/internal/netlimit"
)

// addPprofFlag gives a server subcommand the hidden --pprof ADDR flag:
// net/http/pprof served on ADDR for the life of the process (profiling,
// bench/peers -pprof). The listener binds before the server starts, so a
// bad address fails the command.
func addPprofFlag(cmd *cobra.Command) {
	var addr string
	cmd.Flags().StringVar(&addr, "pprof", "", "serve net/http/pprof on this address (debugging)")
	_ = cmd.Flags().MarkHidden("pprof")
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(cmd, args); err != nil {
				return err
			}
		}
		if addr == "" {
			return nil
		}
		// Profiles show the process's memory and command line: loopback
		// only, and bounded as the other HTTP servers (internal/netlimit),
		// with room for a long CPU profile or trace.
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		if ta, ok := l.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			_ = l.Close()
			return fmt.Errorf("pprof: %s is not a loopback address (profiles expose the process's memory)", addr)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		lim := netlimit.DefaultHTTP()
		lim.WriteTimeout = 10 * time.Minute
		log := slog.Default()
		go lim.Server(mux, log).Serve(lim.Listener(l, "pprof", log)) //nolint:errcheck // ends with the process
		return nil
	}
}
