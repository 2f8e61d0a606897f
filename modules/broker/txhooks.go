package broker

import (
	"net/netip"

	"github.com/quivermq/quiver/core/remoting"
)

// Accessors for modules that extend the broker (transactions): they read
// broker state without reaching into its tables.

// ProducerPeers lists the live connections of a producer group, as known
// from heartbeats, in no particular order. A connection that closes or
// falls silent for broker.client_expiry leaves the list.
func (b *Broker) ProducerPeers(group string) []*remoting.Peer {
	return b.clients.producerPeers(group)
}

// StoreHost is the address written into stored messages and their
// offsetMsgIds.
func (b *Broker) StoreHost() netip.AddrPort { return b.storeHost }

// LoadMeta decodes the small JSON state document name (kept in the store
// when it implements store.Metadata, else under the data directory) into
// into; it reports false when the document does not exist.
func (b *Broker) LoadMeta(name string, into any) (bool, error) {
	return b.topics.meta.load(name, into)
}

// SaveMeta persists v as the state document name.
func (b *Broker) SaveMeta(name string, v any) error {
	return b.topics.meta.save(name, v)
}
