// Command streambench runs the bench/streambench workloads against one or
// more stream-protocol brokers, alternating between them (A B A B ...) so
// that drift on the machine hits every target alike, and prints per-target
// medians and the ratio of the first target to each other one.
//
//	go run ./bench/cmd/streambench -targets warren=127.0.0.1:5552,rabbit=127.0.0.1:15552 \
//	    -messages 1000000 -size 100 -mode both -pairs 3
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
	"log"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/warren-mq/warren/bench/streambench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags besides the workload Config.
type options struct {
	targets   []streambench.Target
	modes     []string // "publish", "replay" in run order
	pairs     int
	jsonOut   bool
	timeout   time.Duration
	clientLog bool
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, opts, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "streambench:", err)
		return 2
	}
	// The client logs through a package-level logger; keep its warnings and
	// errors, drop its info chatter unless asked.
	logs.SetLogger(streambench.NewClientLogger(log.New(stderr, "client: ", log.LstdFlags), opts.clientLog))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := report{Config: cfg, Targets: opts.targets, Pairs: opts.pairs, Modes: opts.modes}
	progress := func(format string, a ...any) {
		if !opts.jsonOut {
			fmt.Fprintf(stdout, format, a...)
		}
	}

	// A replay-only run needs the stream filled once per target; that
	// publish is not measured.
	if len(opts.modes) == 1 && opts.modes[0] == "replay" {
		for _, t := range opts.targets {
			c := cfg
			c.Addr = t.Addr
			progress("prepare %s: publishing %d messages (not measured)\n", t.Name, c.Messages)
			if _, err := runOne(ctx, opts.timeout, "publish", c); err != nil {
				fmt.Fprintf(stderr, "streambench: prepare %s: %v\n", t.Name, err)
				return 1
			}
		}
	}

	failed := false
	for pair := 1; pair <= opts.pairs && ctx.Err() == nil; pair++ {
		for _, t := range opts.targets {
			c := cfg
			c.Addr = t.Addr
			for _, mode := range opts.modes {
				res, err := runOne(ctx, opts.timeout, mode, c)
				r := runRecord{Pair: pair, Target: t.Name, Result: res}
				if err != nil {
					r.Error = err.Error()
					failed = true
					fmt.Fprintf(stderr, "streambench: pair %d %s %s: %v\n", pair, t.Name, mode, err)
				}
				rep.Runs = append(rep.Runs, r)
				lat := ""
				if mode == "publish" {
					lat = fmt.Sprintf("  confirm p50 %v p99 %v",
						res.LatencyP50.Round(time.Microsecond), res.LatencyP99.Round(time.Microsecond))
				}
				progress("pair %d  %-10s %-8s %10.0f msgs/s %8.2f MB/s %8.3fs%s%s\n",
					pair, t.Name, mode, res.MsgsPerSec, res.MBPerSec, res.Elapsed.Seconds(), lat, errMark(err))
				if mode == "publish" && err != nil && len(opts.modes) > 1 {
					break // nothing sensible to replay
				}
			}
		}
	}
	rep.summarize()

	if opts.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "streambench:", err)
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

func errMark(err error) string {
	if err != nil {
		return "  FAILED"
	}
	return ""
}

// runOne runs one mode with its own deadline.
func runOne(ctx context.Context, timeout time.Duration, mode string, cfg streambench.Config) (streambench.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if mode == "publish" {
		return streambench.RunPublish(ctx, cfg)
	}
	return streambench.RunReplay(ctx, cfg)
}

func parseFlags(args []string, stderr io.Writer) (streambench.Config, options, error) {
	var cfg streambench.Config
	var opts options
	fs := flag.NewFlagSet("streambench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("targets", "", "`name=host:port,...` brokers to compare, run alternately; the first is the numerator of the ratios")
	addr := fs.String("addr", "127.0.0.1:5552", "`host:port` of the broker when -targets is empty")
	mode := fs.String("mode", "both", "`publish|replay|both`")
	fs.IntVar(&opts.pairs, "pairs", 3, "rounds over all targets (A B A B ...)")
	fs.BoolVar(&opts.jsonOut, "json", false, "print one JSON report instead of text")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "deadline of each single run")
	fs.BoolVar(&opts.clientLog, "client-log", false, "show the stream client's info logs")

	fs.StringVar(&cfg.User, "user", "guest", "user")
	fs.StringVar(&cfg.Password, "password", "guest", "password")
	fs.StringVar(&cfg.Vhost, "vhost", "/", "virtual host")
	fs.StringVar(&cfg.Stream, "stream", "streambench", "stream name (deleted and re-declared by publish)")
	fs.IntVar(&cfg.Messages, "messages", streambench.DefaultMessages, "messages per run (publish: across all producers)")
	fs.IntVar(&cfg.MessageSize, "size", streambench.DefaultMessageSize, "message body size in bytes (>= 16)")
	fs.IntVar(&cfg.Producers, "producers", 1, "producers, one connection each")
	fs.IntVar(&cfg.BatchSize, "batch", streambench.DefaultBatchSize, "messages per BatchSend call (one publish frame)")
	fs.IntVar(&cfg.SubEntrySize, "sub-entry", 1, "messages per sub-entry; 1 = no sub-entry batching")
	fs.IntVar(&cfg.MaxInFlight, "inflight", streambench.DefaultMaxInFlight, "unconfirmed messages per producer")
	fs.IntVar(&cfg.SocketBuffer, "socket-buffer", 0, "SO_SNDBUF/SO_RCVBUF bytes; 0 = harness default (kernel autotuning), -1 = kernel autotuning, 8192 = the client's own default")
	fs.IntVar(&cfg.InitialCredits, "credits", streambench.DefaultInitialCredits, "consumer initial credits (chunks)")
	fs.BoolVar(&cfg.SkipCRC, "no-crc", false, "skip the client's chunk CRC check on replay")
	fs.DurationVar(&cfg.SetupTimeout, "setup-timeout", 30*time.Second, "limit on connecting and creating a producer or consumer")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", 30*time.Second, "fail a run after this long without progress")
	if err := fs.Parse(args); err != nil {
		return cfg, opts, err
	}
	if fs.NArg() > 0 {
		return cfg, opts, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var err error
	if *targets == "" {
		opts.targets = []streambench.Target{{Name: *addr, Addr: *addr}}
	} else if opts.targets, err = streambench.ParseTargets(*targets); err != nil {
		return cfg, opts, err
	}
	switch *mode {
	case "publish", "replay":
		opts.modes = []string{*mode}
	case "both":
		opts.modes = []string{"publish", "replay"}
	default:
		return cfg, opts, fmt.Errorf("-mode %q: want publish, replay or both", *mode)
	}
	if opts.pairs < 1 {
		return cfg, opts, fmt.Errorf("-pairs %d: want at least 1", opts.pairs)
	}
	return cfg, opts, nil
}

// report is everything one invocation measured; it is also the -json output.
type report struct {
	Config  streambench.Config   `json:"config"`
	Targets []streambench.Target `json:"targets"`
	Pairs   int                  `json:"pairs"`
	Modes   []string             `json:"modes"`
	Runs    []runRecord          `json:"runs"`
	Medians []median             `json:"medians"`
	Ratios  []ratio              `json:"ratios"`
}

type runRecord struct {
	Pair   int                `json:"pair"`
	Target string             `json:"target"`
	Result streambench.Result `json:"result"`
	Error  string             `json:"error,omitempty"`
}

// median summarizes the successful runs of one target and mode.
type median struct {
	Target     string        `json:"target"`
	Mode       string        `json:"mode"`
	Runs       int           `json:"runs"`
	MsgsPerSec float64       `json:"msgs_per_sec"`
	MBPerSec   float64       `json:"mb_per_sec"`
	LatencyP50 time.Duration `json:"latency_p50_ns,omitempty"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
}

// ratio is first-target median msgs/s over another target's.
type ratio struct {
	First string  `json:"first"`
	Other string  `json:"other"`
	Mode  string  `json:"mode"`
	Ratio float64 `json:"msgs_per_sec_ratio"`
}

func (r *report) summarize() {
	r.Medians = r.Medians[:0]
	r.Ratios = r.Ratios[:0]
	byKey := map[[2]string]median{}
	for _, t := range r.Targets {
		for _, mode := range r.Modes {
			var rates, mbs, p50s, p99s []float64
			for _, run := range r.Runs {
				if run.Target != t.Name || run.Result.Mode != mode || run.Error != "" {
					continue
				}
				rates = append(rates, run.Result.MsgsPerSec)
				mbs = append(mbs, run.Result.MBPerSec)
				p50s = append(p50s, float64(run.Result.LatencyP50))
				p99s = append(p99s, float64(run.Result.LatencyP99))
			}
			m := median{
				Target:     t.Name,
				Mode:       mode,
				Runs:       len(rates),
				MsgsPerSec: streambench.Median(rates),
				MBPerSec:   streambench.Median(mbs),
				LatencyP50: time.Duration(streambench.Median(p50s)),
				LatencyP99: time.Duration(streambench.Median(p99s)),
			}
			byKey[[2]string{t.Name, mode}] = m
			r.Medians = append(r.Medians, m)
		}
	}
	if len(r.Targets) < 2 {
		return
	}
	first := r.Targets[0].Name
	for _, t := range r.Targets[1:] {
		for _, mode := range r.Modes {
			a, b := byKey[[2]string{first, mode}], byKey[[2]string{t.Name, mode}]
			if a.Runs == 0 || b.Runs == 0 || b.MsgsPerSec == 0 {
				continue
			}
			r.Ratios = append(r.Ratios, ratio{First: first, Other: t.Name, Mode: mode, Ratio: a.MsgsPerSec / b.MsgsPerSec})
		}
	}
}

func (r *report) print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "\nmedians over %d pair(s); %d messages x %d B, %d producer(s), batch %d, sub-entry %d\n",
		r.Pairs, c.Messages, c.MessageSize, c.Producers, c.BatchSize, c.SubEntrySize)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmode\truns\tmsgs/s\tMB/s\tconfirm p50\tconfirm p99\t")
	for _, m := range r.Medians {
		p50, p99 := "-", "-"
		if m.Mode == "publish" && m.Runs > 0 {
			p50, p99 = m.LatencyP50.Round(time.Microsecond).String(), m.LatencyP99.Round(time.Microsecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%s\t%s\t\n", m.Target, m.Mode, m.Runs, m.MsgsPerSec, m.MBPerSec, p50, p99)
	}
	_ = tw.Flush()
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
		for _, x := range r.Ratios {
			fmt.Fprintf(w, "ratio %s/%s %-8s %.2fx msgs/s\n", x.First, x.Other, x.Mode, x.Ratio)
		}
	}
}
