// Job pages and the dashboard redraw a job's progress every two seconds (htmx). The redrawn parts are not live
// regions (a screen reader would read them out at every redraw); instead, when a job's status changes, one polite
// live region says so once: "Job 12 succeeded".
(function () {
  var region = document.createElement("div");
  region.className = "visually-hidden";
  region.setAttribute("role", "status");
  region.id = "status-announcer";
  document.body.appendChild(region);
  var known = {};
  function scan(announce) {
    document.querySelectorAll("[data-announce]").forEach(function (el) {
      var text = el.dataset.announce;
      if (announce && el.id in known && known[el.id] !== text) region.textContent = text;
      known[el.id] = text;
    });
  }
  scan(false);
  document.addEventListener("htmx:afterSettle", function () { scan(true); });
})();
