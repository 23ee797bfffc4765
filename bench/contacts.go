package main

// The contacts step: a CSV of -contact-rows contacts (100,000 by default),
// generated as it is uploaded (never held in memory), goes to POST
// /contacts/imports of the running dev; the step polls GET
// /contacts/imports/<id> until the import completed and prints contacts
// imported per second, from the start of the upload to `completed`. While
// it runs it samples the dev process's VmRSS (/proc/<pid>/status) every
// 20 ms and prints the growth over the RSS just before the upload (the
// importer's memory: parsing, spooling, chunking and the ContactImport
// workflow all run in dev; PostgreSQL is another process) and dev's
// VmHWM, the peak RSS since it started. Then, in this process, the
// template rendering rate: a component document with ten variables
// rendered to HTML and text (what saving a template does) and a send
// rendered with it through submit.SendRequest.WithTemplate (what every
// templated send does), each as renders per second on one goroutine.
//
//	GOTOOLCHAIN=local go run ./bench -contacts          # this step only
//	GOTOOLCHAIN=local go run ./bench -contacts -contact-rows 1000000

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/components"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// The aims of issue 17.
const (
	contactsAim     = 5000 // contacts imported per second
	importMemoryAim = 200  // MB of RSS growth while importing
)

// runContacts runs only the contacts step on a dev of its own.
func runContacts(ctx context.Context, bin string, rows int, out, progress io.Writer) error {
	return inRoot(ctx, bin, "posthaste bench -contacts", out, progress,
		func(p, logf func(string, ...any), root, bin string) error {
			return contactsIn(ctx, bin, root, rows, p, logf)
		})
}

// contactsIn is runContacts in its root, with its binary.
func contactsIn(ctx context.Context, bin, root string, rows int, p, logf func(string, ...any)) error {
	return withDev(ctx, bin, root, logf, nil, func(dev *devProcess) error {
		return measureContacts(ctx, dev, rows, p, logf)
	})
}

// measureContacts is the contacts step on a running dev.
func measureContacts(ctx context.Context, dev *devProcess, rows int, p func(string, ...any), logf func(string, ...any)) error {
	hc := &http.Client{Timeout: 10 * time.Minute}
	call := func(method, path, contentType string, body io.Reader) (map[string]any, error) {
		req, err := http.NewRequestWithContext(ctx, method, dev.base+path, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+dev.creds.APIKey)
		req.Header.Set("Content-Type", contentType)
		res, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		var out map[string]any
		return out, json.Unmarshal(raw, &out)
	}
	for _, prop := range []string{`{"key":"plan","type":"string"}`, `{"key":"seats","type":"number"}`} {
		if _, err := call("POST", "/contact-properties", "application/json", strings.NewReader(prop)); err != nil {
			return err
		}
	}

	pid := dev.cmd.Process.Pid
	base, _, err := readMemory(pid)
	if err != nil {
		return fmt.Errorf("reading dev's memory: %w", err)
	}
	sampler := startMemorySampler(pid, 20*time.Millisecond)

	logf("contacts: importing %d generated rows", rows)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeImportForm(mw, rows)) }()
	start := time.Now()
	created, err := call("POST", "/contacts/imports", mw.FormDataContentType(), pr)
	if err != nil {
		sampler.stop()
		return err
	}
	uploaded := time.Since(start)
	id, _ := created["id"].(string)
	var imp map[string]any
	for {
		if imp, err = call("GET", "/contacts/imports/"+id, "application/json", nil); err != nil {
			sampler.stop()
			return err
		}
		if s := imp["status"]; s == store.ImportCompleted || s == store.ImportFailed {
			break
		}
		select {
		case <-ctx.Done():
			sampler.stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	peak := sampler.stop()
	_, hwm, err := readMemory(pid)
	if err != nil {
		return fmt.Errorf("reading dev's memory: %w", err)
	}
	if imp["status"] != store.ImportCompleted {
		return fmt.Errorf("import %s ended %v: %v", id, imp["status"], imp["error"])
	}
	counts, _ := imp["counts"].(map[string]any)
	perSecond := float64(rows) / elapsed.Seconds()
	growth := float64(peak-base) / (1 << 20)
	p("")
	p("contact import: POST /contacts/imports, %d-row CSV generated while uploading, polled until completed", rows)
	p("  counts: created %v, updated %v, skipped %v, failed %v", counts["created"], counts["updated"],
		counts["skipped"], counts["failed"])
	p("  upload answered in %s; completed %s after the upload started: %.0f contacts/s (aim >= %d: %s)",
		fmtDur(uploaded), fmtDur(elapsed), perSecond, contactsAim, met(perSecond >= contactsAim))
	p("  importer memory (posthaste dev VmRSS): %.0f MB before, peak %.0f MB while importing, growth %.0f MB (aim < %d MB: %s)",
		float64(base)/(1<<20), float64(peak)/(1<<20), growth, importMemoryAim, met(growth < importMemoryAim))
	p("  posthaste dev VmHWM (peak RSS since it started, Temporal and all): %.0f MB", float64(hwm)/(1<<20))

	return measureTemplates(p)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// writeImportForm writes the multipart form of an import of rows
// generated contacts, one in 500 with an invalid address, and closes it.
func writeImportForm(mw *multipart.Writer, rows int) error {
	fw, err := mw.CreateFormFile("file", "contacts.csv")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fw, 64<<10)
	if _, err := w.WriteString("email,first_name,last_name,unsubscribed,plan,seats\n"); err != nil {
		return err
	}
	plans := []string{"free", "pro", "team"}
	var line []byte
	for i := range rows {
		line = line[:0]
		if i%500 == 499 {
			line = append(line, "not-an-address-"...)
		} else {
			line = append(line, "bench-"...)
		}
		line = strconv.AppendInt(line, int64(i), 10)
		if i%500 != 499 {
			line = append(line, "@example.com"...)
		}
		line = append(line, ",Ann"...)
		line = strconv.AppendInt(line, int64(i%97), 10)
		line = append(line, ",Lee,"...)
		line = strconv.AppendBool(line, i%10 == 0)
		line = append(line, ',')
		line = append(line, plans[i%3]...)
		line = append(line, ',')
		line = strconv.AppendInt(line, int64(i%50), 10)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return mw.Close()
}

// memorySampler records the highest VmRSS of a process.
type memorySampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
}

func startMemorySampler(pid int, every time.Duration) *memorySampler {
	s := &memorySampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if rss, _, err := readMemory(pid); err == nil && rss > s.peak {
				s.peak = rss
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak VmRSS in bytes.
func (s *memorySampler) stop() int64 {
	close(s.done)
	s.wg.Wait()
	return s.peak
}

// readMemory returns a process's VmRSS and VmHWM in bytes (Linux).
func readMemory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc/<pid>/status")
	}
	return rss, hwm, nil
}

// benchDocument is a representative component document: a heading, text
// runs, a button, two columns and a footer, with ten variables.
const benchDocument = `{"version": 1,
 "settings": {"preview_text": "Order {{{ORDER_ID}}} is on its way"},
 "blocks": [
  {"type": "heading", "level": 1, "text": "Hi {{{FIRST_NAME|there}}} {{{LAST_NAME}}}, it's shipped!"},
  {"type": "text", "runs": [{"text": "Your order "}, {"text": "#{{{ORDER_ID}}}", "bold": true},
    {"text": " of {{{TOTAL}}} left our warehouse in {{{CITY}}} on {{{DATE}}}. "},
    {"text": "Track it", "href": "{{{TRACK_URL}}}"}]},
  {"type": "button", "label": "View your order", "href": "https://example.com/orders/{{{ORDER_ID}}}"},
  {"type": "divider"},
  {"type": "columns", "columns": [
    [{"type": "heading", "level": 3, "text": "{{{ITEM1}}}"}, {"type": "text", "runs": [{"text": "In this parcel."}]}],
    [{"type": "heading", "level": 3, "text": "{{{ITEM2}}}"}, {"type": "text", "runs": [{"text": "Use {{{COUPON}}} next time."}]}]]},
  {"type": "footer", "text": "You get this email because you bought from Example & Co.", "address": ["Example & Co.", "1 Main Street"]}
 ]}`

// measureTemplates prints the rendering rates of the component document
// and of a send with the template it makes.
func measureTemplates(p func(string, ...any)) error {
	doc, err := components.Parse([]byte(benchDocument))
	if err != nil {
		return fmt.Errorf("parsing the bench document: %w", err)
	}
	html, text, err := components.Render(doc)
	if err != nil {
		return fmt.Errorf("rendering the bench document: %w", err)
	}
	subject, from := "Order {{{ORDER_ID}}} shipped", "Shop <shop@example.com>"
	content := store.TemplateContent{From: &from, Subject: &subject, HTML: html, Text: &text}
	values := map[string]json.RawMessage{}
	for _, v := range []struct{ key, typ, value string }{
		{"LAST_NAME", "string", `"Lee"`}, {"ORDER_ID", "string", `"A-1234"`}, {"TOTAL", "number", `42.5`},
		{"CITY", "string", `"Lyon"`}, {"DATE", "string", `"24 November"`},
		{"TRACK_URL", "string", `"https://example.com/track?o=A-1234&u=<ann>"`},
		{"ITEM1", "string", `"Blue mug & saucer"`}, {"ITEM2", "string", `"Green tea"`}, {"COUPON", "string", `"THANKS10"`},
	} {
		content.Variables = append(content.Variables, store.TemplateVariable{Key: v.key, Type: v.typ})
		values[v.key] = json.RawMessage(v.value)
	}
	// The footer's unsubscribe link, reserved (never declared).
	values["RESEND_UNSUBSCRIBE_URL"] = json.RawMessage(`"https://example.com/unsubscribe/abc"`)
	req := submit.SendRequest{To: submit.AddressList{"ann@example.com"},
		Template: &submit.TemplateRequest{ID: "order-shipped", Variables: values}}
	if _, err := req.WithTemplate(content); err != nil {
		return fmt.Errorf("rendering the bench template: %w", err)
	}
	rate := func(f func() error) (float64, error) {
		n, start := 0, time.Now()
		for time.Since(start) < 2*time.Second {
			for range 100 {
				if err := f(); err != nil {
					return 0, err
				}
			}
			n += 100
		}
		return float64(n) / time.Since(start).Seconds(), nil
	}
	docRate, err := rate(func() error { _, _, err := components.Render(doc); return err })
	if err != nil {
		return err
	}
	sendRate, err := rate(func() error { _, err := req.WithTemplate(content); return err })
	if err != nil {
		return err
	}
	p("")
	p("template rendering, in this process, one goroutine (%d-byte HTML, %d variables)", len(html), len(values))
	p("  component document to HTML and text (saving a template): %.0f renders/s", docRate)
	p("  a send with the template (SendRequest.WithTemplate: subject, HTML, text): %.0f renders/s", sendRate)
	return nil
}

// defaultContactRows is the size of the contacts step's CSV.
const defaultContactRows = 100_000
