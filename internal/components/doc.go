// Package components renders an email template assembled from components
// (headings, text, buttons, images, dividers, spacers, columns and a footer),
// stored as a JSON document, to email-safe HTML and a plain-text part.
//
// The package is pure: no database, no network. [Parse] decodes and validates
// a document; [Render] turns a valid [Document] into the two parts. The
// template API stores the JSON as it was sent and renders it when the
// template is saved, keeping its {{{…}}} placeholders, which each send then
// fills (package merge); the broadcast editor reads and writes the same JSON.
//
// # Document format (version 1)
//
// A document is one JSON object:
//
//	{
//	  "version": 1,
//	  "settings": {
//	    "background_color": "#f4f4f5",
//	    "content_background_color": "#ffffff",
//	    "text_color": "#111827",
//	    "link_color": "#2563eb",
//	    "content_width": 600,
//	    "font_family": "arial",
//	    "preview_text": "Your order is on its way",
//	    "lang": "en"
//	  },
//	  "blocks": [
//	    {"type": "heading", "level": 1, "text": "Hi {{{FIRST_NAME|there}}}"},
//	    {"type": "text", "runs": [
//	      {"text": "Your order "},
//	      {"text": "#1234", "bold": true},
//	      {"text": " has shipped. "},
//	      {"text": "Track it", "href": "https://example.com/t/1234"}
//	    ]},
//	    {"type": "button", "label": "View order", "href": "https://example.com/o/1234"},
//	    {"type": "footer", "address": ["Example Inc.", "1 Main St", "Springfield"]}
//	  ]
//	}
//
// "version" may be omitted (it means 1); any other value is refused, so a
// later format can be told apart. Unknown fields anywhere are refused, so a
// misspelt field is an error rather than silently ignored (names are matched
// without regard to case, as encoding/json does; write them in lower case). Every setting is
// optional; the defaults are shown above, except "preview_text" (none).
//
// Settings:
//   - background_color, content_background_color, text_color, link_color:
//     "#rgb" or "#rrggbb" (no other CSS is accepted anywhere).
//   - content_width: pixels, 320 to 800 (default 600).
//   - font_family: one of arial, helvetica, georgia, times, verdana, tahoma,
//     trebuchet, courier, system (each maps to a font stack ending in a
//     generic family, so every client has a fallback).
//   - preview_text: up to 500 characters shown by inboxes next to the
//     subject (a hidden preheader); not part of the text part.
//   - lang: the language tag of the html element (default "en").
//
// Blocks ("blocks" is an array, possibly empty; every block has "type"):
//   - heading: "text" (required), "level" 1 to 3 (required), "align"
//     (left, center, right; default left), "color".
//   - text: one paragraph. "runs" (required, at least one): each run has
//     "text" (required), optional "bold", "italic" (booleans) and "href" (a
//     link). A newline in a run's text is a line break. Also "align", "color".
//     Inline formatting is structural: no HTML is accepted in any value.
//   - button: "label", "href" (required), "background_color" (default
//     #111827), "text_color" (default #ffffff), "border_radius" (0 to 50
//     pixels, default 6), "align" (default center).
//   - image: "src" (required, an https URL), "alt" (required, non-empty),
//     "width" in pixels (at most the content width; default and upper bound
//     when rendered: the width available, inside a column its share), optional "href" (the image becomes a link), "align"
//     (default center).
//   - divider: optional "color" (default #e5e7eb).
//   - spacer: "height" in pixels, 1 to 200 (required).
//   - columns: "columns" (required): 2 or 3 arrays of blocks, shown side by
//     side of equal width and stacked on narrow screens. Columns hold any
//     block except columns and footer (one level of nesting at most).
//   - footer: "address" (required): 1 to 10 non-empty postal address lines;
//     optional "text" (a note above the address), "unsubscribe_label"
//     (default "Unsubscribe"), "align" (default center), "color" (default
//     #6b7280). The footer always links to {{{RESEND_UNSUBSCRIBE_URL}}}.
//     Footers are only allowed at the top level.
//
// Links ("href" of runs, buttons and images) must be absolute http, https or
// mailto URLs, or start with a merge placeholder ("{{{RESET_URL}}}"), whose
// value the sender supplies: this package cannot check the scheme of a value
// that is only known when the email is sent. Image "src" must be an https
// URL. URLs are at most 2048 bytes and contain no spaces or control
// characters (outside placeholders).
//
// Limits (bounding the work of one render): a document is at most
// [MaxDocumentSize] bytes and [MaxBlocks] blocks, counting those inside
// columns; a text block has at most [MaxRuns] runs.
//
// Errors name the offending value by its path, for example
// "blocks[3].columns[1][0].href: must be an http, https or mailto URL"; see
// [FieldError].
//
// # Merge placeholders
//
// Text and URLs may contain Resend's merge placeholders, {{{NAME}}} and
// {{{NAME|fallback}}}. This package does not fill them: it copies them into
// both parts for the mail-merge step (package merge), which runs on the
// rendered output. Parse refuses what that step would refuse (an unclosed
// "{{{", a name that is not a variable name), naming the value's path.
// HTML escaping never touches braces, names or the "|", so placeholders
// survive; a fallback is text like any other value in the document, so in
// the HTML part it is escaped ({{{NAME|Tom & Jerry}}} becomes
// {{{NAME|Tom &amp; Jerry}}}) and the merge step copies it as written. The
// values the merge step fills in are escaped by that step (HTML-escaped in
// the HTML part, copied as they are into the text part); nothing in this
// package escapes them.
//
// # HTML
//
// The HTML part uses only what Gmail, Outlook (Word rendering engine), Apple
// Mail and Yahoo render: nested tables with role="presentation", inline
// style attributes and HTML attributes (bgcolor, width, align), no <style>
// element, no scripts, no classes. Outlook for Windows gets fixed-width
// "ghost" tables inside conditional comments (<!--[if mso]>), because it
// ignores max-width and inline-block. Columns use the hybrid ("fluid")
// technique: each column is an inline-block of max-width its share of the
// content width, so they sit side by side when there is room and stack when
// there is not, without media queries (which some Gmail apps drop). Buttons
// are padding-based, with mso-padding-alt for Outlook.
//
// # Text
//
// The text part is readable plain text: headings underlined (level 1 with
// "=", level 2 with "-"), paragraphs separated by blank lines, links as
// "label (url)" (just the url when the label is the url), buttons as
// "label: url", linked images as "alt (url)" (images without a link are
// left out), dividers as a line of dashes, and the footer's note, address
// lines and "Unsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}".
package components
