// Package mimewalk walks the parts of a MIME message (RFC 2045–2049)
// under bounds: the entities visited, the multipart nesting descended into
// and the decoded body bytes read, so that a hostile message costs at most
// a known amount of work. It is the one walker of Posthaste's received
// mail (internal/received) and of the reports that come back to it
// (internal/reports).
package mimewalk

import (
	"io"

	"github.com/emersion/go-message"
)

// Limits bound a walk; each must be positive.
type Limits struct {
	// MaxParts is the most entities visited, multiparts included.
	MaxParts int
	// MaxDepth is the deepest multipart nesting descended into, the
	// top-level entity being depth 0: a multipart at MaxDepth is not
	// opened.
	MaxDepth int
	// MaxBytes is the most decoded body bytes that Part.Read returns over
	// the whole walk.
	MaxBytes int64
}

// Result says what a walk visited.
type Result struct {
	// Parts is the number of entities visited, multiparts included.
	Parts int
	// Truncated is set when a limit left something out: a part beyond
	// MaxParts, a multipart nested deeper than MaxDepth, or body bytes
	// beyond MaxBytes.
	Truncated bool
}

// Part is an entity that is not a multipart, handed to the leaf function
// of Walk. Its Body is to be read through Read, which counts the bytes.
type Part struct {
	*message.Entity
	// Depth is the nesting of the part, the top-level entity being 0.
	Depth int
	w     *walker
}

// Read reads at most n bytes of the part's decoded body, and never more
// than what is left of the walk's MaxBytes; n <= 0 reads up to that. more
// says whether the body held more than n bytes (when the walk's budget cut
// it instead, the walk is marked truncated). A read error is returned with
// what was read before it: a message cut short ends mid-part.
func (p Part) Read(n int64) (b []byte, more bool, err error) {
	left := p.w.lim.MaxBytes - p.w.read
	limit := left
	if n > 0 && n < left {
		limit = n
	}
	b, err = io.ReadAll(io.LimitReader(p.Body, limit+1))
	if int64(len(b)) > limit {
		b = b[:limit]
		if limit == left {
			p.w.res.Truncated = true
		}
		more = n <= 0 || limit == n
	}
	p.w.read += int64(len(b))
	return b, more, err
}

// Walk visits e and, depth first and in order, the parts of its
// multiparts, and calls leaf with each entity that is not a multipart. A
// part with an unknown charset or transfer encoding is visited as it is;
// a malformed multipart ends its walk there, keeping what came before.
func Walk(e *message.Entity, lim Limits, leaf func(Part)) Result {
	w := &walker{lim: lim, leaf: leaf}
	w.walk(e, 0)
	return w.res
}

type walker struct {
	lim  Limits
	leaf func(Part)
	read int64
	res  Result
}

func (w *walker) walk(e *message.Entity, depth int) {
	if w.res.Parts >= w.lim.MaxParts {
		w.res.Truncated = true
		return
	}
	w.res.Parts++
	mr := e.MultipartReader()
	if mr == nil {
		w.leaf(Part{Entity: e, Depth: depth, w: w})
		return
	}
	if depth >= w.lim.MaxDepth {
		w.res.Truncated = true
		return
	}
	for {
		// A part comes back with an error only for an unknown charset or
		// encoding (message.New), and is read as it is. Without a part,
		// the multipart ended or is broken.
		part, _ := mr.NextPart()
		if part == nil {
			return
		}
		w.walk(part, depth+1)
		if w.res.Parts >= w.lim.MaxParts {
			if next, _ := mr.NextPart(); next != nil {
				w.res.Truncated = true
			}
			return
		}
	}
}
