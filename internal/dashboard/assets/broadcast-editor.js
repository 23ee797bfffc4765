// The broadcast editor (templates/broadcast.html). On a draft it saves the
// form on its own: about 800 ms after the last change, when a field loses
// focus, and when the page is left; the server answers JSON (the time
// saved, or the field error to show) and the preview frame reloads with
// the saved copy. It keeps the Preview text field and the block editor's
// own "Preview text" setting in step, shows the body fields of the chosen
// format, and switches the preview between desktop and mobile widths.
// On a broadcast that was sent it polls the progress endpoint and updates
// the status and counts until nothing can change any more, then reloads
// the page once to show the recipients as they ended. Without it, the Save
// button saves, and reloading the page shows new counts.
(function () {
  "use strict";
  var frame = document.getElementById("preview-frame");

  // Desktop and mobile previews: one frame, two widths.
  var tabs = document.querySelector(".bc-tabs");
  if (tabs && frame) {
    tabs.hidden = false;
    tabs.querySelectorAll("[role=tab]").forEach(function (tab) {
      tab.addEventListener("click", function () {
        var mobile = tab.id === "tab-mobile";
        frame.classList.toggle("mobile", mobile);
        tabs.querySelectorAll("[role=tab]").forEach(function (t) {
          t.setAttribute("aria-selected", String(t === tab));
        });
      });
    });
  }

  var report = document.getElementById("broadcast-report");
  if (report && report.dataset.settled !== "true") poll(report);
  var form = document.getElementById("broadcast-form");
  if (!form) return;

  var status = document.getElementById("save-status");
  var subject = document.getElementById("preview-subject");
  var previewText = form.elements.preview_text;
  var timer = null;
  var dirty = false;
  var saving = null; // the save under way
  var again = false; // a change came while saving

  // say shows text in the save status; `field` quotes become <code>, as
  // the server's prose does.
  function say(text, failed) {
    status.textContent = "";
    text.split("`").forEach(function (part, i, parts) {
      if (i % 2 === 1 && i < parts.length - 1) {
        var code = document.createElement("code");
        code.textContent = part;
        status.append(code);
      } else {
        status.append((i % 2 === 1 ? "`" : "") + part);
      }
    });
    status.classList.toggle("failed", !!failed);
  }

  function markInvalid(field) {
    form.querySelectorAll("[aria-invalid][data-live]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("data-live");
    });
    var el = field && form.elements[field];
    if (el && el.setAttribute) {
      el.setAttribute("aria-invalid", "true");
      el.setAttribute("data-live", "");
    }
  }

  function body() {
    var data = new URLSearchParams(new FormData(form));
    data.delete("mode");
    return data;
  }

  function save(leaving) {
    clearTimeout(timer);
    timer = null;
    if (!dirty) return;
    if (saving && !leaving) {
      again = true;
      return;
    }
    dirty = false;
    say("Saving…");
    var data = body().toString();
    // keepalive lets the save finish if the page goes away meanwhile; it
    // is limited to 64 KiB of body.
    var req = fetch(form.getAttribute("action"), {
      method: "POST", body: data, credentials: "same-origin", keepalive: data.length < 60000,
      headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" }
    });
    if (leaving) return;
    saving = req.then(function (r) {
      var ct = r.headers.get("Content-Type") || "";
      if (ct.indexOf("application/json") < 0) {
        var e = new Error("HTTP " + r.status);
        e.signedOut = r.status === 403 || r.redirected;
        throw e;
      }
      return r.json();
    }).then(function (d) {
      if (d.error) {
        say(d.error, true);
        markInvalid(d.field);
        return;
      }
      markInvalid("");
      var at = new Date(d.saved_at);
      say("Saved " + at.toLocaleTimeString());
      if (subject && d.subject !== undefined) subject.textContent = d.subject;
      if (frame) frame.src = form.dataset.preview + "?v=" + Date.now();
    }).catch(function (e) {
      dirty = true;
      say(e.signedOut ?
        "Not saved: your session has ended. Sign in again in another tab, then change anything here to save." :
        "Not saved: the server cannot be reached. Your changes are kept on this page; they are saved with your next change.", true);
    }).then(function () {
      saving = null;
      if (again) {
        again = false;
        save();
      }
    });
  }

  function changed(e) {
    if (e && e.target && e.target.name === "scheduled_at") return; // not part of the draft
    dirty = true;
    say("Unsaved changes");
    clearTimeout(timer);
    timer = setTimeout(save, 800);
  }

  // The block editor's "Preview text" setting and the form's field are one.
  function blockPreviewText() {
    return form.querySelector('.be [aria-label="Preview text"]');
  }
  form.addEventListener("input", function (e) {
    var other = blockPreviewText();
    if (other && e.target === other && previewText.value !== other.value) {
      previewText.value = other.value;
    } else if (other && e.target === previewText && other.value !== previewText.value) {
      other.value = previewText.value;
      other.dispatchEvent(new Event("input", { bubbles: true }));
      return; // that event is the change
    }
    changed(e);
  });
  form.addEventListener("change", function (e) {
    if (e.target.name === "format") showFormat();
    if (e.target.name === "segment_id" || e.target.name === "topic_id" || e.target.name === "format") changed(e);
  });
  form.addEventListener("focusout", function () { if (dirty) save(); });
  form.addEventListener("submit", function () {
    // The buttons post the whole form, which the server saves first.
    clearTimeout(timer);
    dirty = false;
  });
  window.addEventListener("pagehide", function () { if (dirty) save(true); });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden" && dirty) save(true);
  });
  window.addEventListener("beforeunload", function () { if (dirty) save(true); });

  function showFormat() {
    var chosen = form.querySelector('input[name="format"]:checked');
    var format = chosen ? chosen.value : "components";
    form.querySelectorAll("[data-format]").forEach(function (el) {
      el.hidden = el.dataset.format !== format;
    });
  }
  showFormat();

  function poll(section) {
    var url = section.dataset.progress;
    var badge = document.getElementById("bc-status");
    var reason = document.getElementById("bc-status-reason");
    var classes = { sent: "ok", paused: "bad", scheduled: "wait", queued: "wait", sending: "wait" };
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.json();
        })
        .then(function (d) {
          if (badge) {
            badge.textContent = d.status;
            badge.className = "badge " + (classes[d.status] || "neutral");
          }
          if (reason) {
            reason.textContent = d.status_reason || "";
            reason.hidden = !d.status_reason;
          }
          Object.keys(d.counts).forEach(function (k) {
            var el = section.querySelector('[data-count="' + k + '"]');
            if (el) el.textContent = String(d.counts[k]);
          });
          var cancel = document.getElementById("cancel-form");
          if (cancel && (d.status === "sent" || d.status === "canceled")) cancel.hidden = true;
          // Settled: show the final page (recipients, sent time) once.
          if (d.settled) {
            var u = new URL(window.location.href);
            u.searchParams.delete("done");
            window.location.replace(u.toString());
          }
          else setTimeout(tick, 3000);
        })
        .catch(function () { setTimeout(tick, 10000); });
    }
    setTimeout(tick, 1000);
  }
})();
