package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/queenmq/queen/engine/keyspace"
)

// Option names one per-queue option (docs/semantics.md §10). Its number is stored in
// queue records: part of the on-disk format — never change or reuse a value.
type Option uint8

// Queue options.
const (
	OptLeaseTime                 Option = 1  // seconds a pop's lease lasts
	OptRetryLimit                Option = 2  // failed acks tolerated before the terminal branch
	OptRetryDelay                Option = 3  // ms before a nacked partition redelivers to the group (docs/decisions.md B6)
	OptMaxSize                   Option = 4  // stored and echoed, not enforced (docs/semantics.md §3.5)
	OptTTL                       Option = 5  // stored and echoed, not enforced
	OptPriority                  Option = 6  // stored and echoed, not enforced
	OptDelayedProcessing         Option = 7  // seconds before a message is visible
	OptWindowBuffer              Option = 8  // seconds a partition must be quiet before it delivers
	OptRetentionSeconds          Option = 9  // retention of all segments (needs retentionEnabled)
	OptCompletedRetentionSeconds Option = 10 // retention of consumed segments (needs retentionEnabled)
	OptRetentionEnabled          Option = 11 // gates both retention rules
	OptEncryptionEnabled         Option = 12 // encrypt payloads at rest when a key is configured
	OptDeadLetterQueue           Option = 13 // dead-lettering on exhaustion (either flag enables it)
	OptDLQAfterMaxRetries        Option = 14 // dead-lettering on exhaustion (either flag enables it)
	OptMaxWaitTimeSeconds        Option = 15 // eviction age (docs/decisions.md C11: deletes, never dead-letters)
	OptDedupWindowSeconds        Option = 16 // cross-request dedup window; 0 disables the probe
	OptMaxDeliveries             Option = 17 // docs/decisions.md B5: dead-letter after this many deliveries; 0 = off
	numOptions                          = 18
)

// OptionKind says how an option is written on the wire.
type OptionKind uint8

// Option kinds.
const (
	KindInt OptionKind = iota
	KindBool
)

type optionSpec struct {
	name string
	kind OptionKind
	def  int64
}

var optionTable = [numOptions]optionSpec{
	OptLeaseTime:                 {"leaseTime", KindInt, 300},
	OptRetryLimit:                {"retryLimit", KindInt, 3},
	OptRetryDelay:                {"retryDelay", KindInt, 0},
	OptMaxSize:                   {"maxSize", KindInt, 0},
	OptTTL:                       {"ttl", KindInt, 3600},
	OptPriority:                  {"priority", KindInt, 0},
	OptDelayedProcessing:         {"delayedProcessing", KindInt, 0},
	OptWindowBuffer:              {"windowBuffer", KindInt, 0},
	OptRetentionSeconds:          {"retentionSeconds", KindInt, 0},
	OptCompletedRetentionSeconds: {"completedRetentionSeconds", KindInt, 0},
	OptRetentionEnabled:          {"retentionEnabled", KindBool, 0},
	OptEncryptionEnabled:         {"encryptionEnabled", KindBool, 0},
	OptDeadLetterQueue:           {"deadLetterQueue", KindBool, 1},
	OptDLQAfterMaxRetries:        {"dlqAfterMaxRetries", KindBool, 1},
	OptMaxWaitTimeSeconds:        {"maxWaitTimeSeconds", KindInt, 0},
	OptDedupWindowSeconds:        {"dedupWindowSeconds", KindInt, 3600},
	OptMaxDeliveries:             {"maxDeliveries", KindInt, 0},
}

// implicitLeaseTime is the lease of a queue created by a push rather than by
// configure (docs/semantics.md §5).
const implicitLeaseTime = 60

// AllOptions lists every option in wire order.
func AllOptions() []Option {
	opts := make([]Option, 0, numOptions-1)
	for o := Option(1); o < numOptions; o++ {
		opts = append(opts, o)
	}
	return opts
}

// OptionByName finds an option by its wire name.
func OptionByName(name string) (Option, bool) {
	for o := Option(1); o < numOptions; o++ {
		if optionTable[o].name == name {
			return o, true
		}
	}
	return 0, false
}

// Name returns the option's wire name.
func (o Option) Name() string { return optionTable[o].name }

// Kind returns how the option is written on the wire.
func (o Option) Kind() OptionKind { return optionTable[o].kind }

// Default returns the option's value on a queue created by configure.
func (o Option) Default() int64 { return optionTable[o].def }

// Config holds the effective value of every option of a queue.
type Config struct {
	values [numOptions]int64
}

// DefaultConfig returns the configuration of a queue created by configure.
func DefaultConfig() Config {
	var c Config
	for o := Option(1); o < numOptions; o++ {
		c.values[o] = optionTable[o].def
	}
	return c
}

func implicitConfig() Config {
	c := DefaultConfig()
	c.values[OptLeaseTime] = implicitLeaseTime
	return c
}

// Get returns an option's value (booleans are 0 or 1).
func (c Config) Get(o Option) int64 { return c.values[o] }

// Bool returns a boolean option's value.
func (c Config) Bool(o Option) bool { return c.values[o] != 0 }

// DeadLetterEnabled reports whether exhaustion dead-letters (either flag).
func (c Config) DeadLetterEnabled() bool {
	return c.Bool(OptDeadLetterQueue) || c.Bool(OptDLQAfterMaxRetries)
}

// MarshalJSON writes every option by its wire name, {"leaseTime": 300,
// ...}: how a Config crosses nodes in a read another node answers
// (raft's remote reads), exactly, since its values are unexported.
func (c Config) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, numOptions-1)
	for o := Option(1); o < numOptions; o++ {
		m[optionTable[o].name] = c.values[o]
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON wrote: an option not named is 0
// (as in the zero Config), a name it does not know (a newer node's
// option) is left out.
func (c *Config) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = Config{}
	for name, v := range m {
		if o, ok := OptionByName(name); ok {
			c.values[o] = v
		}
	}
	return nil
}

func (c Config) records() []keyspace.Option {
	out := make([]keyspace.Option, 0, numOptions-1)
	for o := Option(1); o < numOptions; o++ {
		out = append(out, keyspace.Option{Number: uint8(o), Value: c.values[o]})
	}
	return out
}

func configFromRecords(opts []keyspace.Option) Config {
	c := DefaultConfig()
	for _, o := range opts {
		if o.Number > 0 && int(o.Number) < numOptions {
			c.values[o.Number] = o.Value
		}
	}
	return c
}

// OptionValue is an explicit option value in a configure command.
type OptionValue struct {
	Option Option
	Value  int64
}

func validateOption(v OptionValue) error {
	if v.Option == 0 || int(v.Option) >= numOptions {
		return fmt.Errorf("%w: unknown option %d", ErrInvalid, v.Option)
	}
	switch v.Option.Kind() {
	case KindBool:
		if v.Value != 0 && v.Value != 1 {
			return fmt.Errorf("%w: %s must be a boolean", ErrInvalid, v.Option.Name())
		}
	default:
		if v.Value < 0 {
			return fmt.Errorf("%w: %s must not be negative", ErrInvalid, v.Option.Name())
		}
	}
	return nil
}

// impliedLabels derives namespace and task from a dotted queue name
// (docs/semantics.md §1.1): namespace is the text before the first dot, task the
// second dotted segment ("" without a dot).
func impliedLabels(name string) (namespace, task string) {
	namespace, rest, ok := strings.Cut(name, ".")
	if !ok {
		return namespace, ""
	}
	task, _, _ = strings.Cut(rest, ".")
	return namespace, task
}

// ValidateQueueName checks a queue name: 1 to 255 bytes of valid UTF-8 with
// no control characters. (The Go SDK itself restricts names to [A-Za-z0-9_.-];
// the broker stays as lenient as Queen.)
func ValidateQueueName(name string) error { return ValidateName("queue", name) }

// ValidateName checks a queue, partition or consumer group name: 1 to 255
// bytes of valid UTF-8 with no control characters.
func ValidateName(kind, name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("%w: %s name must be 1 to 255 bytes", ErrInvalid, kind)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalid, kind)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s name has a control character", ErrInvalid, kind)
		}
	}
	return nil
}
