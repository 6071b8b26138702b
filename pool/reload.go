package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultReloadInterval is how often a Reloader's Run looks at its file when
// ReloadSettings.Interval is zero.
const DefaultReloadInterval = 5 * time.Second

// ReloadSettings tune a Reloader. The zero value means every default.
type ReloadSettings struct {
	// Interval is how often Run looks at the file's size, modification time and identity (a file
	// renamed over it is a change even with the same size and time), on the pool's clock. Default
	// DefaultReloadInterval (5 s); negative is an error.
	Interval time.Duration
	// OnReload, when set, is called after every reload — each time Run or Check found the file
	// changed, and each Reload — with what it did or why it failed. It runs on the goroutine that
	// reloaded, with no lock held; it may be called concurrently when Reload runs beside Run, and
	// should return quickly.
	OnReload func(ReloadEvent)
	// AllowEmpty lets a list with no proxies remove every exit. By default such a list is an error
	// and the pool keeps its exits: an editor that truncates a file before writing it leaves it
	// empty for a moment.
	AllowEmpty bool
}

// ReloadEvent is one reload of a Reloader.
type ReloadEvent struct {
	// At is when the reload happened, on the pool's clock.
	At time.Time
	// Result is what Pool.Sync did; zero when the reload failed.
	Result SyncResult
	// Err is why the reload failed, a *ReloadError; the pool kept its exits. Nil on success.
	Err error
}

// ReloadError is a reload that changed nothing: the file could not be read, a line of it is not a
// proxy (Err comes from ReadExits: line numbers, passwords redacted), it holds no proxies, it changed
// while being read, or Pool.Sync refused the list (a label twice).
type ReloadError struct {
	Path string
	Err  error
}

// Error names the file and what was wrong.
func (e *ReloadError) Error() string {
	return "pool: reload " + e.Path + ": " + strings.TrimPrefix(e.Err.Error(), "pool: ")
}

// Unwrap returns the underlying error.
func (e *ReloadError) Unwrap() error { return e.Err }

// ErrEmptyList is what a ReloadError wraps when the file holds no proxies and
// ReloadSettings.AllowEmpty is not set.
var ErrEmptyList = errors.New("pool: proxy list holds no proxies")

// errChanging is what a ReloadError wraps when the file changed while it was being read.
var errChanging = errors.New("pool: file changed while being read (write it elsewhere and rename it over the list)")

// Reloader keeps a pool's exits in step with a proxy-list file (the format of ReadExits), for a
// list edited while traffic flows. Each reload reads the whole file and hands it to Pool.Sync, so
// an exit whose line did not change keeps its breakers; a file that cannot be read or holds a bad
// line changes nothing and is reported (ReloadSettings.OnReload, and Reload's error).
//
// Run looks at the file every ReloadSettings.Interval and reloads it when its size, modification
// time or identity changed; Reload reloads at once (on SIGHUP, say). A bad file is reported once,
// and tried again when it changes. Replace the file by renaming a complete new one over it: a
// reload that catches a file being written may see it change while it reads (then it tries again
// on the next look) or read half of it. No file-system notifications: the reloader only looks,
// so it works the same on every platform and on a fake clock.
//
// A Reloader is safe for concurrent use; reloads are serialised.
type Reloader struct {
	p    *Pool
	path string
	s    ReloadSettings

	mu   sync.Mutex // serialises reloads; guards seen and last
	seen fileStamp  // the version of the file last read (or found missing)
	last ReloadEvent
}

// fileStamp is what Check compares to tell a changed file: size, modification time and identity.
type fileStamp struct {
	info    fs.FileInfo // nil: not looked at yet, or missing
	missing bool
}

func stampOf(fi fs.FileInfo) fileStamp { return fileStamp{info: fi} }

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil && a.missing && b.missing
	}
	return a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime()) && os.SameFile(a.info, b.info)
}

// NewReloader returns a Reloader that keeps p's exits in step with the proxy list at path. It
// validates its arguments and reads nothing: call Reload to load the file at once (and learn of a
// bad one), Run to follow it.
func NewReloader(p *Pool, path string, s ReloadSettings) (*Reloader, error) {
	switch {
	case p == nil:
		return nil, errors.New("pool: NewReloader: nil pool")
	case path == "":
		return nil, errors.New("pool: NewReloader: empty path")
	case s.Interval < 0:
		return nil, fmt.Errorf("pool: NewReloader: Interval %v must not be negative", s.Interval)
	}
	if s.Interval == 0 {
		s.Interval = DefaultReloadInterval
	}
	return &Reloader{p: p, path: path, s: s}, nil
}

// Path returns the file the reloader follows.
func (r *Reloader) Path() string { return r.path }

// Last returns the last reload's event; the zero ReloadEvent before the first.
func (r *Reloader) Last() ReloadEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Reload reads the file now, whether or not it changed, and syncs the pool with it. On error —
// a *ReloadError — the pool keeps its exits.
func (r *Reloader) Reload() (SyncResult, error) {
	r.mu.Lock()
	ev := r.reload()
	r.mu.Unlock()
	r.report(ev)
	return ev.Result, ev.Err
}

// Check reloads the file if its size, modification time or identity changed since the reloader
// last read it (every file counts as changed before the first read), and reports whether it
// reloaded: what Run does at each look. A file that went missing is reported once, as a failed
// reload; so is a bad file, which is not read again until it changes.
func (r *Reloader) Check() (reloaded bool, res SyncResult, err error) {
	r.mu.Lock()
	fi, serr := os.Stat(r.path)
	now := stampOf(fi)
	if serr != nil {
		now = fileStamp{missing: true}
	}
	if now.same(r.seen) {
		r.mu.Unlock()
		return false, SyncResult{}, nil
	}
	ev := r.reload()
	r.mu.Unlock()
	r.report(ev)
	return true, ev.Result, ev.Err
}

// Run checks the file at once and then every ReloadSettings.Interval on the pool's clock, until
// ctx is done; it returns ctx's error. Failed reloads reach ReloadSettings.OnReload and Last.
func (r *Reloader) Run(ctx context.Context) error {
	for {
		r.Check()
		t := r.p.clock.NewTimer(r.s.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// reload reads the file and syncs the pool; r.mu is held.
func (r *Reloader) reload() ReloadEvent {
	ev := ReloadEvent{At: r.p.clock.Now()}
	exits, stamp, err := r.read()
	if stamp.info != nil || stamp.missing {
		r.seen = stamp
	}
	if err == nil && len(exits) == 0 && !r.s.AllowEmpty {
		err = fmt.Errorf("%w (ReloadSettings.AllowEmpty lets it empty the pool)", ErrEmptyList)
	}
	if err == nil {
		ev.Result, err = r.p.Sync(exits)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == r.path {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the ReloadError names the path once
	}
	if err != nil {
		ev.Result, ev.Err = SyncResult{}, &ReloadError{Path: r.path, Err: err}
	}
	r.last = ev
	return ev
}

// read reads and parses the file. stamp is the version read, or missing; zero when the file
// changed while being read, so that the next Check tries again.
func (r *Reloader) read() ([]*Exit, fileStamp, error) {
	f, err := os.Open(r.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fileStamp{missing: true}, err
		}
		// Unreadable (permissions, say): report it once, until the file changes.
		fi, serr := os.Stat(r.path)
		if serr != nil {
			return nil, fileStamp{}, err
		}
		return nil, stampOf(fi), err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, stampOf(before), err // a directory, say: reported once, until it changes
	}
	after, err := os.Stat(r.path)
	if err != nil || int64(len(data)) != before.Size() || !stampOf(before).same(stampOf(after)) {
		return nil, fileStamp{}, errChanging
	}
	exits, err := ReadExits(bytes.NewReader(data))
	return exits, stampOf(before), err
}

func (r *Reloader) report(ev ReloadEvent) {
	if r.s.OnReload != nil {
		r.s.OnReload(ev)
	}
}
