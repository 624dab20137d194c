package replay

import "github.com/walcast/walcast/internal/defaults"

// The zero value of every field of ServerConfig and ClientConfig means
// its default (DefaultServerConfig and DefaultClientConfig show them).
// Where zero was a setting of its own, a negative value asks for it:
// ServerConfig.MaxConns < 0 is no cap, ClientConfig.RetryBudget < 0 is no
// retry, ClientConfig.Jitter < 0 is no jitter (KeepAlive < 0 already
// turned keepalive off).

func (c ServerConfig) withDefaults() ServerConfig {
	d := DefaultServerConfig()
	c.HandshakeTimeout = defaults.Or(c.HandshakeTimeout, d.HandshakeTimeout)
	c.WriteTimeout = defaults.Or(c.WriteTimeout, d.WriteTimeout)
	c.BufferBytes = defaults.Or(c.BufferBytes, d.BufferBytes)
	c.ReadBufferBytes = defaults.Or(c.ReadBufferBytes, d.ReadBufferBytes)
	c.KeepaliveInterval = defaults.Or(c.KeepaliveInterval, d.KeepaliveInterval)
	c.MaxConns = defaults.Off(c.MaxConns, d.MaxConns)
	return c
}

func (c ClientConfig) withDefaults() ClientConfig {
	d := DefaultClientConfig()
	c.TipInterval = defaults.Or(c.TipInterval, d.TipInterval)
	c.ConnectTimeout = defaults.Or(c.ConnectTimeout, d.ConnectTimeout)
	c.ReadTimeout = defaults.Or(c.ReadTimeout, d.ReadTimeout)
	c.IdleTimeout = defaults.Or(c.IdleTimeout, d.IdleTimeout)
	c.KeepAlive = defaults.Or(c.KeepAlive, d.KeepAlive)
	if len(c.Backoff) == 0 {
		c.Backoff = d.Backoff
	}
	c.Jitter = defaults.Off(c.Jitter, d.Jitter)
	c.RetryBudget = defaults.Off(c.RetryBudget, d.RetryBudget)
	c.BufferBytes = defaults.Or(c.BufferBytes, d.BufferBytes)
	return c
}
