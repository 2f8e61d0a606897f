package grpcapi_test

// The pin of PROTO_PIN, checked three ways: the .proto files are the pinned
// upstream blobs; the descriptors embedded in the generated Go declare what
// the .proto files declare (a small parser here reads the .proto files, so
// this runs without protoc); and, where protoc is on PATH, regenerating with
// the pinned plugins reproduces the committed files.

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // git's blob ids are SHA-1
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/quivermq/quiver/core/grpcapi"
)

const protoDir = "proto"

// goPackageLine is the one line the repository adds to upstream's files.
const goPackageLine = `option go_package = "github.com/quivermq/quiver/core/grpcapi";` + "\n"

type pin struct {
	commit string
	blobs  map[string]string // path under proto/ → git blob id
	tools  map[string]string // tool → version
}

func readPin(t *testing.T) pin {
	t.Helper()
	f, err := os.Open("PROTO_PIN")
	require.NoError(t, err)
	defer f.Close()
	p := pin{blobs: map[string]string{}, tools: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		switch {
		case fs[0] == "commit" && len(fs) == 2:
			p.commit = fs[1]
		case fs[0] == "blob" && len(fs) == 3:
			p.blobs[fs[1]] = fs[2]
		case fs[0] == "tool" && len(fs) == 3:
			p.tools[fs[1]] = fs[2]
		}
	}
	require.NoError(t, sc.Err())
	require.Regexp(t, `^[0-9a-f]{40}$`, p.commit, "PROTO_PIN: commit")
	return p
}

// gitBlobID is what git names a file of these bytes.
func gitBlobID(b []byte) string {
	h := sha1.New() //nolint:gosec // git's blob ids are SHA-1
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// TestProtoPin: every .proto file under proto/ is pinned, and with the
// go_package line taken out it is the pinned upstream blob.
func TestProtoPin(t *testing.T) {
	p := readPin(t)
	var found []string
	require.NoError(t, filepath.WalkDir(protoDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return err
		}
		found = append(found, filepath.ToSlash(strings.TrimPrefix(path, protoDir+string(filepath.Separator))))
		return nil
	}))
	var pinned []string
	for k := range p.blobs {
		pinned = append(pinned, k)
	}
	slices.Sort(found)
	slices.Sort(pinned)
	require.Equal(t, pinned, found, "the .proto files are the ones PROTO_PIN names")
	for rel, want := range p.blobs {
		b, err := os.ReadFile(filepath.Join(protoDir, rel))
		require.NoError(t, err)
		require.Equal(t, 1, bytes.Count(b, []byte(goPackageLine)), "%s: one go_package line", rel)
		up := bytes.Replace(b, []byte(goPackageLine), nil, 1)
		assert.Equal(t, want, gitBlobID(up), "%s is not the pinned upstream blob: edited, or PROTO_PIN not moved with it", rel)
	}
}

// TestToolPin: the generated files name the pinned tool versions, and
// protoc-gen-go's is the google.golang.org/protobuf this module requires
// (TestRegenerate builds protoc-gen-go from it).
func TestToolPin(t *testing.T) {
	p := readPin(t)
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		require.Regexp(t, `^v[0-9]+\.[0-9]+\.[0-9]+$`, p.tools[tool], "PROTO_PIN: tool %s", tool)
	}
	for _, f := range []string{"definition.pb.go", "service.pb.go"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(b), "// \tprotoc-gen-go "+p.tools["protoc-gen-go"]+"\n", f)
		assert.Contains(t, string(b), "// \tprotoc        "+p.tools["protoc"]+"\n", f)
	}
	b, err := os.ReadFile("service_grpc.pb.go")
	require.NoError(t, err)
	assert.Contains(t, string(b), "// - protoc-gen-go-grpc "+p.tools["protoc-gen-go-grpc"]+"\n")
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^\s*google\.golang\.org/protobuf `+regexp.QuoteMeta(p.tools["protoc-gen-go"])+`\b`, string(mod),
		"go.mod's google.golang.org/protobuf is the pinned protoc-gen-go: regenerate after moving it")
}

// TestGeneratedMatchesProto: the descriptors compiled into the generated Go
// declare exactly the messages, fields (number, label, type, oneof), enum
// values and RPCs the .proto files declare.
func TestGeneratedMatchesProto(t *testing.T) {
	files := map[string]protoreflect.FileDescriptor{
		"apache/rocketmq/v2/definition.proto": grpcapi.File_apache_rocketmq_v2_definition_proto,
		"apache/rocketmq/v2/service.proto":    grpcapi.File_apache_rocketmq_v2_service_proto,
	}
	var fromProto, fromGo []string
	var decls []protoDecl
	for rel := range files {
		b, err := os.ReadFile(filepath.Join(protoDir, rel))
		require.NoError(t, err)
		ds, err := parseProto(string(b))
		require.NoError(t, err, rel)
		decls = append(decls, ds...)
	}
	fromProto = resolveDecls(t, decls)
	for _, fd := range files {
		fromGo = append(fromGo, describeFile(fd)...)
	}
	slices.Sort(fromProto)
	slices.Sort(fromGo)
	require.Greater(t, len(fromProto), 300, "the parser read the files")
	for _, l := range fromProto {
		if _, ok := slices.BinarySearch(fromGo, l); !ok {
			t.Errorf("only in .proto: %s", l)
		}
	}
	for _, l := range fromGo {
		if _, ok := slices.BinarySearch(fromProto, l); !ok {
			t.Errorf("only in the generated Go: %s", l)
		}
	}
	if t.Failed() {
		t.Log("the generated code and the .proto files differ: regenerate (doc.go)")
	}
}

// TestRegenerate runs go:generate's protoc with the pinned plugins and
// compares the output with the committed files. It needs protoc on PATH and
// the plugins buildable (protoc-gen-go from this module's requirement,
// protoc-gen-go-grpc installed at its pinned version); it skips otherwise.
func TestRegenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the protoc plugins")
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc not on PATH (Debian: apt-get install protobuf-compiler)")
	}
	p := readPin(t)
	bin := t.TempDir()
	gobin := "GOBIN=" + bin
	if out, err := runIn(t, "", []string{gobin}, "go", "install", "google.golang.org/protobuf/cmd/protoc-gen-go"); err != nil {
		t.Skipf("cannot build protoc-gen-go: %v\n%s", err, out)
	}
	grpcPlugin := "google.golang.org/grpc/cmd/protoc-gen-go-grpc@" + p.tools["protoc-gen-go-grpc"]
	if out, err := runIn(t, "", []string{gobin}, "go", "install", grpcPlugin); err != nil {
		t.Skipf("cannot install %s (offline?): %v\n%s", grpcPlugin, err, out)
	}
	out := t.TempDir()
	args := []string{"-I", protoDir,
		"--go_out=" + out, "--go_opt=module=github.com/quivermq/quiver",
		"--go-grpc_out=" + out, "--go-grpc_opt=module=github.com/quivermq/quiver",
		"apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto"}
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	if o, err := runIn(t, "", []string{path}, protoc, args...); err != nil {
		t.Fatalf("protoc: %v\n%s", err, o)
	}
	protocLine := regexp.MustCompile(`(?m)^// \tprotoc +v[0-9.]+$`)
	for _, f := range []string{"definition.pb.go", "service.pb.go", "service_grpc.pb.go"} {
		got, err := os.ReadFile(filepath.Join(out, "core", "grpcapi", f))
		require.NoError(t, err)
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		// Another protoc release generates the same code; only its version
		// line differs.
		got = protocLine.ReplaceAll(got, []byte("// \tprotoc (version)"))
		want = protocLine.ReplaceAll(want, []byte("// \tprotoc (version)"))
		assert.True(t, bytes.Equal(want, got), "%s differs from what the pinned protos and plugins generate: run go generate ./core/grpcapi (doc.go)", f)
	}
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// describeFile renders a file's declarations the way resolveDecls renders
// the parsed .proto.
func describeFile(fd protoreflect.FileDescriptor) []string {
	var out []string
	var msgs func(ms protoreflect.MessageDescriptors)
	enums := func(es protoreflect.EnumDescriptors) {
		for i := range es.Len() {
			e := es.Get(i)
			out = append(out, "enum "+string(e.FullName()))
			vs := e.Values()
			for j := range vs.Len() {
				out = append(out, fmt.Sprintf("value %s.%s = %d", e.FullName(), vs.Get(j).Name(), vs.Get(j).Number()))
			}
		}
	}
	msgs = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			out = append(out, "message "+string(m.FullName()))
			fs := m.Fields()
			for j := range fs.Len() {
				f := fs.Get(j)
				label := ""
				switch {
				case f.IsMap():
				case f.IsList():
					label = "repeated "
				case f.HasOptionalKeyword():
					label = "optional "
				}
				typ := fieldType(f)
				if f.IsMap() {
					typ = "map<" + fieldType(f.MapKey()) + "," + fieldType(f.MapValue()) + ">"
				}
				oneof := ""
				if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
					oneof = " oneof " + string(o.Name())
				}
				out = append(out, fmt.Sprintf("field %s.%s = %d %s%s%s", m.FullName(), f.Name(), f.Number(), label, typ, oneof))
			}
			enums(m.Enums())
			msgs(m.Messages())
		}
	}
	enums(fd.Enums())
	msgs(fd.Messages())
	ss := fd.Services()
	for i := range ss.Len() {
		s := ss.Get(i)
		out = append(out, "service "+string(s.FullName()))
		ms := s.Methods()
		for j := range ms.Len() {
			m := ms.Get(j)
			out = append(out, fmt.Sprintf("rpc %s.%s (%s%s) returns (%s%s)", s.FullName(), m.Name(),
				streamWord(m.IsStreamingClient()), m.Input().FullName(), streamWord(m.IsStreamingServer()), m.Output().FullName()))
		}
	}
	return out
}

func streamWord(b bool) string {
	if b {
		return "stream "
	}
	return ""
}

func fieldType(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(f.Message().FullName())
	case protoreflect.EnumKind:
		return string(f.Enum().FullName())
	default:
		return f.Kind().String()
	}
}

// protoDecl is one declaration read from a .proto file; type references
// are resolved once every file is read.
type protoDecl struct {
	kind  string // enum, value, message, field, service, rpc
	scope string // full name of the enclosing message, enum or service (the package for top level)
	name  string
	num   string
	label string
	typ   string // field type as written (map<k,v> kept whole)
	oneof string
	in    string // rpc: request type as written, with "stream " when streaming
	out   string
}

var scalars = map[string]bool{"double": true, "float": true, "int32": true, "int64": true, "uint32": true, "uint64": true,
	"sint32": true, "sint64": true, "fixed32": true, "fixed64": true, "sfixed32": true, "sfixed64": true, "bool": true, "string": true, "bytes": true}

// resolveDecls renders the declarations with every type reference resolved
// to its full name by protobuf's scoping rules.
func resolveDecls(t *testing.T, ds []protoDecl) []string {
	t.Helper()
	known := map[string]bool{"google.protobuf.Timestamp": true, "google.protobuf.Duration": true}
	for _, d := range ds {
		if d.kind == "message" || d.kind == "enum" {
			known[d.scope+"."+d.name] = true
		}
	}
	resolve := func(scope, ref string) string {
		if scalars[ref] {
			return ref
		}
		if after, ok := strings.CutPrefix(ref, "."); ok {
			return after
		}
		for s := scope; s != ""; {
			if known[s+"."+ref] {
				return s + "." + ref
			}
			i := strings.LastIndexByte(s, '.')
			if i < 0 {
				break
			}
			s = s[:i]
		}
		if known[ref] {
			return ref
		}
		t.Errorf("unresolved type %q in %s", ref, scope)
		return ref
	}
	var out []string
	for _, d := range ds {
		full := d.scope + "." + d.name
		switch d.kind {
		case "enum", "message", "service":
			out = append(out, d.kind+" "+full)
		case "value":
			out = append(out, fmt.Sprintf("value %s = %s", full, d.num))
		case "field":
			typ := d.typ
			if k, v, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(typ, "map<"), ">"), ","); ok && strings.HasPrefix(typ, "map<") {
				typ = "map<" + resolve(d.scope, k) + "," + resolve(d.scope, v) + ">"
			} else {
				typ = resolve(d.scope, typ)
			}
			oneof := ""
			if d.oneof != "" {
				oneof = " oneof " + d.oneof
			}
			out = append(out, fmt.Sprintf("field %s = %s %s%s%s", full, d.num, d.label, typ, oneof))
		case "rpc":
			pkg := d.scope[:strings.LastIndexByte(d.scope, '.')]
			r := func(s string) string {
				ref, stream := strings.CutPrefix(s, "stream ")
				return streamWord(stream) + resolve(pkg, ref)
			}
			out = append(out, fmt.Sprintf("rpc %s (%s) returns (%s)", full, r(d.in), r(d.out)))
		}
	}
	return out
}

// protoTokens splits .proto source into identifiers (dotted), numbers,
// strings and single punctuation characters, without comments.
func protoTokens(src string) ([]string, error) {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			i += j
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated comment at %d", i)
			}
			i += j + 4
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, src[i:j+1])
			i = j + 1
		case c == '_' || c == '.' || c == '-' || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)):
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] == '.' || unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j]))) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		default:
			toks = append(toks, string(c))
			i++
		}
	}
	return toks, nil
}

type protoParser struct {
	toks  []string
	i     int
	decls []protoDecl
}

func (p *protoParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *protoParser) next() string {
	s := p.peek()
	p.i++
	return s
}

func (p *protoParser) expect(want string) error {
	if got := p.next(); got != want {
		return fmt.Errorf("token %d: want %q, got %q", p.i-1, want, got)
	}
	return nil
}

// skipStatement skips to the end of a statement (`;`) or a block (`{…}`).
func (p *protoParser) skipStatement() {
	depth := 0
	for p.i < len(p.toks) {
		switch p.next() {
		case "{":
			depth++
		case "}":
			depth--
			if depth == 0 {
				return
			}
		case ";":
			if depth == 0 {
				return
			}
		}
	}
}

// parseProto reads the declarations of one proto3 file.
func parseProto(src string) ([]protoDecl, error) {
	toks, err := protoTokens(src)
	if err != nil {
		return nil, err
	}
	p := &protoParser{toks: toks}
	pkg := ""
	for p.i < len(p.toks) {
		switch p.peek() {
		case "package":
			p.next()
			pkg = p.next()
			if err := p.expect(";"); err != nil {
				return nil, err
			}
		case "message":
			if err := p.message(pkg); err != nil {
				return nil, err
			}
		case "enum":
			if err := p.enum(pkg); err != nil {
				return nil, err
			}
		case "service":
			if err := p.service(pkg); err != nil {
				return nil, err
			}
		case "syntax", "import", "option":
			p.skipStatement()
		default:
			return nil, fmt.Errorf("token %d: unexpected %q at top level", p.i, p.peek())
		}
	}
	if pkg == "" {
		return nil, fmt.Errorf("no package")
	}
	return p.decls, nil
}

func (p *protoParser) enum(scope string) error {
	p.next()
	name := p.next()
	p.decls = append(p.decls, protoDecl{kind: "enum", scope: scope, name: name})
	full := scope + "." + name
	if err := p.expect("{"); err != nil {
		return err
	}
	for p.peek() != "}" {
		switch p.peek() {
		case "option", "reserved":
			p.skipStatement()
			continue
		case "":
			return fmt.Errorf("enum %s: unexpected end", full)
		}
		v := p.next()
		if err := p.expect("="); err != nil {
			return fmt.Errorf("enum %s: %w", full, err)
		}
		num := p.next()
		p.skipStatement() // options and the `;`
		p.decls = append(p.decls, protoDecl{kind: "value", scope: full, name: v, num: num})
	}
	p.next()
	return nil
}

func (p *protoParser) message(scope string) error {
	p.next()
	name := p.next()
	p.decls = append(p.decls, protoDecl{kind: "message", scope: scope, name: name})
	full := scope + "." + name
	if err := p.expect("{"); err != nil {
		return err
	}
	return p.body(full, "")
}

// body reads fields and nested declarations up to the closing brace of a
// message or a oneof.
func (p *protoParser) body(msg, oneof string) error {
	for {
		switch tok := p.peek(); tok {
		case "}":
			p.next()
			return nil
		case "":
			return fmt.Errorf("message %s: unexpected end", msg)
		case "message":
			if err := p.message(msg); err != nil {
				return err
			}
		case "enum":
			if err := p.enum(msg); err != nil {
				return err
			}
		case "option", "reserved", "extensions":
			p.skipStatement()
		case "oneof":
			p.next()
			name := p.next()
			if err := p.expect("{"); err != nil {
				return err
			}
			if err := p.body(msg, name); err != nil {
				return err
			}
		default:
			d := protoDecl{kind: "field", scope: msg, oneof: oneof}
			if tok == "repeated" || tok == "optional" {
				d.label = p.next() + " "
			}
			if p.peek() == "map" {
				p.next()
				if err := p.expect("<"); err != nil {
					return err
				}
				k := p.next()
				if err := p.expect(","); err != nil {
					return err
				}
				v := p.next()
				if err := p.expect(">"); err != nil {
					return err
				}
				d.typ = "map<" + k + "," + v + ">"
			} else {
				d.typ = p.next()
			}
			d.name = p.next()
			if err := p.expect("="); err != nil {
				return fmt.Errorf("message %s field %s: %w", msg, d.name, err)
			}
			d.num = p.next()
			p.skipStatement()
			p.decls = append(p.decls, d)
		}
	}
}

func (p *protoParser) service(pkg string) error {
	p.next()
	name := p.next()
	p.decls = append(p.decls, protoDecl{kind: "service", scope: pkg, name: name})
	full := pkg + "." + name
	if err := p.expect("{"); err != nil {
		return err
	}
	for p.peek() != "}" {
		switch p.peek() {
		case "option":
			p.skipStatement()
			continue
		case "rpc":
		default:
			return fmt.Errorf("service %s: unexpected %q", full, p.peek())
		}
		p.next()
		d := protoDecl{kind: "rpc", scope: full, name: p.next()}
		arg := func() (string, error) {
			if err := p.expect("("); err != nil {
				return "", err
			}
			s := ""
			if p.peek() == "stream" {
				p.next()
				s = "stream "
			}
			s += p.next()
			return s, p.expect(")")
		}
		var err error
		if d.in, err = arg(); err != nil {
			return fmt.Errorf("rpc %s: %w", d.name, err)
		}
		if err := p.expect("returns"); err != nil {
			return err
		}
		if d.out, err = arg(); err != nil {
			return fmt.Errorf("rpc %s: %w", d.name, err)
		}
		p.skipStatement()
		p.decls = append(p.decls, d)
	}
	p.next()
	return nil
}
