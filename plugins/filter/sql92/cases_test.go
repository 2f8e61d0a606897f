package sql92_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/plugins/filter/sql92"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/cases.txt with the actual results")

const casesFile = "testdata/cases.txt"

// A block of testdata/cases.txt:
//
//	### name
//	expression                 (or q:"Go-quoted expression")
//	----
//	{"a":"7"} true             (properties as JSON, or nil; then the match)
//	{} false
//
// or, for an expression that must not compile,
//
//	----
//	error 9: expected an operand after AND, found end of expression
//
// Lines starting with # (but not ###) and blank lines between blocks are
// comments. Run go test -rewrite to regenerate the results.
type block struct {
	comments []string // lines before the block
	name     string
	expr     string
	exprLine string
	props    []string // raw JSON (or "nil") per result line
	want     []bool
	err      string // "error <pos>: <expected>" when the block expects one
}

func readBlocks(t *testing.T) ([]block, []string) {
	t.Helper()
	f, err := os.Open(casesFile)
	require.NoError(t, err)
	defer f.Close()
	var blocks []block
	var pending []string
	var cur *block
	state := 0 // 0 between blocks, 1 want expr, 2 want ----, 3 results
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.HasPrefix(s, "### "):
			if cur != nil {
				blocks = append(blocks, *cur)
			}
			cur = &block{comments: pending, name: strings.TrimSpace(s[4:])}
			pending = nil
			state = 1
		case state == 1:
			cur.exprLine = s
			cur.expr = s
			if rest, ok := strings.CutPrefix(s, "q:"); ok {
				cur.expr, err = strconv.Unquote(rest)
				require.NoError(t, err, "%s:%d: bad quoted expression", casesFile, line)
			}
			state = 2
		case state == 2:
			require.Equal(t, "----", s, "%s:%d: want ----", casesFile, line)
			state = 3
		case state == 3 && (s == "error" || strings.HasPrefix(s, "error ")):
			cur.err = s
		case state == 3 && s != "" && !strings.HasPrefix(s, "#"):
			i := strings.LastIndexByte(s, ' ')
			require.True(t, i > 0, "%s:%d: want <props> true|false", casesFile, line)
			b, err := strconv.ParseBool(s[i+1:])
			require.NoError(t, err, "%s:%d", casesFile, line)
			cur.props = append(cur.props, s[:i])
			cur.want = append(cur.want, b)
		default:
			if cur != nil {
				blocks = append(blocks, *cur)
				cur = nil
			}
			state = 0
			pending = append(pending, s)
		}
	}
	require.NoError(t, sc.Err())
	if cur != nil {
		blocks = append(blocks, *cur)
	}
	return blocks, pending
}

func parseProps(t *testing.T, name, raw string) message.Properties {
	t.Helper()
	if raw == "nil" {
		return nil
	}
	var p message.Properties
	require.NoError(t, json.Unmarshal([]byte(raw), &p), "%s: bad properties %s", name, raw)
	return p
}

// outcome is what the cases file records for an expression that fails.
func outcome(err error) string {
	var se *filter.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("error %d: %s", se.Pos, se.Expected)
	}
	return "error: " + err.Error()
}

func writeBlocks(t *testing.T, blocks []block, trailer []string) {
	t.Helper()
	var b strings.Builder
	for _, bl := range blocks {
		for _, c := range bl.comments {
			b.WriteString(c + "\n")
		}
		fmt.Fprintf(&b, "### %s\n%s\n----\n", bl.name, bl.exprLine)
		if bl.err != "" {
			b.WriteString(bl.err + "\n")
		}
		for i, p := range bl.props {
			fmt.Fprintf(&b, "%s %v\n", p, bl.want[i])
		}
	}
	for _, c := range trailer {
		b.WriteString(c + "\n")
	}
	require.NoError(t, os.WriteFile(casesFile, []byte(b.String()), 0o644))
}

// TestConformance runs testdata/cases.txt through the filtertest suite.
func TestConformance(t *testing.T) {
	blocks, trailer := readBlocks(t)
	if *rewrite {
		for i := range blocks {
			bl := &blocks[i]
			m, err := sql92.Compile(bl.expr)
			bl.err = ""
			if err != nil {
				bl.err = outcome(err)
				bl.props, bl.want = nil, nil
				continue
			}
			for j, raw := range bl.props {
				bl.want[j] = m.Match(parseProps(t, bl.name, raw))
			}
		}
		writeBlocks(t, blocks, trailer)
	}
	var cases []filtertest.Case
	errs := map[string]string{}
	for _, bl := range blocks {
		if bl.err != "" {
			require.Empty(t, bl.props, "%s: an error block has no results", bl.name)
			cases = append(cases, filtertest.Case{Name: bl.name, Expr: bl.expr, WantErr: true})
			errs[bl.expr] = bl.err
			continue
		}
		require.NotEmpty(t, bl.props, "%s: no results", bl.name)
		for j, raw := range bl.props {
			cases = append(cases, filtertest.Case{
				Name:  fmt.Sprintf("%s/%d", bl.name, j+1),
				Expr:  bl.expr,
				Props: parseProps(t, bl.name, raw),
				Want:  bl.want[j],
			})
		}
	}
	t.Logf("%d cases in %d blocks", len(cases), len(blocks))
	require.GreaterOrEqual(t, len(cases), 150, "the issue asks for at least 150 cases")
	filtertest.Run(t, sql92.NewProvider(), cases)

	// The position and the message of each error, which filtertest does
	// not check.
	t.Run("Errors", func(t *testing.T) {
		for expr, want := range errs {
			_, err := sql92.Compile(expr)
			require.Error(t, err, "Compile(%q)", expr)
			assert.Equal(t, want, outcome(err), "Compile(%q)", expr)
		}
	})
}
