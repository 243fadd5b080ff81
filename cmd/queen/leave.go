package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// leave asks a cluster (through any node, which forwards to the leader) to
// remove a server from its membership. The leader refuses a removal that
// would leave too few reachable voters for a quorum, unless --force.
func leave(args []string) error {
	fs := flag.NewFlagSet("leave", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node of the cluster")
	id := fs.String("node-id", "", "id of the node to remove")
	force := fs.Bool("force", false, "remove it even when the voters left would not be a reachable majority")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return fmt.Errorf("--node-id is required")
	}
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Post(strings.TrimSuffix(*url, "/")+"/internal/v1/cluster/leave", "application/json",
		strings.NewReader(fmt.Sprintf(`{"id":%q,"force":%t}`, *id, *force)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Printf("removed %s\n", *id)
	return nil
}
