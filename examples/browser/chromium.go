package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// debianChromium is where Debian's chromium package installs the browser.
const debianChromium = "/usr/bin/chromium"

// errNoChromium is matched by the error findChromium returns when no browser is installed.
var errNoChromium = errors.New("browser: chromium not found")

// findChromium returns the browser to run: path when set, else Debian's /usr/bin/chromium, else the
// first of chromium, chromium-browser, google-chrome and google-chrome-stable on $PATH.
func findChromium(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("%w: -chromium %q: %v", errNoChromium, path, err)
		}
		return p, nil
	}
	if st, err := os.Stat(debianChromium); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return debianChromium, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w at %s or on $PATH (Debian: apt-get install chromium)", errNoChromium, debianChromium)
}

// runningBrowser is one headless Chromium process, driven over the DevTools protocol through a pipe.
type runningBrowser struct {
	// ctx is a chromedp context that holds the running browser: new chromedp contexts made from it
	// open tabs in that browser. It ends when stop is called.
	ctx     context.Context
	version string // "HeadlessChrome/156.0.8078.114", say
	cancel  func()
	dataDir string
}

// startBrowser starts headless Chromium from execPath with a fresh profile in a temporary directory
// and waits at most timeout for it to answer. The browser lives until stop, or until parent ends.
func startBrowser(parent context.Context, execPath string, timeout time.Duration) (*runningBrowser, error) {
	dir, err := os.MkdirTemp("", "proxybreaker-browser-")
	if err != nil {
		return nil, fmt.Errorf("browser: profile directory: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox, // we may run as root (containers, CI); Chromium refuses its sandbox then
		chromedp.DisableGPU,
		// No proxy at the browser level: each navigation gets a browser context with its own.
		chromedp.Flag("no-proxy-server", true),
	)
	actx, acancel := chromedp.NewExecAllocator(parent, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b := &runningBrowser{ctx: bctx, dataDir: dir, cancel: func() { bcancel(); acancel() }}

	// The first Run on bctx starts the browser and binds its life to bctx, so it must not carry the
	// timeout: the wait is bounded here instead, and a browser that does not answer is stopped.
	type started struct {
		version string
		err     error
	}
	done := make(chan started, 1)
	go func() {
		v, err := chromedp.CallBrowser(bctx, browser.GetVersion, cdp.Empty{})
		done <- started{v.Product, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case s := <-done:
		if s.err != nil {
			b.stop()
			return nil, fmt.Errorf("browser: starting %s: %w", execPath, s.err)
		}
		b.version = s.version
		return b, nil
	case <-timer.C:
		b.stop()
		<-done
		return nil, fmt.Errorf("browser: %s did not answer within %v", execPath, timeout)
	}
}

// stop ends the browser, waits for its process to exit and removes its profile.
func (b *runningBrowser) stop() error {
	b.cancel()
	if err := os.RemoveAll(b.dataDir); err != nil {
		return fmt.Errorf("browser: removing the profile: %w", err)
	}
	return nil
}
