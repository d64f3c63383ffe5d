package agent

import "testing"

// TestReportMarginScalesWithWindow: a provider that cannot fetch its
// input reports it a quarter of the job's commit window before the
// deadline (at least 3 blocks), not a fixed 3. The soak's job 39 (commit
// window 40) shows why: p1 stopped fetching 3 blocks before its deadline,
// its report did not land in those 3 blocks (full of spam, a validator
// down), and it was slashed as a no-show although it had tried all along.
// With the window's quarter it stops 10 blocks before.
func TestReportMarginScalesWithWindow(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		deadline, window, want uint64
		checked                bool
	}{
		{name: "soak pipeline job: window 40", deadline: 476, window: 40, want: 466},
		{name: "window 30 (the tests' jobs)", deadline: 100, window: 30, want: 93},
		{name: "short window keeps 3 blocks", deadline: 100, window: 8, want: 97},
		{name: "long window", deadline: 1000, window: 400, want: 900},
		{name: "after an input check: until the deadline", deadline: 476, window: 40, checked: true, want: 476},
		{name: "deadline within the margin", deadline: 9, window: 40, want: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reportBy(tc.deadline, tc.window, tc.checked); got != tc.want {
				t.Errorf("reportBy(%d, window %d, checked %v) = %d, want %d", tc.deadline, tc.window, tc.checked, got, tc.want)
			}
		})
	}
}
