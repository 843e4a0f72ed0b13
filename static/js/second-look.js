// The reviewer queue: s opens its first item (the trajectory page then takes c confirm, o overturn, e fix).
(function () {
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    if (event.key !== "s") return;
    var start = document.getElementById("start-second-look");
    if (!start) return;
    event.preventDefault();
    window.location.href = start.href;
  });
})();
