package listener

import "golang.org/x/sys/unix"

// hungUp reports whether the peer of the socket fd has shut down its side
// (a FIN received), even while unread bytes are still queued before it.
func hungUp(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
