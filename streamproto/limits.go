package streamproto

// Protocol limits and defaults.
const (
	// initialFrameMax caps frames until the connection is open, unless
	// Config.InitialFrameMax says otherwise.
	initialFrameMax = 8192
	// DefaultFrameMax and DefaultHeartbeat are offered in Tune.
	DefaultFrameMax  = 1048576
	DefaultHeartbeat = 60
	// initialPublishCredits is the connection's publish credit: one per
	// entry in flight. Reading stops at zero and resumes above
	// creditsRequiredForUnblocking.
	initialPublishCredits        = 50000
	creditsRequiredForUnblocking = 12500
	// maxPublishers and maxSubscriptions per connection (ids are u8).
	maxPublishers    = 256
	maxSubscriptions = 256
	// ServerVersion is the RabbitMQ version Warren reports, so clients
	// enable the features it implements.
	ServerVersion = "4.2.0"
)
