// An import's page: while the import runs, poll its progress every two
// seconds and update the counts in place; reload the page once it is over,
// to show its final state and failed rows.
(function () {
  "use strict";
  var box = document.getElementById("import-progress");
  if (!box || !box.dataset.poll) return;
  var fields = ["total", "processed", "created", "updated", "skipped", "failed"];
  function poll() {
    fetch(box.dataset.poll, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (p) {
        if (p.final) {
          window.location.reload();
          return;
        }
        document.getElementById("import-status").textContent = p.status;
        document.getElementById("import-bar").value = p.percent;
        document.getElementById("import-percent").textContent = p.percent;
        fields.forEach(function (f) { document.getElementById("count-" + f).textContent = p[f]; });
        setTimeout(poll, 2000);
      })
      .catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 1000);
})();
