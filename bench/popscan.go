package bench

import (
	"bytes"
	"errors"
)

// A pop reply carries every message's payload; the driver needs only three
// strings per message to ack it. popScan reads them without decoding the
// rest: a small JSON scanner that skips values it does not need, so the
// driver spends little CPU per delivered byte. Strings are kept raw (still
// escaped), which is what an ack body re-embeds.

var errPopReply = errors.New("bench: malformed pop reply")

// poppedMessage is one delivered message's ack address, as raw JSON string
// contents (slices into the reply body).
type poppedMessage struct {
	transactionID, partitionID, leaseID []byte
}

// popReply is the part of a pop reply the driver reads.
type popReply struct {
	leaseID  []byte
	messages []poppedMessage
}

// scanPop reads body into r, reusing r's slice. An empty body is an empty
// reply.
func scanPop(body []byte, r *popReply) error {
	r.leaseID = nil
	r.messages = r.messages[:0]
	s := jsonScan{b: body}
	if s.ws() == 0 {
		return nil
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "leaseId":
			v, err := s.optString()
			r.leaseID = v
			return err
		case "messages":
			if s.ws() != '[' {
				return s.skip()
			}
			return s.array(func() error {
				var m poppedMessage
				if s.ws() != '{' {
					return errPopReply
				}
				err := s.object(func(key []byte) error {
					var err error
					switch string(key) {
					case "transactionId":
						m.transactionID, err = s.optString()
					case "partitionId":
						m.partitionID, err = s.optString()
					case "leaseId":
						m.leaseID, err = s.optString()
					default:
						err = s.skip()
					}
					return err
				})
				r.messages = append(r.messages, m)
				return err
			})
		}
		return s.skip()
	})
}

// jsonScan walks a JSON document; it checks structure only as far as it
// needs to find its way.
type jsonScan struct {
	b []byte
	i int
}

// ws skips white space and returns the next byte (0 at the end).
func (s *jsonScan) ws() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// str reads a string and returns its raw contents.
func (s *jsonScan) str() ([]byte, error) {
	if s.ws() != '"' {
		return nil, errPopReply
	}
	start := s.i + 1
	for j := start; ; j++ {
		k := bytes.IndexByte(s.b[j:], '"')
		if k < 0 {
			return nil, errPopReply
		}
		j += k
		escapes := 0
		for p := j - 1; p >= start && s.b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			s.i = j + 1
			return s.b[start:j], nil
		}
	}
}

// optString reads a string, or null as nil.
func (s *jsonScan) optString() ([]byte, error) {
	if s.ws() == 'n' {
		return nil, s.skip()
	}
	return s.str()
}

// object reads an object, calling member for each key with the scanner at
// the value; member must consume the value.
func (s *jsonScan) object(member func(key []byte) error) error {
	if s.ws() != '{' {
		return errPopReply
	}
	s.i++
	if s.ws() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.ws() != ':' {
			return errPopReply
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.ws() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errPopReply
		}
	}
}

// array reads an array, calling elem with the scanner at each element.
func (s *jsonScan) array(elem func() error) error {
	if s.ws() != '[' {
		return errPopReply
	}
	s.i++
	if s.ws() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.ws() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errPopReply
		}
	}
}

// skip passes over one value of any kind.
func (s *jsonScan) skip() error {
	switch s.ws() {
	case '"':
		_, err := s.str()
		return err
	case '{', '[':
		depth := 0
		for {
			k := bytes.IndexAny(s.b[s.i:], `"{}[]`)
			if k < 0 {
				return errPopReply
			}
			s.i += k
			switch s.b[s.i] {
			case '"':
				if _, err := s.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
	case 0:
		return errPopReply
	default: // number, true, false, null
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if s.i == start {
					return errPopReply
				}
				return nil
			}
			s.i++
		}
		return nil
	}
}
