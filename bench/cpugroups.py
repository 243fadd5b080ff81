#!/usr/bin/env python3
"""cpugroups.py: a CPU profile of a pushing node, grouped into the costs issue 41
names, in µs of CPU per pushed message.

    go tool pprof -traces QUEEN_BINARY PROFILE | bench/cpugroups.py MESSAGES

MESSAGES is the number of messages pushed while the profile was taken
(bench/cpu.sh prints it). Each sample goes to one group: allocation and GC
when the stack passes through the allocator or the collector; else the first
CONTEXT group any of its frames names (compaction, zstd, the JSON scanner, ...,
wherever they were called from); else the group of the frame nearest the leaf
that names one (so the syscalls of the WAL count as the WAL, those of the
connection as HTTP).
"""
import re, sys

GC = ("runtime.mallocgc", "runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep",
      "runtime.bgscavenge", "runtime.gcStart", "runtime.gcMarkDone", "runtime.markroot", "runtime.(*mheap)")
# (group, frame prefixes) that claim a sample when any frame of its stack
# matches, tried in this order.
CONTEXT = [
    ("Pebble compaction + flush", ("github.com/cockroachdb/pebble/v2.(*DB).compact", "github.com/cockroachdb/pebble/v2.(*DB).flush",
                                   "github.com/cockroachdb/pebble/v2.(*DB).runCompaction", "github.com/cockroachdb/pebble/v2.(*DB).runPickedCompaction",
                                   # sstables and blob files are written only by flushes and compactions, from goroutines of their own
                                   "github.com/cockroachdb/pebble/v2/sstable.(*RawColumnWriter).drainWriteQueue",
                                   "github.com/cockroachdb/pebble/v2/sstable/blob.(*FileWriter).drainWriteQueue")),
    ("segment encode + zstd", ("github.com/klauspost/compress/", "github.com/queenmq/queen/engine/segment.")),
    ("JSON scan", ("github.com/queenmq/queen/server/wire.", "github.com/queenmq/queen/server/bodies.")),
    ("ids", ("github.com/queenmq/queen/engine.FormatID", "github.com/queenmq/queen/engine.(*minter)",
             "github.com/queenmq/queen/engine.(*IDMinter)", "github.com/queenmq/queen/engine.NewID")),
    ("dedup probe (Pebble reads)", ("github.com/queenmq/queen/engine.(*Batch).probeTxn",)),
    ("Raft log store", ("github.com/queenmq/queen/raft/logstore.",)),
]
# The rest, tried leaf first, frame by frame.
RULES = [
    ("Pebble batch + WAL (fsync)", ("github.com/cockroachdb/pebble/",)),
    ("engine apply (other)", ("github.com/queenmq/queen/engine.",)),
    ("Raft + FSM", ("github.com/hashicorp/raft.", "github.com/queenmq/queen/raft.")),
    ("HTTP (fasthttp + handler)", ("github.com/valyala/", "github.com/queenmq/queen/server.", "net.(*conn)", "net.(*netFD)")),
    ("Go scheduler + idle", ("runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m",
                             "runtime.sysmon", "runtime.mstart", "runtime.goexit0", "runtime.notesleep", "runtime.futex")),
]

def group(stack):
    if any(f.startswith(GC) for f in stack):
        return "allocation + GC"
    for name, prefixes in CONTEXT:
        if any(f.startswith(prefixes) for f in stack):
            return name
    for f in stack:
        for name, prefixes in RULES:
            if f.startswith(prefixes):
                return name
    return "other"

def seconds(v):
    m = re.fullmatch(r"([\d.]+)(ns|us|µs|ms|s|min|h)", v)
    return float(m.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600}[m.group(2)]

def main():
    msgs = int(sys.argv[1])
    totals, stack, value = {}, [], None
    def flush():
        if value is not None:
            g = group(stack)
            totals[g] = totals.get(g, 0) + value
    for line in sys.stdin:
        if line.startswith("-----------+"):
            flush()
            stack, value = [], None
            continue
        if value is None:
            m = re.match(r"\s+([\d.]+(?:ns|us|µs|ms|s|min|h))\s+(\S.*)$", line)
            if m:
                value, stack = seconds(m.group(1)), [m.group(2).strip()]
            continue
        if line.strip():
            stack.append(line.strip())
    flush()
    total = sum(totals.values())
    print(f"{'group':30} {'µs/msg':>7} {'share':>6}")
    for g, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{g:30} {v / msgs * 1e6:7.2f} {v / total:6.1%}")
    print(f"{'total (sampled)':30} {total / msgs * 1e6:7.2f}")

main()
