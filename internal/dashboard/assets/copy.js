// Copy buttons: a click copies the button's data-copy value to the
// clipboard and says so on the button for a moment. Loaded by the layout;
// a page that loads it again does not copy twice.
(function () {
  if (window.posthasteCopy) return;
  window.posthasteCopy = true;
  document.addEventListener("click", function (e) {
    var b = e.target.closest("button.copy");
    if (!b || !navigator.clipboard) return;
    navigator.clipboard.writeText(b.dataset.copy).then(function () {
      var t = b.textContent;
      b.textContent = "Copied";
      setTimeout(function () { b.textContent = t; }, 1200);
    }, function () {
      b.textContent = "Copy failed: select the text instead";
    });
  });
})();
