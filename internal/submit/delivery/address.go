package delivery

import (
	"fmt"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/mime"
)

// mimeAddress turns a stored display-form address back into its parts.
func mimeAddress(s string) (mime.Address, error) {
	a, err := address.Parse(s)
	if err != nil {
		return mime.Address{}, fmt.Errorf("parsing stored address %q: %w", s, err)
	}
	return mime.Address{Name: a.Name, Addr: a.Addr()}, nil
}

func mimeAddresses(list []string) ([]mime.Address, error) {
	out := make([]mime.Address, 0, len(list))
	for _, s := range list {
		a, err := mimeAddress(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
