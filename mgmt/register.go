package mgmt

// register installs every endpoint. Paths are RabbitMQ's management API
// paths (https://www.rabbitmq.com/docs/http-api-reference).
func (s *Server) register() {
	s.registerOverview()
	s.registerAccess()
	s.registerLimits()
	s.registerQueues()
	s.registerExchanges()
	s.registerPolicies()
	s.registerStreams()
	s.registerConnections()
	s.registerDefinitions()
}
