package streambench

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("streambench: invalid config")

// headerSize is the fixed part of a message body: send time and sequence.
const headerSize = 16

// Config describes one workload against one broker. The zero value of every
// field but Addr means "the default" (see ensureDefaults).
type Config struct {
	// Addr is the host:port of a stream-protocol broker. Every connection
	// goes there, whatever host the broker advertises.
	Addr string `json:"addr"`
	// User and Password are the PLAIN credentials; default guest/guest.
	// The password is left out of JSON.
	User     string `json:"user"`
	Password string `json:"-"`
	// Vhost is the virtual host; default "/".
	Vhost string `json:"vhost"`
	// Stream is the stream to publish to and replay; default "streambench".
	Stream string `json:"stream"`
	// Messages is the number of messages published in total (across all
	// producers) and the number RunReplay reads; default DefaultMessages.
	Messages int `json:"messages"`
	// MessageSize is the body size in bytes, at least 16; default
	// DefaultMessageSize.
	MessageSize int `json:"message_size"`
	// Producers is the number of producers, each on its own connection;
	// default 1.
	Producers int `json:"producers"`
	// BatchSize is the number of messages per BatchSend call, which the
	// client writes as one publish frame; default DefaultBatchSize.
	BatchSize int `json:"batch_size"`
	// SubEntrySize, when above 1, makes each producer pack that many
	// messages into one sub-entry (one publishing id, uncompressed), the
	// client-side batching RabbitMQ stores as one entry; default 1 (off).
	SubEntrySize int `json:"sub_entry_size"`
	// MaxInFlight is the number of unconfirmed messages each producer may
	// have outstanding; default DefaultMaxInFlight. It is raised to
	// BatchSize if smaller.
	MaxInFlight int `json:"max_in_flight"`
	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF on every connection. Zero
	// means the harness default, -1 leaves the kernel's autotuning alone, a
	// positive value is used as is (the client's own default is 8 KiB).
	SocketBuffer int `json:"socket_buffer"`
	// InitialCredits is the consumer's initial credit (chunks the broker
	// may send before the client asks for more); default
	// DefaultInitialCredits, the client's.
	InitialCredits int `json:"initial_credits"`
	// SkipCRC turns off the client's per-chunk CRC check on replay (on by
	// default, as in the client).
	SkipCRC bool `json:"skip_crc"`
	// SetupTimeout bounds connecting and creating producers and consumers;
	// default 30 s.
	SetupTimeout time.Duration `json:"setup_timeout_ns"`
	// StallTimeout fails a run when no confirm or message arrives for that
	// long; default 30 s.
	StallTimeout time.Duration `json:"stall_timeout_ns"`
}

// Defaults for the zero Config fields. BatchSize and MaxInFlight are the
// best single-producer settings found against RabbitMQ 3.10 on a 2-core
// machine (see bench/README.md): a larger window only queues inside the
// broker, which lowers throughput and multiplies confirm latency.
const (
	DefaultMessages       = 100_000
	DefaultMessageSize    = 100
	DefaultBatchSize      = 200
	DefaultMaxInFlight    = 2_000
	DefaultInitialCredits = 10
	// DefaultSocketBuffer is -1, the kernel's autotuning. The client's own
	// 8 KiB default is below the loopback MSS (about 64 KiB), which stalls
	// TCP: against RabbitMQ it gave 9k msgs/s publish with 1 s confirm
	// latency and under 1k msgs/s replay.
	DefaultSocketBuffer = -1
)

// ensureDefaults returns a copy of c with zero fields filled in.
func (c Config) ensureDefaults() Config {
	if c.User == "" {
		c.User = "guest"
	}
	if c.Password == "" {
		c.Password = "guest"
	}
	if c.Vhost == "" {
		c.Vhost = "/"
	}
	if c.Stream == "" {
		c.Stream = "streambench"
	}
	if c.Messages == 0 {
		c.Messages = DefaultMessages
	}
	if c.MessageSize == 0 {
		c.MessageSize = DefaultMessageSize
	}
	if c.Producers == 0 {
		c.Producers = 1
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SubEntrySize == 0 {
		c.SubEntrySize = 1
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.BatchSize > 0 && c.MaxInFlight < c.BatchSize {
		c.MaxInFlight = c.BatchSize
	}
	if c.SocketBuffer == 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.InitialCredits == 0 {
		c.InitialCredits = DefaultInitialCredits
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = 30 * time.Second
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 30 * time.Second
	}
	return c
}

// validate checks a defaulted Config.
func (c Config) validate() error {
	if _, _, err := splitAddr(c.Addr); err != nil {
		return err
	}
	switch {
	case c.Messages < 0:
		return fmt.Errorf("%w: Messages %d < 0", ErrConfig, c.Messages)
	case c.MessageSize < headerSize:
		return fmt.Errorf("%w: MessageSize %d < %d", ErrConfig, c.MessageSize, headerSize)
	case c.Producers < 1 || c.Producers > 254:
		return fmt.Errorf("%w: Producers %d not in [1, 254]", ErrConfig, c.Producers)
	case c.BatchSize < 1:
		return fmt.Errorf("%w: BatchSize %d < 1", ErrConfig, c.BatchSize)
	case c.SubEntrySize < 1:
		return fmt.Errorf("%w: SubEntrySize %d < 1", ErrConfig, c.SubEntrySize)
	case c.MaxInFlight < 1:
		return fmt.Errorf("%w: MaxInFlight %d < 1", ErrConfig, c.MaxInFlight)
	case c.SocketBuffer < -1:
		return fmt.Errorf("%w: SocketBuffer %d < -1", ErrConfig, c.SocketBuffer)
	case c.InitialCredits < 1 || c.InitialCredits > 1<<15-1:
		return fmt.Errorf("%w: InitialCredits %d not in [1, 32767]", ErrConfig, c.InitialCredits)
	case c.SetupTimeout < 0 || c.StallTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	return nil
}

// splitAddr splits host:port with a numeric port.
func splitAddr(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: Addr %q: %v", ErrConfig, addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: Addr %q: bad port", ErrConfig, addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%w: Addr %q: empty host", ErrConfig, addr)
	}
	return host, port, nil
}

// environmentOptions builds the client's options for a defaulted, valid c:
// one broker at c.Addr, and an AddressResolver pointing at the same address
// so producers and consumers connect there too.
func (c Config) environmentOptions() *stream.EnvironmentOptions {
	host, port, _ := splitAddr(c.Addr)
	opts := stream.NewEnvironmentOptions().
		SetHost(host).
		SetPort(port).
		SetUser(c.User).
		SetPassword(c.Password).
		SetVHost(c.Vhost).
		SetAddressResolver(stream.AddressResolver{Host: host, Port: port}).
		SetRPCTimeout(c.SetupTimeout)
	switch {
	case c.SocketBuffer > 0:
		opts.SetWriteBuffer(c.SocketBuffer).SetReadBuffer(c.SocketBuffer)
	case c.SocketBuffer == -1:
		// The client only calls SetWriteBuffer/SetReadBuffer for values > 0.
		opts.SetWriteBuffer(0).SetReadBuffer(0)
	}
	return opts
}
