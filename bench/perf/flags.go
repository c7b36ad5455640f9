package perf

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BindCommonFlags defines the flags every mode shares on fs, writing into c.
func BindCommonFlags(fs *flag.FlagSet, c *Common) {
	fs.IntVar(&c.Producers, "producers", 1, "number of producers, each on its own connection (0: consume only)")
	fs.IntVar(&c.Consumers, "consumers", 1, "number of consumers, each on its own connection (0: publish only)")
	fs.IntVar(&c.Size, "size", 100, "message body size in bytes (>= 8 carries the send time for latency)")
	fs.IntVar(&c.Count, "count", 0, "messages per producer (consume-only: per consumer); 0 = no limit")
	fs.DurationVar(&c.Duration, "duration", 0, "stop publishing (consume-only: consuming) after this long")
	fs.Float64Var(&c.Rate, "rate", 0, "messages per second per producer; 0 = as fast as possible")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 60*time.Second, "how long consumers may take to catch up after publishing")
	fs.DurationVar(&c.StallTimeout, "stall-timeout", 30*time.Second, "fail when no confirm or delivery arrives for this long")
	fs.DurationVar(&c.SetupTimeout, "setup-timeout", 30*time.Second, "bound on connecting and declaring")
	fs.DurationVar(&c.WaitReady, "wait-ready", 0, "retry connecting and subscribing for up to this long (restart measurements)")
	fs.Func("t0", "measure time_to_first from this Unix time in nanoseconds (default: the run's start)", func(s string) error {
		ns, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		c.T0 = time.Unix(0, ns)
		return nil
	})
	fs.Func("broker-pid", "broker process id or pid file: report its CPU and disk writes (/proc)", func(s string) error {
		pid, err := ResolvePID(s)
		c.BrokerPID = pid
		return err
	})
	fs.BoolVar(&c.Keep, "keep", false, "keep the streams, queues and exchanges the run declared")
	fs.Func("label", "key=value[,key=value...] copied into the summary (scenario=...,target=...)", func(s string) error {
		labels, err := ParseLabels(s)
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for k, v := range labels {
			c.Labels[k] = v
		}
		return err
	})
}

// BindStreamFlags defines the stream mode's flags on fs. After fs.Parse,
// call FinishStreamFlags.
func BindStreamFlags(fs *flag.FlagSet, c *StreamConfig) {
	BindCommonFlags(fs, &c.Common)
	fs.IntVar(&c.ConfirmWindow, "confirm", DefaultStreamConfirmWindow, "unconfirmed messages per producer")
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:5552", "broker host:port (all connections go there)")
	fs.BoolVar(&c.TLS, "tls", false, "connect over TLS (rabbitmq-stream+tls; SSL_CERT_FILE=ca.pem trusts a private CA)")
	fs.StringVar(&c.User, "user", "guest", "user")
	fs.StringVar(&c.Password, "password", "guest", "password")
	fs.StringVar(&c.Vhost, "vhost", "/", "virtual host")
	fs.StringVar(&c.Stream, "stream", "perf-stream", "stream (or super stream) name")
	fs.BoolVar(&c.SuperStream, "super-stream", false, "use a super stream of -partitions partitions")
	fs.IntVar(&c.Partitions, "partitions", 3, "partitions of the super stream")
	fs.IntVar(&c.BatchSize, "batch", 100, "messages per publish call")
	fs.IntVar(&c.SubEntrySize, "sub-entry", 1, "messages per sub-entry (> 1 turns sub-entry batching on)")
	fs.StringVar(&c.Compression, "compression", "none", "sub-entry compression: "+strings.Join(Compressions, ", "))
	fs.StringVar(&c.Offset, "offset", "first", "consumer start: first, last, next, offset:N, timestamp:UNIXMILLIS")
	fs.Func("filter-values", "comma-separated filter values producers tag messages with (round robin)", func(s string) error {
		c.FilterValues = splitList(s)
		return nil
	})
	fs.Func("consumer-filter", "comma-separated filter values consumers ask for", func(s string) error {
		c.ConsumerFilter = splitList(s)
		return nil
	})
	fs.StringVar(&c.ProducerName, "producer-name", "", "name producers NAME-i (turns on deduplication)")
	fs.Int64Var(&c.MaxSegmentSize, "max-segment-size", 0, "x-stream-max-segment-size-bytes of declared streams")
	fs.IntVar(&c.Credits, "credits", 10, "initial credits per consumer")
	fs.StringVar(&c.Client, "client", ClientGo, "stream client: go (rabbitmq-stream-go-client) or lean (bench/leanstream)")
	fs.BoolVar(&c.Recreate, "recreate", true, "delete and declare the stream before publishing (only with producers)")
}

// FinishStreamFlags applies what depends on several flags.
func FinishStreamFlags(c *StreamConfig) {
	c.Recreate = c.Recreate && c.Producers > 0
	if c.Recreate && c.Producers > 0 && c.Consumers == 0 {
		// Publish-only runs usually feed a later replay: the run keeps
		// its stream unless the stream is recreated with consumers.
		c.Keep = true
	}
}

// BindAMQPFlags defines the AMQP mode's flags on fs.
func BindAMQPFlags(fs *flag.FlagSet, c *AMQPConfig) {
	BindCommonFlags(fs, &c.Common)
	fs.IntVar(&c.ConfirmWindow, "confirm", 0, "unconfirmed messages per producer; 0 = no publisher confirms")
	fs.StringVar(&c.URL, "url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL (amqps:// for TLS; SSL_CERT_FILE=ca.pem trusts a private CA)")
	fs.StringVar(&c.QueueType, "queue-type", QueueClassic, "classic, quorum or stream")
	fs.IntVar(&c.Queues, "queues", 1, "queues; above 1 they are bound to a fanout exchange (fan-out)")
	fs.StringVar(&c.Queue, "queue", "", "queue name (prefix with -queues > 1); default a unique name")
	fs.BoolVar(&c.Persistent, "persistent", false, "publish persistent messages (delivery mode 2)")
	fs.IntVar(&c.Prefetch, "prefetch", 1000, "basic.qos prefetch per consumer (0: unlimited, with -autoack)")
	fs.IntVar(&c.MultiAckEvery, "multi-ack-every", 1, "ack with multiple=true every N messages")
	fs.BoolVar(&c.AutoAck, "autoack", false, "consume without acks")
	fs.StringVar(&c.Client, "client", ClientGo, "amqp client of producers and consumers: go (amqp091-go), lean (bench/leanamqp) or amqp10 (go-amqp, AMQP 1.0)")
	fs.StringVar(&c.AMQP10Address, "amqp10-address", "v2", "AMQP 1.0 address format with -client amqp10: v2 (/queues/q) or v1 (RabbitMQ 3.x: /amq/queue/q)")
}

// ParseLabels parses "k=v,k2=v2".
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range splitList(s) {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return out, fmt.Errorf("%w: label %q: want key=value", ErrConfig, item)
		}
		out[k] = v
	}
	return out, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
