package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// selectBreakers reads every row of the breakers table, its columns in breakerColumns' order.
var selectBreakers = func() string {
	names := make([]string, len(breakerColumns))
	for i, c := range breakerColumns {
		names[i] = c.name
	}
	return "SELECT " + strings.Join(names, ", ") + " FROM breakers ORDER BY scope, exit_label, origin"
}()

// readBreakers reads and parses every row of the breakers table. A row this build cannot read (a
// value of the wrong type, an unknown scope or state, a negative level) is ErrCorrupt, naming the
// row.
func readBreakers(ctx context.Context, db *sql.DB) ([]pool.SavedBreaker, error) {
	rows, err := db.QueryContext(ctx, selectBreakers)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pool.SavedBreaker
	for n := 1; rows.Next(); n++ {
		var (
			scope, state                 string
			sb                           pool.SavedBreaker
			parked                       bool
			level                        int
			trips                        int64
			nextProbe, closedAt, changed int64
		)
		if err := rows.Scan(&scope, &sb.Exit, &sb.Origin, &state, &parked, &level, &trips,
			&nextProbe, &closedAt, &sb.LastFailure, &changed); err != nil {
			return nil, &FileError{Kind: ErrCorrupt, Err: fmt.Errorf("breakers row %d: %v", n, err)}
		}
		if err := sb.Scope.UnmarshalText([]byte(scope)); err != nil {
			return nil, &FileError{Kind: ErrCorrupt, Err: fmt.Errorf("row (%s, %q, %q): %v", scope, sb.Exit, sb.Origin, err)}
		}
		if err := sb.State.UnmarshalText([]byte(state)); err != nil || sb.State == breaker.HalfOpen || level < 0 || trips < 0 || trips > 1<<32-1 {
			return nil, &FileError{Kind: ErrCorrupt, Err: fmt.Errorf("row (%s, %q, %q): state %q, level %d, trips %d", scope, sb.Exit, sb.Origin, state, level, trips)}
		}
		sb.Parked, sb.Level, sb.Trips = parked, level, uint32(trips)
		sb.NextProbe, sb.ClosedAt, sb.Changed = unixTime(nextProbe), unixTime(closedAt), unixTime(changed)
		out = append(out, sb)
	}
	return out, rows.Err()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
