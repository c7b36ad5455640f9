package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

// Config is the daemon's configuration: flags, or a JSON file given with
// -config (flags given explicitly win over the file).
type Config struct {
	DataDir         string `json:"data_dir"`
	AMQPListen      string `json:"amqp_listen"`
	StreamListen    string `json:"stream_listen"`
	StreamAdvertise string `json:"stream_advertise"` // default localhost:<stream port>
	// FrameMax and Heartbeat (seconds) are offered to stream clients.
	FrameMax  uint32 `json:"frame_max"`
	Heartbeat uint32 `json:"heartbeat"`
	// AMQPFrameMax, AMQPChannelMax and AMQPHeartbeat (seconds) are offered
	// in connection.tune; 0 means RabbitMQ's defaults (131072, 2047, 60).
	AMQPFrameMax   uint32 `json:"amqp_frame_max"`
	AMQPChannelMax uint16 `json:"amqp_channel_max"`
	AMQPHeartbeat  uint16 `json:"amqp_heartbeat"`
	// DenyTransientNonExclusive refuses durable=false exclusive=false
	// queues as RabbitMQ 4.3 does (off: the ≤4.2 behaviour).
	DenyTransientNonExclusive bool `json:"deny_transient_nonexclusive_queues"`
	// RetentionInterval is how often stream retention runs besides on
	// segment roll (a Go duration such as "1m").
	RetentionInterval string `json:"retention_interval"`
	LogLevel          string `json:"log_level"` // debug, info, warn, error
	// DebugListen, when set, serves Go's runtime profiles
	// (/debug/pprof/...) over HTTP on that address. Off by default; bind
	// it to loopback: profiles reveal internals and cost CPU while taken.
	DebugListen string `json:"debug_listen"`
}

func defaults() Config {
	return Config{
		DataDir:           "warren-data",
		AMQPListen:        ":5672",
		StreamListen:      ":5552",
		RetentionInterval: "1m",
		LogLevel:          "info",
	}
}

// bindFlags registers the flags onto cfg.
func bindFlags(fs *flag.FlagSet, cfg *Config) *string {
	configFile := fs.String("config", "", "JSON configuration file (flags given explicitly override it)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for all broker data")
	fs.StringVar(&cfg.AMQPListen, "amqp-listen", cfg.AMQPListen, "AMQP 0-9-1 listen address (empty: off)")
	fs.StringVar(&cfg.StreamListen, "stream-listen", cfg.StreamListen, "stream protocol listen address (empty: off)")
	fs.StringVar(&cfg.StreamAdvertise, "stream-advertise", cfg.StreamAdvertise, "host:port stream clients are told to connect to (default localhost:<stream port>)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	fs.StringVar(&cfg.DebugListen, "debug-listen", cfg.DebugListen, "address for Go profiles over HTTP at /debug/pprof/ (empty: off; use loopback)")
	return configFile
}

// parseFlags reads the flags and, with -config, the file under them.
func parseFlags(args []string) (Config, error) {
	cfg := defaults()
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	configFile := bindFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *configFile == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(*configFile)
	if err != nil {
		return cfg, err
	}
	fileCfg := defaults()
	if err := json.Unmarshal(b, &fileCfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", *configFile, err)
	}
	// Parse again onto the file's values: only flags given explicitly
	// change them.
	fs = flag.NewFlagSet("warren", flag.ContinueOnError)
	bindFlags(fs, &fileCfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return fileCfg, nil
}
