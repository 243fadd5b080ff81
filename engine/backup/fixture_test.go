package backup_test

import (
	"os"
	"testing"

	"github.com/queenmq/queen/engine/backup"
)

// testdata/v1.qbak is a backup in format 1 made by `queen backup` of the
// store raft/testdata/store-v1. Every later binary must read it; never
// regenerate it.
func TestVerify_V1Fixture(t *testing.T) {
	f, err := os.Open("testdata/v1.qbak")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := backup.Verify(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != 1 || m.Node != "node1" || len(m.Groups) != 1 || m.Groups[0].ID != 1 || m.Groups[0].Index != 19 ||
		m.Groups[0].Queues["fixture"] != 10 || m.Groups[0].Queues["poison"] != 1 {
		t.Fatalf("manifest %+v", m)
	}
}
