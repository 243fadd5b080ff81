package bench

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags_Defaults(t *testing.T) {
	c, err := ParseFlags(nil, io.Discard)
	if err != nil {
		t.Fatalf("ParseFlags: %v", err)
	}
	want := DefaultOptions()
	o := c.Options
	if !slices.Equal(o.URLs, want.URLs) || o.Workload != Push || o.Conns != 32 || o.Batch != 100 || o.Size != 1024 ||
		o.Duration != 0 || o.Messages != 0 || c.JSON {
		t.Fatalf("defaults = %+v", c)
	}
	if got := o.runDuration(); got != DefaultDuration {
		t.Errorf("run duration without limits = %v, want %v", got, DefaultDuration)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := ParseFlags([]string{
		"--url", "http://127.0.0.1:6632,http://localhost:6642/", "--url=http://[::1]:6652",
		"--workload", "mixed", "--conns", "8", "--batch", "10", "--size", "256", "--queues", "2",
		"--partitions", "4", "--groups", "3", "--messages", "5000", "--json",
	}, io.Discard)
	if err != nil {
		t.Fatalf("ParseFlags: %v", err)
	}
	o := c.Options
	if got, want := o.URLs, []string{"http://127.0.0.1:6632", "http://localhost:6642", "http://[::1]:6652"}; !slices.Equal(got, want) {
		t.Errorf("URLs = %q, want %q", got, want)
	}
	if o.Workload != Mixed || o.Conns != 8 || o.Batch != 10 || o.Size != 256 || o.Queues != 2 || o.Partitions != 4 ||
		o.Groups != 3 || o.Messages != 5000 || !c.JSON {
		t.Errorf("options = %+v", c)
	}
	if got, want := o.runDuration(), MaxDuration; got != want {
		t.Errorf("run duration with only --messages = %v, want the cap %v", got, want)
	}
	if o.pushConns() != 4 || o.popConns() != 4 {
		t.Errorf("mixed split %d pushers / %d poppers, want 4/4", o.pushConns(), o.popConns())
	}
}

func TestParseFlags_Invalid(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://10.1.2.3:6632"}, "not a loopback"},
		{[]string{"--url", "http://example.com:6632"}, "not a loopback"},
		{[]string{"--url", "ftp://127.0.0.1:6632"}, "http:// or https://"},
		{[]string{"--url", "http://127.0.0.1:6632/api"}, "base URL"},
		{[]string{"--url", "127.0.0.1:6632"}, "bad --url"},
		{[]string{"--url", "localhost:6632"}, "http:// or https://"},
		{[]string{"--workload", "pop"}, "unknown workload"},
		{[]string{"--conns", "0"}, "--conns"},
		{[]string{"--conns", "5000"}, "--conns"},
		{[]string{"--workload", "mixed", "--conns", "1"}, "mixed needs"},
		{[]string{"--batch", "0"}, "--batch"},
		{[]string{"--size", "8"}, "--size"},
		{[]string{"--queue", "a/b"}, "--queue"},
		{[]string{"--queues", "0"}, "--queues"},
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--groups", "-1"}, "--groups"},
		{[]string{"--workload", "popack", "--conns", "2", "--groups", "3"}, "groups need"},
		{[]string{"--duration", "11m"}, "--duration"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--messages", "-5"}, "--messages"},
		{[]string{"--idle", "0s"}, "--idle"},
		{[]string{"--path", "/api/v1/resources/queues"}, "--path is for --workload read"},
		{[]string{"--workload", "read", "--path", "api/v1/status"}, "starts with /"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--nope"}, "not defined"},
	} {
		_, err := ParseFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want one containing %q", c.args, err, c.want)
		}
	}
}

func TestParseFlags_AllowRemote(t *testing.T) {
	c, err := ParseFlags([]string{"--url", "http://10.1.2.3:6632", "--allow-remote"}, io.Discard)
	if err != nil {
		t.Fatalf("--allow-remote: %v", err)
	}
	if !c.Options.AllowRemote {
		t.Fatal("AllowRemote not set")
	}
}

func TestParseFlags_Help(t *testing.T) {
	var out strings.Builder
	_, err := ParseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "--workload") && !strings.Contains(out.String(), "-workload") {
		t.Fatalf("-h: err %v, output %q", err, out.String())
	}
}

func TestOptions_Validate_Groups(t *testing.T) {
	o := DefaultOptions()
	o.Groups = 64 // more groups than connections is fine for a push run
	if err := o.Validate(); err != nil {
		t.Errorf("push with groups: %v", err)
	}
	o.Workload, o.Duration = PopAck, 30*time.Second
	if err := o.Validate(); err == nil {
		t.Error("popack with more groups than connections: no error")
	}
}
