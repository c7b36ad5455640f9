// Package rabbitconf reads RabbitMQ's configuration file format, the
// sysctl-like rabbitmq.conf that RabbitMQ parses with cuttlefish, and
// knows RabbitMQ's keys and the forms its values take. What a key means
// to Warren is decided by the caller (tools/warren).
//
// # Syntax
//
// The grammar is cuttlefish's (conf_parse.peg of Kyorai/cuttlefish 3.7,
// the fork RabbitMQ ships), read the same way, as a PEG: alternatives are
// tried in order and the first that matches is kept, never revisited.
//
//	file     = line*
//	line     = (setting | comment | ws*) (crlf | eof)
//	setting  = ws* key ws* "=" ws* value ws* comment?
//	key      = word ("." word)*
//	word     = ("\." | [A-Za-z0-9_-])+        a \. is a dot inside the word
//	value    = "'''" <anything up to the next '''> "'''"
//	         | "'" <anything up to the next '> "'"
//	         | (!(ws* crlf | comment) <any character>)+
//	comment  = ws* "#" <anything up to crlf>
//	ws       = [ \t]+
//	crlf     = "\r"? "\n"
//
// What follows from it, and what RabbitMQ users meet:
//
//   - A line is blank, a comment, or one key = value; there are no
//     sections. Whitespace around the key, the = and the value does not
//     count.
//   - An unquoted value runs to the end of the line or to the first #,
//     which starts a comment even inside a word. Quotes inside an
//     unquoted value are kept as written.
//   - A value in single quotes is taken as is, # and all, without the
//     quotes. It cannot contain a single quote, and may span lines.
//     Nothing but whitespace and a comment may follow the closing quote.
//     A single quote that is never closed is an ordinary character.
//   - A value in triple single quotes (a here-document, new in
//     cuttlefish 3.6) may span lines and contain single quotes; the run
//     of newlines and single quotes next to either delimiter is removed
//     (cuttlefish trims "'", "\n" and "\r\n" from both ends), the rest,
//     indentation included, is kept.
//   - A value cannot be empty unless quoted: "key =" is malformed.
//   - Values must be valid UTF-8; keys are ASCII by the grammar.
//   - A key given twice keeps its first place in the file and takes the
//     last value, as cuttlefish's remove_duplicates does (later wins);
//     Entry.Line is then the line of the value kept.
//
// For example:
//
//	default_pass = a#b            # sets a
//	default_pass = 'a#b'          # sets a#b
//	default_pass = "a b"          # sets "a b", double quotes included
//	default_pass = ''             # sets the empty string
//	x = '''
//	    two lines, "kept"
//	    as written
//	'''
//
// A UTF-8 byte order mark at the start is skipped, as cuttlefish does.
// Refused, where cuttlefish would read other files or other encodings:
// "include <path>" lines, values of the form $(<path) (the value read
// from that file), and files in UTF-16 or UTF-32. One detail differs on
// purpose: cuttlefish keeps the spaces and tabs after an unquoted value
// on the file's last line when no line end follows; Parse trims them,
// as on every other line.
//
// # Values
//
// ParseBool, ParseInt, ParseBytesize, ParsePort, ParseIPPort and
// ParseListener read values as cuttlefish's datatypes do (boolean,
// integer, bytesize, ip) and as RabbitMQ's listener keys accept them.
//
// # RabbitMQ's keys
//
// Schema says which of RabbitMQ's applications (the broker, "rabbit", or
// a plugin shipped with it) defines a key, from the list of every key of
// RabbitMQ 4.3's schemas in rabbitmq_keys.txt. A caller uses it to tell
// a RabbitMQ key it does not act on from a key that is simply unknown.
package rabbitconf
