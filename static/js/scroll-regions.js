// A table wider than the screen scrolls inside its own box (.table-scroll). While it does, the box is a named
// region that takes the keyboard focus, so that it can be scrolled with the arrow keys; otherwise it is no tab stop.
(function () {
  function update() {
    document.querySelectorAll(".table-scroll").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", box.dataset.label || "Table");
      } else {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    });
  }
  update();
  window.addEventListener("resize", update);
  document.addEventListener("htmx:afterSettle", update);
})();
