package wire

// Key is a command key. Responses set the top bit (ResponseBit).
type Key uint16

// These constants are part of the wire protocol and must not be changed.
const (
	KeyDeclarePublisher        Key = 0x0001 // corr, u8 publisherId, string reference, string stream
	KeyPublish                 Key = 0x0002 // u8 publisherId, i32 n, n*(u64 publishingId, [v2: string filter], entry)
	KeyPublishConfirm          Key = 0x0003 // u8 publisherId, [u64] publishingIds
	KeyPublishError            Key = 0x0004 // u8 publisherId, i32 n, n*(u64 publishingId, u16 code)
	KeyQueryPublisherSequence  Key = 0x0005 // corr, string reference, string stream -> code, u64 sequence
	KeyDeletePublisher         Key = 0x0006 // corr, u8 publisherId
	KeySubscribe               Key = 0x0007 // corr, u8 subId, string stream, u16 offsetType, [u64 offset], u16 credit, [map properties]
	KeyDeliver                 Key = 0x0008 // u8 subId, [v2: u64 committedChunkId], chunk
	KeyCredit                  Key = 0x0009 // u8 subId, i16 credit
	KeyStoreOffset             Key = 0x000a // string reference, string stream, u64 offset
	KeyQueryOffset             Key = 0x000b // corr, string reference, string stream -> code, u64 offset
	KeyUnsubscribe             Key = 0x000c // corr, u8 subId
	KeyCreate                  Key = 0x000d // corr, string stream, map arguments
	KeyDelete                  Key = 0x000e // corr, string stream
	KeyMetadata                Key = 0x000f // corr, [string] streams -> [broker], [stream metadata]
	KeyMetadataUpdate          Key = 0x0010 // u16 code, string stream
	KeyPeerProperties          Key = 0x0011 // corr, map -> code, map
	KeySaslHandshake           Key = 0x0012 // corr -> code, [string] mechanisms
	KeySaslAuthenticate        Key = 0x0013 // corr, string mechanism, bytes data -> code, [bytes challenge]
	KeyTune                    Key = 0x0014 // u32 frameMax, u32 heartbeat
	KeyOpen                    Key = 0x0015 // corr, string vhost -> code, map properties
	KeyClose                   Key = 0x0016 // corr, u16 code, string reason -> code
	KeyHeartbeat               Key = 0x0017 // (no fields)
	KeyRoute                   Key = 0x0018 // corr, string routingKey, string superStream -> code, [string] streams
	KeyPartitions              Key = 0x0019 // corr, string superStream -> code, [string] streams
	KeyConsumerUpdate          Key = 0x001a // corr, u8 subId, u8 active (server to client)
	KeyExchangeCommandVersions Key = 0x001b // corr, [u16 key, u16 min, u16 max]
	KeyStreamStats             Key = 0x001c // corr, string stream -> code, map string -> i64
	KeyCreateSuperStream       Key = 0x001d // corr, string name, [string] partitions, [string] bindingKeys, map args
	KeyDeleteSuperStream       Key = 0x001e // corr, string name
	KeyResolveOffsetSpec       Key = 0x001f // corr, string stream, u16 type, [u64 offset], map props -> code, u16 type, u64 offset

	// ResponseBit is set in the key of a response.
	ResponseBit Key = 0x8000
)

// No command key may carry the response bit.
const _ = uint(ResponseBit - 1 - KeyResolveOffsetSpec)

// ServerCommandVersions is what Warren's server answers to
// ExchangeCommandVersions: key, lowest and highest version it reads (for
// Deliver: sends). Read it; do not change it.
var ServerCommandVersions = [...][3]uint16{
	{uint16(KeyDeclarePublisher), 1, 1},
	{uint16(KeyPublish), 1, 2},
	{uint16(KeyQueryPublisherSequence), 1, 1},
	{uint16(KeyDeletePublisher), 1, 1},
	{uint16(KeySubscribe), 1, 1},
	{uint16(KeyDeliver), 1, 2},
	{uint16(KeyCredit), 1, 1},
	{uint16(KeyStoreOffset), 1, 1},
	{uint16(KeyQueryOffset), 1, 1},
	{uint16(KeyUnsubscribe), 1, 1},
	{uint16(KeyCreate), 1, 1},
	{uint16(KeyDelete), 1, 1},
	{uint16(KeyMetadata), 1, 1},
	{uint16(KeyClose), 1, 1},
	{uint16(KeyHeartbeat), 1, 1},
	{uint16(KeyExchangeCommandVersions), 1, 1},
	{uint16(KeyStreamStats), 1, 1},
	{uint16(KeyResolveOffsetSpec), 1, 1},
	{uint16(KeyRoute), 1, 1},
	{uint16(KeyPartitions), 1, 1},
	{uint16(KeyCreateSuperStream), 1, 1},
	{uint16(KeyDeleteSuperStream), 1, 1},
}

// Offset types of Subscribe, ResolveOffsetSpec and the ConsumerUpdate
// response. These are part of the wire protocol.
const (
	OffsetTypeNone      = 0 // ConsumerUpdate response: keep the Subscribe spec
	OffsetTypeFirst     = 1
	OffsetTypeLast      = 2
	OffsetTypeNext      = 3
	OffsetTypeOffset    = 4 // followed by u64 offset
	OffsetTypeTimestamp = 5 // followed by i64 Unix milliseconds
)
