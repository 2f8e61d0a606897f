package broker

import (
	"fmt"
	"sync"

	"github.com/quivermq/quiver/core/remoting"
)

// registrations remembers, per name server, whether the broker's last
// registration was refused (an answer other than SUCCESS, such as
// NO_PERMISSION from a name server that checks ACL). A name server that
// does not answer is not a refusal: it may be down, and the others route.
type registrations struct {
	mu      sync.Mutex
	refused map[string]string // name server → why
}

func (r *registrations) record(ns string, resp *remoting.Command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if resp.Code == remoting.Success {
		delete(r.refused, ns)
		return
	}
	if r.refused == nil {
		r.refused = map[string]string{}
	}
	why := fmt.Sprintf("code %d: %s", resp.Code, resp.Remark)
	if resp.Code == remoting.NoPermission {
		why = "NO_PERMISSION: " + resp.Remark
	}
	r.refused[ns] = why
}

// RegistrationRefused reports the name servers whose last answer to the
// broker's registration was a refusal, with their reasons ("" when none):
// such a broker is not routable through them, so it is not ready.
func (b *Broker) RegistrationRefused() map[string]string {
	b.regs.mu.Lock()
	defer b.regs.mu.Unlock()
	if len(b.regs.refused) == 0 {
		return nil
	}
	out := make(map[string]string, len(b.regs.refused))
	for k, v := range b.regs.refused {
		out[k] = v
	}
	return out
}
