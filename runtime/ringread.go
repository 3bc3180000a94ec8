package runtime

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// ringReader reads a BPF ring buffer with a read position of its own: a
// record is consumed (its room given back to the producers) only when the
// reader commits, so a record read but not yet written anywhere survives
// the reader's crash in the buffer. cilium/ebpf's ringbuf.Reader moves the
// consumer position as it copies each record, which loses what a reader
// held when it died.
//
// The kernel wakes a waiting reader only for a record committed at the
// consumer position, so next never waits while records are held: it
// returns errHeld, and the caller commits (or gives up) first.
type ringReader struct {
	cons, data []byte   // the mmapped consumer page, and producer page + data twice
	consPos    *uintptr // in cons
	prodPos    *uintptr // in data
	ring       []byte   // the data pages, mapped twice: a record never wraps
	mask       uintptr
	pos        uintptr // the read position: records before it were returned
	ep, wake   int     // epoll on the map, and the eventfd that wakes a wait
	events     []unix.EpollEvent
}

// The ring's record header (kernel/bpf/ringbuf.c): the length, with the
// two bits below; compiled.RingbufHeaderSize bytes.
const (
	ringBusyBit   = 1 << 31
	ringDiscardBt = 1 << 30
)

var (
	errRingIdle = errors.New("ring buffer: no record before the deadline")
	errRingHeld = errors.New("ring buffer: records held, commit first")
)

func newRingReader(m *ebpf.Map) (*ringReader, error) {
	size := int(m.MaxEntries())
	if m.Type() != ebpf.RingBuf || size <= 0 || size&(size-1) != 0 {
		return nil, fmt.Errorf("not a ring buffer (%s of %d bytes)", m.Type(), size)
	}
	r := &ringReader{ep: -1, wake: -1, events: make([]unix.EpollEvent, 2)}
	if err := r.mapPages(m.FD(), size); err != nil {
		r.close()
		return nil, err
	}
	if err := r.watch(m.FD()); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// mapPages maps the ring buffer of size bytes that fd is: its consumer
// page read-write, its producer page and data (twice, so that a record
// wrapping around reads in one piece) read-only.
func (r *ringReader) mapPages(fd, size int) error {
	page := os.Getpagesize()
	var err error
	if r.cons, err = unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mmap the consumer page: %w", err)
	}
	if r.data, err = unix.Mmap(fd, int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mmap the data pages: %w", err)
	}
	r.consPos = (*uintptr)(unsafe.Pointer(&r.cons[0]))
	r.prodPos = (*uintptr)(unsafe.Pointer(&r.data[0]))
	r.ring, r.mask = r.data[page:], uintptr(size-1)
	r.pos = atomic.LoadUintptr(r.consPos)
	return nil
}

// watch makes the epoll instance that waits for the ring buffer fd and
// for the wake-up eventfd.
func (r *ringReader) watch(fd int) error {
	var err error
	if r.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	if r.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	for _, fd := range []int{fd, r.wake} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(r.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll add: %w", err)
		}
	}
	return nil
}

// held reports whether records were returned and not committed.
func (r *ringReader) held() bool { return r.pos != atomic.LoadUintptr(r.consPos) }

// unread is the bytes after the read position.
func (r *ringReader) unread() int { return int(atomic.LoadUintptr(r.prodPos) - r.pos) }

// next copies the next record into buf and moves the read position past
// it (not the consumer position: see commit). It waits until deadline
// (zero: for ever) for a record when none is there and none is held;
// errRingIdle when the deadline passed or wakeUp was called, errRingHeld
// when records are held.
func (r *ringReader) next(buf []byte, deadline time.Time) ([]byte, error) {
	for {
		rec, ok, err := r.peek(buf)
		if ok || err != nil {
			return rec, err
		}
		if r.held() {
			return nil, errRingHeld
		}
		if err := r.wait(deadline); err != nil {
			// A record may have come without a wakeup (BPF_RB_NO_WAKEUP).
			if rec, ok, perr := r.peek(buf); ok || perr != nil {
				return rec, perr
			}
			return nil, err
		}
	}
}

func (r *ringReader) peek(buf []byte) ([]byte, bool, error) {
	for {
		prod := atomic.LoadUintptr(r.prodPos)
		if prod == r.pos {
			return nil, false, nil
		}
		if prod-r.pos < compiled.RingbufHeaderSize {
			return nil, false, errors.New("ring buffer: a record header cut short")
		}
		// Loaded atomically: the kernel's xchg of the busy bit orders the
		// record's data before its length.
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.ring[r.pos&r.mask])))
		if hdr&ringBusyBit != 0 {
			return nil, false, nil // reserved, not committed yet
		}
		n := uintptr(hdr &^ (ringBusyBit | ringDiscardBt))
		start := (r.pos + compiled.RingbufHeaderSize) & r.mask
		end := r.pos + compiled.RingbufHeaderSize + (n+7)&^7
		if prod < end {
			return nil, false, errors.New("ring buffer: a record cut short")
		}
		r.pos = end
		if hdr&ringDiscardBt != 0 {
			continue
		}
		buf = append(buf[:0], r.ring[start:start+n]...)
		return buf, true, nil
	}
}

func (r *ringReader) wait(deadline time.Time) error {
	ms := -1
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return errRingIdle
		}
		ms = int((d + time.Millisecond - 1) / time.Millisecond)
	}
	n, err := unix.EpollWait(r.ep, r.events, ms)
	if errors.Is(err, unix.EINTR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ring buffer: epoll: %w", err)
	}
	if n == 0 {
		return errRingIdle
	}
	for _, ev := range r.events[:n] {
		if int(ev.Fd) == r.wake {
			var b [8]byte
			_, _ = unix.Read(r.wake, b[:])
			return errRingIdle
		}
	}
	return nil
}

// commit consumes every record next returned: the producers get their
// room back.
func (r *ringReader) commit() { atomic.StoreUintptr(r.consPos, r.pos) }

// commitTo consumes the records before mark, a read position next was at
// since the last commit (a mark from before it, or past pos, is ignored).
func (r *ringReader) commitTo(mark uintptr) {
	if cons := atomic.LoadUintptr(r.consPos); mark-cons <= r.pos-cons {
		atomic.StoreUintptr(r.consPos, mark)
	}
}

// rewind forgets the records returned since the last commit: next
// returns them again.
func (r *ringReader) rewind() { r.pos = atomic.LoadUintptr(r.consPos) }

// wakeUp makes a waiting next return errRingIdle; safe from any goroutine.
func (r *ringReader) wakeUp() {
	one := [8]byte{1}
	_, _ = unix.Write(r.wake, one[:])
}

func (r *ringReader) close() {
	if r.cons != nil {
		_ = unix.Munmap(r.cons)
		r.cons = nil
	}
	if r.data != nil {
		_ = unix.Munmap(r.data)
		r.data = nil
	}
	for _, fd := range []*int{&r.ep, &r.wake} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}
