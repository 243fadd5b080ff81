package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressBar shows a run's progress: towards Messages when the run has a
// message count, else towards its duration, with the live rate.
type progressBar struct {
	bar  *progressbar.ProgressBar
	stop func()
}

func startProgress(r *run, out io.Writer) *progressBar {
	o := r.opts
	byCount := o.Messages > 0 && o.Duration == 0
	total := int64(o.runDuration() / (100 * time.Millisecond)) // tenths of a second
	if byCount {
		total = o.Messages
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			secs := time.Since(r.start).Seconds()
			pushed, acked := r.pushed.Load(), r.acked.Load()
			switch o.Workload {
			case Push:
				bar.Describe(fmt.Sprintf("push %d msgs, %.0f msgs/s", pushed, float64(pushed)/secs))
			case PopAck:
				bar.Describe(fmt.Sprintf("popack %d msgs, %.0f msgs/s", acked, float64(acked)/secs))
			case Read:
				bar.Describe(fmt.Sprintf("read %.0f s", secs))
			default:
				bar.Describe(fmt.Sprintf("push %.0f msgs/s, ack %.0f msgs/s", float64(pushed)/secs, float64(acked)/secs))
			}
			if byCount {
				n := pushed
				if o.Workload == PopAck {
					n = acked
				}
				bar.Set64(min(n, total))
			} else {
				bar.Set64(min(int64(secs*10), total))
			}
		}
	}()
	return &progressBar{bar: bar, stop: func() {
		close(done)
		<-finished
		bar.Finish() // clears the bar's line
	}}
}
