// Command amqpbench runs the bench/amqpbench scenarios against one or more
// AMQP 0-9-1 brokers, alternating between them (A B A B ...) so that drift
// on the machine hits every target alike, and prints per-target medians and
// the ratio of the first target to each other one.
//
//	go run ./bench/cmd/amqpbench \
//	    -targets warren=amqp://guest:guest@127.0.0.1:5672/,rabbitmq=amqp://guest:guest@127.0.0.1:15673/ \
//	    -scenario classic-1p1c,fanout -size 16,1024 -count 200000 -pairs 3
//
// See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/warren-mq/warren/bench/amqpbench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags besides the workload Config.
type options struct {
	targets   []amqpbench.Target
	scenarios []string
	sizes     []int
	pids      map[string]int
	pairs     int
	jsonOut   bool
	timeout   time.Duration
}

// benchCase is one scenario at one message size.
type benchCase struct {
	Scenario    string `json:"scenario"`
	MessageSize int    `json:"message_size"`
}

func (c benchCase) String() string { return fmt.Sprintf("%s %dB", c.Scenario, c.MessageSize) }

func run(args []string, stdout, stderr io.Writer) int {
	cfg, opts, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "amqpbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := report{Config: cfg, Targets: opts.targets, Pairs: opts.pairs, PIDs: opts.pids}
	for _, s := range opts.scenarios {
		for _, size := range opts.sizes {
			rep.Cases = append(rep.Cases, benchCase{Scenario: s, MessageSize: size})
		}
	}
	progress := func(format string, a ...any) {
		if !opts.jsonOut {
			fmt.Fprintf(stdout, format, a...)
		}
	}

	failed := false
	for _, bc := range rep.Cases {
		refused := map[string]bool{} // targets that refused this case's declare
		for pair := 1; pair <= opts.pairs && ctx.Err() == nil; pair++ {
			for _, t := range opts.targets {
				if refused[t.Name] || ctx.Err() != nil {
					continue
				}
				c := cfg
				c.URL, c.Scenario, c.MessageSize, c.BrokerPID = t.URL, bc.Scenario, bc.MessageSize, opts.pids[t.Name]
				if bc.Scenario != amqpbench.ScenarioFanout {
					// -queues, -consumer-conns and -queue-type shape fanout
					// only; the 1p1c scenarios fix them.
					c.Queues, c.ConsumerConnections, c.QueueType = 0, 0, ""
				}
				res, err := runOne(ctx, opts.timeout, c)
				r := runRecord{Case: bc, Pair: pair, Target: t.Name, Result: res}
				switch {
				case errors.Is(err, amqpbench.ErrDeclare):
					r.Error, r.Refused = err.Error(), true
					refused[t.Name] = true
					fmt.Fprintf(stderr, "amqpbench: %s on %s: broker refused the declare, skipping its other pairs: %v\n", bc, t.Name, err)
				case err != nil:
					r.Error = err.Error()
					failed = true
					fmt.Fprintf(stderr, "amqpbench: %s pair %d on %s: %v\n", bc, pair, t.Name, err)
				}
				rep.Runs = append(rep.Runs, r)
				switch {
				case r.Refused:
					progress("%-18s pair %d  %-10s REFUSED (declare)\n", bc, pair, t.Name)
				case err != nil && res.Published == 0:
					progress("%-18s pair %d  %-10s FAILED\n", bc, pair, t.Name)
				default:
					progress("%-18s pair %d  %-10s %s%s\n", bc, pair, t.Name, runLine(res), errMark(err))
				}
			}
		}
	}
	rep.summarize()

	if opts.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "amqpbench:", err)
			return 1
		}
	} else {
		rep.print(stdout)
	}
	if ctx.Err() != nil || failed {
		return 1
	}
	return 0
}

// runLine is the one-line summary of a run.
func runLine(r amqpbench.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "publish %7.0f msgs/s", r.PublishMsgsPerSec)
	if r.Queues > 1 {
		fmt.Fprintf(&b, "  delivered %8.0f msgs/s", r.DeliveredMsgsPerSec)
	} else {
		fmt.Fprintf(&b, "  end-to-end %7.0f msgs/s", r.EndToEndMsgsPerSec)
	}
	fmt.Fprintf(&b, "  %7d msgs %6.2fs", r.Published, r.DeliverElapsed.Seconds())
	if r.LatencyP50 > 0 {
		fmt.Fprintf(&b, "  latency p50 %v p99 %v", roundDur(r.LatencyP50), roundDur(r.LatencyP99))
	}
	if r.ConfirmP50 > 0 {
		fmt.Fprintf(&b, "  confirm p50 %v", roundDur(r.ConfirmP50))
	}
	if r.BrokerStats {
		fmt.Fprintf(&b, "  broker cpu %.2fs", r.BrokerCPU.Seconds())
	}
	if r.BrokerIO {
		fmt.Fprintf(&b, "  disk %.2f B/B", r.WritePerPublishedByte)
	}
	return b.String()
}

// roundDur rounds to 3 significant figures or so, for reading.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

func errMark(err error) string {
	if err != nil {
		return "  FAILED"
	}
	return ""
}

// runOne runs one scenario with its own deadline.
func runOne(ctx context.Context, timeout time.Duration, cfg amqpbench.Config) (amqpbench.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return amqpbench.RunScenario(ctx, cfg)
}

func parseFlags(args []string, stderr io.Writer) (amqpbench.Config, options, error) {
	var cfg amqpbench.Config
	var opts options
	fs := flag.NewFlagSet("amqpbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("targets", "", "`name=amqp://user:pass@host:port/vhost,...` brokers to compare, run alternately; the first is the numerator of the ratios")
	url := fs.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker `URL` when -targets is empty")
	scenarios := fs.String("scenario", amqpbench.ScenarioClassic1p1c, "comma-separated `scenarios`: "+strings.Join(amqpbench.Scenarios, ", ")+", or all")
	sizes := fs.String("size", strconv.Itoa(amqpbench.DefaultMessageSize), "comma-separated message body `sizes` in bytes (each run at every size)")
	pids := fs.String("pids", "", "`name=PID|name=PIDFILE,...` broker processes per target: report their CPU time and bytes written (write_bytes, needs root)")
	short := fs.Bool("short", false, "smoke mode: 2000 messages and 1 pair unless -count/-duration/-pairs are given")
	fs.IntVar(&opts.pairs, "pairs", 3, "rounds over all targets (A B A B ...) per scenario and size")
	fs.BoolVar(&opts.jsonOut, "json", false, "print one JSON report instead of text")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "deadline of each single run")

	fs.IntVar(&cfg.Count, "count", 0, fmt.Sprintf("messages per run; 0 = %d, or no limit with -duration", amqpbench.DefaultCount))
	fs.DurationVar(&cfg.Duration, "duration", 0, "publish for this long instead of (or, with -count, at most) a count")
	fs.IntVar(&cfg.MaxInFlight, "inflight", amqpbench.DefaultMaxInFlight, "unconfirmed messages the publisher may have")
	fs.IntVar(&cfg.Prefetch, "prefetch", amqpbench.DefaultPrefetch, "consumer prefetch (basic.qos)")
	fs.IntVar(&cfg.AckEvery, "ack-every", amqpbench.DefaultAckEvery, "consumers ack with multiple=true every this many messages")
	fs.IntVar(&cfg.Queues, "queues", amqpbench.DefaultQueues, "queues bound to the fanout exchange (fanout only)")
	fs.IntVar(&cfg.ConsumerConnections, "consumer-conns", 1, "connections the fanout consumers are spread over (one channel each)")
	fs.StringVar(&cfg.QueueType, "queue-type", "", "x-queue-type of the fanout queues: classic (default) or quorum")
	fs.BoolVar(&cfg.Transient, "transient", false, "publish with delivery mode 1 instead of 2 (persistent)")
	fs.StringVar(&cfg.Prefix, "prefix", "amqpbench", "start of the names of the queues and exchanges each run declares and deletes")
	fs.DurationVar(&cfg.SetupTimeout, "setup-timeout", 30*time.Second, "limit on dialing, declaring and subscribing")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", 30*time.Second, "fail a run after this long without a confirm or delivery")
	if err := fs.Parse(args); err != nil {
		return cfg, opts, err
	}
	if fs.NArg() > 0 {
		return cfg, opts, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *short {
		if !set["count"] && !set["duration"] {
			cfg.Count = 2000
		}
		if !set["pairs"] {
			opts.pairs = 1
		}
	}

	var err error
	if *targets == "" {
		if opts.targets, err = amqpbench.ParseTargets(*url); err != nil {
			return cfg, opts, err
		}
	} else if opts.targets, err = amqpbench.ParseTargets(*targets); err != nil {
		return cfg, opts, err
	}
	for s := range strings.SplitSeq(*scenarios, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case s == "all":
			opts.scenarios = append(opts.scenarios, amqpbench.Scenarios...)
		case slices.Contains(amqpbench.Scenarios, s):
			opts.scenarios = append(opts.scenarios, s)
		default:
			return cfg, opts, fmt.Errorf("-scenario %q: want %s or all", s, strings.Join(amqpbench.Scenarios, ", "))
		}
	}
	opts.scenarios = slices.Compact(opts.scenarios)
	if len(opts.scenarios) == 0 {
		return cfg, opts, errors.New("-scenario: none given")
	}
	for s := range strings.SplitSeq(*sizes, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return cfg, opts, fmt.Errorf("-size %q: want byte counts", *sizes)
		}
		opts.sizes = append(opts.sizes, n)
	}
	if len(opts.sizes) == 0 {
		return cfg, opts, errors.New("-size: none given")
	}
	if opts.pids, err = amqpbench.ParsePIDs(*pids); err != nil {
		return cfg, opts, err
	}
	for name := range opts.pids {
		if !slices.ContainsFunc(opts.targets, func(t amqpbench.Target) bool { return t.Name == name }) {
			return cfg, opts, fmt.Errorf("-pids: no target named %q", name)
		}
	}
	if opts.pairs < 1 {
		return cfg, opts, fmt.Errorf("-pairs %d: want at least 1", opts.pairs)
	}
	return cfg, opts, nil
}

// report is everything one invocation measured; it is also the -json output.
type report struct {
	Config  amqpbench.Config   `json:"config"`
	Targets []amqpbench.Target `json:"targets"`
	PIDs    map[string]int     `json:"pids,omitempty"`
	Pairs   int                `json:"pairs"`
	Cases   []benchCase        `json:"cases"`
	Runs    []runRecord        `json:"runs"`
	Medians []median           `json:"medians"`
	Ratios  []ratio            `json:"ratios"`
}

type runRecord struct {
	Case   benchCase        `json:"case"`
	Pair   int              `json:"pair"`
	Target string           `json:"target"`
	Result amqpbench.Result `json:"result"`
	Error  string           `json:"error,omitempty"`
	// Refused is set when the broker refused the declare (for example a
	// quorum queue on a broker without them); the target's other pairs of
	// that case were skipped.
	Refused bool `json:"refused,omitempty"`
}

// median summarizes the successful runs of one target and case.
type median struct {
	Case                  benchCase     `json:"case"`
	Target                string        `json:"target"`
	Runs                  int           `json:"runs"`
	Refused               string        `json:"refused,omitempty"`
	PublishMsgsPerSec     float64       `json:"publish_msgs_per_sec"`
	PublishMBPerSec       float64       `json:"publish_mb_per_sec"`
	EndToEndMsgsPerSec    float64       `json:"end_to_end_msgs_per_sec"`
	DeliveredMsgsPerSec   float64       `json:"delivered_msgs_per_sec"`
	ConsumeMsgsPerSec     float64       `json:"consume_msgs_per_sec"`
	LatencyP50            time.Duration `json:"latency_p50_ns"`
	LatencyP99            time.Duration `json:"latency_p99_ns"`
	ConfirmP50            time.Duration `json:"confirm_p50_ns"`
	ConfirmP99            time.Duration `json:"confirm_p99_ns"`
	BrokerStats           bool          `json:"broker_stats"`
	BrokerCPU             time.Duration `json:"broker_cpu_ns,omitempty"`
	BrokerCPUPerMsg       time.Duration `json:"broker_cpu_per_msg_ns,omitempty"`
	BrokerIO              bool          `json:"broker_io"`
	WritePerPublishedByte float64       `json:"write_per_published_byte,omitempty"`
}

// ratio compares the first target's medians with another target's: msgs/s
// first over other (above 1: the first is faster), broker CPU per message
// first over other (below 1: the first needs less).
type ratio struct {
	Case            benchCase `json:"case"`
	First           string    `json:"first"`
	Other           string    `json:"other"`
	Publish         float64   `json:"publish_msgs_per_sec_ratio"`
	EndToEnd        float64   `json:"end_to_end_msgs_per_sec_ratio"`
	BrokerCPUPerMsg float64   `json:"broker_cpu_per_msg_ratio,omitempty"`
}

func (r *report) summarize() {
	r.Medians = r.Medians[:0]
	r.Ratios = r.Ratios[:0]
	type key struct {
		c benchCase
		t string
	}
	byKey := map[key]median{}
	for _, bc := range r.Cases {
		for _, t := range r.Targets {
			m := median{Case: bc, Target: t.Name, BrokerStats: true, BrokerIO: true}
			var pub, pubMB, e2e, del, cons, l50, l99, c50, c99, cpu, cpuMsg, wpb []float64
			for _, run := range r.Runs {
				if run.Case != bc || run.Target != t.Name {
					continue
				}
				if run.Refused {
					m.Refused = run.Error
				}
				if run.Error != "" {
					continue
				}
				x := run.Result
				pub = append(pub, x.PublishMsgsPerSec)
				pubMB = append(pubMB, x.PublishMBPerSec)
				e2e = append(e2e, x.EndToEndMsgsPerSec)
				del = append(del, x.DeliveredMsgsPerSec)
				cons = append(cons, x.ConsumeMsgsPerSec)
				l50 = append(l50, float64(x.LatencyP50))
				l99 = append(l99, float64(x.LatencyP99))
				c50 = append(c50, float64(x.ConfirmP50))
				c99 = append(c99, float64(x.ConfirmP99))
				m.BrokerStats = m.BrokerStats && x.BrokerStats
				m.BrokerIO = m.BrokerIO && x.BrokerIO
				cpu = append(cpu, float64(x.BrokerCPU))
				cpuMsg = append(cpuMsg, float64(x.BrokerCPUPerMsg))
				wpb = append(wpb, x.WritePerPublishedByte)
			}
			m.Runs = len(pub)
			if m.Runs == 0 {
				m.BrokerStats, m.BrokerIO = false, false
			}
			m.PublishMsgsPerSec = amqpbench.Median(pub)
			m.PublishMBPerSec = amqpbench.Median(pubMB)
			m.EndToEndMsgsPerSec = amqpbench.Median(e2e)
			m.DeliveredMsgsPerSec = amqpbench.Median(del)
			m.ConsumeMsgsPerSec = amqpbench.Median(cons)
			m.LatencyP50 = time.Duration(amqpbench.Median(l50))
			m.LatencyP99 = time.Duration(amqpbench.Median(l99))
			m.ConfirmP50 = time.Duration(amqpbench.Median(c50))
			m.ConfirmP99 = time.Duration(amqpbench.Median(c99))
			if m.BrokerStats {
				m.BrokerCPU = time.Duration(amqpbench.Median(cpu))
				m.BrokerCPUPerMsg = time.Duration(amqpbench.Median(cpuMsg))
			}
			if m.BrokerIO {
				m.WritePerPublishedByte = amqpbench.Median(wpb)
			}
			byKey[key{bc, t.Name}] = m
			r.Medians = append(r.Medians, m)
		}
	}
	if len(r.Targets) < 2 {
		return
	}
	first := r.Targets[0].Name
	for _, bc := range r.Cases {
		a := byKey[key{bc, first}]
		for _, t := range r.Targets[1:] {
			b := byKey[key{bc, t.Name}]
			if a.Runs == 0 || b.Runs == 0 || b.PublishMsgsPerSec == 0 || b.EndToEndMsgsPerSec == 0 {
				continue
			}
			x := ratio{Case: bc, First: first, Other: t.Name,
				Publish:  a.PublishMsgsPerSec / b.PublishMsgsPerSec,
				EndToEnd: a.EndToEndMsgsPerSec / b.EndToEndMsgsPerSec}
			if a.BrokerStats && b.BrokerStats && b.BrokerCPUPerMsg > 0 {
				x.BrokerCPUPerMsg = float64(a.BrokerCPUPerMsg) / float64(b.BrokerCPUPerMsg)
			}
			r.Ratios = append(r.Ratios, x)
		}
	}
}

func (r *report) print(w io.Writer) {
	c := r.Config
	bound := fmt.Sprintf("%d messages", c.Count)
	switch {
	case c.Duration > 0 && c.Count > 0:
		bound = fmt.Sprintf("%v or %d messages", c.Duration, c.Count)
	case c.Duration > 0:
		bound = fmt.Sprintf("%v of publishing", c.Duration)
	case c.Count == 0:
		bound = fmt.Sprintf("%d messages", amqpbench.DefaultCount)
	}
	fmt.Fprintf(w, "\nmedians over %d pair(s); %s per run, inflight %d, prefetch %d, ack every %d\n",
		r.Pairs, bound, c.MaxInFlight, c.Prefetch, c.AckEvery)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\ttarget\truns\tpublish msgs/s\tpublish MB/s\tend-to-end msgs/s\tdelivered msgs/s\tlatency p50\tlatency p99\tconfirm p50\tbroker cpu/msg\tdisk B/B\t")
	var missing []string
	for _, m := range r.Medians {
		if m.Runs == 0 {
			why := "no successful run"
			if m.Refused != "" {
				why = "the broker refused the declare: " + m.Refused
			}
			missing = append(missing, fmt.Sprintf("%s %s: %s", m.Case, m.Target, why))
			continue
		}
		cpu, disk := "-", "-"
		if m.BrokerStats {
			cpu = m.BrokerCPUPerMsg.Round(10 * time.Nanosecond).String()
		}
		if m.BrokerIO {
			disk = fmt.Sprintf("%.2f", m.WritePerPublishedByte)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.0f\t%.0f\t%v\t%v\t%v\t%s\t%s\t\n",
			m.Case, m.Target, m.Runs, m.PublishMsgsPerSec, m.PublishMBPerSec, m.EndToEndMsgsPerSec,
			m.DeliveredMsgsPerSec, roundDur(m.LatencyP50), roundDur(m.LatencyP99), roundDur(m.ConfirmP50), cpu, disk)
	}
	_ = tw.Flush()
	for _, line := range missing {
		fmt.Fprintln(w, "no median for", line)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
		for _, x := range r.Ratios {
			fmt.Fprintf(w, "ratio %s/%s %-18s publish %.2fx  end-to-end %.2fx", x.First, x.Other, x.Case, x.Publish, x.EndToEnd)
			if x.BrokerCPUPerMsg > 0 {
				fmt.Fprintf(w, "  broker cpu/msg %.2fx", x.BrokerCPUPerMsg)
			}
			fmt.Fprintln(w)
		}
	}
}
