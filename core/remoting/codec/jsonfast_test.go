package codec

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var jsonHeaderSamples = []string{
	`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicA"}}`,
	`{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"0","queueOffset":"5"},"flag":1,"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON","version":409}`,
	`{"code":10,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"properties":"TAGS\u0001TagA\u0002KEYS\u0001a b\u0002","x":"\u003c\u003e\u0026 \"q\" \\ \/ \n\t\u00e9\ud83d\ude00"}}`,
	` { "code" : -3 , "extFields" : { } , "remark" : null , "unknown" : [1, {"a": [true, false, null, -1.5e3]}, "s"] } `,
	`{"code":1,"extFields":null,"language":9}`,
	`{"code":1,"extFields":{"a":null,"b":"x","a":"y"}}`,
	`{}`,
}

// TestFastJSONHeaderMatchesEncodingJSON checks the fast decoder against
// encoding/json on inputs it accepts.
func TestFastJSONHeaderMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonHeaderSamples {
		t.Run(s, func(t *testing.T) {
			fast, ok := decodeJSONHeaderFast([]byte(s), false)
			require.True(t, ok, "fast path refused a plain header")
			std, err := decodeJSONHeaderStd([]byte(s))
			require.NoError(t, err)
			assert.Equal(t, std, ForgetPool(fast))
		})
	}
}

func TestFastJSONHeaderDefersOddInput(t *testing.T) {
	tests := []string{
		`{"Code":105}`,            // case-insensitive key: encoding/json's call
		`{"code":1.0}`,            // not an int
		`{"code":99999999999}`,    // overflow
		`{"code":01}`,             // leading zero
		`{"remark":"\ud800"}`,     // lone surrogate
		"{\"remark\":\"\xff\"}",   // invalid UTF-8
		"{\"remark\":\"a\nb\"}",   // raw control character
		`{"code":1} trailing`,     // trailing garbage
		`{"code":1,}`,             // trailing comma
		`{"extFields":{"a":[1]}}`, // array value: the reference refuses it
		`{"extFields":{"a":{}}}`,  // object value: likewise
		`{"code":1.5}`,            // a float int field: the reference truncates it
		`{"remark":1}`,            // a number remark: the reference's call
		`[1]`,
		``,
	}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			_, ok := decodeJSONHeaderFast([]byte(s), false)
			assert.False(t, ok)
		})
	}
}

// FuzzFastJSONHeader: whenever the fast path accepts input, the reference
// decoder accepts it too and decodes the same command. Each input is tried
// as it is and, read as a recipe by genLenientHeader, as a header full of
// the values Java's fastjson is lenient about (numbers, booleans and null
// in extFields, ints as strings, floats and booleans for ints, repeated
// keys, wrong shapes); the generated header's decoding is also checked
// against the recipe's own expectations.
func FuzzFastJSONHeader(f *testing.F) {
	for _, s := range jsonHeaderSamples {
		f.Add([]byte(s))
	}
	f.Add([]byte{2, 3, 0, 1, 1, 2, 2, 1, 3, 4, 5, 2, 6, 2, 1, 0, 9, 7, 0, 0, 3, 2})
	f.Add([]byte("\x02\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastMatchesStd(t, b)
		hdr, model := genLenientHeader(b)
		checkFastMatchesStd(t, hdr)
		model.check(t, hdr)
	})
}

func checkFastMatchesStd(t *testing.T, b []byte) {
	fast, ok := decodeJSONHeaderFast(b, false)
	if !ok {
		return
	}
	std, err := decodeJSONHeaderStd(b)
	if err != nil {
		t.Fatalf("fast path accepted %q which the reference rejects: %v", b, err)
	}
	fast.pooledExt = false
	if !assert.ObjectsAreEqual(std, fast) {
		t.Fatalf("decoders differ on %q:\nfast %+v\nstd  %+v", b, fast, std)
	}
}

// lenientModel is what a generated header must decode to.
type lenientModel struct {
	code   int32
	opaque int32
	ext    map[string]string // "~" + literal: a non-integer number
	bad    string            // a wrong-shaped field: the decoders must refuse
}

// bigDecimalText is BigDecimal.toString()'s shape.
var bigDecimalText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?(E[+-][0-9]+)?$`)

func (m *lenientModel) check(t *testing.T, hdr []byte) {
	c, err := decodeJSONHeaderStd(hdr)
	if m.bad != "" {
		var he *HeaderShapeError
		if !errors.As(err, &he) {
			t.Fatalf("%s: want a HeaderShapeError (%s), got %v", hdr, m.bad, err)
		}
		if he.Opaque != m.opaque {
			t.Fatalf("%s: opaque %d, want %d", hdr, he.Opaque, m.opaque)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", hdr, err)
	}
	if c.Code != m.code || c.Opaque != m.opaque {
		t.Fatalf("%s: code %d opaque %d, want %d %d", hdr, c.Code, c.Opaque, m.code, m.opaque)
	}
	if len(c.ExtFields) != len(m.ext) {
		t.Fatalf("%s: extFields %q, want %q", hdr, c.ExtFields, m.ext)
	}
	for k, want := range m.ext {
		got, ok := c.ExtFields[k]
		if !ok {
			t.Fatalf("%s: extFields[%q] missing", hdr, k)
		}
		lit, isNum := strings.CutPrefix(want, "~")
		if !isNum {
			if got != want {
				t.Fatalf("%s: extFields[%q] = %q, want %q", hdr, k, got, want)
			}
			continue
		}
		// Not the same code as numberText: the value must survive and the
		// text must have BigDecimal's shape.
		var a, b big.Rat
		if _, ok := a.SetString(lit); !ok {
			t.Fatalf("bad generated literal %q", lit)
		}
		if _, ok := b.SetString(got); !ok || a.Cmp(&b) != 0 || !bigDecimalText.MatchString(got) {
			t.Fatalf("%s: extFields[%q] = %q for the number %s", hdr, k, got, lit)
		}
	}
}

type fuzzBytes struct {
	b []byte
	i int
}

func (g *fuzzBytes) next() int {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return int(g.b[g.i-1])
}

func (g *fuzzBytes) digits(n int, lead bool) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i == 0 && lead {
			sb.WriteByte(byte('1' + g.next()%9))
		} else {
			sb.WriteByte(byte('0' + g.next()%10))
		}
	}
	return sb.String()
}

// number returns a JSON number literal and whether it is an integer.
func (g *fuzzBytes) number() (string, bool) {
	lit := ""
	if g.next()%4 == 0 {
		lit = "-"
	}
	if g.next()%3 == 0 {
		lit += "0"
	} else {
		lit += g.digits(1+g.next()%4, true)
	}
	integer := true
	if g.next()%3 == 0 {
		lit += "." + g.digits(1+g.next()%3, false)
		integer = false
	}
	if g.next()%4 == 0 {
		lit += [...]string{"e", "E", "e+", "E-", "e-"}[g.next()%5] + g.digits(1+g.next()%2, false)
		integer = false
	}
	return lit, integer
}

var genKeys = [...]string{"a", "b", "queueId", "topic", `k\u00e9`, ""}
var genKeyText = [...]string{"a", "b", "queueId", "topic", "ké", ""}
var genStrings = [...]string{`"x"`, `""`, `"a b\n"`, `"\u00e9\ud83d\ude00"`, `"12"`, `"true"`}
var genStringText = [...]string{"x", "", "a b\n", "é😀", "12", "true"}

// intField writes an int header field in one of the forms fastjson reads
// and updates *v as Java would.
func (g *fuzzBytes) intField(sb *strings.Builder, v *int32) {
	n := int32(g.next()<<8|g.next()) - 1<<15
	switch g.next() % 7 {
	case 0, 1:
		fmt.Fprintf(sb, "%d", n)
		*v = n
	case 2:
		fmt.Fprintf(sb, `"%d"`, n)
		*v = n
	case 3:
		sb.WriteString("true")
		*v = 1
	case 4:
		sb.WriteString("false")
		*v = 0
	case 5:
		sb.WriteString("null")
	case 6:
		frac := g.digits(1+g.next()%2, false)
		fmt.Fprintf(sb, "%d.%s", n, frac)
		*v = n // toward zero: n's integer part is n
	}
}

// genLenientHeader builds a JSON header from a fuzz recipe, with what it
// must decode to.
func genLenientHeader(b []byte) ([]byte, *lenientModel) {
	g := &fuzzBytes{b: b}
	m := &lenientModel{ext: map[string]string{}}
	var sb strings.Builder
	sb.WriteByte('{')
	fields := 1 + g.next()%7
	for i := 0; i < fields; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		switch g.next() % 8 {
		case 0:
			sb.WriteString(`"code":`)
			g.intField(&sb, &m.code)
		case 1:
			sb.WriteString(`"opaque":`)
			g.intField(&sb, &m.opaque)
		case 2, 3:
			sb.WriteString(`"extFields":{`)
			m.ext = map[string]string{}
			n := g.next() % 6
			for j := 0; j < n; j++ {
				if j > 0 {
					sb.WriteByte(',')
				}
				ki := g.next() % len(genKeys)
				k := genKeyText[ki]
				sb.WriteString(`"` + genKeys[ki] + `":`)
				switch g.next() % 9 {
				case 0, 1:
					si := g.next() % len(genStrings)
					sb.WriteString(genStrings[si])
					m.ext[k] = genStringText[si]
				case 2:
					lit, integer := g.number()
					sb.WriteString(lit)
					if integer {
						m.ext[k] = lit
					} else {
						m.ext[k] = "~" + lit
					}
				case 3:
					lit, _ := g.number()
					sb.WriteString(lit)
					if !strings.ContainsAny(lit, ".eE") {
						m.ext[k] = lit
					} else {
						m.ext[k] = "~" + lit
					}
				case 4:
					sb.WriteString("true")
					m.ext[k] = "true"
				case 5:
					sb.WriteString("false")
					m.ext[k] = "false"
				case 6, 7:
					sb.WriteString("null")
					delete(m.ext, k)
				case 8:
					if g.next()%2 == 0 {
						sb.WriteString(`[1]`)
					} else {
						sb.WriteString(`{"v":"1"}`)
					}
					if m.bad == "" {
						m.bad = "extFields." + k
					}
				}
			}
			sb.WriteByte('}')
		case 4:
			sb.WriteString(`"remark":`)
			switch g.next() % 3 {
			case 0:
				sb.WriteString("null")
			case 1:
				lit, _ := g.number()
				sb.WriteString(lit)
			default:
				sb.WriteString(genStrings[g.next()%len(genStrings)])
			}
		case 5:
			sb.WriteString(`"unknown":`)
			if g.next()%2 == 0 {
				lit, _ := g.number()
				sb.WriteString(lit)
			} else {
				sb.WriteString(`{"x":[true,null,"s",-1.5e3]}`)
			}
		case 6:
			if g.next()%2 == 0 {
				sb.WriteString(`"extFields":null`)
				m.ext = map[string]string{}
			} else {
				sb.WriteString(`"extFields":[]`)
				if m.bad == "" {
					m.bad = "extFields"
				}
			}
		case 7:
			var v int32
			sb.WriteString([...]string{`"flag":`, `"version":`}[g.next()%2])
			g.intField(&sb, &v)
		}
	}
	sb.WriteByte('}')
	return []byte(sb.String()), m
}
