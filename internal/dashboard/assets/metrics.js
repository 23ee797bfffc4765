// Draws the Metrics chart from the JSON the server embedded in the page.
(function () {
  var el = document.getElementById("chart-data");
  var canvas = document.getElementById("chart");
  if (!el || !canvas || typeof Chart === "undefined") return;
  var data = JSON.parse(el.textContent);
  var colors = {sent: "#6366f1", delivered: "#16a34a", delivery_delayed: "#d97706", bounced: "#dc2626",
    complained: "#9333ea", opened: "#0891b2", clicked: "#0d9488"};
  data.datasets.forEach(function (d) {
    d.borderColor = colors[d.label] || "#64748b";
    d.backgroundColor = d.borderColor;
    d.tension = 0.25;
  });
  new Chart(canvas, {type: "line", data: data, options: {
    responsive: true, maintainAspectRatio: false, animation: false,
    interaction: {mode: "index", intersect: false},
    scales: {y: {beginAtZero: true, ticks: {precision: 0}}}
  }});
})();
