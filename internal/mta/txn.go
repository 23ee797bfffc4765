package mta

import (
	"fmt"
)

// deliverOn delivers m to the pending recipients over cn and records their
// results. It returns true, recording nothing that a retry would not
// overwrite, when a reused connection failed before the server answered
// MAIL: nothing was attempted and a fresh connection should try again.
func (c *Client) deliverOn(cn *conn, m *message, pending []int, results []Result) (retry bool) {
	host := cn.host
	if limit := cn.maxSize(); limit > 0 && m.size > limit {
		// RFC 1870 §6.1: a message over the announced SIZE would be
		// refused; do not send it.
		setAll(results, pending, outcome{Bounced, 552, "5.3.4",
			fmt.Sprintf("message of %d bytes exceeds the %d-byte limit of %s", m.size, limit, host), host})
		return false
	}

	queue := pending
	utf8 := cn.has("SMTPUTF8")
	if !utf8 {
		// RFC 6531 §3.2: without the extension the message must not be
		// sent; the sender has to be told.
		switch {
		case m.utf8From:
			setAll(results, pending, outcome{Bounced, 553, "5.6.7",
				fmt.Sprintf("the sender address needs SMTPUTF8, which %s does not support", host), host})
			return false
		case m.utf8Headers:
			setAll(results, pending, outcome{Bounced, 554, "5.6.9",
				fmt.Sprintf("the message headers need SMTPUTF8, which %s does not support", host), host})
			return false
		}
		queue = nil
		for _, i := range pending {
			if m.utf8Rcpts[i] {
				outcome{Bounced, 553, "5.6.7",
					fmt.Sprintf("the recipient address needs SMTPUTF8, which %s does not support", host), host}.apply(&results[i])
				continue
			}
			queue = append(queue, i)
		}
	}

	first := true
	for len(queue) > 0 {
		if cn.broken {
			setAll(results, queue, outcome{Deferred, 451, "4.4.2",
				fmt.Sprintf("connection to %s closed before these recipients were tried", host), host})
			return false
		}
		n := min(len(queue), maxRcptsPerTxn)
		batch, rest := queue[:n], queue[n:]
		needUTF8 := utf8 && m.needsUTF8()
		for _, i := range batch {
			needUTF8 = needUTF8 || (utf8 && m.utf8Rcpts[i])
		}

		outs, untouched := cn.transaction(m, batch, needUTF8)
		if untouched && first && cn.reused {
			return true
		}
		first = false

		delivered := false
		for _, o := range outs {
			delivered = delivered || o.status == Delivered
		}
		var again []int
		for j, i := range batch {
			// RFC 5321 §4.5.3.1.8: recipients refused for the size of the
			// transaction go in the next one, as long as each transaction
			// makes progress.
			if outs[j].tooMany && delivered && !cn.broken {
				again = append(again, i)
				continue
			}
			outs[j].apply(&results[i])
		}
		queue = append(again, rest...)
	}
	return false
}

// txnOutcome is one recipient's outcome in one transaction.
type txnOutcome struct {
	outcome
	// tooMany marks a 452 (or 552, RFC 5321 §4.5.3.1.10) reply to RCPT:
	// the server may take the recipient in another transaction.
	tooMany bool
}

// transaction runs one mail transaction (RFC 5321 §3.3) for the recipients
// m.rcpts[batch...] and returns one outcome per batch entry. With
// PIPELINING (RFC 2920) MAIL, the RCPTs and DATA go in one group. untouched
// reports that the connection failed before the server answered MAIL.
func (cn *conn) transaction(m *message, batch []int, utf8 bool) (outs []txnOutcome, untouched bool) {
	outs = make([]txnOutcome, len(batch))
	decided := make([]bool, len(batch))
	decideRest := func(o outcome) {
		for j := range outs {
			if !decided[j] {
				outs[j].outcome, decided[j] = o, true
			}
		}
	}
	lost := func(err error) {
		decideRest(outcome{Deferred, 451, "4.4.2", fmt.Sprintf("connection to %s failed: %v", cn.host, err), cn.host})
	}
	pipelining := cn.has("PIPELINING")

	if err := cn.send(cn.t.Mail, cn.mailCommand(m, utf8)); err != nil {
		lost(err)
		return outs, true
	}
	if pipelining {
		for _, i := range batch {
			if err := cn.send(cn.t.Rcpt, "RCPT TO:<"+m.rcpts[i]+">"); err != nil {
				lost(err)
				return outs, true
			}
		}
		// RFC 2920 §3.1: DATA may end a group.
		if err := cn.send(cn.t.DataInit, "DATA"); err != nil {
			lost(err)
			return outs, true
		}
	}
	if err := cn.flush(); err != nil {
		lost(err)
		return outs, true
	}
	mr, err := cn.read(cn.t.Mail, "MAIL FROM")
	if err != nil {
		lost(err)
		return outs, true
	}
	if mr.code/100 != 2 {
		decideRest(failureOutcome(mr, cn.host))
		if pipelining && !cn.broken {
			cn.drain(len(batch))
		}
		cn.endFailed()
		return outs, false
	}

	var accepted []int // positions in batch
	for j, i := range batch {
		if !pipelining {
			if err := cn.send(cn.t.Rcpt, "RCPT TO:<"+m.rcpts[i]+">"); err != nil {
				lost(err)
				return outs, false
			}
			if err := cn.flush(); err != nil {
				lost(err)
				return outs, false
			}
		}
		rr, err := cn.read(cn.t.Rcpt, "RCPT TO")
		if err != nil {
			lost(err)
			return outs, false
		}
		switch {
		case rr.code/100 == 2:
			accepted = append(accepted, j)
		case rr.code == 421:
			decideRest(failureOutcome(rr, cn.host))
			return outs, false
		case rr.code == 452 || rr.code == 552:
			o := failureOutcome(rr, cn.host)
			if rr.code == 552 {
				// RFC 5321 §4.5.3.1.10: 552 on RCPT is treated as 452.
				o.code, o.message = 452, rr.String()
				if o.enhanced != "" {
					o.enhanced = "4" + o.enhanced[1:]
				}
			}
			o.status = Deferred
			outs[j], decided[j] = txnOutcome{outcome: o, tooMany: true}, true
		default:
			outs[j].outcome, decided[j] = failureOutcome(rr, cn.host), true
		}
	}

	var dr reply
	switch {
	case pipelining:
		dr, err = cn.read(cn.t.DataInit, "DATA")
	case len(accepted) == 0:
		cn.endFailed()
		return outs, false
	default:
		dr, err = cn.cmd(cn.t.DataInit, "DATA")
	}
	if err != nil {
		lost(err)
		return outs, false
	}
	if dr.code != 354 {
		decideRest(failureOutcome(dr, cn.host))
		cn.endFailed()
		return outs, false
	}
	if len(accepted) == 0 {
		// RFC 2920 §3.1: the server took DATA though it took no
		// recipient; end the empty message with a lone dot.
		cn.finishEmptyData()
		cn.endFailed()
		return outs, false
	}

	if err := cn.writeData(m.data); err != nil {
		lost(err)
		return outs, false
	}
	fr, err := cn.read(cn.t.DataFinal, "end of data")
	if err != nil {
		// RFC 5321 §6.1: the server may have taken the message; a retry
		// risks a duplicate, which is better than a loss.
		lost(err)
		return outs, false
	}
	if fr.code/100 == 2 {
		decideRest(outcome{Delivered, fr.code, fr.enhanced, fr.text, cn.host})
	} else {
		decideRest(failureOutcome(fr, cn.host))
	}
	return outs, false
}

// failureOutcome reads a reply that ends a recipient's attempt: 4xx defers,
// 5xx bounces, anything else is a protocol error and defers.
func failureOutcome(r reply, host string) outcome {
	switch r.code / 100 {
	case 4:
		return outcome{Deferred, r.code, r.enhanced, r.text, host}
	case 5:
		return outcome{Bounced, r.code, r.enhanced, r.text, host}
	}
	return outcome{Deferred, 451, "4.5.0", fmt.Sprintf("unexpected reply from %s: %s", host, r), host}
}

// drain reads the replies to n pipelined RCPTs and to DATA after MAIL
// failed, ending an unexpectedly opened DATA with a lone dot.
func (cn *conn) drain(n int) {
	for range n {
		if _, err := cn.read(cn.t.Rcpt, "RCPT TO"); err != nil {
			return
		}
	}
	r, err := cn.read(cn.t.DataInit, "DATA")
	if err == nil && r.code == 354 {
		cn.finishEmptyData()
	}
}

func (cn *conn) finishEmptyData() {
	if err := cn.send(cn.t.DataBlock, "."); err != nil {
		return
	}
	if err := cn.flush(); err != nil {
		return
	}
	_, _ = cn.read(cn.t.DataFinal, "end of data")
}

// endFailed resets a transaction that did not end with the final dot, so
// that the connection can carry the next one.
func (cn *conn) endFailed() {
	if !cn.broken {
		_ = cn.reset()
	}
}
