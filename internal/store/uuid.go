package store

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID makes m encode uuid.UUID and *uuid.UUID (alone or in
// slices) as the 16 bytes they are. Otherwise pgx falls back on their
// driver.Valuer: it formats the id as a string, tries to encode that as a
// binary uuid, builds the error, parses the string back and encodes the
// result, for every id of every row of an acceptance.
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
}

func tryWrapUUID(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	switch value.(type) {
	case uuid.UUID:
		return &uuidEncodePlan{}, [16]byte{}, true
	case *uuid.UUID:
		return &uuidPtrEncodePlan{}, [16]byte{}, true
	}
	return nil, nil, false
}

// uuidEncodePlan hands the bytes of a uuid.UUID to pgx's uuid codec.
type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(value.(uuid.UUID)), buf)
}

// uuidPtrEncodePlan encodes a nil *uuid.UUID as NULL and any other as
// uuidEncodePlan does.
type uuidPtrEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidPtrEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPtrEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(*uuid.UUID)
	if u == nil {
		return nil, nil
	}
	return p.next.Encode([16]byte(*u), buf)
}
