package schedule

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWheelPersistsEntries(t *testing.T) {
	dir := t.TempDir()
	w, err := openWheel(dir, 1000)
	require.NoError(t, err)
	for _, e := range []entry{{At: 5500, Offset: 3}, {At: 1200, Offset: 1}, {At: 5100, Offset: 2}, {At: 5500, Offset: 3}, {At: 9000, Offset: 7}} {
		require.NoError(t, w.add(e))
	}
	require.NoError(t, w.close())

	w, err = openWheel(dir, 1000)
	require.NoError(t, err)
	defer w.close()
	assert.Equal(t, []int64{1, 5, 9}, w.slots)
	got, err := w.load(5, entry{})
	require.NoError(t, err)
	assert.Equal(t, []entry{{At: 5100, Offset: 2}, {At: 5500, Offset: 3}}, got, "sorted, duplicate dropped")
	got, err = w.load(5, entry{At: 5100, Offset: 3})
	require.NoError(t, err)
	assert.Equal(t, []entry{{At: 5500, Offset: 3}}, got, "entries before the cursor dropped")

	ns, ok := w.next(1)
	assert.True(t, ok)
	assert.Equal(t, int64(5), ns)
	ns, ok = w.next(-1)
	assert.True(t, ok)
	assert.Equal(t, int64(1), ns)
	_, ok = w.next(9)
	assert.False(t, ok)

	require.NoError(t, w.remove(5))
	assert.Equal(t, []int64{9}, w.slots)
	_, err = os.Stat(filepath.Join(dir, "5.slot"))
	assert.True(t, os.IsNotExist(err))
}

func TestWheelDropsTornTail(t *testing.T) {
	dir := t.TempDir()
	w, err := openWheel(dir, 1000)
	require.NoError(t, err)
	require.NoError(t, w.add(entry{At: 100, Offset: 1}))
	require.NoError(t, w.close())
	f, err := os.OpenFile(filepath.Join(dir, "0.slot"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	w, err = openWheel(dir, 1000)
	require.NoError(t, err)
	defer w.close()
	require.NoError(t, w.add(entry{At: 200, Offset: 2}))
	require.NoError(t, w.sync())
	got, err := w.load(0, entry{})
	require.NoError(t, err)
	assert.Equal(t, []entry{{At: 100, Offset: 1}, {At: 200, Offset: 2}}, got, "torn tail cut, later appends aligned")
}
