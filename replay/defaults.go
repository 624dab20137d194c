package replay

// The zero value of every field of ServerConfig and ClientConfig means
// its default (DefaultServerConfig and DefaultClientConfig show them).
// Where zero was a setting of its own, a negative value asks for it:
// ServerConfig.MaxConns < 0 is no cap, ClientConfig.RetryBudget < 0 is no
// retry, ClientConfig.Jitter < 0 is no jitter (KeepAlive < 0 already
// turned keepalive off).

func (c ServerConfig) withDefaults() ServerConfig {
	d := DefaultServerConfig()
	c.HandshakeTimeout = or(c.HandshakeTimeout, d.HandshakeTimeout)
	c.WriteTimeout = or(c.WriteTimeout, d.WriteTimeout)
	c.BufferBytes = or(c.BufferBytes, d.BufferBytes)
	c.KeepaliveInterval = or(c.KeepaliveInterval, d.KeepaliveInterval)
	c.MaxConns = orOff(c.MaxConns, d.MaxConns)
	return c
}

func (c ClientConfig) withDefaults() ClientConfig {
	d := DefaultClientConfig()
	c.TipInterval = or(c.TipInterval, d.TipInterval)
	c.ConnectTimeout = or(c.ConnectTimeout, d.ConnectTimeout)
	c.ReadTimeout = or(c.ReadTimeout, d.ReadTimeout)
	c.IdleTimeout = or(c.IdleTimeout, d.IdleTimeout)
	c.KeepAlive = or(c.KeepAlive, d.KeepAlive)
	if len(c.Backoff) == 0 {
		c.Backoff = d.Backoff
	}
	c.Jitter = orOff(c.Jitter, d.Jitter)
	c.RetryBudget = orOff(c.RetryBudget, d.RetryBudget)
	c.BufferBytes = or(c.BufferBytes, d.BufferBytes)
	return c
}

// or is v, or def when v is zero.
func or[T ~int | ~int64 | ~float64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// orOff is def for zero, 0 for a negative v ("off"), else v.
func orOff[T ~int | ~int64 | ~float64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
