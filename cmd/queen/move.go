package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// moveCmd is queen move QUEUE --group G: it asks any node to move the
// queue to Raft group G (POST /api/v1/system/queues/{queue}/move, which
// answers when the move is done) and shows a spinner meanwhile: the
// answer comes at the end, and GET /api/v1/system/placement lists the move
// under "moves" while it runs.
func moveCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node")
	group := fs.Uint("group", 0, "the data group to move the queue to (1..G)")
	wait := fs.Duration("timeout", 10*time.Minute, "how long to wait for the move")
	token, ca, asJSON := clientFlags(fs)
	var queue string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		queue, args = args[0], args[1:]
	}
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	if queue == "" && fs.NArg() == 1 {
		queue = fs.Arg(0)
	}
	if queue == "" || *group == 0 {
		return fmt.Errorf("usage: queen move QUEUE --group G [--url URL]")
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	c.hc.Timeout = *wait
	root := strings.TrimRight(*base, "/")
	body := fmt.Sprintf(`{"group":%d}`, *group)
	done := make(chan error, 1)
	var raw json.RawMessage
	go func() {
		done <- c.call("POST", root+"/api/v1/system/queues/"+url.PathEscape(queue)+"/move", strings.NewReader(body), &raw)
	}()
	if !*asJSON {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(out), progressbar.OptionSpinnerType(14),
			progressbar.OptionSetDescription(fmt.Sprintf("moving %s to group %d", queue, *group)), progressbar.OptionClearOnFinish())
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				_ = bar.Add(1)
			}
		}
		_ = bar.Finish()
	} else {
		err = <-done
	}
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(out, "%s\n", raw)
		return err
	}
	var res struct {
		Queue  string `json:"queue"`
		From   int    `json:"from"`
		Group  int    `json:"group"`
		Epoch  int    `json:"epoch"`
		Chunks int    `json:"chunks"`
		Bytes  int64  `json:"bytes"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "moved %s from group %d to group %d (placement epoch %d): %d chunks, %d bytes\n",
		res.Queue, res.From, res.Group, res.Epoch, res.Chunks, res.Bytes)
	return err
}
