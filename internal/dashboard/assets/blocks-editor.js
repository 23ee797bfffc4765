// The block editor: a visual editor of a component document (the JSON
// format of internal/components, documented in its doc.go), for people
// who do not write JSON.
//
// Contract (page-agnostic; any page may use it):
//   - It enhances every <textarea data-blocks-editor> on the page once the
//     script runs (load it at the end of the body, or with defer); a textarea
//     added later is enhanced by window.PosthasteBlocksEditor.enhance(ta)
//     (once per textarea; a second call does nothing). Without JavaScript
//     the textarea stays as it is and the JSON can be edited by hand.
//   - It reads the textarea's value (a component document; empty means a new
//     document with no blocks) and its data-variables attribute: a JSON array
//     of variable names offered by "Insert variable", next to the reserved
//     FIRST_NAME, LAST_NAME, EMAIL and RESEND_UNSUBSCRIBE_URL. The attribute
//     is read again each time the list is opened, so a page may update it.
//   - It hides the textarea and renders the editor right after it (after
//     the textarea's <label> when the textarea sits inside one). Every change
//     writes the whole document back into the textarea as JSON (two-space
//     indentation, keys in the order of doc.go, empty optional fields left
//     out) and dispatches a bubbling "input" event on the textarea, so form
//     listeners (a live preview, an autosave) see it. The textarea keeps its
//     name, so the form posts the JSON as before.
//   - A document it cannot represent (invalid JSON, an unknown block type or
//     field, a value of the wrong kind) is never rewritten: the textarea
//     stays visible with a message, and a "Use the visual editor" button
//     tries again once the JSON is fixed.
//   - None of its controls has a name (nothing extra is posted), every
//     button is type="button", Enter in its fields does not submit the form,
//     and it uses no inline styles or scripts (a strict
//     Content-Security-Policy holds). Its styles are the "Block editor"
//     section of style.css (classes prefixed "be-").
//
// Blocks are named by position, counting from 1: a top-level block is
// "block N"; a block inside columns is "block N column C block M". Stable
// aria-labels (NAME is such a name, Type one of Heading, Text, Button,
// Image, Divider, Spacer, Columns, Footer):
//   - "Add Type" (lower-case type: "Add heading", "Add text", …): appends a
//     block at the end of the document.
//   - "Add a block after NAME" toggles a row of "Add TYPE after NAME".
//   - "Add TYPE to block N column C": appends a block to a column.
//   - "Move NAME up", "Move NAME down", "Duplicate NAME", "Delete NAME".
//   - Fields: "FIELD of NAME", FIELD being Text, Level, Align, Color, Label,
//     Link, Background color, Text color, Border radius, Image URL,
//     Alternative text, Width, Height, Number of columns, Note, Address
//     lines, Unsubscribe label ("Text of block 1", "Link of block 3").
//     Each color field has a picker "Pick FIELD of NAME" (lower-case field:
//     "Pick color of block 1"). The text of a text block is a contenteditable
//     labelled "Text of NAME", with the buttons "Bold", "Italic" and "Link"
//     of NAME ("Bold text of block 2", "Italic text of block 2", "Link text
//     of block 2"); the link row has "Link URL of NAME", "Apply link to NAME"
//     and "Remove link from NAME". Ctrl/Cmd+B and Ctrl/Cmd+I toggle bold and
//     italic; Bold, Italic and Link apply to the selected text (with no
//     selection they say so in the status line); Enter inserts a line
//     break; pasted content becomes plain text; dropped content is refused.
//   - "Variable", "Fallback of the variable" and "Insert variable": inserts
//     {{{NAME|fallback}}} (or {{{NAME}}} without a fallback) at the caret of
//     the text field or text block focused last.
//   - Settings (a <details> "Document settings"): "Preview text",
//     "Background color", "Content background color", "Text color", "Link
//     color", "Content width", "Font", "Language" (pickers "Pick background
//     color", …).
//   - Other: "Use the visual editor" (the message shown instead of the
//     editor), a status line (role=status, class be-status) saying what the
//     last action did.
// Drag and drop: a card can be dragged onto another card of the same list
// to move it there.
(function () {
  "use strict";

  var RESERVED = ["FIRST_NAME", "LAST_NAME", "EMAIL", "RESEND_UNSUBSCRIBE_URL"];
  var TYPES = ["heading", "text", "button", "image", "divider", "spacer", "columns", "footer"];
  var TITLES = { heading: "Heading", text: "Text", button: "Button", image: "Image", divider: "Divider",
    spacer: "Spacer", columns: "Columns", footer: "Footer" };
  // Fields of each block type in the order they are written, with their
  // kind: s string, n number, b boolean, runs, lines (array of strings),
  // cols (columns of blocks).
  var FIELDS = {
    heading: [["level", "n"], ["text", "s"], ["align", "s"], ["color", "s"]],
    text: [["runs", "runs"], ["align", "s"], ["color", "s"]],
    button: [["label", "s"], ["href", "s"], ["background_color", "s"], ["text_color", "s"], ["border_radius", "n"], ["align", "s"]],
    image: [["src", "s"], ["alt", "s"], ["width", "n"], ["href", "s"], ["align", "s"]],
    divider: [["color", "s"]],
    spacer: [["height", "n"]],
    columns: [["columns", "cols"]],
    footer: [["text", "s"], ["address", "lines"], ["unsubscribe_label", "s"], ["align", "s"], ["color", "s"]]
  };
  // Fields a block always has (written even when empty, so the server names
  // what is missing).
  var REQUIRED = { heading: ["level", "text"], text: ["runs"], button: ["label", "href"], image: ["src", "alt"],
    spacer: ["height"], columns: ["columns"], footer: ["address"] };
  var SETTINGS = [["background_color", "s"], ["content_background_color", "s"], ["text_color", "s"], ["link_color", "s"],
    ["content_width", "n"], ["font_family", "s"], ["preview_text", "s"], ["lang", "s"]];
  var RUN_FIELDS = [["text", "s"], ["bold", "b"], ["italic", "b"], ["href", "s"]];
  var FONTS = ["arial", "helvetica", "georgia", "times", "verdana", "tahoma", "trebuchet", "courier", "system"];

  // ---- The document model -------------------------------------------------

  function Unrepresentable(message) { this.message = message; }

  function kindOK(v, kind) {
    if (kind === "s") return typeof v === "string";
    if (kind === "n") return typeof v === "number" && isFinite(v);
    if (kind === "b") return typeof v === "boolean";
    return true;
  }

  // pick copies the known fields of obj (names matched without regard to
  // case, as the server does) and refuses unknown ones or wrong kinds.
  function pick(obj, fields, path, extra) {
    if (!obj || typeof obj !== "object" || Array.isArray(obj)) throw new Unrepresentable(path + " is not an object");
    var out = {};
    Object.keys(obj).forEach(function (k) {
      var key = k.toLowerCase();
      if (extra && extra.indexOf(key) >= 0) return;
      var f = fields.filter(function (f) { return f[0] === key; })[0];
      if (!f) throw new Unrepresentable(path + " has the unknown field \"" + k + "\"");
      if (!kindOK(obj[k], f[1])) throw new Unrepresentable(path + "." + key + " has a value of the wrong kind");
      out[key] = obj[k];
    });
    return out;
  }

  function readBlock(raw, path, nested) {
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Unrepresentable(path + " is not an object");
    var type = null;
    Object.keys(raw).forEach(function (k) { if (k.toLowerCase() === "type") type = raw[k]; });
    if (typeof type !== "string" || TYPES.indexOf(type) < 0) throw new Unrepresentable(path + " has an unknown type");
    if (nested && (type === "columns" || type === "footer")) throw new Unrepresentable(path + ": a " + type + " block cannot be inside columns");
    var b = pick(raw, FIELDS[type], path, ["type"]);
    b.type = type;
    if (b.runs !== undefined) {
      if (!Array.isArray(b.runs)) throw new Unrepresentable(path + ".runs is not a list");
      b.runs = b.runs.map(function (r, i) { return pick(r, RUN_FIELDS, path + ".runs[" + i + "]"); });
    }
    if (b.address !== undefined) {
      if (!Array.isArray(b.address) || b.address.some(function (l) { return typeof l !== "string"; })) {
        throw new Unrepresentable(path + ".address is not a list of lines");
      }
    }
    if (b.columns !== undefined) {
      if (!Array.isArray(b.columns) || b.columns.some(function (c) { return !Array.isArray(c); })) {
        throw new Unrepresentable(path + ".columns is not a list of columns");
      }
      if (b.columns.length > 3) throw new Unrepresentable(path + ".columns has more than 3 columns");
      b.columns = b.columns.map(function (col, ci) {
        return col.map(function (inner, j) { return readBlock(inner, path + ".columns[" + ci + "][" + j + "]", true); });
      });
    }
    return b;
  }

  // readDocument parses the textarea's JSON into the model, or throws
  // Unrepresentable.
  function readDocument(src) {
    if (src.trim() === "") return { settings: {}, blocks: [] };
    var raw;
    try {
      raw = JSON.parse(src);
    } catch (e) {
      throw new Unrepresentable("the JSON does not parse (" + e.message + ")");
    }
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Unrepresentable("the document is not a JSON object");
    var doc = { settings: {}, blocks: [] };
    Object.keys(raw).forEach(function (k) {
      var key = k.toLowerCase(), v = raw[k];
      if (key === "version") {
        if (v !== 1) throw new Unrepresentable("only version 1 documents can be edited here");
      } else if (key === "settings") {
        doc.settings = v === null ? {} : pick(v, SETTINGS, "settings");
      } else if (key === "blocks") {
        if (v === null) return;
        if (!Array.isArray(v)) throw new Unrepresentable("blocks is not a list");
        doc.blocks = v.map(function (b, i) { return readBlock(b, "blocks[" + i + "]", false); });
      } else {
        throw new Unrepresentable("the document has the unknown field \"" + k + "\"");
      }
    });
    return doc;
  }

  function isEmpty(v) { return v === undefined || v === null || v === "" || v === false; }

  function writeFields(src, fields, required) {
    var out = {};
    fields.forEach(function (f) {
      var k = f[0], v = src[k];
      if (isEmpty(v) && (!required || required.indexOf(k) < 0)) return;
      if (v === undefined || v === null) v = f[1] === "n" ? 0 : f[1] === "s" ? "" : [];
      if (f[1] === "runs") v = v.map(function (r) { return writeFields(r, RUN_FIELDS, ["text"]); });
      if (f[1] === "cols") v = v.map(function (col) { return col.map(writeBlock); });
      if (f[1] === "lines") v = v.slice();
      out[k] = v;
    });
    return out;
  }

  function writeBlock(b) {
    var out = { type: b.type };
    var fields = writeFields(b, FIELDS[b.type], REQUIRED[b.type] || []);
    Object.keys(fields).forEach(function (k) { out[k] = fields[k]; });
    return out;
  }

  // writeDocument is the model as the JSON the textarea holds.
  function writeDocument(doc) {
    var out = { version: 1 };
    var settings = writeFields(doc.settings, SETTINGS, []);
    if (Object.keys(settings).length) out.settings = settings;
    out.blocks = doc.blocks.map(writeBlock);
    return JSON.stringify(out, null, 2);
  }

  function newBlock(type) {
    switch (type) {
      case "heading": return { type: type, level: 2, text: "" };
      case "text": return { type: type, runs: [{ text: "" }] };
      case "button": return { type: type, label: "", href: "" };
      case "image": return { type: type, src: "", alt: "" };
      case "divider": return { type: type };
      case "spacer": return { type: type, height: 24 };
      case "columns": return { type: type, columns: [[], []] };
      case "footer": return { type: type, address: [] };
    }
  }

  function clone(v) { return JSON.parse(JSON.stringify(v)); }

  // ---- Runs: the text of a text block -------------------------------------

  function sameStyle(a, b) { return !!a.bold === !!b.bold && !!a.italic === !!b.italic && (a.href || "") === (b.href || ""); }

  function style(r) {
    var s = {};
    if (r.bold) s.bold = true;
    if (r.italic) s.italic = true;
    if (r.href) s.href = r.href;
    return s;
  }

  // normalize merges neighbouring runs of the same style and drops empty
  // ones, keeping one run so the block has text to edit.
  function normalize(runs) {
    var out = [];
    runs.forEach(function (r) {
      if (!r.text) return;
      var last = out[out.length - 1];
      if (last && sameStyle(last, r)) last.text += r.text;
      else out.push(Object.assign(style(r), { text: r.text }));
    });
    return out.length ? out.map(function (r) { return Object.assign({ text: r.text }, style(r)); }) : [{ text: "" }];
  }

  // chars is runs as one style per character, to edit ranges.
  function chars(runs) {
    var out = [];
    runs.forEach(function (r) {
      Array.from(r.text).forEach(function (c) { out.push(Object.assign(style(r), { text: c })); });
    });
    return out;
  }

  function runsLength(runs) { return chars(runs).length; }

  function replaceRange(runs, start, end, text) {
    var cs = chars(runs);
    // Inserted text takes the bold and italic of the character before it,
    // and its link only inside a link (not at the link's end).
    var before = cs[start - 1] || cs[end] || {}, after = cs[end] || {};
    var at = style(before);
    if (at.href && at.href !== after.href) delete at.href;
    var ins = Array.from(text).map(function (c) { return Object.assign(style(at), { text: c }); });
    cs.splice.apply(cs, [start, end - start].concat(ins));
    return normalize(cs);
  }

  // toggle sets (or, when the whole range has it, clears) a style on a range.
  function applyStyle(runs, start, end, key, value) {
    var cs = chars(runs);
    var slice = cs.slice(start, end);
    if (value === undefined) value = !slice.every(function (c) { return c[key]; });
    slice.forEach(function (c) { if (value) c[key] = value; else delete c[key]; });
    return normalize(cs);
  }

  function hrefAt(runs, start, end) {
    var cs = chars(runs).slice(start, Math.max(end, start + 1));
    return cs.length && cs[0].href && cs.every(function (c) { return c.href === cs[0].href; }) ? cs[0].href : "";
  }

  // renderRuns fills a contenteditable with runs: links, strong and em
  // around text, a <br> for each newline.
  function renderRuns(el, runs) {
    el.textContent = "";
    var all = "";
    runs.forEach(function (r) {
      var node = document.createDocumentFragment();
      r.text.split("\n").forEach(function (part, i) {
        if (i > 0) node.appendChild(document.createElement("br"));
        if (part) node.appendChild(document.createTextNode(part));
      });
      var wrap = function (tag) { var w = document.createElement(tag); w.appendChild(node); node = w; };
      if (r.italic) wrap("em");
      if (r.bold) wrap("strong");
      if (r.href) { wrap("a"); node.setAttribute("href", r.href); }
      el.appendChild(node);
      all += r.text;
    });
    // A trailing newline needs a second <br> to show its empty line.
    if (all.slice(-1) === "\n") el.appendChild(document.createElement("br"));
  }

  var BLOCK_TAGS = /^(DIV|P|LI|H[1-6]|BLOCKQUOTE|PRE|TR)$/;

  // flatten reads the runs of a node (what the user typed or pasted):
  // text with bold, italic and link, newlines for <br> and block elements.
  function flatten(root, dropTrailingBreak) {
    var out = [];
    var text = function () { return out.map(function (r) { return r.text; }).join(""); };
    function walk(node, st) {
      if (node.nodeType === 3) {
        if (node.nodeValue) out.push(Object.assign(style(st), { text: node.nodeValue.replace(/\r\n?/g, "\n") }));
        return;
      }
      if (node.nodeType !== 1 && node.nodeType !== 11) return;
      if (node.nodeType === 1) {
        var tag = node.tagName;
        if (tag === "BR") { out.push(Object.assign(style(st), { text: "\n", br: true })); return; }
        if (tag === "SCRIPT" || tag === "STYLE") return;
        st = style(st);
        if (tag === "B" || tag === "STRONG" || /^(bold|[6-9]00)$/.test(node.style && node.style.fontWeight)) st.bold = true;
        if (tag === "I" || tag === "EM" || (node.style && node.style.fontStyle === "italic")) st.italic = true;
        if (tag === "A" && node.getAttribute("href")) st.href = node.getAttribute("href");
        if (BLOCK_TAGS.test(tag) && out.length && text().slice(-1) !== "\n") out.push({ text: "\n" });
      }
      Array.prototype.forEach.call(node.childNodes, function (c) { walk(c, st); });
    }
    walk(root, {});
    if (dropTrailingBreak && out.length && out[out.length - 1].br) out.pop();
    return out.map(function (r) { return Object.assign({ text: r.text }, style(r)); });
  }

  // caretOffsets is the selection inside el as character offsets of its
  // runs, or null when the selection is elsewhere.
  function caretOffsets(el) {
    var sel = window.getSelection();
    if (!sel.rangeCount) return null;
    var r = sel.getRangeAt(0);
    if (!el.contains(r.startContainer) || !el.contains(r.endContainer)) return null;
    var measure = function (node, off) {
      var range = document.createRange();
      range.setStart(el, 0);
      range.setEnd(node, off);
      return runsLength(flatten(range.cloneContents(), false));
    };
    return { start: measure(r.startContainer, r.startOffset), end: measure(r.endContainer, r.endOffset) };
  }

  // setCaret selects [start, end) in el, rendered by renderRuns.
  function setCaret(el, start, end) {
    var point = function (offset) {
      var count = 0, found = null;
      (function walk(node) {
        for (var i = 0; i < node.childNodes.length && !found; i++) {
          var c = node.childNodes[i];
          if (c.nodeType === 3) {
            var n = Array.from(c.nodeValue).length;
            if (offset <= count + n) { found = [c, c.nodeValue.length - Array.from(c.nodeValue).slice(offset - count).join("").length]; return; }
            count += n;
          } else if (c.tagName === "BR") {
            if (offset === count) { found = [node, i]; return; }
            count += 1;
          } else {
            walk(c);
          }
        }
      })(el);
      return found || [el, el.childNodes.length];
    };
    var a = point(start), b = point(end);
    var range = document.createRange();
    range.setStart(a[0], a[1]);
    range.setEnd(b[0], b[1]);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // ---- Small DOM helpers ----------------------------------------------------

  function h(tag, attrs, children) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "text") el.textContent = v;
      else if (k === "class") el.className = v;
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else if (k === "value") el.value = v;
      else el.setAttribute(k, v === true ? "" : v);
    });
    (children || []).forEach(function (c) { if (c) el.append(c); });
    return el;
  }

  function button(text, label, onclick, cls) {
    return h("button", { type: "button", class: "secondary be-btn" + (cls ? " " + cls : ""), "aria-label": label, text: text, onclick: onclick });
  }

  var uid = 0;
  function nextID() { return "be-" + (++uid); }

  // noSubmit keeps Enter in a one-line field from submitting the form.
  function noSubmit(e) {
    if (e.key === "Enter" && e.target.tagName === "INPUT") e.preventDefault();
  }

  // ---- The editor -------------------------------------------------------------

  function Editor(textarea) {
    this.ta = textarea;
    this.host = textarea.parentElement && textarea.parentElement.tagName === "LABEL" ? textarea.parentElement : textarea;
    this.root = h("div", { class: "be", "data-blocks-editor-ui": "" });
    this.host.after(this.root);
    this.last = null; // the field focused last: {el, rich, start, end}
    this.start();
  }

  Editor.prototype.start = function () {
    var self = this;
    try {
      this.doc = readDocument(this.ta.value);
    } catch (e) {
      if (!(e instanceof Unrepresentable)) throw e;
      this.showRaw(e.message);
      return;
    }
    this.ta.hidden = true;
    this.root.textContent = "";
    this.status = h("p", { class: "hint be-status", role: "status" });
    this.list = h("div", { class: "be-blocks" });
    this.root.append(this.settingsPanel(), this.variableBar(), this.list, this.addBar(null, this.doc.blocks, -1), this.status);
    this.root.addEventListener("keydown", noSubmit);
    this.root.addEventListener("focusin", function (e) { self.track(e.target); });
    this.render();
  };

  Editor.prototype.showRaw = function (why) {
    var self = this;
    this.ta.hidden = false;
    this.root.textContent = "";
    this.root.append(h("p", { class: "error be-raw", role: "alert",
      text: "The visual editor cannot show this document: " + why + ". Edit the JSON below, or fix it and try again." }),
    button("Use the visual editor", "Use the visual editor", function () {
      try {
        readDocument(self.ta.value);
      } catch (e) {
        self.showRaw(e.message);
        return;
      }
      self.start();
    }));
  };

  // commit writes the document into the textarea and tells the form.
  Editor.prototype.commit = function () {
    this.ta.value = writeDocument(this.doc);
    this.ta.dispatchEvent(new Event("input", { bubbles: true }));
  };

  // changed commits and redraws the block list, then focuses the control
  // labelled focusLabel if there is one.
  Editor.prototype.changed = function (focusLabel) {
    this.commit();
    this.render();
    if (focusLabel) {
      var el = this.root.querySelector('[aria-label="' + focusLabel + '"]');
      if (el && el.disabled) {
        // A block moved to an end: its other move button.
        var other = focusLabel.replace(/ up$/, " DOWN").replace(/ down$/, " up").replace(/ DOWN$/, " down");
        el = this.root.querySelector('[aria-label="' + other + '"]');
      }
      if (el && !el.disabled) el.focus();
    }
  };

  Editor.prototype.say = function (msg) { this.status.textContent = msg; };

  Editor.prototype.render = function () {
    var self = this;
    this.list.textContent = "";
    if (!this.doc.blocks.length) this.list.append(h("p", { class: "hint", text: "No blocks yet: add one below." }));
    this.doc.blocks.forEach(function (b, i) {
      self.list.append(self.card(b, self.doc.blocks, i, "block " + (i + 1), false));
    });
  };

  // ---- Settings -------------------------------------------------------------

  Editor.prototype.settingsPanel = function () {
    var s = this.doc.settings, self = this;
    var set = function (key, v) {
      if (isEmpty(v)) delete s[key]; else s[key] = v;
      self.commit();
    };
    var font = h("select", { "aria-label": "Font", onchange: function () { set("font_family", this.value); } },
      [h("option", { value: "", text: "Default (Arial)" })].concat(FONTS.map(function (f) {
        return h("option", { value: f, text: f, selected: s.font_family === f });
      })));
    return h("details", { class: "be-settings" }, [
      h("summary", { text: "Document settings" }),
      h("div", { class: "be-grid" }, [
        this.textField("Preview text", s.preview_text, function (v) { set("preview_text", v); }, { vars: true, wide: true,
          hint: "Shown by inboxes next to the subject." }),
        this.colorField("Background color", s.background_color, "#f4f4f5", function (v) { set("background_color", v); }),
        this.colorField("Content background color", s.content_background_color, "#ffffff", function (v) { set("content_background_color", v); }),
        this.colorField("Text color", s.text_color, "#111827", function (v) { set("text_color", v); }),
        this.colorField("Link color", s.link_color, "#2563eb", function (v) { set("link_color", v); }),
        this.numberField("Content width", s.content_width, 320, 800, "600", function (v) { set("content_width", v); }),
        this.wrapLabel("Font", font),
        this.textField("Language", s.lang, function (v) { set("lang", v); }, { placeholder: "en" })
      ])
    ]);
  };

  // ---- Fields -----------------------------------------------------------------

  Editor.prototype.wrapLabel = function (text, control, hint) {
    var id = nextID();
    control.id = id;
    return h("div", { class: "be-field" }, [h("label", { for: id, text: text, "aria-hidden": "true" }), control,
      hint ? h("span", { class: "hint", text: hint }) : null]);
  };

  // textField is a one-line field; opts: vars (variables may be inserted),
  // placeholder, hint, wide, aria (the aria-label, default the label).
  Editor.prototype.textField = function (label, value, set, opts) {
    opts = opts || {};
    var input = h("input", { type: "text", "aria-label": opts.aria || label, value: value || "", placeholder: opts.placeholder,
      autocomplete: "off", spellcheck: opts.url ? "false" : null, "data-vars": opts.vars ? "" : null,
      oninput: function () { set(this.value); } });
    var f = this.wrapLabel(label, input, opts.hint);
    if (opts.wide) f.classList.add("be-wide");
    return f;
  };

  Editor.prototype.numberField = function (label, value, min, max, placeholder, set, aria) {
    var input = h("input", { type: "number", "aria-label": aria || label, min: min, max: max, step: 1, placeholder: placeholder,
      value: value === undefined ? "" : String(value),
      oninput: function () { set(this.value === "" ? undefined : Number(this.value)); } });
    return this.wrapLabel(label, input);
  };

  Editor.prototype.selectField = function (label, value, options, set, aria) {
    var sel = h("select", { "aria-label": aria || label, onchange: function () { set(this.value); } },
      options.map(function (o) { return h("option", { value: o[0], text: o[1], selected: String(value || "") === o[0] }); }));
    return this.wrapLabel(label, sel);
  };

  // colorField is a text field for "#rgb"/"#rrggbb" with a color picker.
  Editor.prototype.colorField = function (label, value, def, set, aria) {
    aria = aria || label;
    var hex6 = function (v) {
      if (/^#[0-9a-f]{6}$/i.test(v)) return v.toLowerCase();
      if (/^#[0-9a-f]{3}$/i.test(v)) return "#" + v.slice(1).split("").map(function (c) { return c + c; }).join("").toLowerCase();
      return def;
    };
    var picker = h("input", { type: "color", class: "be-swatch", "aria-label": "Pick " + aria.charAt(0).toLowerCase() + aria.slice(1),
      value: hex6(value || def) });
    var text = h("input", { type: "text", "aria-label": aria, value: value || "", placeholder: def, autocomplete: "off",
      spellcheck: "false", size: 8, pattern: "#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})",
      oninput: function () { picker.value = hex6(this.value || def); set(this.value.trim()); } });
    picker.addEventListener("input", function () { text.value = picker.value; set(picker.value); });
    var id = nextID();
    text.id = id;
    return h("div", { class: "be-field" }, [h("label", { for: id, text: label, "aria-hidden": "true" }),
      h("span", { class: "be-color" }, [picker, text])]);
  };

  var ALIGN = [["", "Default"], ["left", "Left"], ["center", "Center"], ["right", "Right"]];

  // ---- Cards --------------------------------------------------------------------

  // card is the editor of block b, list[i], named name.
  Editor.prototype.card = function (b, list, i, name, nested) {
    var self = this;
    var title = TITLES[b.type];
    var cap = name.charAt(0).toUpperCase() + name.slice(1);
    var move = function (to, label) {
      return function () {
        var moved = list.splice(i, 1)[0];
        list.splice(to, 0, moved);
        var renamed = name.replace(/\d+$/, String(to + 1));
        self.changed(label.replace("NAME", renamed));
        self.say(title + " moved to position " + (to + 1) + ".");
      };
    };
    var addAfter = h("div", { class: "be-add", hidden: true });
    var toggle = button("+ Add after", "Add a block after " + name, null, "be-toggle");
    toggle.setAttribute("aria-expanded", "false");
    toggle.addEventListener("click", function () {
      var open = addAfter.hidden;
      addAfter.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      if (open) addAfter.querySelector("button").focus();
    });
    addAfter.append.apply(addAfter, this.typeButtons(nested, function (t) { return "Add " + t + " after " + name; }, function (t) {
      list.splice(i + 1, 0, newBlock(t));
      self.changed(self.firstFieldLabel(t, name.replace(/\d+$/, String(i + 2))));
    }));
    var up = button("↑", "Move " + name + " up", move(i - 1, "Move NAME up"));
    up.disabled = i === 0;
    var down = button("↓", "Move " + name + " down", move(i + 1, "Move NAME down"));
    down.disabled = i === list.length - 1;
    var card = h("section", { class: "be-card", "aria-label": cap + ": " + title.toLowerCase(), "data-type": b.type }, [
      h("div", { class: "be-head" }, [
        h("span", { class: "be-grip", draggable: "true", title: "Drag to move", text: "⠿" }),
        h("strong", { text: (i + 1) + ". " + title }),
        h("span", { class: "be-tools" }, [up, down,
          button("Duplicate", "Duplicate " + name, function () {
            list.splice(i + 1, 0, clone(b));
            self.changed("Duplicate " + name.replace(/\d+$/, String(i + 2)));
            self.say(title + " duplicated.");
          }),
          button("Delete", "Delete " + name, function () {
            list.splice(i, 1);
            var prev = i > 0 ? name.replace(/\d+$/, String(i)) : list.length ? name : null;
            self.changed(prev ? "Add a block after " + prev : null);
            self.say(title + " deleted.");
          }, "danger")])
      ]),
      this.fields(b, name, nested),
      h("div", { class: "be-after" }, [toggle, addAfter])
    ]);
    this.draggable(card, list, i);
    return card;
  };

  // draggable lets a card be dropped on another card of the same list.
  Editor.prototype.draggable = function (card, list, i) {
    var self = this;
    var grip = card.querySelector(".be-grip");
    grip.addEventListener("dragstart", function (e) {
      e.stopPropagation();
      self.dragging = { list: list, i: i };
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", "");
      e.dataTransfer.setDragImage(card, 10, 10);
    });
    grip.addEventListener("dragend", function () { self.dragging = null; });
    card.addEventListener("dragover", function (e) {
      if (self.dragging && self.dragging.list === list) {
        e.preventDefault();
        e.stopPropagation();
        card.classList.add("be-drop");
      }
    });
    card.addEventListener("dragleave", function () { card.classList.remove("be-drop"); });
    card.addEventListener("drop", function (e) {
      card.classList.remove("be-drop");
      var d = self.dragging;
      if (!d || d.list !== list) return;
      e.preventDefault();
      e.stopPropagation();
      self.dragging = null;
      if (d.i === i) return;
      list.splice(i, 0, list.splice(d.i, 1)[0]);
      self.changed();
      self.say("Block moved to position " + (i + 1) + ".");
    });
  };

  Editor.prototype.typeButtons = function (nested, labelOf, add) {
    return TYPES.filter(function (t) { return !nested || (t !== "columns" && t !== "footer"); }).map(function (t) {
      return button(TITLES[t], labelOf(t), function () { add(t); });
    });
  };

  // firstFieldLabel is the aria-label of the first field of a new block of
  // type t named name (focused once it is added).
  Editor.prototype.firstFieldLabel = function (t, name) {
    return { heading: "Text of ", text: "Text of ", button: "Label of ", image: "Image URL of ", divider: "Color of ",
      spacer: "Height of ", columns: "Number of columns of ", footer: "Address lines of " }[t] + name;
  };

  // addBar adds blocks at the end of list: the document's (nested false,
  // column null) or a column's.
  Editor.prototype.addBar = function (column, list) {
    var self = this;
    var nested = column !== null;
    return h("div", { class: "be-addbar" }, [h("span", { class: "hint", text: nested ? "Add to this column:" : "Add a block:" })]
      .concat(this.typeButtons(nested, function (t) { return "Add " + t + (nested ? " to " + column : ""); }, function (t) {
        list.push(newBlock(t));
        var name = nested ? column + " block " + list.length : "block " + list.length;
        self.changed(self.firstFieldLabel(t, name));
        self.say(TITLES[t] + " added.");
      })));
  };

  Editor.prototype.fields = function (b, name, nested) {
    var self = this;
    var set = function (key) {
      return function (v) {
        if (isEmpty(v) && (REQUIRED[b.type] || []).indexOf(key) < 0) delete b[key]; else b[key] = v;
        self.commit();
      };
    };
    var of = function (f) { return f + " of " + name; };
    var grid = function (children) { return h("div", { class: "be-grid" }, children); };
    switch (b.type) {
      case "heading":
        return grid([
          this.textField("Text", b.text, set("text"), { aria: of("Text"), vars: true, wide: true }),
          this.selectField("Level", b.level, [["1", "1 (largest)"], ["2", "2"], ["3", "3"]], function (v) { set("level")(Number(v)); }, of("Level")),
          this.selectField("Align", b.align, ALIGN, set("align"), of("Align")),
          this.colorField("Color", b.color, "#111827", set("color"), of("Color"))
        ]);
      case "text":
        return h("div", {}, [this.richText(b, name), grid([
          this.selectField("Align", b.align, ALIGN, set("align"), of("Align")),
          this.colorField("Color", b.color, "#111827", set("color"), of("Color"))
        ])]);
      case "button":
        return grid([
          this.textField("Label", b.label, set("label"), { aria: of("Label"), vars: true }),
          this.textField("Link", b.href, set("href"), { aria: of("Link"), vars: true, url: true, placeholder: "https://" }),
          this.colorField("Background color", b.background_color, "#111827", set("background_color"), of("Background color")),
          this.colorField("Text color", b.text_color, "#ffffff", set("text_color"), of("Text color")),
          this.numberField("Border radius", b.border_radius, 0, 50, "6", set("border_radius"), of("Border radius")),
          this.selectField("Align", b.align, ALIGN, set("align"), of("Align"))
        ]);
      case "image":
        return grid([
          this.textField("Image URL", b.src, set("src"), { aria: of("Image URL"), url: true, wide: true, placeholder: "https://",
            hint: "An https address of the image." }),
          this.textField("Alternative text", b.alt, set("alt"), { aria: of("Alternative text"), vars: true, wide: true,
            hint: "Shown when images are off, and read aloud." }),
          this.numberField("Width", b.width, 1, 800, "full", set("width"), of("Width")),
          this.textField("Link", b.href, set("href"), { aria: of("Link"), vars: true, url: true, placeholder: "optional" }),
          this.selectField("Align", b.align, ALIGN, set("align"), of("Align"))
        ]);
      case "divider":
        return grid([this.colorField("Color", b.color, "#e5e7eb", set("color"), of("Color"))]);
      case "spacer":
        return grid([this.numberField("Height", b.height, 1, 200, "24", set("height"), of("Height"))]);
      case "footer":
        var address = h("textarea", { rows: 3, "aria-label": of("Address lines"), "data-vars": "",
          oninput: function () {
            b.address = this.value.split("\n").filter(function (l) { return l.trim() !== ""; });
            self.commit();
          } });
        address.value = (b.address || []).join("\n");
        return grid([
          this.textField("Note", b.text, set("text"), { aria: of("Note"), vars: true, wide: true, hint: "Optional, above the address." }),
          h("div", { class: "be-wide" }, [this.wrapLabel("Address lines", address, "Your postal address, one line each (required by anti-spam laws).")]),
          this.textField("Unsubscribe label", b.unsubscribe_label, set("unsubscribe_label"), { aria: of("Unsubscribe label"), vars: true, placeholder: "Unsubscribe" }),
          this.selectField("Align", b.align, ALIGN, set("align"), of("Align")),
          this.colorField("Color", b.color, "#6b7280", set("color"), of("Color"))
        ]);
      case "columns":
        return this.columns(b, name);
    }
  };

  Editor.prototype.columns = function (b, name) {
    var self = this;
    var count = this.selectField("Number of columns", String(b.columns.length), [["2", "2"], ["3", "3"]], function (v) {
      var n = Number(v);
      while (b.columns.length < n) b.columns.push([]);
      // Fewer columns: the blocks of the dropped column join the last one kept.
      while (b.columns.length > n) {
        var dropped = b.columns.pop();
        b.columns[b.columns.length - 1] = b.columns[b.columns.length - 1].concat(dropped);
      }
      self.changed("Number of columns of " + name);
    }, "Number of columns of " + name);
    var cols = h("div", { class: "be-columns" }, b.columns.map(function (col, c) {
      var cname = name + " column " + (c + 1);
      var box = h("div", { class: "be-column", role: "group", "aria-label": cname.charAt(0).toUpperCase() + cname.slice(1) },
        [h("p", { class: "be-column-title", text: "Column " + (c + 1) })]);
      col.forEach(function (inner, j) { box.append(self.card(inner, col, j, cname + " block " + (j + 1), true)); });
      box.append(self.addBar(cname, col));
      return box;
    }));
    return h("div", {}, [h("div", { class: "be-grid" }, [count]), cols]);
  };

  // ---- The text of a text block --------------------------------------------------

  Editor.prototype.richText = function (b, name) {
    var self = this;
    var area = h("div", { class: "be-rich", contenteditable: "true", role: "textbox", "aria-multiline": "true",
      "aria-label": "Text of " + name, "data-vars": "" });
    renderRuns(area, b.runs || [{ text: "" }]);
    var sync = function () {
      b.runs = normalize(flatten(area, true));
      self.commit();
    };
    // redraw re-renders the runs and puts the caret back.
    var redraw = function (start, end) {
      renderRuns(area, b.runs);
      area.focus();
      setCaret(area, start, end);
      self.commit();
    };
    var styleRange = function (key) {
      var at = caretOffsets(area) || (self.last && self.last.el === area ? self.last : null);
      if (!at || at.start === at.end) {
        self.say("Select some text first.");
        return;
      }
      b.runs = applyStyle(b.runs, at.start, at.end, key);
      redraw(at.start, at.end);
    };
    area.addEventListener("input", sync);
    // The browser's own formatting (menus, shortcuts) would store markup.
    // Enter is a line break in the text, not a new <div>.
    area.addEventListener("beforeinput", function (e) {
      if (/^format/.test(e.inputType)) e.preventDefault();
      if (e.inputType === "insertParagraph" || e.inputType === "insertLineBreak") {
        e.preventDefault();
        self.insertRich(area, b, "\n");
      }
    });
    area.addEventListener("keydown", function (e) {
      var mod = e.ctrlKey || e.metaKey;
      if (mod && !e.altKey && (e.key === "b" || e.key === "B")) { e.preventDefault(); styleRange("bold"); return; }
      if (mod && !e.altKey && (e.key === "i" || e.key === "I")) { e.preventDefault(); styleRange("italic"); return; }
      if (mod && !e.altKey && (e.key === "u" || e.key === "U")) e.preventDefault();
    });
    area.addEventListener("paste", function (e) {
      e.preventDefault();
      var text = (e.clipboardData && e.clipboardData.getData("text/plain")) || "";
      self.insertRich(area, b, text.replace(/\r\n?/g, "\n"));
    });
    area.addEventListener("drop", function (e) {
      e.preventDefault();
    });
    area.addEventListener("blur", function () {
      // Whatever the browser made of the markup, show the runs as stored.
      renderRuns(area, b.runs);
    });

    var linkRow = h("div", { class: "be-linkrow", hidden: true });
    var linkInput = h("input", { type: "text", "aria-label": "Link URL of " + name, placeholder: "https://", spellcheck: "false",
      autocomplete: "off", size: 30 });
    var linkRange = null;
    var applyLink = function (href) {
      if (!linkRange) return;
      b.runs = applyStyle(b.runs, linkRange.start, linkRange.end, "href", href || false);
      linkRow.hidden = true;
      redraw(linkRange.start, linkRange.end);
      linkRange = null;
    };
    linkInput.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); applyLink(linkInput.value.trim()); }
      if (e.key === "Escape") { e.preventDefault(); linkRow.hidden = true; area.focus(); }
    });
    linkRow.append(h("label", { for: (linkInput.id = nextID()), text: "Link to", "aria-hidden": "true" }), linkInput,
      button("Apply", "Apply link to " + name, function () { applyLink(linkInput.value.trim()); }),
      button("Remove link", "Remove link from " + name, function () { applyLink(""); }));

    var toolbar = h("div", { class: "be-toolbar", role: "toolbar", "aria-label": "Formatting of " + name }, [
      h("button", { type: "button", class: "secondary be-btn be-b", "aria-label": "Bold text of " + name, title: "Bold (Ctrl+B)", text: "B",
        onmousedown: function (e) { e.preventDefault(); }, onclick: function () { styleRange("bold"); } }),
      h("button", { type: "button", class: "secondary be-btn be-i", "aria-label": "Italic text of " + name, title: "Italic (Ctrl+I)", text: "I",
        onmousedown: function (e) { e.preventDefault(); }, onclick: function () { styleRange("italic"); } }),
      h("button", { type: "button", class: "secondary be-btn", "aria-label": "Link text of " + name, title: "Link", text: "Link",
        onmousedown: function (e) { e.preventDefault(); },
        onclick: function () {
          var at = caretOffsets(area) || (self.last && self.last.el === area ? { start: self.last.start, end: self.last.end } : null);
          if (!at || at.start === at.end) {
            self.say("Select the text to link first.");
            return;
          }
          linkRange = at;
          linkInput.value = hrefAt(b.runs, at.start, at.end);
          linkRow.hidden = false;
          linkInput.focus();
        } })
    ]);
    return h("div", { class: "be-text" }, [toolbar, area, linkRow]);
  };

  // insertRich replaces the selection of a text block's area with text.
  Editor.prototype.insertRich = function (area, b, text, at) {
    at = at || caretOffsets(area) || { start: runsLength(b.runs), end: runsLength(b.runs) };
    b.runs = replaceRange(b.runs, at.start, at.end, text);
    var caret = at.start + Array.from(text).length;
    renderRuns(area, b.runs);
    area.focus();
    setCaret(area, caret, caret);
    this.last = { el: area, rich: true, start: caret, end: caret, block: b };
    this.commit();
  };

  // ---- Variables ------------------------------------------------------------------

  // track remembers the field the user is in, and its caret, for "Insert
  // variable".
  Editor.prototype.track = function (el) {
    var self = this;
    if (!el.hasAttribute || !el.hasAttribute("data-vars") || el._beTracked) return;
    el._beTracked = true;
    var save = function () {
      if (el.isContentEditable) {
        var at = caretOffsets(el);
        if (at) self.last = { el: el, rich: true, start: at.start, end: at.end };
      } else {
        self.last = { el: el, rich: false, start: el.selectionStart, end: el.selectionEnd };
      }
    };
    ["keyup", "mouseup", "input", "focus", "select"].forEach(function (ev) { el.addEventListener(ev, save); });
    // A text block redraws its runs on blur: its caret was saved before.
    if (!el.isContentEditable) el.addEventListener("blur", save);
    save();
  };

  Editor.prototype.variables = function () {
    var names = [];
    try {
      var declared = JSON.parse(this.ta.getAttribute("data-variables") || "[]");
      if (Array.isArray(declared)) names = declared.filter(function (n) { return typeof n === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(n); });
    } catch (e) {
      names = [];
    }
    RESERVED.forEach(function (n) { if (names.indexOf(n) < 0) names.push(n); });
    return names;
  };

  Editor.prototype.variableBar = function () {
    var self = this;
    var select = h("select", { "aria-label": "Variable" });
    var fill = function () {
      var keep = select.value;
      select.textContent = "";
      self.variables().forEach(function (n) { select.append(h("option", { value: n, text: n, selected: n === keep })); });
    };
    fill();
    select.addEventListener("focus", fill);
    select.addEventListener("mousedown", fill);
    var fallback = h("input", { type: "text", "aria-label": "Fallback of the variable", placeholder: "optional", autocomplete: "off", size: 12 });
    var insert = h("button", { type: "button", class: "secondary be-btn", "aria-label": "Insert variable", text: "Insert",
      onmousedown: function (e) { e.preventDefault(); }, onclick: function () { self.insertVariable(select.value, fallback.value); } });
    var sid = nextID(), fid = nextID();
    select.id = sid;
    fallback.id = fid;
    return h("div", { class: "be-vars", role: "group", "aria-label": "Variables" }, [
      h("label", { for: sid, text: "Insert variable", "aria-hidden": "true" }), select,
      h("label", { for: fid, text: "fallback", "aria-hidden": "true" }), fallback, insert,
      h("span", { class: "hint", text: "at the caret of the text field you were in." })
    ]);
  };

  Editor.prototype.insertVariable = function (name, fallback) {
    if (!name) return;
    fallback = (fallback || "").replace(/[{}|\n]/g, "").trim();
    var token = "{{{" + name + (fallback ? "|" + fallback : "") + "}}}";
    var last = this.last;
    if (!last || !this.root.contains(last.el)) {
      this.say("Click into a text field first, then insert the variable.");
      return;
    }
    if (last.rich) {
      var card = last.el;
      var b = this.blockOfArea(card);
      if (!b) return;
      this.insertRich(card, b, token, { start: last.start, end: last.end });
    } else {
      var el = last.el, v = el.value;
      var s = last.start === null || last.start === undefined ? v.length : last.start;
      var e = last.end === null || last.end === undefined ? s : last.end;
      el.value = v.slice(0, s) + token + v.slice(e);
      el.focus();
      el.setSelectionRange(s + token.length, s + token.length);
      this.last = { el: el, rich: false, start: s + token.length, end: s + token.length };
      el.dispatchEvent(new Event("input", { bubbles: true }));
    }
    this.say("Inserted " + token + ".");
  };

  // blockOfArea finds the text block a contenteditable edits, by its name.
  Editor.prototype.blockOfArea = function (area) {
    var m = area.getAttribute("aria-label").match(/^Text of block (\d+)(?: column (\d+) block (\d+))?$/);
    if (!m) return null;
    var b = this.doc.blocks[Number(m[1]) - 1];
    if (m[2]) b = b && b.columns && b.columns[Number(m[2]) - 1] && b.columns[Number(m[2]) - 1][Number(m[3]) - 1];
    return b && b.type === "text" ? b : null;
  };

  function enhance(ta) {
    if (ta._blocksEditor) return;
    ta._blocksEditor = new Editor(ta);
  }

  window.PosthasteBlocksEditor = { enhance: enhance };
  document.querySelectorAll("textarea[data-blocks-editor]").forEach(enhance);
})();
