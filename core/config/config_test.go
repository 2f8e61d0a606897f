package config_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
)

const layersFile = "testdata/layers.yaml"

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func TestPrecedence(t *testing.T) {
	file := writeYAML(t, "broker:\n  listen: file\n  name: file-broker\n")
	defaults := map[string]any{"broker.listen": "default", "broker.region": "default-region"}
	env := []string{"QUIVER_BROKER__LISTEN=env", "PATH=/bin"}
	sets := []string{"broker.listen=set"}

	tests := []struct {
		name                  string
		file, env, set, deflt bool
		want                  string
	}{
		{name: "defaults", deflt: true, want: "default"},
		{name: "file over defaults", deflt: true, file: true, want: "file"},
		{name: "env over file", deflt: true, file: true, env: true, want: "env"},
		{name: "set over env", deflt: true, file: true, env: true, set: true, want: "set"},
		{name: "env over defaults", deflt: true, env: true, want: "env"},
		{name: "set over file", file: true, set: true, want: "set"},
		{name: "set over defaults", deflt: true, set: true, want: "set"},
		{name: "file alone", file: true, want: "file"},
		{name: "env alone", env: true, want: "env"},
		{name: "nothing", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o config.Options
			if tt.deflt {
				o.Defaults = defaults
			}
			if tt.file {
				o.File = file
			}
			if tt.env {
				o.Env = env
			}
			if tt.set {
				o.Sets = sets
			}
			cfg, err := config.Load(o)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.String("broker.listen"))
			// Keys a higher layer does not set survive from lower ones.
			if tt.file {
				assert.Equal(t, "file-broker", cfg.String("broker.name"))
			}
			if tt.deflt {
				assert.Equal(t, "default-region", cfg.String("broker.region"))
			}
		})
	}
}

func TestLoadTestdataFile(t *testing.T) {
	cfg, err := config.Load(config.Options{File: layersFile, Env: []string{"QUIVER_STORAGE__FLUSH_INTERVAL=1s"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp", "quic"}, cfg.Strings("transports"))
	var sc struct {
		FlushInterval  time.Duration   `koanf:"flush_interval"`
		MaxMessageSize config.ByteSize `koanf:"max_message_size"`
	}
	require.NoError(t, cfg.Decode("storage", &sc))
	assert.Equal(t, time.Second, sc.FlushInterval, "env beats the file")
	assert.Equal(t, config.ByteSize(16<<20), sc.MaxMessageSize)
	assert.Equal(t, []string{"broker", "storage", "transports"}, cfg.TopLevel())
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		give config.Options
		want string
	}{
		{name: "missing file", give: config.Options{File: "testdata/nope.yaml"}, want: "config: load testdata/nope.yaml"},
		{name: "bad yaml", give: config.Options{File: writeYAML(t, "broker: [unclosed\n")}, want: "config: load "},
		{name: "set without =", give: config.Options{Sets: []string{"broker.listen"}}, want: `config: --set "broker.listen": want key=value`},
		{name: "set without key", give: config.Options{Sets: []string{"=x"}}, want: `config: --set "=x": want key=value`},
		{name: "set with blank key", give: config.Options{Sets: []string{"  =x"}}, want: `want key=value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(tt.give)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		give []string
		key  string
		want string
	}{
		{give: []string{"broker.listen=:10911"}, key: "broker.listen", want: ":10911"},
		{give: []string{"a.b=c=d"}, key: "a.b", want: "c=d"},
		{give: []string{"a.b="}, key: "a.b", want: ""},
		{give: []string{" a.b =x"}, key: "a.b", want: "x"},
		{give: []string{"a.b=1", "a.b=2"}, key: "a.b", want: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.give[0], func(t *testing.T) {
			cfg, err := config.Load(config.Options{Sets: tt.give})
			require.NoError(t, err)
			require.True(t, cfg.Exists(tt.key))
			assert.Equal(t, tt.want, cfg.String(tt.key))
		})
	}
}

func TestEnvMapping(t *testing.T) {
	tests := []struct {
		give    string
		wantKey string
		want    string
	}{
		{give: "QUIVER_BROKER__LISTEN=:10911", wantKey: "broker.listen", want: ":10911"},
		{give: "QUIVER_STORAGE__MAX_MESSAGE_SIZE=4MiB", wantKey: "storage.max_message_size", want: "4MiB"},
		{give: "QUIVER_STORAGE__COMMITLOG__SEGMENT_SIZE=1GiB", wantKey: "storage.commitlog.segment_size", want: "1GiB"},
		{give: "QUIVER_TRANSPORTS=tcp", wantKey: "transports", want: "tcp"},
		{give: "QUIVER_LOG__LEVEL=a=b", wantKey: "log.level", want: "a=b"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			cfg, err := config.Load(config.Options{Env: []string{tt.give}})
			require.NoError(t, err)
			assert.Equal(t, []string{tt.wantKey}, cfg.Keys())
			assert.Equal(t, tt.want, cfg.String(tt.wantKey))
		})
	}

	t.Run("ignored", func(t *testing.T) {
		cfg, err := config.Load(config.Options{Env: []string{
			"BROKER__LISTEN=x", "quiver_broker__listen=x", "QUIVER_=x", "QUIVER_BROKER__LISTEN", "HOME=/root", "XQUIVER_A=1",
		}})
		require.NoError(t, err)
		assert.Empty(t, cfg.Keys())
	})
}

func TestLists(t *testing.T) {
	type section struct {
		Seeds []string `koanf:"seeds"`
	}
	tests := []struct {
		name string
		give config.Options
		want []string
	}{
		{name: "env semicolons", give: config.Options{Env: []string{"QUIVER_NAMESRV__SEEDS=a;b"}}, want: []string{"a", "b"}},
		{name: "env commas", give: config.Options{Env: []string{"QUIVER_NAMESRV__SEEDS=a,b"}}, want: []string{"a", "b"}},
		{name: "env mixed and spaces", give: config.Options{Env: []string{"QUIVER_NAMESRV__SEEDS= a , b;;c ;"}}, want: []string{"a", "b", "c"}},
		{name: "env single", give: config.Options{Env: []string{"QUIVER_NAMESRV__SEEDS=a"}}, want: []string{"a"}},
		{name: "env empty", give: config.Options{Env: []string{"QUIVER_NAMESRV__SEEDS="}}, want: []string{}},
		{name: "set", give: config.Options{Sets: []string{"namesrv.seeds=a;b"}}, want: []string{"a", "b"}},
		{name: "yaml list", give: config.Options{File: writeYAML(t, "namesrv:\n  seeds: [a, b]\n")}, want: []string{"a", "b"}},
		{name: "yaml string", give: config.Options{File: writeYAML(t, "namesrv:\n  seeds: a,b\n")}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Strings("namesrv.seeds"), "Strings")
			var s section
			require.NoError(t, cfg.Decode("namesrv", &s))
			assert.Equal(t, tt.want, s.Seeds, "Decode")
		})
	}
	assert.Nil(t, config.FromMap(nil).Strings("absent"))
}

type subSection struct {
	Size config.ByteSize `koanf:"size"`
}

type testSection struct {
	Name     string          `koanf:"name"`
	Interval time.Duration   `koanf:"interval"`
	Size     config.ByteSize `koanf:"size"`
	Count    int             `koanf:"count"`
	Enabled  bool            `koanf:"enabled"`
	Sub      subSection      `koanf:"sub"`
}

func defaultSection() testSection {
	return testSection{Name: "default", Interval: time.Second, Size: 1 << 20, Count: 3}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want testSection
	}{
		{name: "absent leaves defaults", give: map[string]any{"other.x": 1}, want: defaultSection()},
		{
			name: "strings from env or flags",
			give: map[string]any{"s.interval": "500ms", "s.size": "1GiB", "s.count": "7", "s.enabled": "true", "s.sub.size": "512KB"},
			want: testSection{Name: "default", Interval: 500 * time.Millisecond, Size: 1 << 30, Count: 7, Enabled: true, Sub: subSection{Size: 512 << 10}},
		},
		{
			name: "typed values from yaml",
			give: map[string]any{"s.name": "x", "s.size": 1024, "s.count": 2, "s.enabled": false, "s.sub.size": "16MiB"},
			want: testSection{Name: "x", Interval: time.Second, Size: 1024, Count: 2, Sub: subSection{Size: 16 << 20}},
		},
		{
			name: "partial keeps other defaults",
			give: map[string]any{"s.interval": "2m30s"},
			want: testSection{Name: "default", Interval: 150 * time.Second, Size: 1 << 20, Count: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaultSection()
			require.NoError(t, config.FromMap(tt.give).Decode("s", &got))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		path string
		give map[string]any
		want []string // each must appear in the error
	}{
		{name: "unknown key", path: "storage", give: map[string]any{"storage.bogus": 1},
			want: []string{"unknown key storage.bogus"}},
		{name: "unknown nested key", path: "storage", give: map[string]any{"storage.sub.nope": 1, "storage.name": "x"},
			want: []string{"unknown key storage.sub.nope"}},
		{name: "several unknown keys", path: "storage", give: map[string]any{"storage.b1": 1, "storage.a1": 1, "storage.sub.c1": 1},
			want: []string{"unknown key storage.a1", "unknown key storage.b1", "unknown key storage.sub.c1"}},
		{name: "deep path", path: "storage.commitlog", give: map[string]any{"storage.commitlog.typo": 1},
			want: []string{"unknown key storage.commitlog.typo"}},
		{name: "root", path: "", give: map[string]any{"name": "x", "zz": 1},
			want: []string{"unknown key zz"}},
		{name: "bad size unit", path: "s", give: map[string]any{"s.size": "1XB"},
			want: []string{"s.size:", `bad size "1XB": unknown unit "XB"`}},
		{name: "bad nested size", path: "s", give: map[string]any{"s.sub.size": "lots"},
			want: []string{"s.sub.size:", `bad size "lots"`}},
		{name: "bad duration", path: "s", give: map[string]any{"s.interval": "5 parsecs"},
			want: []string{"s.interval:"}},
		{name: "bad int", path: "s", give: map[string]any{"s.count": "many"},
			want: []string{"s.count:"}},
		{name: "section is a scalar", path: "s", give: map[string]any{"s": "scalar"},
			want: []string{"config: s:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaultSection()
			err := config.FromMap(tt.give).Decode(tt.path, &got)
			require.Error(t, err)
			assert.Regexp(t, "^config: ", err.Error())
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("errors are listed", func(t *testing.T) {
		got := defaultSection()
		err := config.FromMap(map[string]any{"s.x": 1, "s.size": "1XB"}).Decode("s", &got)
		var errs config.Errors
		require.True(t, errors.As(err, &errs), "%v", err)
		assert.Len(t, errs, 2)
	})
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		give string
		want int64
	}{
		{give: "0", want: 0},
		{give: "1024", want: 1024},
		{give: "1B", want: 1},
		{give: "4KiB", want: 4 << 10},
		{give: "4KB", want: 4 << 10},
		{give: "512KB", want: 512 << 10},
		{give: "4k", want: 4 << 10},
		{give: "16MiB", want: 16 << 20},
		{give: "16mb", want: 16 << 20},
		{give: "1GiB", want: 1 << 30},
		{give: "1G", want: 1 << 30},
		{give: "2TiB", want: 2 << 40},
		{give: " 1 GiB ", want: 1 << 30},
		{give: "8388607TiB", want: 8388607 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := config.ParseByteSize(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseByteSizeErrors(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "", want: `bad size ""`},
		{give: "GiB", want: `bad size "GiB"`},
		{give: "1.5GiB", want: `bad size "1.5GiB"`},
		{give: "-1", want: `bad size "-1"`},
		{give: "-1KiB", want: `bad size "-1KiB"`},
		{give: "1XB", want: `unknown unit "XB"`},
		{give: "1PiB", want: `unknown unit "PIB"`},
		{give: "1 KiB B", want: `bad size`},
		{give: "8388608TiB", want: "too large"},
		{give: "99999999999999999999", want: "bad size"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := config.ParseByteSize(tt.give)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		give config.ByteSize
		want string
	}{
		{give: 0, want: "0"},
		{give: 1000, want: "1000"},
		{give: 1 << 10, want: "1KiB"},
		{give: 1536, want: "1536"},
		{give: 16 << 20, want: "16MiB"},
		{give: 1 << 30, want: "1GiB"},
		{give: 3 << 40, want: "3TiB"},
		{give: math.MaxInt64, want: "9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.String())
			if tt.give >= 0 {
				var back config.ByteSize
				require.NoError(t, back.UnmarshalText([]byte(tt.give.String())))
				assert.Equal(t, tt.give, back, "String round-trips")
			}
		})
	}
}

func TestErrors(t *testing.T) {
	var errs config.Errors
	assert.NoError(t, errs.Err())

	errs.Add("storage.dir", "%q is not a directory", "/x")
	errs.Add("transports", "empty")
	err := errs.Err()
	require.Error(t, err)
	assert.Equal(t, `storage.dir: "/x" is not a directory; transports: empty`, err.Error())

	var got config.Errors
	require.True(t, errors.As(err, &got))
	assert.Len(t, got, 2)
}

func TestAccessors(t *testing.T) {
	cfg := config.FromMap(map[string]any{
		"broker":        map[string]any{"listen": ":1", "tls": map[string]any{"cert": "c"}},
		"storage.dir":   "/d",
		"transports":    []any{"tcp", "quic"},
		"namesrv.seeds": []string{"a"},
		"count":         3,
	})
	assert.True(t, cfg.Exists("broker.tls"))
	assert.True(t, cfg.Exists("storage.dir"))
	assert.False(t, cfg.Exists("storage.engine"))
	assert.Equal(t, "c", cfg.String("broker.tls.cert"))
	assert.Equal(t, []string{"tcp", "quic"}, cfg.Strings("transports"))
	assert.Equal(t, []string{"a"}, cfg.Strings("namesrv.seeds"))
	assert.Equal(t, []string{"3"}, cfg.Strings("count"))
	assert.Equal(t, []string{"broker", "count", "namesrv", "storage", "transports"}, cfg.TopLevel())
	assert.ElementsMatch(t, []string{"broker.listen", "broker.tls.cert", "storage.dir", "transports", "namesrv.seeds", "count"}, cfg.Keys())

	cfg.Set("storage.engine", "pebble")
	assert.Equal(t, "pebble", cfg.String("storage.engine"))
	assert.Equal(t, "/d", cfg.String("storage.dir"), "Set keeps siblings")
}

func TestSource(t *testing.T) {
	file := writeYAML(t, "broker:\n  listen: file\n  name: n\nstorage:\n  dir: d\n")
	cfg, err := config.Load(config.Options{File: file, Env: []string{"QUIVER_BROKER__NAME=e"}, Sets: []string{"storage.dir=s"},
		Defaults: map[string]any{"log.level": "info"}})
	require.NoError(t, err)
	tests := []struct{ give, want string }{
		{"broker.listen", file},
		{"broker.name", "QUIVER_BROKER__NAME"},
		{"storage.dir", "--set"},
		{"log.level", ""},
		{"broker", file}, // a section: the layer of its first key (listen)
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, cfg.Source(tt.give), tt.give)
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"listen", "advertise", "name", "namesrv", "id"}
	tests := []struct{ give, want string }{
		{"lissten", "listen"},
		{"lsiten", "listen"},
		{"advertize", "advertise"},
		{"namesvr", "namesrv"},
		{"ip", "id"},
		{"zzzzzz", ""},
		{"listen", ""}, // not a typo
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, config.Suggest(tt.give, keys), tt.give)
	}
}

func TestDurationErrorShowsValue(t *testing.T) {
	var c struct {
		D time.Duration `koanf:"d"`
	}
	err := config.FromMap(map[string]any{"s.d": "fast"}).Decode("s", &c)
	require.Error(t, err)
	assert.Equal(t, `config: s.d: "fast" is not a duration (e.g. 500ms)`, err.Error())
}
