package events

// AnonKey says which anonymization key the addresses that follow it were
// made with (docs/privacy.md): written when output starts and each time
// --anon-key-rotate starts a new key. It names the key by an identifier
// derived from it (anon.KeyID), never by the key itself.
type AnonKey struct {
	// Time is when the key came into use (Unix ns, or relative to the run
	// with --relative-time).
	Time int64
	// Scheme is the anonymization mode ("pfx", "cryptopan", "det").
	Scheme string
	// KeyID identifies the key; records between two AnonKey records were
	// anonymized with the same key.
	KeyID string
	// Rotated is false for the run's first key and true for the keys that
	// --anon-key-rotate started.
	Rotated bool
}
