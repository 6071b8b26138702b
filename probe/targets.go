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

// ReadTargets reads a target list: one absolute http or https URL per line. Blank lines and lines
// starting with # are skipped. Errors give the line number and the URL with its credentials
// redacted; up to ten bad lines are reported together.
func ReadTargets(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
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
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			}
			continue
		}
		targets = append(targets, t.raw)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("after line %d: %w", line, err))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("probe: target list: %w", errors.Join(errs...))
	}
	return targets, nil
}
