package config

import (
	"fmt"
	"net"
	"strings"

	"go.yaml.in/yaml/v3"
)

// textValue turns a string from the environment or --set into the value
// the YAML file would give: one that starts with [ or { is a YAML flow
// list or map ([a, b], {k: v}) and is refused when it does not parse, so
// that --set broker.namesrv=[10.0.0.1:9876] is a list and not the string
// "[10.0.0.1:9876]". A bracketed IPv6 host:port ([::1]:10911) stays a
// string; inside a list, quote it (['[::1]:9876']). Other strings stay
// strings: a comma- or semicolon-separated one still decodes into a list
// key (stringToSliceHook).
func textValue(s string) (any, error) {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '[' && t[0] != '{') {
		return s, nil
	}
	if t[0] == '[' {
		if _, _, err := net.SplitHostPort(t); err == nil {
			return s, nil
		}
	}
	// As the value of a one-key document: yaml.Unmarshal of the bare
	// value would drop text after the closing bracket ("[a] b" is [a]).
	var doc map[string]any
	if err := yaml.Unmarshal([]byte("v: "+t), &doc); err != nil {
		return nil, fmt.Errorf("%q starts with %c but is not a YAML flow %s (%s): %w", s, t[0], flowKind(t[0]), flowExample(t[0]), err)
	}
	switch v := doc["v"]; v.(type) {
	case []any, map[string]any:
		if len(doc) == 1 {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%q starts with %c but is not a YAML flow %s (%s)", s, t[0], flowKind(t[0]), flowExample(t[0]))
}

func flowKind(c byte) string {
	if c == '[' {
		return "list"
	}
	return "map"
}

func flowExample(c byte) string {
	if c == '[' {
		return "e.g. [10.0.0.1:9876, 10.0.0.2:9876]"
	}
	return "e.g. {topic-a: 100}"
}
