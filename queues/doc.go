// Package queues is the broker's model, shared by the protocol front ends:
// virtual hosts, users and their permissions, and the catalog of streams,
// persisted in pebble; and the registry of open streams (package osiris)
// that the front ends publish to and read from.
//
// Catalog keys (values are JSON):
//
//	v/<vhost>                 VHost
//	u/<user>                  User (salted SHA-256 password hash)
//	p/<vhost> 0x00 <user>     Permissions (configure, write, read regexps)
//	s/<vhost> 0x00 <stream>   StreamDef (directory id and arguments)
//	n/stream-id               the last stream directory id handed out
//
// Every change is written with pebble.Sync before the call returns, so a
// protocol front end replies -ok only for what is on disk.
package queues
