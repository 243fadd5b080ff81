package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: Some CPU
BenchmarkClamp/single-2         	 1000	        32.46 ns/op	        32.5 ns/item	  30800000 msgs/s	       0 B/op	       0 allocs/op
BenchmarkEnginePush/batch=100-2  	      300	   3917308 ns/op	  26.14 MB/s	     25500 msgs/s	  165285 B/op	     525 allocs/op
BenchmarkPebbleSyncedLimit/batch=1-2	      500	   2000000 ns/op	   0.50 MB/s	       500.0 fsyncs/s	       500.0 msgs/s	     411 B/op	       0 allocs/op
BenchmarkPebbleSyncedLimit/batch=100-2
    some_test.go:12: a log line in between
      400	   2500000 ns/op	  40.93 MB/s	       400.0 fsyncs/s	     40000 msgs/s	    7412 B/op	       2 allocs/op
BenchmarkLogStoreGetLog-2	   30000	     32425 ns/op	  31.58 MB/s	    1054 B/op	       2 allocs/op
PASS
`

func TestParse(t *testing.T) {
	results, header := parse(sample)
	if len(header) != 2 {
		t.Errorf("header %q", header)
	}
	var names []string
	for _, r := range results {
		names = append(names, r.name)
	}
	want := "Clamp/single EnginePush/batch=100 PebbleSyncedLimit/batch=1 PebbleSyncedLimit/batch=100 LogStoreGetLog"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("names %q, want %q", got, want)
	}
	if rate, unit := results[3].rate(); rate != 40000 || unit != "msgs/s" {
		t.Errorf("limit rate %v %s, want 40000 msgs/s (not fsyncs/s)", rate, unit)
	}
	if rate, unit := results[4].rate(); unit != "ops/s" || rate < 30840 || rate > 30841 {
		t.Errorf("GetLog rate %v %s, want ops/s from ns/op", rate, unit)
	}
	var out strings.Builder
	write(&out, results, header)
	for _, line := range []string{"batch=100: 400 fsyncs/s, 40k msgs/s", "EnginePush/batch=100", "0.64"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, out.String())
		}
	}
}

func TestParse_NoProcsSuffix(t *testing.T) {
	results, _ := parse("BenchmarkClamp/completed-100 \t 10 \t 5 ns/op\nBenchmarkClamp/single \t 10 \t 5 ns/op\n")
	if len(results) != 2 || results[0].name != "Clamp/completed-100" {
		t.Fatalf("results %+v: a -N that is not on every name must stay", results)
	}
}

func TestBatchOf(t *testing.T) {
	for name, want := range map[string]int{
		"Clamp/completed-100":                 100,
		"Clamp/failed-mid-100":                100,
		"Clamp/single":                        1,
		"ReplicatedPush/batch=1/callers=32":   1,
		"SegmentEncode/frames=100/codec=zstd": 100,
		"LogStoreGetLog":                      1,
	} {
		if got := batchOf(name); got != want {
			t.Errorf("batchOf(%q) = %d, want %d", name, got, want)
		}
	}
}
