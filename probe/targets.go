package probe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/proxybreaker/proxybreaker/transport"
)

// maxTargetErrors bounds how many bad lines ReadTargets reports.
const maxTargetErrors = 10

// MaxTargetLine is the longest line ReadTargets reads, in bytes, its line break included.
const MaxTargetLine = 1 << 20

// ReadTargets reads a target list: one absolute http or https URL per line. Blank lines and lines
// starting with # are skipped. Errors give the line number and the URL with its credentials
// redacted; up to ten bad lines are reported together. A line longer than MaxTargetLine ends the
// reading with an error naming its number and the limit, and none of its text.
func ReadTargets(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxTargetLine)
	var (
		targets []string
		errs    []error
		line    int
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		t, err := parseTarget(text, transport.OriginHost)
		if err != nil {
			if len(errs) < maxTargetErrors {
				// parseTarget's error has the package prefix the whole list's error gives: once.
				errs = append(errs, fmt.Errorf("line %d: %s", line, strings.TrimPrefix(err.Error(), "probe: ")))
			}
			continue
		}
		targets = append(targets, t.raw)
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		errs = append(errs, fmt.Errorf("line %d: longer than %d bytes (%d MiB), the longest line a target list may have", line+1, MaxTargetLine, MaxTargetLine>>20))
	case err != nil:
		errs = append(errs, fmt.Errorf("after line %d: %w", line, err))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("probe: target list: %w", errors.Join(errs...))
	}
	return targets, nil
}
