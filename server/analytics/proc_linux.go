package analytics

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// readProc reads this process's CPU times (getrusage) and its resident and
// virtual memory (/proc/self/statm, in pages). A figure it cannot read is
// 0.
func readProc() procStats {
	var p procStats
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		p.user = time.Duration(ru.Utime.Nano())
		p.system = time.Duration(ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := bytes.Fields(b)
		page := int64(os.Getpagesize())
		if len(f) >= 2 {
			size, _ := strconv.ParseInt(string(f[0]), 10, 64)
			resident, _ := strconv.ParseInt(string(f[1]), 10, 64)
			p.virtual, p.rss = size*page, resident*page
		}
	}
	return p
}
