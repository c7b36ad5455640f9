// Command warren-perf is a load generator for Warren and RabbitMQ, in the
// spirit of RabbitMQ's PerfTest and stream-perf-test. It prints a progress
// line every second to stderr and a summary at the end (-json: one JSON
// object on stdout).
//
//	warren-perf stream [flags]    stream protocol (default 127.0.0.1:5552)
//	warren-perf amqp [flags]      AMQP 0-9-1 (default amqp://guest:guest@127.0.0.1:5672/)
//	warren-perf nats [flags]      NATS JetStream publish with acks and replay
//	warren-perf declare [flags]   declare (or -delete) N idle queues
//	warren-perf report [-baseline NAME] FILE...   medians and ratios of -json lines
//
// Examples:
//
//	warren-perf stream -count 1000000 -size 100 -consumers 0
//	warren-perf stream -producers 0 -consumers 1 -offset first -count 1000000 -recreate=false
//	warren-perf stream -rate 10000 -duration 30s -batch 10
//	warren-perf stream -super-stream -partitions 3 -duration 10s
//	warren-perf stream -filter-values a,b,c -consumer-filter b -count 100000
//	warren-perf amqp -confirm 1000 -persistent -multi-ack-every 100 -size 1024 -count 200000
//	warren-perf amqp -queues 10 -confirm 1000 -persistent -broker-pid /tmp/warren.pid
//	warren-perf amqp -queue-type quorum -confirm 100 -duration 30s
//
// See bench/README.md for every flag and bench/run.sh for the comparison
// harness.
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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/warren-mq/warren/bench/perf"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: warren-perf stream|amqp|nats|declare|report [flags]
run "warren-perf MODE -h" for the flags of a mode`

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mode, args := args[0], args[1:]
	fs := flag.NewFlagSet("warren-perf "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print the summary as one JSON object on stdout")
	quiet := fs.Bool("quiet", false, "no progress lines")
	interval := fs.Duration("progress-interval", time.Second, "progress line interval")
	cpuProfile := fs.String("cpuprofile", "", "write the tool's own CPU profile to this file (go tool pprof), to tell client-bound runs from broker-bound ones")
	var exec func() (perf.Summary, error)
	switch mode {
	case "stream":
		var cfg perf.StreamConfig
		perf.BindStreamFlags(fs, &cfg)
		exec = func() (perf.Summary, error) {
			perf.FinishStreamFlags(&cfg)
			return perf.RunStream(ctx, cfg, progressTo(stderr, *quiet), *interval)
		}
	case "amqp":
		var cfg perf.AMQPConfig
		perf.BindAMQPFlags(fs, &cfg)
		exec = func() (perf.Summary, error) {
			return perf.RunAMQP(ctx, cfg, progressTo(stderr, *quiet), *interval)
		}
	case "nats":
		var cfg perf.NATSConfig
		perf.BindNATSFlags(fs, &cfg)
		exec = func() (perf.Summary, error) {
			return perf.RunNATS(ctx, cfg, progressTo(stderr, *quiet), *interval)
		}
	case "declare":
		return declare(ctx, args, stderr)
	case "report":
		return report(args, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "warren-perf: unknown mode %q\n%s\n", mode, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "warren-perf: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "warren-perf: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "warren-perf: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	sum, err := exec()
	if *jsonOut {
		out := struct {
			perf.Summary
			Error string `json:"error,omitempty"`
		}{Summary: sum}
		if err != nil {
			out.Error = err.Error()
		}
		b, jerr := json.Marshal(out)
		if jerr != nil {
			fmt.Fprintf(stderr, "warren-perf: %v\n", jerr)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		printSummary(stdout, sum)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warren-perf: %v\n", err)
		return 1
	}
	return 0
}

func progressTo(w io.Writer, quiet bool) func(perf.Progress) {
	if quiet {
		return nil
	}
	return func(p perf.Progress) { fmt.Fprintln(w, p.String()) }
}

// printSummary writes the human-readable summary.
func printSummary(w io.Writer, s perf.Summary) {
	fmt.Fprintf(w, "%s %s: %.2fs\n", s.Mode, s.Target, s.Elapsed.Seconds())
	fmt.Fprintf(w, "  published %d, confirmed %d, nacked %d, consumed %d", s.Published, s.Confirmed, s.Nacked, s.Consumed)
	if s.ExpectedConsumed >= 0 {
		fmt.Fprintf(w, " (expected %d)", s.ExpectedConsumed)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  publish %.0f msg/s (to the last confirm), consume %.0f msg/s (start to last delivery)\n", s.PublishRate, s.ConsumeRate)
	if l := s.ConfirmLatency; l.Count > 0 {
		fmt.Fprintf(w, "  confirm latency p50 %v p99 %v p99.9 %v max %v\n", l.P50, l.P99, l.P999, l.Max)
	}
	if l := s.Latency; l.Count > 0 {
		fmt.Fprintf(w, "  end-to-end latency p50 %v p99 %v p99.9 %v max %v\n", l.P50, l.P99, l.P999, l.Max)
	}
	if s.TimeToFirst > 0 {
		fmt.Fprintf(w, "  first delivery %v after t0\n", s.TimeToFirst)
	}
	if b := s.Broker; b != nil {
		fmt.Fprintf(w, "  broker pid %d: cpu %v (%v per message)", b.PID, b.CPU, b.CPUPerMessage)
		if b.HaveIO {
			fmt.Fprintf(w, ", wrote %d bytes (%.2f per published byte)", b.WriteBytes, b.WriteBytesPerByte)
		}
		fmt.Fprintln(w)
	}
}

func declare(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("warren-perf declare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	n := fs.Int("queues", 1000, "number of queues")
	prefix := fs.String("prefix", "perf-idle", "queue names are PREFIX-0 … PREFIX-(N-1)")
	qt := fs.String("queue-type", perf.QueueClassic, "classic, quorum or stream")
	del := fs.Bool("delete", false, "delete the queues instead")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := perf.DeclareQueues(ctx, *url, *prefix, *n, *qt, *del); err != nil {
		fmt.Fprintf(stderr, "warren-perf: %v\n", err)
		return 1
	}
	return 0
}

func report(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("warren-perf report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseline := fs.String("baseline", "warren", "target label the ratios are taken of (baseline/other)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var recs []perf.Record
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "warren-perf: %v\n", err)
			return 1
		}
		r, err := perf.ReadRecords(f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "warren-perf: %s: %v\n", name, err)
			return 1
		}
		recs = append(recs, r...)
	}
	if err := perf.Report(stdout, recs, *baseline); err != nil {
		fmt.Fprintf(stderr, "warren-perf: %v\n", err)
		return 1
	}
	return 0
}

func init() {
	// The stream client logs through a package-level logger.
	logs.SetLogger(newClientLogger(log.New(os.Stderr, "client: ", log.LstdFlags), false))
}
