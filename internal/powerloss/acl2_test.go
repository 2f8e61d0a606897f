package powerloss_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// ACL 2.0's users and policies (plugins/auth/acl/acl2's store, one
// document replaced atomically per change) as a row of the crash matrix:
// every acknowledged creation, change and deletion of a user and of a
// policy entry is what a reopened store holds.

func init() { durableStates = append(durableStates, acl2State) }

var acl2State = durableState{name: "ACL 2.0 users and policies",
	change: func(t *testing.T, w *world, run int, want map[string]string) {
		s, err := acl2.OpenStore(filepath.Join(w.dir, "config", "acl2.json"))
		require.NoError(t, err)
		user := fmt.Sprintf("matrix-user-%d", run)
		require.NoError(t, s.CreateUser(acl2.User{Username: user, Password: fmt.Sprintf("matrix-pw-%d", run)}))
		require.NoError(t, s.PutACL(acl2.ACL{Subject: acl2.UserSubject(user), Policies: []acl2.Policy{{PolicyType: "Custom",
			Entries: []acl2.Entry{{Resource: fmt.Sprintf("Topic:orders-%d*", run), Actions: []string{"Pub", "Sub"}, Decision: "Allow"}}}}}))
		want["user "+user] = fmt.Sprintf("matrix-pw-%d", run)
		want["acl "+user] = fmt.Sprintf("Topic:orders-%d*=Pub,Sub:Allow", run)
		if run > 0 { // and the previous run's user changed and its policy deleted
			prev := fmt.Sprintf("matrix-user-%d", run-1)
			require.NoError(t, s.UpdateUser(acl2.User{Username: prev, Password: fmt.Sprintf("matrix-pw-%d-changed", run-1)}))
			want["user "+prev] = fmt.Sprintf("matrix-pw-%d-changed", run-1)
			require.NoError(t, s.DeleteACL(acl2.UserSubject(prev), "Custom", fmt.Sprintf("Topic:orders-%d*", run-1)))
			delete(want, "acl "+prev)
		}
	},
	read: func(t *testing.T, w *world, _ map[string]string) map[string]string {
		s, err := acl2.OpenStore(filepath.Join(w.dir, "config", "acl2.json"))
		require.NoError(t, err)
		got := map[string]string{}
		for _, u := range s.ListUsers("") {
			got["user "+u.Username] = u.Password
		}
		for _, a := range s.ListACLs("", "") {
			name := strings.TrimPrefix(a.Subject, "User:")
			var es []string
			for _, p := range a.Policies {
				for _, e := range p.Entries {
					es = append(es, e.Resource+"="+strings.Join(e.Actions, ",")+":"+e.Decision)
				}
			}
			if len(es) > 0 {
				got["acl "+name] = strings.Join(es, ";")
			}
		}
		return got
	}}
