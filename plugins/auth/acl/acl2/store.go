package acl2

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/durable"
)

// ErrNotExist and ErrExists are the refusals of the store's changes;
// the wire answers them NO_PERMISSION with Java's remark, as Java's
// AuthenticationException / AuthorizationException.
var (
	ErrNotExist = errors.New("not exist")
	ErrExists   = errors.New("existed")
	ErrInvalid  = errors.New("invalid")
)

// StoreError is a refused change: Error is Java's message (the wire's
// remark), Unwrap one of ErrNotExist, ErrExists, ErrInvalid.
type StoreError struct {
	kind error
	msg  string
}

func (e *StoreError) Error() string { return e.msg }

// Unwrap returns the kind.
func (e *StoreError) Unwrap() error { return e.kind }

func storeErr(kind error, format string, args ...any) error {
	return &StoreError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Store holds the users and ACLs. Every change is written to one JSON
// document with core/durable's atomic replace (temporary file, fsync,
// rename, fsync of the directory: the mechanism the broker's metadata
// documents use without a store's metadata seam) before it is
// acknowledged, and is in force for the next request once written. A
// crash keeps the document before or after the change, never neither,
// never a torn one.
type Store struct {
	path string
	mu   sync.Mutex // serializes changes
	cur  atomic.Pointer[state]
	// watch run after each change is written (Watch).
	watchMu sync.Mutex
	watch   []func()
}

// Watch makes f run after each change, once it is written and in force.
// f must not block.
func (s *Store) Watch(f func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watch = append(s.watch, f)
}

func (s *Store) changed() {
	s.watchMu.Lock()
	ws := append([]func(){}, s.watch...)
	s.watchMu.Unlock()
	for _, f := range ws {
		f()
	}
}

// document is the file's layout.
type document struct {
	Version int64  `json:"version"`
	Users   []User `json:"users"`
	ACLs    []ACL  `json:"acls"`
}

// OpenStore loads path, or starts empty when it does not exist (the
// directory is created on the first change).
func OpenStore(path string) (*Store, error) {
	s := &Store{path: path}
	st := newState()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("acl2: %w", err)
	default:
		var doc document
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("acl2: %s: %w", path, err)
		}
		st.version = doc.Version
		for _, u := range doc.Users {
			if err := u.normalize(); err != nil {
				return nil, fmt.Errorf("acl2: %s: user %q: %w", path, u.Username, err)
			}
			st.users[u.Username] = u
		}
		for _, a := range doc.ACLs {
			name, err := parseSubject(a.Subject)
			if err == nil {
				err = a.compile()
			}
			if err != nil {
				return nil, fmt.Errorf("acl2: %s: acl of %q: %w", path, a.Subject, err)
			}
			a.Subject = UserSubject(name)
			st.acls[name] = &a
		}
	}
	s.cur.Store(st)
	return s, nil
}

func (s *Store) load() *state { return s.cur.Load() }

// Version counts the changes written.
func (s *Store) Version() int64 { return s.load().version }

// update applies fn to a copy of the state, writes it and installs it.
func (s *Store) update(fn func(st *state) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.load().clone()
	if err := fn(next); err != nil {
		return err
	}
	next.version++
	doc := document{Version: next.version, Users: next.listUsers(""), ACLs: next.listACLs("", "")}
	if doc.Users == nil {
		doc.Users = []User{}
	}
	if doc.ACLs == nil {
		doc.ACLs = []ACL{}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("acl2: encode: %w", err)
	}
	if err := durable.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("acl2: %w", err)
	}
	if err := durable.WriteFile(s.path, data, 0o600); err != nil {
		return fmt.Errorf("acl2: save %s: %w", s.path, err)
	}
	s.cur.Store(next)
	s.changed()
	return nil
}

// CreateUser adds u (Java createUser): its name must be new and its
// password not blank.
func (s *Store) CreateUser(u User) error {
	if err := u.normalize(); err != nil {
		return storeErr(ErrInvalid, "%v", err)
	}
	if strings.TrimSpace(u.Password) == "" {
		return storeErr(ErrInvalid, "password can not be blank")
	}
	return s.update(func(st *state) error {
		if _, ok := st.users[u.Username]; ok {
			return storeErr(ErrExists, "The user is existed")
		}
		st.users[u.Username] = u
		return nil
	})
}

// UpdateUser changes the fields u sets (Java updateUser): a blank
// password, type or status keeps the old one.
func (s *Store) UpdateUser(u User) error {
	if strings.TrimSpace(u.Username) == "" {
		return storeErr(ErrInvalid, "username can not be blank")
	}
	return s.update(func(st *state) error {
		old, ok := st.users[u.Username]
		if !ok {
			return storeErr(ErrNotExist, "The user is not exist")
		}
		if strings.TrimSpace(u.Password) != "" {
			old.Password = u.Password
		}
		if u.UserType != "" {
			old.UserType = u.UserType
		}
		if u.UserStatus != "" {
			old.UserStatus = u.UserStatus
		}
		if err := old.normalize(); err != nil {
			return storeErr(ErrInvalid, "%v", err)
		}
		st.users[u.Username] = old
		return nil
	})
}

// DeleteUser removes a user and its ACL (Java deleteUser); an unknown
// user is no error.
func (s *Store) DeleteUser(name string) error {
	if _, ok := s.GetUser(name); !ok {
		return nil
	}
	return s.update(func(st *state) error {
		delete(st.users, name)
		delete(st.acls, name)
		return nil
	})
}

// GetUser returns a user.
func (s *Store) GetUser(name string) (User, bool) {
	u, ok := s.load().users[name]
	return u, ok
}

// ListUsers returns the users whose name contains filter.
func (s *Store) ListUsers(filter string) []User { return s.load().listUsers(filter) }

// PutACL creates or merges a subject's policies (Java createAcl and
// updateAcl alike): an entry replaces the entry of its resource in the
// policy of its type, others are added. The subject must be a user.
func (s *Store) PutACL(a ACL) error {
	name, err := parseSubject(a.Subject)
	if err != nil {
		return storeErr(ErrInvalid, "%v", err)
	}
	a.Subject = UserSubject(name)
	if err := a.compile(); err != nil {
		return storeErr(ErrInvalid, "%v", err)
	}
	return s.update(func(st *state) error {
		if _, ok := st.users[name]; !ok {
			return storeErr(ErrNotExist, "The subject of %s is not exist.", a.Subject)
		}
		old := st.acls[name]
		if old == nil {
			c := cloneACL(a)
			st.acls[name] = &c
			return nil
		}
		old.merge(a.Policies)
		return nil
	})
}

// DeleteACL removes subject's entry of resource in policy t, or its whole
// ACL when resource is "" (Java deleteAcl).
func (s *Store) DeleteACL(subject string, t PolicyType, resource string) error {
	name, err := parseSubject(subject)
	if err != nil {
		return storeErr(ErrInvalid, "%v", err)
	}
	if resource != "" {
		r, err := ParseResource(resource)
		if err != nil {
			return storeErr(ErrInvalid, "%v", err)
		}
		resource = r.Key()
	}
	return s.update(func(st *state) error {
		if _, ok := st.users[name]; !ok {
			return storeErr(ErrNotExist, "The subject is not exist.")
		}
		a := st.acls[name]
		if a == nil {
			return storeErr(ErrNotExist, "The acl is not exist.")
		}
		if resource != "" {
			a.remove(t, resource)
		}
		if resource == "" || len(a.Policies) == 0 {
			delete(st.acls, name)
		}
		return nil
	})
}

// GetACL returns a subject's ACL; a subject that is no user is an error.
func (s *Store) GetACL(subject string) (ACL, bool, error) {
	name, err := parseSubject(subject)
	if err != nil {
		return ACL{}, false, storeErr(ErrInvalid, "%v", err)
	}
	st := s.load()
	if _, ok := st.users[name]; !ok {
		return ACL{}, false, storeErr(ErrNotExist, "The subject is not exist.")
	}
	a := st.acls[name]
	if a == nil {
		return ACL{}, false, nil
	}
	return cloneACL(*a), true, nil
}

// ListACLs returns the ACLs by subject and resource filters (substrings).
func (s *Store) ListACLs(subjectFilter, resourceFilter string) []ACL {
	return s.load().listACLs(subjectFilter, resourceFilter)
}

// ReplaceUsers installs users as the whole user table (a slave copying
// its master's), written durably as any change.
func (s *Store) ReplaceUsers(users []User) error {
	for i := range users {
		if err := users[i].normalize(); err != nil {
			return storeErr(ErrInvalid, "user %q: %v", users[i].Username, err)
		}
	}
	return s.update(func(st *state) error {
		st.users = make(map[string]User, len(users))
		for _, u := range users {
			st.users[u.Username] = u
		}
		return nil
	})
}

// ReplaceACLs installs acls as the whole policy table (a slave copying
// its master's), written durably as any change.
func (s *Store) ReplaceACLs(acls []ACL) error {
	m := make(map[string]*ACL, len(acls))
	for i := range acls {
		a := acls[i]
		name, err := parseSubject(a.Subject)
		if err == nil {
			err = a.compile()
		}
		if err != nil {
			return storeErr(ErrInvalid, "acl of %q: %v", a.Subject, err)
		}
		a.Subject = UserSubject(name)
		m[name] = &a
	}
	return s.update(func(st *state) error {
		st.acls = m
		return nil
	})
}
