package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/quivermq/quiver/core/auth"
)

// Named is a resource name a request gives for one source of its rule.
type Named struct {
	Source AuthSource
	Name   string
}

// Names reads the names req gives for r's sources, in their order; with
// noBody, sources in the body are left out. A missing name a source needs,
// a body that is not JSON or a stored message that cannot be read is an
// error.
func (r AuthRule) Names(ctx context.Context, req auth.Request, noBody bool) ([]Named, error) {
	var out []Named
	var doc *jsonDoc
	for _, s := range r.Needs {
		var names []string
		switch s.From {
		case FromHeader:
			if v := req.ExtFields[s.Path]; v != "" {
				names = []string{v}
			}
		case FromBody:
			if noBody {
				continue
			}
			if doc == nil {
				d, err := parseDoc(req.Body)
				if err != nil {
					return nil, err
				}
				doc = d
			}
			vs, err := doc.strings(s.Path, s.Optional)
			if err != nil {
				return nil, err
			}
			if len(vs) == 0 && strings.Contains(s.Path, "[]") {
				continue // an empty list (a heartbeat of producers only) names nothing
			}
			names = vs
		case FromStored:
			t, err := storedTopic(ctx, req, s)
			if err != nil {
				return nil, err
			}
			names = []string{t}
		}
		if len(names) == 0 {
			if s.Optional {
				continue
			}
			return nil, fmt.Errorf("the %s field is missing", s.Path)
		}
		for _, n := range names {
			out = append(out, Named{Source: s, Name: n})
		}
	}
	return out, nil
}

// storedTopic reads the topic of the message at the offset in header
// s.Path, parsing the offset as the processors do.
func storedTopic(ctx context.Context, req auth.Request, s AuthSource) (string, error) {
	e := ReadExt(&Command{ExtFields: req.ExtFields})
	off := e.Int64(s.Path)
	if e.Err != nil {
		return "", fmt.Errorf("the %s field: %v", s.Path, e.Err)
	}
	if req.Lookup == nil {
		return "", fmt.Errorf("this server cannot read the message at offset %d", off)
	}
	m, err := req.Lookup(ctx, off)
	if err != nil || m.Topic == "" {
		return "", fmt.Errorf("no message at commit-log offset %d", off)
	}
	if s.Real && m.RealTopic != "" {
		return m.RealTopic, nil
	}
	return m.Topic, nil
}

// jsonDoc is a parsed body.
type jsonDoc struct{ v any }

func parseDoc(body []byte) (*jsonDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("the body is not JSON%s", err.detail)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("the body is not one JSON value")
	}
	return &jsonDoc{v: v}, nil
}

// docError is why a body does not parse; detail is "" or ": <reason>".
type docError struct{ detail string }

// maxDepth bounds the nesting a body may have.
const maxDepth = 64

// decodeValue reads one JSON value. An object that spells a key twice,
// exactly or in another case, is refused: encoding/json, which the
// processors use, keeps the last value and matches keys without regard
// to case, so a check reading the first would see another name.
func decodeValue(dec *json.Decoder, depth int) (any, *docError) {
	if depth > maxDepth {
		return nil, &docError{": nested too deep"}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, &docError{}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			folded := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &docError{}
				}
				k, _ := kt.(string)
				f := foldKey(k)
				if folded[f] {
					return nil, &docError{fmt.Sprintf(": key %q is spelt twice", k)}
				}
				folded[f] = true
				v, derr := decodeValue(dec, depth+1)
				if derr != nil {
					return nil, derr
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &docError{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, derr := decodeValue(dec, depth+1)
				if derr != nil {
					return nil, derr
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &docError{}
			}
			return arr, nil
		}
		return nil, &docError{}
	}
	return tok, nil
}

// strings returns the strings at path (see Body). A missing or null list
// ("key[]") holds nothing; a missing, null or empty value, or one that is
// not a string, is an error unless optional.
func (d *jsonDoc) strings(path string, optional bool) ([]string, error) {
	cur := []any{d.v}
	for _, seg := range strings.Split(path, ".") {
		key, each := strings.CutSuffix(seg, "[]")
		var next []any
		for _, c := range cur {
			obj, ok := c.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("the body has no object holding %s", path)
			}
			v, found, err := foldGet(obj, key)
			if err != nil {
				return nil, fmt.Errorf("the body's %s: %v", path, err)
			}
			switch {
			case each && (!found || v == nil):
			case each:
				arr, ok := v.([]any)
				if !ok {
					return nil, fmt.Errorf("the body's %s is not a list", key)
				}
				next = append(next, arr...)
			case !found || v == nil:
				if !optional {
					return nil, fmt.Errorf("the body has no %s", path)
				}
			default:
				next = append(next, v)
			}
		}
		cur = next
	}
	out := make([]string, 0, len(cur))
	for _, c := range cur {
		s, ok := c.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("the body has no %s", path)
		}
		out = append(out, s)
	}
	return out, nil
}

// foldGet finds key in obj the way encoding/json fills a struct field:
// any key equal under case folding. Two such keys with different values
// are refused, so that this check and a processor cannot read different
// names from one body.
func foldGet(obj map[string]any, key string) (any, bool, error) {
	var v any
	found := false
	for k, x := range obj {
		if !strings.EqualFold(k, key) {
			continue
		}
		if found && !sameJSON(v, x) {
			return nil, false, fmt.Errorf("key %s is spelt twice with different values", key)
		}
		v, found = x, true
	}
	return v, found, nil
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// foldKey maps a key to one spelling of its case-folding class (each rune
// to the least of its unicode.SimpleFold orbit), so that two keys
// strings.EqualFold calls equal fold to the same string.
func foldKey(k string) string {
	b := make([]rune, 0, len(k))
	for _, r := range k {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < least {
				least = f
			}
		}
		b = append(b, least)
	}
	return string(b)
}

// ParseStrictJSON decodes a body as Names reads it: one JSON value,
// numbers as json.Number, no object key spelt twice in any case, nested
// at most 64 deep.
func ParseStrictJSON(body []byte) (any, error) {
	d, err := parseDoc(body)
	if err != nil {
		return nil, err
	}
	return d.v, nil
}
