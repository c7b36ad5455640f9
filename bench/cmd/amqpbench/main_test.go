package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/bench/amqpbench"
)

func TestParseFlags(t *testing.T) {
	cfg, opts, err := parseFlags([]string{
		"-targets", "warren=amqp://guest:guest@127.0.0.1:5672/,rabbitmq=amqp://guest:guest@127.0.0.1:15673/",
		"-scenario", "classic-1p1c,fanout", "-size", "16,1024", "-short", "-pids", "warren=42",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Count != 2000 || opts.pairs != 1 {
		t.Errorf("-short: count %d pairs %d, want 2000, 1", cfg.Count, opts.pairs)
	}
	if len(opts.targets) != 2 || opts.targets[0].Name != "warren" || opts.pids["warren"] != 42 {
		t.Errorf("targets %+v pids %v", opts.targets, opts.pids)
	}
	if strings.Join(opts.scenarios, ",") != "classic-1p1c,fanout" || len(opts.sizes) != 2 || opts.sizes[1] != 1024 {
		t.Errorf("scenarios %v sizes %v", opts.scenarios, opts.sizes)
	}

	_, opts, err = parseFlags([]string{"-scenario", "all", "-short", "-count", "500", "-pairs", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.scenarios) != 3 || opts.pairs != 2 || opts.targets[0].Name != "127.0.0.1:5672" {
		t.Errorf("all: %+v", opts)
	}

	for _, args := range [][]string{
		{"-scenario", "nope"},
		{"-size", "x"},
		{"-pairs", "0"},
		{"-pids", "other=1"},
		{"-targets", "a=127.0.0.1:5672"},
		{"stray"},
	} {
		if _, _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

func TestSummarize(t *testing.T) {
	c := benchCase{Scenario: amqpbench.ScenarioClassic1p1c, MessageSize: 16}
	q := benchCase{Scenario: amqpbench.ScenarioQuorum1p1c, MessageSize: 16}
	res := func(pub, e2e float64, cpu time.Duration) amqpbench.Result {
		return amqpbench.Result{PublishMsgsPerSec: pub, EndToEndMsgsPerSec: e2e, DeliveredMsgsPerSec: e2e,
			BrokerStats: true, BrokerCPUPerMsg: cpu, Queues: 1}
	}
	rep := report{
		Targets: []amqpbench.Target{{Name: "a"}, {Name: "b"}},
		Pairs:   3,
		Cases:   []benchCase{c, q},
		Runs: []runRecord{
			{Case: c, Pair: 1, Target: "a", Result: res(100, 90, 10)},
			{Case: c, Pair: 1, Target: "b", Result: res(50, 45, 20)},
			{Case: c, Pair: 2, Target: "a", Result: res(300, 270, 10)},
			{Case: c, Pair: 2, Target: "b", Result: res(50, 45, 20)},
			{Case: c, Pair: 3, Target: "a", Result: res(200, 180, 10)},
			{Case: c, Pair: 3, Target: "b", Result: res(1, 1, 1), Error: "boom"},
			{Case: q, Pair: 1, Target: "a", Error: "declare refused", Refused: true},
			{Case: q, Pair: 1, Target: "b", Result: res(10, 10, 1)},
		},
	}
	rep.summarize()
	if len(rep.Medians) != 4 {
		t.Fatalf("medians %+v", rep.Medians)
	}
	a, b := rep.Medians[0], rep.Medians[1]
	if a.Runs != 3 || a.PublishMsgsPerSec != 200 || b.Runs != 2 || b.PublishMsgsPerSec != 50 {
		t.Errorf("medians a %+v b %+v", a, b)
	}
	if rep.Medians[2].Runs != 0 || rep.Medians[2].Refused == "" {
		t.Errorf("refused median %+v", rep.Medians[2])
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].Publish != 4 || rep.Ratios[0].EndToEnd != 4 || rep.Ratios[0].BrokerCPUPerMsg != 0.5 {
		t.Errorf("ratios %+v", rep.Ratios)
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{"ratio a/b classic-1p1c 16B", "publish 4.00x", "no median for quorum-1p1c 16B a"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("json: %v", err)
	}
}
