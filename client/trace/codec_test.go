package trace

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rec joins fields as one trace record.
func rec(fields ...string) string {
	return strings.Join(fields, string(rune(ContentSeparator))) + string(rune(FieldSeparator))
}

func TestDecodeJavaAndGoRecords(t *testing.T) {
	tests := []struct {
		name string
		give string
		want Context
	}{
		{
			// Java's TraceDataEncoder: 14 fields, no client host.
			name: "java pub",
			give: rec("Pub", "1700000000000", "DefaultRegion", "PG", "T", "MSGID", "TagA", "k1 k2", "127.0.0.1:10911", "5", "3", "0", "OFFID", "true"),
			want: Context{Type: Pub, TimeStamp: 1700000000000, RegionID: "DefaultRegion", GroupName: "PG", CostTime: 3, Success: true,
				Beans: []Bean{{Topic: "T", MsgID: "MSGID", Tags: "TagA", Keys: "k1 k2", StoreHost: "127.0.0.1:10911", BodyLength: 5, OffsetMsgID: "OFFID"}}},
		},
		{
			// The official Go client's: the client host last.
			name: "go pub",
			give: rec("Pub", "1700000000000", "DefaultRegion", "PG", "T", "MSGID", "", "", "127.0.0.1:10911", "5", "3", "3", "OFFID", "false", "10.0.0.1"),
			want: Context{Type: Pub, TimeStamp: 1700000000000, RegionID: "DefaultRegion", GroupName: "PG", CostTime: 3,
				Beans: []Bean{{Topic: "T", MsgID: "MSGID", StoreHost: "127.0.0.1:10911", BodyLength: 5, MsgType: DelayMsg, OffsetMsgID: "OFFID", ClientHost: "10.0.0.1"}}},
		},
		{
			name: "old pub",
			give: rec("Pub", "1", "R", "PG", "T", "M", "t", "k", "h", "1", "2", "0", "true"),
			want: Context{Type: Pub, TimeStamp: 1, RegionID: "R", GroupName: "PG", CostTime: 2, Success: true,
				Beans: []Bean{{Topic: "T", MsgID: "M", Tags: "t", Keys: "k", StoreHost: "h", BodyLength: 1}}},
		},
		{
			name: "sub before",
			give: rec("SubBefore", "1700000000001", "DefaultRegion", "CG", "REQ", "MSGID", "2", "null", "10.0.0.2"),
			want: Context{Type: SubBefore, TimeStamp: 1700000000001, RegionID: "DefaultRegion", GroupName: "CG", RequestID: "REQ",
				Beans: []Bean{{MsgID: "MSGID", RetryTimes: 2, Keys: "null", ClientHost: "10.0.0.2"}}},
		},
		{
			name: "sub after",
			give: rec("SubAfter", "REQ", "MSGID", "7", "false", "null", "4", "1700000000009", "CG"),
			want: Context{Type: SubAfter, RequestID: "REQ", CostTime: 7, ContextCode: ConsumeFailed, TimeStamp: 1700000000009, GroupName: "CG",
				Beans: []Bean{{MsgID: "MSGID", Keys: "null"}}},
		},
		{
			// Java's cloud layout: no time or group.
			name: "sub after cloud",
			give: rec("SubAfter", "REQ", "MSGID", "7", "TRUE", "k", "0", ""),
			want: Context{Type: SubAfter, RequestID: "REQ", CostTime: 7, Success: true, Beans: []Bean{{MsgID: "MSGID", Keys: "k"}}},
		},
		{
			name: "end transaction",
			give: rec("EndTransaction", "5", "R", "PG", "T", "M", "t", "k", "h", "1", "TX", "COMMIT_MESSAGE", "true"),
			want: Context{Type: EndTransaction, TimeStamp: 5, RegionID: "R", GroupName: "PG",
				Beans: []Bean{{Topic: "T", MsgID: "M", Tags: "t", Keys: "k", StoreHost: "h", MsgType: TransMsgHalf, TransactionID: "TX", TransactionState: "COMMIT_MESSAGE", FromTransactionCheck: true}}},
		},
		{
			name: "recall",
			give: rec("Recall", "6", "R", "PG", "T", "M", "true"),
			want: Context{Type: Recall, TimeStamp: 6, RegionID: "R", GroupName: "PG", Success: true, Beans: []Bean{{Topic: "T", MsgID: "M"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.give)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.want, got[0])
		})
	}
}

func TestDecodeKeepsGoodRecordsAndReportsBad(t *testing.T) {
	data := rec("Pub", "x", "R", "PG", "T", "M", "", "", "h", "1", "2", "0", "", "true") + // bad time
		rec("SubAfter", "REQ", "M", "7", "true", "k", "0", "1", "CG") +
		rec("Pub", "1", "R") + // short
		rec("Pub", "1", "R", "PG", "T", "M", "", "", "h", "1", "2", "9", "", "true") + // message type 9
		rec("Unknown", "1") +
		rec("EndTransaction", "5", "R", "PG", "T", "M", "t", "k", "h", "1", "TX", "MAYBE", "true")
	got, err := Decode(data)
	require.Len(t, got, 1)
	assert.Equal(t, SubAfter, got[0].Type)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrShortRecord)
	for _, want := range []string{"record 0", "record 2", "record 3", "record 5"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "record 4")
}

func TestEncodeRoundTrips(t *testing.T) {
	tests := []Context{
		{Type: Pub, TimeStamp: 1700000000000, RegionID: "DefaultRegion", GroupName: "PG", CostTime: 4, Success: true,
			Beans: []Bean{{Topic: "T", MsgID: "M1", Tags: "TagA", Keys: "k1 k2", StoreHost: "127.0.0.1:10911", BodyLength: 11, MsgType: OrderMsg, OffsetMsgID: "OFF", ClientHost: "10.1.1.1"}}},
		{Type: SubBefore, TimeStamp: 2, RegionID: "DefaultRegion", GroupName: "CG", RequestID: "R1",
			Beans: []Bean{{MsgID: "M1", RetryTimes: 1, Keys: "k1", ClientHost: "10.1.1.1"}, {MsgID: "M2", Keys: "null", ClientHost: "10.1.1.1"}}},
		{Type: SubAfter, TimeStamp: 3, GroupName: "CG", RequestID: "R1", CostTime: 9, ContextCode: ConsumeException,
			Beans: []Bean{{MsgID: "M1", Keys: "k1"}}},
		{Type: EndTransaction, TimeStamp: 4, RegionID: "R", GroupName: "PG",
			Beans: []Bean{{Topic: "T", MsgID: "M", Tags: "t", Keys: "k", StoreHost: "h", MsgType: TransMsgHalf, TransactionID: "TX", TransactionState: "ROLLBACK_MESSAGE"}}},
		{Type: Recall, TimeStamp: 5, RegionID: "R", GroupName: "PG", Success: true, Beans: []Bean{{Topic: "T", MsgID: "M"}}},
	}
	for _, c := range tests {
		t.Run(string(c.Type), func(t *testing.T) {
			data, keys := c.Encode()
			got, err := Decode(data)
			require.NoError(t, err)
			require.Len(t, got, len(c.Beans))
			if c.Type == SubBefore {
				// One record per bean.
				for i, b := range c.Beans {
					want := c
					want.Beans = []Bean{b}
					assert.Equal(t, want, got[i])
				}
			} else {
				assert.Equal(t, c, got[0])
			}
			assert.Contains(t, keys, c.Beans[0].MsgID)
		})
	}
	_, keys := tests[0].Encode()
	assert.Equal(t, []string{"M1", "k1", "k2"}, keys)
}

// FuzzDecode: any text decodes without panicking, a record is either
// returned or reported, and what decodes encodes back to text that
// decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(rec("Pub", "1700000000000", "DefaultRegion", "PG", "T", "MSGID", "", "", "127.0.0.1:10911", "5", "3", "3", "OFFID", "false", "10.0.0.1"))
	f.Add(rec("SubBefore", "1", "R", "CG", "REQ", "M", "2", "null", "h") + rec("SubAfter", "REQ", "M", "7", "false", "null", "4", "9", "CG"))
	f.Add(rec("EndTransaction", "5", "R", "PG", "T", "M", "t", "k", "h", "1", "TX", "UNKNOW", "true"))
	f.Add(rec("Recall", "6", "R", "PG", "T", "M", "true"))
	f.Add("\x01\x02\x02Pub")
	f.Fuzz(func(t *testing.T, data string) {
		got, err := Decode(data)
		if data != "" && len(got) == 0 && err == nil {
			// Nothing decoded and nothing reported: only unknown types
			// or empty records.
			for _, r := range javaSplit(data, FieldSeparator) {
				typ := javaSplit(r, ContentSeparator)
				if len(typ) > 0 {
					switch Type(typ[0]) {
					case Pub, SubBefore, SubAfter, EndTransaction, Recall:
						t.Fatalf("record %q neither decoded nor reported", r)
					}
				}
			}
		}
		for _, c := range got {
			enc, _ := c.Encode()
			again, err := Decode(enc)
			require.NoError(t, err, "%q", enc)
			require.Len(t, again, 1, "%q", enc)
			want := c
			if c.Type == SubBefore || c.Type == SubAfter {
				want.Beans = []Bean{c.Beans[0]}
				want.Beans[0].Keys = nullWrap(c.Beans[0].Keys)
			}
			assert.Equal(t, want, again[0], "%q", enc)
		}
	})
}
