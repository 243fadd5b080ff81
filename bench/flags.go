package bench

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command is a parsed `queen bench` command line.
type Command struct {
	Options Options
	// JSON prints the report as one JSON object instead of the table, and
	// turns the progress bar off.
	JSON bool
}

// ParseFlags parses `queen bench` flags (args after "bench") and validates
// the options. Usage and parse errors are written to errOut.
func ParseFlags(args []string, errOut io.Writer) (Command, error) {
	c := Command{Options: DefaultOptions()}
	o := &c.Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprint(errOut, "usage: queen bench [flags]\n\nDrives running nodes over HTTP (loopback only) and reports msgs/s, MB/s and latency percentiles.\n\n")
		fs.PrintDefaults()
	}
	var urls []string
	fs.Func("url", "broker base URL, repeatable or comma-separated: requests are spread over them (default "+o.URLs[0]+"; loopback only)", func(v string) error {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, strings.TrimSuffix(u, "/"))
			}
		}
		return nil
	})
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow non-loopback --url (aims the load at another machine)")
	workload := fs.String("workload", string(o.Workload), "push, popack (pop+ack until drained), mixed (both at once) or read (GET --path)")
	fs.StringVar(&o.ReadPath, "path", "", "read: the path and query to GET (default /api/v1/resources/queues/QUEUE)")
	fs.IntVar(&o.Conns, "conns", o.Conns, "concurrent connections")
	fs.IntVar(&o.Batch, "batch", o.Batch, "messages per push / most per pop")
	fs.IntVar(&o.Size, "size", o.Size, "payload bytes per message (realistic JSON)")
	fs.StringVar(&o.Queue, "queue", o.Queue, "queue name (prefix of name-0, name-1, ... with --queues > 1)")
	fs.IntVar(&o.Queues, "queues", o.Queues, "queues to spread requests over")
	fs.IntVar(&o.Partitions, "partitions", o.Partitions, "partitions per queue to spread pushes over (1: the Default partition)")
	fs.IntVar(&o.Groups, "groups", o.Groups, "consumer groups popping, each consuming everything (0: queue mode)")
	fs.DurationVar(&o.Duration, "duration", 0, fmt.Sprintf("how long to run (default %s without --messages; at most %s)", DefaultDuration, MaxDuration))
	fs.Float64Var(&o.Rate, "rate", 0, "pace pushes to this many messages/s in total (0: unpaced)")
	fs.Int64Var(&o.Messages, "messages", 0, "stop after this many messages pushed (push, mixed) or acked (popack); whichever of --duration and --messages comes first")
	fs.DurationVar(&o.Idle, "idle", o.Idle, "popack: stop once no message was delivered for this long")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "per-request timeout")
	fs.Uint64Var(&o.Seed, "seed", 0, "payload seed (0: from the clock; transaction ids are fresh on every run)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object (no progress bar)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	if len(urls) > 0 {
		o.URLs = urls
	}
	o.Workload = Workload(*workload)
	return c, o.Validate()
}
