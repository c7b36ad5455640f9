package testutil

import (
	"runtime"
	"strings"
)

// LeakedGoroutines returns the stacks of other goroutines whose stack
// mentions one of suspects (package paths such as "warren/segment."),
// giving exiting goroutines a bounded number of chances to finish; ""
// when there are none. Call it from TestMain after m.Run.
func LeakedGoroutines(suspects ...string) string {
	var leaks []string
	for try := 0; try < 1000; try++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaks = leaks[:0]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 { // this goroutine
				continue
			}
			for _, s := range suspects {
				if strings.Contains(g, s) {
					leaks = append(leaks, g)
					break
				}
			}
		}
		if len(leaks) == 0 {
			return ""
		}
		runtime.Gosched()
	}
	return strings.Join(leaks, "\n\n")
}
