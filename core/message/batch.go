package message

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// BatchItem is one message of a client batch (SEND_BATCH_MESSAGE body).
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties Properties
}

// batchItemMin is the smallest encoded batch item: totalSize, magic,
// bodyCRC, flag, bodyLen and propLen with no body and no properties.
const batchItemMin = 22

// ErrBatchTooLarge is returned by DecodeBatchLimit for a batch with more
// messages than allowed.
var ErrBatchTooLarge = errors.New("message: batch has too many messages")

// CountBatch returns how many items a SEND_BATCH_MESSAGE body holds,
// reading only their size words (no allocation).
func CountBatch(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if len(b) < 4 {
			return 0, fmt.Errorf("%w: batch item size cut at %d bytes", ErrMalformed, len(b))
		}
		total := int(int32(binary.BigEndian.Uint32(b)))
		if total < batchItemMin || total > len(b) {
			return 0, fmt.Errorf("%w: batch item size %d with %d bytes left", ErrMalformed, total, len(b))
		}
		n++
		b = b[total:]
	}
	return n, nil
}

// DecodeBatchLimit is DecodeBatch for at most maxItems messages: a larger
// batch is refused (ErrBatchTooLarge) after counting, before anything is
// decoded. Decoding costs memory per message (the item, its properties
// map) beyond the body bytes it shares with b, so the count is what bounds
// a batch's memory: 200,000 empty messages fit in a 4.4 MB body.
func DecodeBatchLimit(b []byte, maxItems int) ([]BatchItem, error) {
	n, err := CountBatch(b)
	if err != nil {
		return nil, err
	}
	if n > maxItems {
		return nil, fmt.Errorf("%w: %d messages, the limit is %d", ErrBatchTooLarge, n, maxItems)
	}
	return decodeBatch(b, n)
}

// DecodeBatch decodes a SEND_BATCH_MESSAGE body: per message totalSize,
// magic, bodyCRC, flag, bodyLen, body, int16 propLen, properties.
func DecodeBatch(b []byte) ([]BatchItem, error) {
	n, err := CountBatch(b)
	if err != nil {
		return nil, err
	}
	return decodeBatch(b, n)
}

func decodeBatch(b []byte, n int) ([]BatchItem, error) {
	out := make([]BatchItem, 0, n)
	for len(b) > 0 {
		r := reader{b: b}
		total := int(int32(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		if total < batchItemMin || total > len(b) {
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

// AppendBatchItem encodes one batch element as the client does. The
// properties are encoded in place and the lengths filled in after, so an
// item costs no allocation beyond b's growth.
func AppendBatchItem(b []byte, it BatchItem) []byte {
	be := binary.BigEndian
	start := len(b)
	b = append(b, make([]byte, 20)...) // total size, magic, CRC, flag, body length: filled in below
	b = append(b, it.Body...)
	b = append(b, 0, 0) // properties length
	p := len(b)
	b = it.Properties.AppendEncoded(b)
	be.PutUint32(b[start:], uint32(len(b)-start))
	be.PutUint32(b[start+12:], uint32(it.Flag))
	be.PutUint32(b[start+16:], uint32(len(it.Body)))
	be.PutUint16(b[p-2:], uint16(len(b)-p))
	return b
}
