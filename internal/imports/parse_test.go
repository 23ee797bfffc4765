package imports

import (
	"encoding/csv"
	"io"
	"strings"
	"testing"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

var fuzzDefs = map[string]store.ContactProperty{
	"plan":  {Key: "plan", Type: store.PropertyString},
	"seats": {Key: "seats", Type: store.PropertyNumber},
}

// FuzzParseCSV reads arbitrary files the way Create does, without the
// database: the header either plans columns or fails with an
// *invalid.Error, and every row becomes a valid row (a normalised address
// that parses again, numbers as numbers) or a row error with a reason,
// numbered in order.
func FuzzParseCSV(f *testing.F) {
	f.Add("email,first_name,last_name,unsubscribed,plan,seats\nann@example.com,Ann,Lee,true,pro,3\n", "")
	f.Add("Email\nnot-an-address\n\n,,\n", "")
	f.Add("\ufeffE-mail;x\n\"a@b.c\",\"q\"\"\"\n", `{"email":"E-mail"}`)
	f.Add("Given,E-mail,Seats\nAnn,ann@example.com,1e400\n", `{"email":"E-mail","first_name":"Given","properties":{"seats":{"column":"Seats"}}}`)
	f.Add("email,email\na@b.c,d@e.f\n", "")
	f.Add("email\n\"unterminated\n", "")
	f.Add("email,unsubscribed\n\"Ann <ann@example.com>\",maybe\n", "")
	f.Fuzz(func(t *testing.T, file, columnMap string) {
		m, err := ParseColumnMap(columnMap)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		cr := csv.NewReader(strings.NewReader(file))
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		header, err := cr.Read()
		if err != nil {
			return
		}
		lay, err := planColumns(header, m, fuzzDefs)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		last := 1
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				return
			}
			if err != nil {
				requireInvalid(t, csvError(err, ""))
				return
			}
			last++
			r, bad := lay.parseRow(last, rec)
			if bad != nil {
				if bad.Row != last || bad.Reason == "" {
					t.Fatalf("row error %+v for row %d", bad, last)
				}
				continue
			}
			if r.Row != last || r.Email != store.NormalizeAddress(r.Email) {
				t.Fatalf("row %+v for row %d", r, last)
			}
			if _, err := address.Parse(r.Email); err != nil {
				t.Fatalf("row %d kept the invalid address %q: %v", last, r.Email, err)
			}
			if v, ok := r.Properties["seats"]; ok {
				if _, isNum := v.(float64); !isNum {
					t.Fatalf("seats is %T", v)
				}
			}
		}
	})
}

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	if _, ok := err.(*invalid.Error); !ok {
		t.Fatalf("error %T %v is not an *invalid.Error", err, err)
	}
}
