package message

import (
	"encoding/binary"
	"fmt"
)

// BatchItem is one message of a client batch (SEND_BATCH_MESSAGE body).
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties Properties
}

// DecodeBatch decodes a SEND_BATCH_MESSAGE body: per message totalSize,
// magic, bodyCRC, flag, bodyLen, body, int16 propLen, properties.
func DecodeBatch(b []byte) ([]BatchItem, error) {
	var out []BatchItem
	for len(b) > 0 {
		r := reader{b: b}
		total := int(int32(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		if total < 22 || total > len(b) {
			return nil, fmt.Errorf("%w: batch item size %d with %d bytes left", ErrMalformed, total, len(b))
		}
		r.b = b[:total]
		r.u32() // magic
		r.u32() // crc
		flag := int32(r.u32())
		bl := int(int32(r.u32()))
		body := r.bytes(bl)
		pl := int(int16(r.u16()))
		var props Properties
		if pl > 0 {
			props = ParseProperties(string(r.bytes(pl)))
		} else {
			props = Properties{}
		}
		if r.err != nil {
			return nil, r.err
		}
		if r.p != total {
			return nil, fmt.Errorf("%w: batch item fields take %d bytes but size says %d", ErrMalformed, r.p, total)
		}
		out = append(out, BatchItem{Flag: flag, Body: body, Properties: props})
		b = b[total:]
	}
	return out, nil
}

// AppendBatchItem encodes one batch element as the client does.
func AppendBatchItem(b []byte, it BatchItem) []byte {
	props := it.Properties.AppendEncoded(nil)
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(20+len(it.Body)+2+len(props)))
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, uint32(it.Flag))
	b = be.AppendUint32(b, uint32(len(it.Body)))
	b = append(b, it.Body...)
	b = be.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}
