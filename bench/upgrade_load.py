"""upgrade_load.py: the bounded push and pop load of upgrade.sh.

    python3 upgrade_load.py URLS OUT STOP MAX RATE

URLS is a comma-separated list of node base URLs. A pusher pushes batches
of 10 messages with unique transaction ids to queue "up", at most RATE
messages a second (with QUEUES=k in the environment, k queues "up",
"up1", .. each with its pusher and consumer, RATE shared among them, so
that a cluster with --groups has load in its several groups), until the file STOP exists or MAX messages were
acknowledged; a push that fails (a node
down, a leader change) is retried with the same ids on the next node, so
transaction-id dedup makes the retry safe. A consumer pops and acks
meanwhile. After STOP it drains until the queue has stayed empty for
DRAIN_IDLE seconds (longer than the lease, so a message whose pop or ack
was lost in a failover is delivered again).

It writes OUT (JSON): pushed (acknowledged pushes), delivered (messages
whose completing ack succeeded), duplicates (ids acked more than once),
missing (acknowledged, never acked by the consumer), uncertain (missing
ids whose ack was answered only after a retry of a request that failed in
flight: the first try may have been applied) and the counts. It exits 1
when missing minus uncertain or duplicates is not empty.
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

BATCH = 10
LEASE = 5  # seconds: the queue's leaseTime
DRAIN_IDLE = 3 * LEASE


def call(url, method="GET", body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception:
        return 0, None


class Load:
    def __init__(self, urls, stop, most, rate, queue):
        self.urls, self.stop, self.most, self.rate, self.queue = urls, stop, most, rate, queue
        self.pushed, self.delivered, self.duplicates, self.uncertain = set(), set(), set(), set()
        self.pushing = True
        self.errors = {"push": 0, "pop": 0, "ack": 0}
        self.lock = threading.Lock()

    def stopped(self):
        return os.path.exists(self.stop) or len(self.pushed) >= self.most

    def configure(self):
        for i in range(600):
            code, _ = call(self.urls[i % len(self.urls)] + "/api/v1/configure", "POST",
                           {"queue": self.queue, "options": {"leaseTime": LEASE, "retryLimit": 100}})
            if code in (200, 201):
                return
            time.sleep(0.2)
        sys.exit("configure: no node answered")

    def push(self):
        n, turn, start = 0, 0, time.time()
        while not self.stopped():
            ahead = n / self.rate - (time.time() - start)
            if ahead > 0:
                time.sleep(ahead)
            ids = ["%s-%07d" % (self.queue, n + i) for i in range(BATCH)]
            items = [{"queue": self.queue, "transactionId": t, "payload": {"t": t}} for t in ids]
            while True:
                code, res = call(self.urls[turn % len(self.urls)] + "/api/v1/push", "POST", {"items": items})
                if code == 201 and isinstance(res, list) and len(res) == BATCH and \
                        all(r.get("status") in ("queued", "duplicate") for r in res):
                    break
                self.errors["push"] += 1
                turn += 1
                time.sleep(0.2)
            with self.lock:
                self.pushed.update(ids)
            n += BATCH
        self.pushing = False

    def ack(self, turn, acks):
        """Acks acks; returns the results, and whether a try failed in flight."""
        retried = False
        while True:
            code, res = call(self.urls[turn % len(self.urls)] + "/api/v1/ack/batch", "POST", {"acknowledgments": acks})
            if code == 200:
                if isinstance(res, dict):
                    res = res.get("results", [])
                return res or [], retried
            self.errors["ack"] += 1
            retried = retried or code == 0 or code >= 500
            turn += 1
            time.sleep(0.2)

    def pop(self):
        turn, idle_since = 0, None
        while True:
            code, res = call(self.urls[turn % len(self.urls)] + "/api/v1/pop/queue/%s?batch=50" % self.queue)
            msgs = (res or {}).get("messages") or [] if code == 200 else []
            if code not in (200, 204):
                self.errors["pop"] += 1
                turn += 1
            if not msgs:
                if not self.pushing:
                    idle_since = idle_since or time.time()
                    if time.time() - idle_since > DRAIN_IDLE:
                        return
                time.sleep(0.1)
                continue
            idle_since = None
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m.get("leaseId") or res.get("leaseId"), "status": "completed"} for m in msgs]
            results, retried = self.ack(turn, acks)
            by_txn = {r.get("transactionId"): r for r in results if isinstance(r, dict)}
            with self.lock:
                for m in msgs:
                    t = m["transactionId"]
                    r = by_txn.get(t)
                    if r and r.get("success"):
                        if t in self.delivered:
                            self.duplicates.add(t)
                        self.delivered.add(t)
                    elif retried:
                        self.uncertain.add(t)


def main():
    urls, out, stop, most, rate = sys.argv[1].split(","), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    k = max(1, int(os.environ.get("QUEUES", "1")))
    loads = [Load(urls, stop, most // k, max(1, rate // k), "up" + (str(i) if i else "")) for i in range(k)]
    for load in loads:
        load.configure()
    threads = [threading.Thread(target=f) for load in loads for f in (load.push, load.pop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pushed = set().union(*(load.pushed for load in loads))
    delivered = set().union(*(load.delivered for load in loads))
    duplicates = set().union(*(load.duplicates for load in loads))
    missing = pushed - delivered
    uncertain = missing & set().union(*(load.uncertain for load in loads))
    extra = delivered - pushed
    errors = {op: sum(load.errors[op] for load in loads) for op in ("push", "pop", "ack")}
    rep = {"pushed": len(pushed), "delivered": len(delivered), "duplicates": sorted(duplicates),
           "missing": sorted(missing - uncertain), "uncertain": sorted(uncertain), "unexpected": sorted(extra),
           "errors": errors, "queues": [load.queue for load in loads]}
    with open(out, "w") as f:
        json.dump(rep, f, indent=1)
    print("pushed %d delivered %d duplicates %d missing %d uncertain %d unexpected %d retried %s" % (
        rep["pushed"], rep["delivered"], len(rep["duplicates"]), len(rep["missing"]), len(uncertain), len(extra),
        errors))
    sys.exit(1 if rep["missing"] or rep["duplicates"] or rep["unexpected"] or not pushed else 0)


if __name__ == "__main__":
    main()
