package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// versionString: the -ldflags version wins; else the module version with
// the VCS revision and time, "+dirty" for a modified tree; "dev" when the
// build recorded nothing.
func TestVersionString(t *testing.T) {
	info := func(v string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: v}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	for _, tc := range []struct {
		set  string
		info func() (*debug.BuildInfo, bool)
		want string
	}{
		{"v9.9.9", info("v1.0.0"), "v9.9.9"},
		{"dev", func() (*debug.BuildInfo, bool) { return nil, false }, "dev"},
		{"dev", info("(devel)"), "dev"},
		{"dev", info("v1.2.3", "vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-12-03T10:00:00Z"), "v1.2.3 (0123456789ab, 2026-12-03T10:00:00Z)"},
		{"dev", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), "dev (0123456789ab+dirty)"},
		{"dev", info("v0.0.0-20261203122931-0123456789ab+dirty", "vcs.revision", "0123456789abcdef", "vcs.modified", "true"), "v0.0.0-20261203122931-0123456789ab+dirty"},
	} {
		if got := versionString(tc.set, tc.info); got != tc.want {
			t.Errorf("versionString(%q) = %q, want %q", tc.set, got, tc.want)
		}
	}
}

// The binary make build ships answers version, --version and -v alike, and every command's
// -h prints its help and exits 0.
func TestCLI_VersionAndHelp(t *testing.T) {
	t.Parallel()
	bin := shippedBinary(t)
	for _, arg := range []string{"version", "--version", "-v"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil || !strings.HasPrefix(string(out), "queen ") {
			t.Errorf("queen %s: %q %v", arg, out, err)
		}
	}
	for _, cmd := range []string{"serve", "check", "leave", "recover", "bench"} {
		out, err := exec.Command(bin, cmd, "-h").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "-") {
			t.Errorf("queen %s -h: %v\n%s", cmd, err, out)
		}
	}
	if err := exec.Command(bin, "nope").Run(); err == nil {
		t.Error("an unknown command exits 0")
	}
}
