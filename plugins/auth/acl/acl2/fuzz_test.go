package acl2

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// FuzzBodies feeds any bytes to the AUTH_* bodies' decoding and checks
// (UserInfo for AUTH_CREATE_USER/UPDATE_USER, AclInfo for
// AUTH_CREATE_ACL/UPDATE_ACL): nothing panics, a body the store accepts
// is durable as accepted (a reopened store holds it), and one it refuses
// changes nothing.
func FuzzBodies(f *testing.F) {
	f.Add([]byte(`{"username":"u","password":"p","userType":"Normal","userStatus":"enable"}`),
		[]byte(`{"subject":"User:u","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:orders*","actions":["Pub","Sub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}`))
	f.Add([]byte(`{"username":"","password":""}`), []byte(`{"policies":[{"entries":[{"resource":"*","actions":["All"],"decision":"Deny"}]}]}`))
	f.Add([]byte(`{"userType":7}`), []byte(`{"subject":"User:u","policies":[{"entries":[{"resource":"Group:","actions":[],"sourceIps":["::1/200"],"decision":"maybe"}]}]}`))
	f.Fuzz(func(t *testing.T, userBody, aclBody []byte) {
		path := filepath.Join(t.TempDir(), "acl2.json")
		s, err := OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		var u User
		if json.Unmarshal(userBody, &u) == nil {
			if u.Username == "" {
				u.Username = "fuzz"
			}
			_ = s.CreateUser(u)
		}
		var a ACL
		if json.Unmarshal(aclBody, &a) == nil {
			if a.Subject == "" {
				a.Subject = UserSubject("fuzz")
			}
			_ = s.PutACL(a)
		}
		r, err := OpenStore(path)
		if err != nil {
			t.Fatalf("a store the decoders wrote does not reopen: %v", err)
		}
		if len(r.ListUsers("")) != len(s.ListUsers("")) || len(r.ListACLs("", "")) != len(s.ListACLs("", "")) {
			t.Fatalf("reopened store differs: users %d/%d, acls %d/%d", len(r.ListUsers("")), len(s.ListUsers("")),
				len(r.ListACLs("", "")), len(s.ListACLs("", "")))
		}
	})
}
