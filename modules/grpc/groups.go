package grpc

import (
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/grpcapi"
)

// A consumer group is consumed either by 4.x clients (offsets, pulls) or by
// 5.x clients (the pop state), never both at once: the two move
// separately, so each message would be consumed twice. The broker refuses
// a group held by live 5.x consumers to 4.x heartbeats and pulls (the
// claim below, installed on Start), and ReceiveMessage refuses a group
// with connected 4.x consumers (mixedGroup).

// claimRefresh bounds how stale the claim's index of 5.x consumer groups
// is: it is rebuilt from the clients table at most this often, so a 4.x
// pull pays a map lookup, not a walk of the table.
const claimRefresh = time.Second

type claimIndex struct {
	built  time.Time
	groups map[string]string // group -> a client id holding it
}

// claim is the broker.GroupClaim of this endpoint: group is held while a
// 5.x consumer that declared it in its settings is alive.
func (s *Server) claim(group string) (string, bool) {
	idx := s.claims.Load()
	if idx == nil || time.Since(idx.built) > claimRefresh {
		idx = s.buildClaims()
	}
	id, ok := idx.groups[group]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("client %s", id), true
}

func (s *Server) buildClaims() *claimIndex {
	now := time.Now()
	idx := &claimIndex{built: now, groups: map[string]string{}}
	s.mu.Lock()
	for _, c := range s.clients {
		if now.Sub(c.seen) > clientExpiry || c.settings == nil {
			continue
		}
		switch c.settings.GetClientType() {
		case grpcapi.ClientType_PUSH_CONSUMER, grpcapi.ClientType_SIMPLE_CONSUMER:
		default:
			continue
		}
		if g := c.settings.GetSubscription().GetGroup().GetName(); g != "" {
			idx.groups[g] = c.id
		}
	}
	s.mu.Unlock()
	s.claims.Store(idx)
	return idx
}

// mixedGroup is the refusal of a 5.x consumer's group that 4.x consumers
// of this broker are connected with, or nil.
func (s *Server) mixedGroup(group string) *grpcapi.Status {
	if !s.b.HasRemotingConsumers(group) {
		return nil
	}
	return status(grpcapi.Code_FORBIDDEN, fmt.Sprintf("consumer group %s is consumed by 4.x clients on this broker; 4.x and 5.x consumers cannot share a group: use another group, or stop the 4.x consumers first", group))
}
