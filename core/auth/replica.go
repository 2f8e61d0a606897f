package auth

// ReplicaDoc is a document of an auth plugin that slaves copy from their
// master, as they copy topics and offsets (ACL 2.0's users and policies):
// the replication module asks the master with a request of Code, without
// header or body, and hands the body of a SUCCESS answer to Apply on the
// slave (an empty body is an empty document).
type ReplicaDoc struct {
	Name  string
	Code  int32
	Apply func(body []byte) error
}

// Replicated is the optional interface of a plugin whose state slaves
// copy; the broker registers its documents for replication.
type Replicated interface {
	ReplicaDocs() []ReplicaDoc
}
