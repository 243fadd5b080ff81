package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	nodes "github.com/queenmq/queen/cluster" // the test harness has a type cluster
)

// leave asks a cluster (through any node, which forwards to the leader) to
// remove a server from its membership. The leader refuses a removal that
// would leave too few reachable voters for a quorum, unless --force. The
// membership routes need the cluster secret, or an admin token when JWT is
// on: without either leave stops before sending anything.
func leave(args []string) error {
	fs := flag.NewFlagSet("leave", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node of the cluster")
	id := fs.String("node-id", "", "id of the node to remove")
	force := fs.Bool("force", false, "remove it even when the voters left would not be a reachable majority")
	secret := fs.String("cluster-secret", "", "the cluster secret (prefer --cluster-secret-file)")
	secretFile := fs.String("cluster-secret-file", "", "file holding the cluster secret")
	token := fs.String("token", "", "an admin JWT, instead of the secret, when the cluster runs with JWT")
	ca := fs.String("tls-ca", "", "PEM CA certificate to trust for an https --url, besides the system roots")
	// Not --node-id: a node's environment names the node itself.
	if err := parseEnvFlags(fs, args, os.Getenv, append(clientEnv, "cluster-secret", "cluster-secret-file")...); err != nil {
		return err
	}
	if *id == "" {
		return fmt.Errorf("--node-id is required")
	}
	s, err := secretFrom(*secret, *secretFile)
	if err != nil {
		return err
	}
	if s == "" && *token == "" {
		return fmt.Errorf("the cluster refuses anonymous membership changes: pass --cluster-secret-file (or --cluster-secret, QUEEN_CLUSTER_SECRET), or an admin --token")
	}
	roots, err := trustedRoots(*ca)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 60 * time.Second, // a drain waits up to 50 s (server/membership.go)
		Transport: &http.Transport{TLSClientConfig: roots}}
	resp, err := postMembership(client, *url, nodes.LeavePath, fmt.Sprintf(`{"id":%q,"force":%t}`, *id, *force), s, *token)
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
