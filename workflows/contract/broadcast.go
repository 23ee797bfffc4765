package contract

import (
	"time"

	"github.com/google/uuid"
)

// Registered names of the activities of Broadcast.
const (
	StartBroadcastName        = "StartBroadcast"
	ReserveBroadcastPaceName  = "ReserveBroadcastPace"
	HandOffBroadcastChunkName = "HandOffBroadcastChunk"
	FinishBroadcastName       = "FinishBroadcast"
)

// What the Broadcast workflow does next with its broadcast
// (BroadcastState.Next).
const (
	// BroadcastWait: it is scheduled; wait until ScheduledAt.
	BroadcastWait = "wait"
	// BroadcastSend: hand its contacts over.
	BroadcastSend = "send"
	// BroadcastEnd: nothing is left to do (gone, canceled, sent, or a
	// draft).
	BroadcastEnd = "end"
)

// BroadcastInput names a broadcast.
type BroadcastInput struct {
	BroadcastID uuid.UUID
}

// BroadcastState is what the Broadcast workflow needs to know of its
// broadcast before sending: whether there is anything to do, and when.
type BroadcastState struct {
	TeamID      uuid.UUID
	Next        string // BroadcastWait, BroadcastSend or BroadcastEnd
	ScheduledAt *time.Time
}

// PaceInput asks for N emails of a team's broadcast pace.
type PaceInput struct {
	TeamID uuid.UUID
	N      int
}

// PaceResult says how long to wait before handing the reserved emails
// over (0: now).
type PaceResult struct {
	Wait time.Duration
}

// BroadcastChunkInput asks for chunk Seq of a broadcast: up to Size
// contacts after After (nil: from the first).
type BroadcastChunkInput struct {
	BroadcastID uuid.UUID
	Seq         int
	After       *uuid.UUID
	Size        int
}

// BroadcastChunkResult is what handing over a chunk did
// (store.HandOffBroadcastChunk, whose result has the same fields).
type BroadcastChunkResult struct {
	// Canceled: the broadcast was canceled (or deleted); nothing was done.
	Canceled bool
	// Paused: the team's monthly quota is used up; the broadcast is now
	// paused with Reason and nothing else was done.
	Paused bool
	Reason string
	// Done: no contact is left after the cursor.
	Done bool
	// Last is the cursor after this chunk; BatchID the batch its emails
	// were accepted as (nil when none was sendable).
	Last    *uuid.UUID
	BatchID *uuid.UUID
	// Emails handed to the send path, Failed recorded failed (rendering
	// or the sandbox's rules).
	Emails, Failed int
}
