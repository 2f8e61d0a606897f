package auth

// ReplicaDoc is a document of an auth plugin that slaves copy from their
// master, as they copy topics and offsets (ACL 2.0's users and policies):
// the replication module asks the master with a request of Code, without
// header or body, and hands the body of a SUCCESS answer to Apply on the
// slave (an empty body is an empty document).
//
// Version and Watch, when set, let a slave copy the document as soon as it
// changes instead of every ha.meta_interval: Version is a cheap read that
// changes with each change of the document, and Watch registers a
// function (that does not block) to run after each change.
type ReplicaDoc struct {
	Name    string
	Code    int32
	Apply   func(body []byte) error
	Version func() int64
	Watch   func(changed func())
}

// Replicated is the optional interface of a plugin whose state slaves
// copy; the broker registers its documents for replication.
type Replicated interface {
	ReplicaDocs() []ReplicaDoc
}
