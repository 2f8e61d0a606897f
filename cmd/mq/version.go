package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped by `make release`
// (go build -ldflags "-X main.version=v1.2.3 -X main.commit=<sha>").
// Unset, the build info's module version is used ("(devel)" for a build
// from a checkout) and the commit go build recorded from git, if any.
var version, commit string

// buildVersion is what `mq version` reports.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Time     string `json:"time,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	CGO      string `json:"cgo"`
}

// readVersion combines the -X stamps with runtime/debug's build info (the
// commit, unless stamped, comes from the VCS settings go build records in
// a git checkout; -buildvcs=false or a build outside git leaves it
// "unknown").
func readVersion(stamp, stampCommit string, info *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: stamp, Commit: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, CGO: "unknown"}
	if stampCommit != "" {
		v.Commit = stampCommit
	}
	if !ok || info == nil {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	if v.Version == "" {
		v.Version = info.Main.Version
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if stampCommit == "" {
				v.Commit = s.Value
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "vcs.time":
			v.Time = s.Value
		case "CGO_ENABLED":
			v.CGO = s.Value
		}
	}
	return v
}

func (v buildVersion) write(w io.Writer) {
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "mq %s\ncommit: %s\n", v.Version, commit)
	if v.Time != "" {
		fmt.Fprintf(w, "commit time: %s\n", v.Time)
	}
	fmt.Fprintf(w, "go: %s %s (CGO_ENABLED=%s)\n", v.Go, v.Platform, v.CGO)
}

func versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version mq was built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			v := readVersion(version, commit, info, ok)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			v.write(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
