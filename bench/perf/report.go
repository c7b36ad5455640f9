package perf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Record is one run as labels and numeric metrics: what Report reads (one
// JSON object per line; warren-perf -json prints a Summary, whose labels
// and metrics fields are a Record, and bench/run.sh writes its own for RSS
// and restart times).
type Record struct {
	Labels  map[string]string  `json:"labels"`
	Metrics map[string]float64 `json:"metrics"`
	// Error is set for a failed run; ReadRecords leaves those out.
	Error string `json:"error,omitempty"`
}

// ReadRecords reads one JSON object per line, skipping blank lines,
// objects without metrics and failed runs.
func ReadRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" || b[0] != '{' {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(b), &rec); err != nil {
			return out, fmt.Errorf("perf: record on line %d: %w", line, err)
		}
		if len(rec.Metrics) > 0 && rec.Error == "" {
			out = append(out, rec)
		}
	}
	return out, sc.Err()
}

// ReportMetrics are the metrics Report prints, in order, when present.
var ReportMetrics = []string{
	"publish_rate", "consume_rate", "confirm_p50_ms", "latency_p50_ms", "latency_p99_ms",
	"broker_cpu_us_per_msg", "disk_bytes_per_byte", "rss_mib", "time_to_first_ms",
}

// Report writes, per scenario label (in order of appearance), a markdown
// table of each metric's median per target label and the ratio of
// baseline's median to each other target's, with the number of runs.
func Report(w io.Writer, recs []Record, baseline string) error {
	var scenarios, targets []string
	values := map[key][]float64{}
	for _, r := range recs {
		s, t := r.Labels["scenario"], r.Labels["target"]
		if !slices.Contains(scenarios, s) {
			scenarios = append(scenarios, s)
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
		for m, v := range r.Metrics {
			values[key{s, t, m}] = append(values[key{s, t, m}], v)
		}
	}
	// The baseline first.
	if i := slices.Index(targets, baseline); i > 0 {
		targets = append([]string{baseline}, slices.Delete(targets, i, i+1)...)
	}
	for _, s := range scenarios {
		var present []string
		for _, t := range targets {
			if len(values[key{s, t, "elapsed_s"}]) > 0 || anyMetric(values, s, t) {
				present = append(present, t)
			}
		}
		fmt.Fprintf(w, "\n### %s\n\n| metric |", s)
		for _, t := range present {
			fmt.Fprintf(w, " %s |", t)
		}
		for _, t := range present {
			if t != baseline && slices.Contains(present, baseline) {
				fmt.Fprintf(w, " %s/%s |", baseline, t)
			}
		}
		fmt.Fprint(w, "\n|---|")
		for range present {
			fmt.Fprint(w, "---|")
		}
		for _, t := range present {
			if t != baseline && slices.Contains(present, baseline) {
				fmt.Fprint(w, "---|")
			}
		}
		fmt.Fprintln(w)
		for _, m := range ReportMetrics {
			have := false
			for _, t := range present {
				have = have || len(values[key{s, t, m}]) > 0
			}
			if !have {
				continue
			}
			fmt.Fprintf(w, "| %s |", m)
			med := map[string]float64{}
			for _, t := range present {
				v := values[key{s, t, m}]
				if len(v) == 0 {
					fmt.Fprint(w, " - |")
					continue
				}
				med[t] = median(v)
				fmt.Fprintf(w, " %s (n=%d) |", fmtNum(med[t]), len(v))
			}
			for _, t := range present {
				if t == baseline || !slices.Contains(present, baseline) {
					continue
				}
				b, okB := med[baseline]
				o, okO := med[t]
				if !okB || !okO || o == 0 {
					fmt.Fprint(w, " - |")
					continue
				}
				fmt.Fprintf(w, " %.2fx |", b/o)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// key names one metric of one target in one scenario.
type key struct{ scenario, target, metric string }

func anyMetric(values map[key][]float64, s, t string) bool {
	for _, m := range ReportMetrics {
		if len(values[key{s, t, m}]) > 0 {
			return true
		}
	}
	return false
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. It does not modify xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtNum prints large numbers without decimals and small ones with three
// significant digits.
func fmtNum(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
