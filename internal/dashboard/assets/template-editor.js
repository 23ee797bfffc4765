// The template editor's live preview. As the draft or a sample value
// changes, it posts the form to the editor's render endpoint (JSON: the
// subject and text rendered, or why the draft does not render) and into the
// sandboxed preview frame (the HTML, served under the email preview's
// Content-Security-Policy: no scripts, nothing loaded from the network).
// It keeps a sample value field for every variable the draft uses, and
// shows the body fields of the chosen format. Without it, the Preview
// button posts the form into the frame.
(function () {
  "use strict";
  var form = document.getElementById("template-form");
  if (!form) return;
  var frame = document.getElementById("preview-frame");
  var subject = document.getElementById("preview-subject");
  var text = document.getElementById("preview-text");
  var error = document.getElementById("preview-error");
  var generated = document.getElementById("preview-text-generated");
  var samples = form.querySelector("#samples .samples");
  var sources = ["subject", "html", "text", "components"].map(function (n) { return form.elements[n]; });
  // A reference ({{{NAME}}} or {{NAME}}) or a block ({{#each NAME}},
  // {{#if NAME}}); the sample is of the variable, the path's first name.
  var nameRe = /\{\{\{?\s*(?:#(?:each|if)\s+)?([A-Za-z_][A-Za-z0-9_]*)/g;
  var timer = null;
  var seq = 0;

  function usedNames() {
    var names = [];
    sources.forEach(function (el) {
      if (!el) return;
      var m;
      nameRe.lastIndex = 0;
      while ((m = nameRe.exec(el.value)) !== null) {
        if (m[1] !== "this" && m[1] !== "else" && names.indexOf(m[1]) < 0) names.push(m[1]);
      }
    });
    return names;
  }

  // syncSamples adds a field for each variable used and removes the empty
  // fields of variables no longer used.
  function syncSamples() {
    var names = usedNames();
    samples.querySelectorAll("input[data-sample]").forEach(function (input) {
      if (names.indexOf(input.dataset.sample) < 0 && input.value === "") input.closest("label").remove();
    });
    names.forEach(function (n) {
      if (samples.querySelector('input[data-sample="' + n + '"]')) return;
      var label = document.createElement("label");
      label.htmlFor = "sample-" + n;
      var code = document.createElement("code");
      code.textContent = n;
      var input = document.createElement("input");
      input.id = "sample-" + n;
      input.name = "sample." + n;
      input.dataset.sample = n;
      input.autocomplete = "off";
      label.append(code, " ", input);
      samples.append(label);
    });
  }

  function showFormat() {
    var chosen = form.querySelector('input[name="format"]:checked');
    var format = chosen ? chosen.value : "html";
    form.querySelectorAll("[data-format]").forEach(function (el) {
      el.hidden = el.dataset.format !== format;
    });
  }

  function show(d) {
    subject.textContent = d.subject || (d.error ? "" : "none: the send gives one");
    text.textContent = d.text || "";
    generated.hidden = !d.text_generated;
    form.querySelectorAll("[aria-invalid][data-live]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("data-live");
    });
    if (d.error) {
      error.textContent = d.error;
      error.hidden = false;
      var field = d.field && form.elements[d.field];
      if (field && field.setAttribute) {
        field.setAttribute("aria-invalid", "true");
        field.setAttribute("data-live", "");
      }
    } else {
      error.textContent = "";
      error.hidden = true;
    }
  }

  function update() {
    syncSamples();
    var mine = ++seq;
    var body = new URLSearchParams(new FormData(form));
    fetch(form.dataset.render, { method: "POST", body: body, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (d) { if (mine === seq) show(d); })
      .catch(function () {
        if (mine === seq) show({ error: "The preview is unavailable. Is the server reachable? Reload the page to try again." });
      });
    // The HTML goes into the frame: post the same form there.
    var action = form.getAttribute("action");
    form.setAttribute("action", form.dataset.preview);
    form.setAttribute("target", frame.name);
    form.submit();
    form.setAttribute("action", action);
    form.removeAttribute("target");
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(update, 250);
  }

  form.addEventListener("input", later);
  form.addEventListener("change", function (e) {
    if (e.target.name === "format") showFormat();
    later();
  });
  showFormat();
  update();
})();
