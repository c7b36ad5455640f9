package mgmt

// register installs every endpoint. Paths are RabbitMQ's management API
// paths (https://www.rabbitmq.com/docs/http-api-reference).
func (s *Server) register() {
	s.registerOverview()
	s.registerAccess()
	s.registerQueues()
	s.registerExchanges()
	s.registerPolicies()
	s.registerStreams()
}

// connectionCounts counts the connections and channels the user may see.
// The connection registry arrives with the connections endpoints.
func (s *Server) connectionCounts(q *request) (connections, channels int) {
	return 0, 0
}
