package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/spf13/cobra"
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
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		go http.Serve(l, mux) //nolint:errcheck // ends with the process
		return nil
	}
}
