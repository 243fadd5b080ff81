#!/usr/bin/env bash
# backup.sh: what a backup and a restore cost, against a plain copy of the
# same data measured in the same run (issue 29). One node is loaded with
# MESSAGES pushes of SIZE bytes; then
#   backup   queen backup of the running node          (MB/s of data dir)
#   tar      tar | zstd (level 3, one thread) of the stopped node's data dir
#            (engine and Raft log: the engine alone is not a consistent
#            copy, its recent writes live in the log until a flush)
#   restore  queen restore of the backup into an empty dir
#   untar    zstd -d | tar x of the tar file, and again followed by sync:
#            a restore's directory is on disk when it returns, an untarred
#            one is in the page cache
# and the ratios backup/tar and restore/untar of their times (>= 1 is
# faster than the plain copy; the goal is >= 0.8). Needs zstd and tar.
#
#   bench/backup.sh            # MESSAGES=800000 SIZE=1024 ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES=${MESSAGES:-800000}
SIZE=${SIZE:-1024}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/queen-backup-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
make -s build
Q=$PWD/bin/queen
command -v zstd >/dev/null || { echo "backup.sh needs zstd (apt-get install zstd)" >&2; exit 1; }

"$Q" serve --data "$W/n1" --node-id n1 --http 127.0.0.1:16632 --log-level warn 2>>"$W/n1.log" &
until curl -s http://127.0.0.1:16632/health | grep -q '"role":"leader"'; do sleep 0.2; done
"$Q" bench --url http://127.0.0.1:16632 --messages "$MESSAGES" --size "$SIZE" --json >/dev/null
data_mb=$(du -sm "$W/n1" | cut -f1)

secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for r in $(seq "$ROUNDS"); do
	rm -f "$W/b.qbak"
	secs "$Q" backup --url http://127.0.0.1:16632 --out "$W/b.qbak" >>"$W/backup.t"
done
kill %1; wait %1 2>/dev/null || true
for r in $(seq "$ROUNDS"); do
	secs sh -c "tar -C '$W' -cf - n1 | zstd -q -o '$W/e.tar.zst' -f" >>"$W/tar.t"
	rm -rf "$W/r"
	secs "$Q" restore --in "$W/b.qbak" --data "$W/r" >>"$W/restore.t"
	rm -rf "$W/u" && mkdir "$W/u"
	secs sh -c "zstd -d -q -c '$W/e.tar.zst' | tar -C '$W/u' -xf -" >>"$W/untar.t"
	rm -rf "$W/u" && mkdir "$W/u" && sync
	secs sh -c "zstd -d -q -c '$W/e.tar.zst' | tar -C '$W/u' -xf - && sync" >>"$W/untarsync.t"
done
b=$(median <"$W/backup.t") t=$(median <"$W/tar.t") r=$(median <"$W/restore.t") u=$(median <"$W/untar.t")
us=$(median <"$W/untarsync.t")
printf 'data dir %d MB; backup file %d MB; tar.zst %d MB\n' "$data_mb" \
	$(( $(stat -c %s "$W/b.qbak") >> 20 )) $(( $(stat -c %s "$W/e.tar.zst") >> 20 ))
printf '%-8s %6.2f s  %6.1f MB/s\n' backup "$b" "$(echo "$data_mb / $b" | bc -l)" tar "$t" "$(echo "$data_mb / $t" | bc -l)" \
	restore "$r" "$(echo "$data_mb / $r" | bc -l)" untar "$u" "$(echo "$data_mb / $u" | bc -l)" \
	untar+sync "$us" "$(echo "$data_mb / $us" | bc -l)"
printf 'backup/tar speed %.2f, restore/untar speed %.2f, restore/(untar+sync) %.2f (median of %d)\n' \
	"$(echo "$t / $b" | bc -l)" "$(echo "$u / $r" | bc -l)" "$(echo "$us / $r" | bc -l)" "$ROUNDS"
