package wire

import "github.com/warren-mq/warren/internal/amqptab"

// Table is an AMQP field table: method arguments, the headers property,
// connection properties. The codec is internal/amqptab's (ReadTable,
// AppendTable, ScanTable, ...), which documents the Go types of the
// values; the generated method structs name it Table.
type Table = amqptab.Table
