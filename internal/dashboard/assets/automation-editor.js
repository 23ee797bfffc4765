// The automation editor (templates/automation.html): an automation's
// steps as boxes in order, each with the fields of its type and, for each
// way it can end (its outcomes: "Then"; "If met" / "If not met"; "When the
// event arrives" / "If it does not arrive in time"), a select choosing the
// next step. Lines in the left margin draw those connections. The
// marketer adds steps from a menu, moves and deletes them; no JSON is
// written by hand. Every change rewrites the form's `definition` field,
// the JSON of the API's `steps` and `connections`, which the server
// decodes and validates (a refused graph comes back with the step at
// fault marked). Without scripts that field is shown and edited as it is.
//
// Step keys are made from the type: "delay_1", "send_email_2"; the
// trigger's is "trigger". Controls carry data-step (on the box),
// data-field and data-outcome attributes for tests.
(function () {
  "use strict";
  var root = document.getElementById("automation-editor");
  var form = document.getElementById("automation-form");
  if (!root || !form) return;
  var field = form.elements.definition;
  var jsonWrap = document.getElementById("au-json");
  var SVG = "http://www.w3.org/2000/svg";

  function list(name) {
    try {
      var v = JSON.parse(root.dataset[name] || "[]");
      return Array.isArray(v) ? v : [];
    } catch (e) {
      return [];
    }
  }
  var templates = list("templates");
  var segments = list("segments");
  var topics = list("topics");

  var LABELS = {
    trigger: "Trigger", delay: "Delay", send_email: "Send email", wait_for_event: "Wait for event",
    condition: "Condition", contact_update: "Update contact", contact_delete: "Delete contact",
    add_to_segment: "Add to segment"
  };
  // The types the menu adds, in its order.
  var ADDABLE = ["delay", "send_email", "wait_for_event", "condition", "contact_update", "add_to_segment", "contact_delete"];
  // The outcomes each type leaves by, with their labels.
  var THEN = [["default", "Then go to"]];
  var OUTCOMES = {
    trigger: THEN, delay: THEN, send_email: THEN, contact_update: THEN, add_to_segment: THEN,
    wait_for_event: [["event_received", "When the event arrives, go to"], ["timeout", "If it does not arrive in time, go to"]],
    condition: [["condition_met", "If met, go to"], ["condition_not_met", "If not met, go to"]],
    contact_delete: []
  };
  var OUTCOME_NAMES = {
    default: "then", event_received: "event arrives", timeout: "timeout",
    condition_met: "met", condition_not_met: "not met"
  };
  var OPERATORS = [["eq", "equals"], ["neq", "does not equal"], ["gt", "is greater than"], ["gte", "is at least"],
    ["lt", "is less than"], ["lte", "is at most"], ["contains", "contains"], ["starts_with", "starts with"],
    ["ends_with", "ends with"], ["exists", "exists"], ["is_empty", "is empty"]];
  // What value each operator takes (workflows/automation/rule.go).
  var OPKIND = {
    eq: "any", neq: "any", gt: "number", gte: "number", lt: "number", lte: "number",
    contains: "string", starts_with: "string", ends_with: "string", exists: "none", is_empty: "none"
  };
  var VALUE_MODES = [["text", "Text"], ["ref", "From a field"], ["json", "Number, true/false or JSON"]];
  var NAME_MODES = [["", "Leave as is"], ["text", "Set to text"], ["ref", "Set from a field"], ["clear", "Clear"]];

  var steps = []; // {key, type, ...the fields of its type}
  var conns = {}; // from + "\n" + outcome → to

  // ---- Reading the definition into the editor's state.

  function obj(v) { return v && typeof v === "object" && !Array.isArray(v) ? v : {}; }
  function str(v) { return typeof v === "string" ? v : ""; }

  // valueOf reads a value or reference: {mode, value}.
  function valueOf(raw) {
    if (raw === undefined) return { mode: "", value: "" };
    if (raw === null) return { mode: "clear", value: "" };
    if (raw && typeof raw === "object" && !Array.isArray(raw) && Object.keys(raw).length === 1 &&
      typeof raw["var"] === "string") return { mode: "ref", value: raw["var"] };
    if (typeof raw === "string") return { mode: "text", value: raw };
    return { mode: "json", value: JSON.stringify(raw) };
  }

  // rawOf writes one back; undefined leaves the field out.
  function rawOf(v) {
    switch (v.mode) {
      case "text": return v.value;
      case "ref": return { "var": v.value.trim() };
      case "clear": return null;
      case "json":
        try { return JSON.parse(v.value); } catch (e) { return v.value; }
    }
    return undefined;
  }

  function rowsOf(m) {
    return Object.keys(obj(m)).map(function (k) {
      var v = valueOf(m[k]);
      if (v.mode === "" || v.mode === "clear") v = { mode: "json", value: JSON.stringify(m[k]) };
      return { key: k, mode: v.mode, value: v.value };
    });
  }

  function mapOf(rows) {
    var out = {}, any = false;
    rows.forEach(function (r) {
      if (!r.key.trim()) return;
      out[r.key.trim()] = rawOf(r);
      any = true;
    });
    return any ? out : undefined;
  }

  function leafOf(r) {
    var v = r.value;
    return { field: str(r.field), op: OPKIND[r.operator] ? r.operator : "eq",
      value: v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v) };
  }

  // rulesOf reads a rule: one leaf, or an and/or of leaves; anything
  // deeper is kept as JSON text.
  function rulesOf(r) {
    if (!r) return { join: "and", rows: [] };
    if (r.type === "rule") return { join: "and", rows: [leafOf(r)] };
    if ((r.type === "and" || r.type === "or") && Array.isArray(r.rules) &&
      r.rules.every(function (x) { return x && x.type === "rule"; })) {
      return { join: r.type, rows: r.rules.map(leafOf) };
    }
    return { join: "and", rows: [], raw: JSON.stringify(r, null, 2) };
  }

  function ruleValue(op, text) {
    switch (OPKIND[op]) {
      case "none": return undefined;
      case "number":
        var n = Number(text);
        return text.trim() !== "" && isFinite(n) ? n : text;
      case "string": return text;
    }
    if (text === "true") return true;
    if (text === "false") return false;
    if (text === "null") return null;
    return text;
  }

  function ruleOf(rs) {
    if (rs.raw !== undefined) {
      try { return JSON.parse(rs.raw); } catch (e) { return rs.raw; }
    }
    var leaves = rs.rows.map(function (row) {
      var leaf = { type: "rule", field: row.field.trim(), operator: row.op };
      var v = ruleValue(row.op, row.value);
      if (v !== undefined) leaf.value = v;
      return leaf;
    });
    if (leaves.length === 0) return null;
    if (leaves.length === 1) return leaves[0];
    return { type: rs.join, rules: leaves };
  }

  function stepOf(s) {
    var c = obj(s.config);
    var st = { key: String(s.key || ""), type: String(s.type || "") };
    switch (st.type) {
      case "trigger":
        st.event = str(c.event_name);
        break;
      case "delay":
        st.duration = str(c.duration);
        break;
      case "send_email":
        var t = obj(c.template);
        st.template = str(t.id);
        st.subject = str(c.subject);
        st.from = str(c.from);
        st.replyTo = str(c.reply_to);
        st.topic = str(c.topic_id);
        st.vars = rowsOf(t.variables);
        break;
      case "wait_for_event":
        st.event = str(c.event_name);
        st.timeout = str(c.timeout);
        st.filter = rulesOf(c.filter_rule);
        break;
      case "condition":
        st.rules = rulesOf(s.config && typeof s.config === "object" ? s.config : null);
        break;
      case "contact_update":
        st.first = valueOf(c.first_name);
        st.last = valueOf(c.last_name);
        st.unsub = c.unsubscribed === undefined ? "" : c.unsubscribed === true ? "true" :
          c.unsubscribed === false ? "false" : "keep";
        st.unsubRaw = c.unsubscribed;
        st.props = rowsOf(c.properties);
        break;
      case "add_to_segment":
        st.segment = str(c.segment_id);
        break;
      case "contact_delete":
        break;
      default:
        st.raw = s.config;
    }
    return st;
  }

  function blank(type) {
    return stepOf({ key: nextKey(type), type: type,
      config: type === "condition" ? { type: "rule", field: "", operator: "eq", value: "" } : {} });
  }

  function configOf(st) {
    switch (st.type) {
      case "trigger": return { event_name: st.event.trim() };
      case "delay": return { duration: st.duration.trim() };
      case "send_email":
        var c = { template: { id: st.template } };
        var vars = mapOf(st.vars);
        if (vars) c.template.variables = vars;
        if (st.subject.trim()) c.subject = st.subject;
        if (st.from.trim()) c.from = st.from.trim();
        if (st.replyTo.trim()) c.reply_to = st.replyTo.trim();
        if (st.topic) c.topic_id = st.topic;
        return c;
      case "wait_for_event":
        var w = { event_name: st.event.trim() };
        if (st.timeout.trim()) w.timeout = st.timeout.trim();
        var f = ruleOf(st.filter);
        if (f !== null) w.filter_rule = f;
        return w;
      case "condition":
        var r = ruleOf(st.rules);
        return r === null ? { type: "and", rules: [] } : r;
      case "contact_update":
        var u = {};
        var first = rawOf(st.first), last = rawOf(st.last);
        if (first !== undefined) u.first_name = first;
        if (last !== undefined) u.last_name = last;
        if (st.unsub === "true") u.unsubscribed = true;
        else if (st.unsub === "false") u.unsubscribed = false;
        else if (st.unsub === "keep") u.unsubscribed = st.unsubRaw;
        var props = mapOf(st.props);
        if (props) u.properties = props;
        return u;
      case "add_to_segment": return { segment_id: st.segment };
      case "contact_delete": return {};
    }
    return st.raw;
  }

  function outcomesOf(st) { return OUTCOMES[st.type] || []; }

  function definition() {
    var out = { steps: [], connections: [] };
    steps.forEach(function (st) {
      out.steps.push({ key: st.key, type: st.type, config: configOf(st) });
    });
    steps.forEach(function (st) {
      outcomesOf(st).forEach(function (o) {
        var to = conns[st.key + "\n" + o[0]];
        if (to) out.connections.push({ from: st.key, to: to, type: o[0] });
      });
    });
    return out;
  }

  function sync() { field.value = JSON.stringify(definition(), null, 2); }

  function byKey(key) {
    for (var i = 0; i < steps.length; i++) if (steps[i].key === key) return steps[i];
    return null;
  }

  function indexOf(key) {
    for (var i = 0; i < steps.length; i++) if (steps[i].key === key) return i;
    return -1;
  }

  function nextKey(type) {
    if (type === "trigger" && !byKey("trigger")) return "trigger";
    for (var n = 1; ; n++) if (!byKey(type + "_" + n)) return type + "_" + n;
  }

  // ---- Building the boxes.

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "text") e.textContent = v;
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    });
    (kids || []).forEach(function (c) { if (c !== null && c !== undefined) e.append(c); });
    return e;
  }

  function fid(st, name) { return "au-" + st.key + "-" + name; }

  function input(id, value, onInput, attrs) {
    var a = attrs || {};
    a.id = id;
    a.autocomplete = "off";
    a.spellcheck = "false";
    var e = el("input", a);
    e.value = value;
    e.addEventListener("input", function () { onInput(e.value); update(); });
    return e;
  }

  function select(id, options, value, onChange, attrs) {
    var a = attrs || {};
    a.id = id;
    var e = el("select", a);
    var found = false;
    options.forEach(function (o) {
      e.append(el("option", { value: o[0], text: o[1] }));
      if (o[0] === value) found = true;
    });
    if (!found && value) e.append(el("option", { value: value, text: value }));
    e.value = value;
    e.addEventListener("change", function () { onChange(e.value); });
    return e;
  }

  // labelled is a control with its visible label and an optional hint.
  function labelled(text, control, hint, wide) {
    var kids = [el("label", { "for": control.id, text: text }), control];
    if (hint) kids.push(hint instanceof Node ? hint : el("p", { "class": "hint", text: hint }));
    return el("div", { "class": "au-field" + (wide ? " au-wide" : "") }, kids);
  }

  function button(text, onClick, attrs) {
    var a = attrs || {};
    a.type = "button";
    var b = el("button", a, [text]);
    b.addEventListener("click", onClick);
    return b;
  }

  // valueRows edits the rows of a map of values (template variables,
  // contact properties): a name, a kind and a value each.
  function valueRows(st, rows, what, legend, hint) {
    var n = indexOf(st.key) + 1;
    var fs = el("fieldset", { "class": "au-rows", "data-rows": what }, [el("legend", { text: legend })]);
    rows.forEach(function (row, j) {
      var base = fid(st, what + "-" + (j + 1));
      var nth = what + " " + (j + 1) + " of step " + n;
      fs.append(el("div", { "class": "au-row", "data-row": j + 1 }, [
        input(base + "-key", row.key, function (v) { row.key = v; },
          { "aria-label": "Name of " + nth, placeholder: "name", "data-field": what + "-key", "class": "au-key" }),
        select(base + "-mode", VALUE_MODES, row.mode, function (v) {
          row.mode = v;
          render(base + "-mode");
        }, { "aria-label": "Kind of " + nth, "data-field": what + "-mode" }),
        input(base + "-value", row.value, function (v) { row.value = v; },
          { "aria-label": "Value of " + nth, "data-field": what + "-value", "list": row.mode === "ref" ? "au-fields" : null,
            placeholder: row.mode === "ref" ? "event.plan" : row.mode === "json" ? "42, true or null" : "value" }),
        button("Remove", function () {
          rows.splice(j, 1);
          render(fid(st, what + "-add"));
        }, { "class": "secondary au-small", "aria-label": "Remove " + nth })
      ]));
    });
    fs.append(button("Add " + what, function () {
      rows.push({ key: "", mode: "text", value: "" });
      render(fid(st, what + "-" + rows.length + "-key"));
    }, { id: fid(st, what + "-add"), "class": "secondary au-small" }));
    if (hint) fs.append(el("p", { "class": "hint", text: hint }));
    return fs;
  }

  // rulesBox edits a rule: rows of field, operator and value, joined by
  // "all" or "any".
  function rulesBox(st, rs, what, legend, hint) {
    var n = indexOf(st.key) + 1;
    var fs = el("fieldset", { "class": "au-rules", "data-rules": what }, [el("legend", { text: legend })]);
    if (rs.raw !== undefined) {
      var ta = el("textarea", { id: fid(st, what + "-json"), rows: 6, spellcheck: "false" });
      ta.value = rs.raw;
      ta.addEventListener("input", function () { rs.raw = ta.value; update(); });
      fs.append(labelled("Nested rules, as JSON", ta, "These rules nest deeper than the editor shows; edit them as JSON.", true));
      return fs;
    }
    if (rs.rows.length > 1) {
      fs.append(labelled("Match", select(fid(st, what + "-join"), [["and", "all of these rules"], ["or", "any of these rules"]],
        rs.join, function (v) { rs.join = v; update(); }, { "data-field": what + "-join" })));
    }
    rs.rows.forEach(function (row, j) {
      var base = fid(st, what + "-" + (j + 1));
      var nth = "rule " + (j + 1) + " of step " + n;
      var kids = [
        input(base + "-field", row.field, function (v) { row.field = v; },
          { "aria-label": "Field of " + nth, placeholder: "event.plan", list: "au-fields", "data-field": "rule-field",
            "class": "au-key" }),
        select(base + "-op", OPERATORS, row.op, function (v) {
          row.op = v;
          render(base + "-op");
        }, { "aria-label": "Operator of " + nth, "data-field": "rule-op" })
      ];
      if (OPKIND[row.op] !== "none") {
        kids.push(input(base + "-value", row.value, function (v) { row.value = v; },
          { "aria-label": "Value of " + nth, "data-field": "rule-value",
            placeholder: OPKIND[row.op] === "number" ? "a number" : "value" }));
      }
      kids.push(button("Remove", function () {
        rs.rows.splice(j, 1);
        render(fid(st, what + "-add"));
      }, { "class": "secondary au-small", "aria-label": "Remove " + nth }));
      fs.append(el("div", { "class": "au-row", "data-row": j + 1 }, kids));
    });
    fs.append(button("Add rule", function () {
      rs.rows.push({ field: "", op: "eq", value: "" });
      render(fid(st, what + "-" + rs.rows.length + "-field"));
    }, { id: fid(st, what + "-add"), "class": "secondary au-small", "aria-label": "Add a rule to step " + n }));
    if (hint) fs.append(el("p", { "class": "hint", text: hint }));
    return fs;
  }

  function options(items, none) {
    return [["", none]].concat(items.map(function (x) { return [x.id, x.name]; }));
  }

  function fieldsOf(st) {
    var n = indexOf(st.key) + 1;
    var set = function (prop) { return function (v) { st[prop] = v; }; };
    switch (st.type) {
      case "trigger":
        return [labelled("Event", input(fid(st, "event"), st.event, set("event"),
          { list: "au-event-names", placeholder: "user.signed_up", "data-field": "event", required: true }),
        "The event you send for a contact (POST /events/send) that starts a run.")];
      case "delay":
        return [labelled("Wait for", input(fid(st, "duration"), st.duration, set("duration"),
          { placeholder: "2 days", "data-field": "duration" }),
        "In words: 30 minutes, 2 hours, 3 days, 1 week (30 days at most).")];
      case "send_email":
        var noTemplates = null;
        if (templates.length === 0) {
          noTemplates = el("p", { "class": "hint" }, ["No published template yet: ",
            el("a", { href: "/dashboard/templates", text: "write and publish one" }), "."]);
        }
        return [
          labelled("Template", select(fid(st, "template"), options(templates,
            templates.length ? "Choose a published template" : "No published template"), st.template,
          function (v) { st.template = v; update(); }, { "data-field": "template" }), noTemplates, true),
          labelled("Subject", input(fid(st, "subject"), st.subject, set("subject"),
            { placeholder: "The template's", "data-field": "subject" })),
          labelled("From", input(fid(st, "from"), st.from, set("from"),
            { placeholder: "The template's", "data-field": "from" })),
          labelled("Reply-To", input(fid(st, "reply_to"), st.replyTo, set("replyTo"),
            { placeholder: "The template's", "data-field": "reply_to" })),
          labelled("Topic", select(fid(st, "topic"), options(topics, "No topic"), st.topic,
            function (v) { st.topic = v; update(); }, { "data-field": "topic" }),
          "With a topic, contacts who unsubscribed from it are skipped."),
          el("div", { "class": "au-wide" }, [valueRows(st, st.vars, "variable", "Template variables",
            "A value of your own, or one from a field: event.plan, contact.first_name.")])
        ];
      case "wait_for_event":
        return [
          labelled("Event", input(fid(st, "event"), st.event, set("event"),
            { list: "au-event-names", placeholder: "user.upgraded", "data-field": "event" })),
          labelled("At most", input(fid(st, "timeout"), st.timeout, set("timeout"),
            { placeholder: "30 days", "data-field": "timeout" }), "Empty waits the longest: 30 days."),
          el("div", { "class": "au-wide" }, [rulesBox(st, st.filter, "filter", "Only an event that matches (optional)",
            "Fields of the awaited event are event.<name>.")])
        ];
      case "condition":
        return [el("div", { "class": "au-wide" }, [rulesBox(st, st.rules, "condition", "Condition",
          "Fields: event.<name> (the trigger's event), contact.first_name, contact.email, contact.<property>, " +
          "wait_events.<event>.<name>. For equals, true, false and null are compared as such.")])];
      case "contact_update":
        var name = function (prop, label) {
          var v = st[prop];
          var kids = [select(fid(st, prop + "-mode"), NAME_MODES, v.mode, function (m) {
            v.mode = m;
            render(fid(st, prop + "-mode"));
          }, { "aria-label": label + " of step " + n, "data-field": prop + "-mode" })];
          if (v.mode === "text" || v.mode === "ref") {
            kids.push(input(fid(st, prop), v.value, function (x) { v.value = x; },
              { "aria-label": label + " value of step " + n, "data-field": prop,
                list: v.mode === "ref" ? "au-fields" : null, placeholder: v.mode === "ref" ? "event.first_name" : "" }));
          }
          return el("div", { "class": "au-field" }, [el("span", { "class": "au-label", text: label }),
            el("div", { "class": "au-row" }, kids)]);
        };
        var unsub = [["", "Leave as is"], ["true", "Unsubscribe from everything"], ["false", "Subscribe again"]];
        if (st.unsub === "keep") unsub.push(["keep", "As set: " + JSON.stringify(st.unsubRaw)]);
        return [
          name("first", "First name"),
          name("last", "Last name"),
          labelled("Unsubscribed", select(fid(st, "unsubscribed"), unsub, st.unsub,
            function (v) { st.unsub = v; update(); }, { "data-field": "unsubscribed" })),
          el("div", { "class": "au-wide" }, [valueRows(st, st.props, "property", "Properties",
            "Contact properties to set, by key.")])
        ];
      case "add_to_segment":
        return [labelled("Segment", select(fid(st, "segment"), options(segments,
          segments.length ? "Choose a segment" : "No segment yet"), st.segment,
        function (v) { st.segment = v; update(); }, { "data-field": "segment" }), null, true)];
      case "contact_delete":
        return [el("p", { "class": "hint au-wide", text: "Deletes the contact. The run ends here." })];
    }
    return [el("p", { "class": "hint au-wide", text: "A step of a type this editor does not know; it is kept as it is." })];
  }

  function stepName(st) {
    return "Step " + (indexOf(st.key) + 1) + ": " + (LABELS[st.type] || st.type) + " (" + st.key + ")";
  }

  function nextSelects(st) {
    var outs = outcomesOf(st);
    if (outs.length === 0) return null;
    var targets = [["", "End of the run"]];
    steps.forEach(function (o) {
      if (o.key !== st.key && o.type !== "trigger") targets.push([o.key, stepName(o)]);
    });
    return el("div", { "class": "au-next" }, outs.map(function (o) {
      var k = st.key + "\n" + o[0];
      return labelled(o[1], select(fid(st, "next-" + o[0]), targets, conns[k] || "", function (v) {
        if (v) conns[k] = v;
        else delete conns[k];
        render(fid(st, "next-" + o[0]));
      }, { "data-outcome": o[0], "class": "au-outcome-" + o[0] }));
    }));
  }

  function incoming(st) {
    if (st.type === "trigger") return "Starts a run when the event is sent for a contact.";
    var from = [];
    steps.forEach(function (o, i) {
      outcomesOf(o).forEach(function (out) {
        if (conns[o.key + "\n" + out[0]] === st.key) from.push("step " + (i + 1) + " (" + OUTCOME_NAMES[out[0]] + ")");
      });
    });
    return from.length ? "Comes from " + from.join(", ") + "." : "Nothing leads here yet: choose it as the next step of another.";
  }

  function box(st, i) {
    var title = fid(st, "title");
    var tools = null;
    if (st.type !== "trigger") {
      tools = el("div", { "class": "au-tools" }, [
        button("↑", function () { move(i, -1); }, { id: fid(st, "up"), "class": "secondary au-small",
          "aria-label": "Move step " + (i + 1) + " up", disabled: i <= 1 }),
        button("↓", function () { move(i, 1); }, { id: fid(st, "down"), "class": "secondary au-small",
          "aria-label": "Move step " + (i + 1) + " down", disabled: i === steps.length - 1 }),
        button("Delete", function () { remove(i); }, { id: fid(st, "delete"), "class": "danger au-small",
          "aria-label": "Delete step " + (i + 1) })
      ]);
    }
    var li = el("li", { "class": "au-step au-type-" + st.type, id: "au-step-" + st.key, "data-step": st.key,
      "data-type": st.type, "aria-labelledby": title }, [
      el("div", { "class": "au-head" }, [
        el("h3", { id: title }, [el("span", { "class": "au-num", text: String(i + 1) }), " " + (LABELS[st.type] || st.type)]),
        el("code", { "class": "au-keyname", text: st.key }),
        tools
      ]),
      el("p", { "class": "au-from", text: incoming(st) }),
      el("div", { "class": "au-fields" }, fieldsOf(st)),
      nextSelects(st)
    ]);
    if (st.key === root.dataset.errorStep) {
      li.classList.add("au-invalid");
      li.insertBefore(el("p", { "class": "error au-step-error", text: "The error above is about this step." }), li.children[1]);
    }
    return li;
  }

  // ---- Changes of the graph.

  function add(type) {
    var prev = steps[steps.length - 1];
    var st = blank(type);
    steps.push(st);
    // The usual chain: the last step's free "Then" leads to the new one.
    if (prev && outcomesOf(prev).some(function (o) { return o[0] === "default"; }) && !conns[prev.key + "\ndefault"]) {
      conns[prev.key + "\ndefault"] = st.key;
    }
    render(fid(st, "title"));
  }

  function move(i, by) {
    var j = i + by;
    if (j < 1 || j >= steps.length) return;
    var st = steps[i];
    steps[i] = steps[j];
    steps[j] = st;
    render(fid(st, by < 0 ? "up" : "down"));
  }

  // remove deletes a step; what led to it leads to where it went, when it
  // went one way only.
  function remove(i) {
    var st = steps[i];
    var outs = [];
    Object.keys(conns).forEach(function (k) { if (k.split("\n")[0] === st.key) outs.push(conns[k]); });
    var single = outs.length === 1 ? outs[0] : "";
    Object.keys(conns).forEach(function (k) {
      var from = k.split("\n")[0];
      if (from === st.key) delete conns[k];
      else if (conns[k] === st.key) {
        if (single && single !== from) conns[k] = single;
        else delete conns[k];
      }
    });
    steps.splice(i, 1);
    var near = steps[Math.min(i, steps.length - 1)];
    render(near ? fid(near, "title") : "au-add-type");
  }

  // ---- The page.

  var graph, ol, svg;
  var ready = false; // the graph as loaded is drawn: what changes now is unsaved
  var saveStatus = document.getElementById("au-save-status");

  function update() {
    sync();
    redraw();
    if (ready && saveStatus) saveStatus.textContent = "Unsaved changes";
  }

  function render(focusID) {
    ol.textContent = "";
    steps.forEach(function (st, i) { ol.append(box(st, i)); });
    update();
    if (focusID) {
      var f = document.getElementById(focusID);
      if (f) {
        if (f.tagName === "H3") f.setAttribute("tabindex", "-1");
        f.focus();
      }
    }
  }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      draw();
    });
  }

  // draw traces each connection in the left margin: from the outcome's
  // select out of its box, to the top of the box it leads to.
  function draw() {
    svg.textContent = "";
    var g = graph.getBoundingClientRect();
    var w = ol.getBoundingClientRect().left - g.left;
    var h = graph.scrollHeight;
    svg.setAttribute("width", String(Math.max(w, 1)));
    svg.setAttribute("height", String(h));
    svg.setAttribute("viewBox", "0 0 " + Math.max(w, 1) + " " + h);
    var lines = [];
    steps.forEach(function (st) {
      outcomesOf(st).forEach(function (o) {
        var to = conns[st.key + "\n" + o[0]];
        var from = document.getElementById(fid(st, "next-" + o[0]));
        var target = to && document.getElementById("au-step-" + to);
        if (!from || !target) return;
        var fr = from.getBoundingClientRect(), tr = target.getBoundingClientRect();
        lines.push({ type: o[0], y1: fr.top + fr.height / 2 - g.top, y2: tr.top + 18 - g.top });
      });
    });
    // Lanes: shorter lines nearer the boxes, none overlapping another in
    // its lane.
    lines.sort(function (a, b) { return Math.abs(a.y2 - a.y1) - Math.abs(b.y2 - b.y1); });
    var lanes = [];
    lines.forEach(function (l) {
      var lo = Math.min(l.y1, l.y2) - 4, hi = Math.max(l.y1, l.y2) + 4;
      var lane = 0;
      for (; ; lane++) {
        var used = lanes[lane] || (lanes[lane] = []);
        if (!used.some(function (u) { return lo < u[1] && u[0] < hi; })) {
          used.push([lo, hi]);
          break;
        }
      }
      var x = Math.max(3, w - 10 - lane * 7);
      var kind = l.type === "default" ? "then" : (l.type === "condition_met" || l.type === "event_received") ? "yes" : "no";
      var p = document.createElementNS(SVG, "path");
      p.setAttribute("d", "M" + w + " " + l.y1 + " H" + x + " V" + l.y2 + " H" + (w - 1));
      p.setAttribute("class", "au-line au-line-" + kind);
      svg.append(p);
      var head = document.createElementNS(SVG, "path");
      head.setAttribute("d", "M" + (w - 7) + " " + (l.y2 - 4) + " L" + w + " " + l.y2 + " L" + (w - 7) + " " + (l.y2 + 4) + " Z");
      head.setAttribute("class", "au-head-" + kind);
      svg.append(head);
    });
  }

  function fallback(why) {
    var status = document.createElement("p");
    status.className = "error";
    status.setAttribute("role", "status");
    status.textContent = why;
    jsonWrap.prepend(status);
  }

  var def;
  try {
    def = JSON.parse(field.value);
  } catch (e) {
    def = null;
  }
  if (!def || typeof def !== "object" || !Array.isArray(def.steps)) {
    fallback("The visual editor cannot read these steps: they are shown as JSON instead.");
    return;
  }
  def.steps.forEach(function (s) { steps.push(stepOf(obj(s))); });
  if (!steps.some(function (s) { return s.type === "trigger"; })) steps.unshift(blank("trigger"));
  // The trigger comes first.
  steps.sort(function (a, b) { return (b.type === "trigger") - (a.type === "trigger"); });
  (Array.isArray(def.connections) ? def.connections : []).forEach(function (c) {
    c = obj(c);
    var from = byKey(c.from);
    if (!from || !byKey(c.to)) return;
    var type = c.type || "default";
    // A wait leaves by "default" on the event, as by event_received.
    if (from.type === "wait_for_event" && type === "default") type = "event_received";
    conns[from.key + "\n" + type] = c.to;
  });

  var fields = el("datalist", { id: "au-fields" }, ["event.", "contact.email", "contact.first_name", "contact.last_name",
    "contact.unsubscribed"].map(function (f) { return el("option", { value: f }); }));
  svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "au-lines");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  ol = el("ol", { "class": "au-steps", id: "au-steps" });
  graph = el("div", { "class": "au-graph" }, [svg, ol]);
  var addType = select("au-add-type", ADDABLE.map(function (t) { return [t, LABELS[t]]; }), "delay", function () {});
  var addBar = el("div", { "class": "au-add" }, [
    labelled("New step", addType),
    button("Add step", function () { add(addType.value); }, { id: "au-add" })
  ]);
  var legend = el("p", { "class": "hint au-legend" }, [
    "Lines show where each step leads: ", el("span", { "class": "au-key-then", text: "then" }), ", ",
    el("span", { "class": "au-key-yes", text: "met or event arrived" }), ", ",
    el("span", { "class": "au-key-no", text: "not met or timed out" }), "."]);
  root.append(fields, legend, graph, addBar);
  root.hidden = false;
  jsonWrap.hidden = true;
  render();
  ready = true;
  if (window.ResizeObserver) new ResizeObserver(redraw).observe(graph);
  window.addEventListener("resize", redraw);
  form.addEventListener("submit", sync);
  var bad = root.dataset.errorStep && document.getElementById("au-step-" + root.dataset.errorStep);
  if (bad) bad.scrollIntoView({ block: "center" });
})();
