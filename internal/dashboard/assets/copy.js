// Copy buttons: copy the button's data-copy value to the clipboard.
document.addEventListener("click", function (e) {
  var b = e.target.closest("button.copy");
  if (!b || !navigator.clipboard) return;
  navigator.clipboard.writeText(b.dataset.copy).then(function () {
    var t = b.textContent;
    b.textContent = "Copied";
    setTimeout(function () { b.textContent = t; }, 1200);
  });
});
