// Review queue: whole-row click, j/k to move, Enter to open, x to select, s to start reviewing, / to search,
// u to undo the decision (or bulk decision) its notice offers, select-all, and the bulk bar's count of selected rows.
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.queue tr.row"));
  var current = -1;
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function mark(index) {
    if (!rows.length) return;
    if (current >= 0) rows[current].classList.remove("current");
    current = Math.max(0, Math.min(rows.length - 1, index));
    rows[current].classList.add("current");
    rows[current].focus({ preventScroll: true });
    rows[current].scrollIntoView({ block: "nearest" });
  }
  function countSelected() {
    var n = document.querySelectorAll("input[name=ids]:checked").length;
    document.querySelectorAll("[data-selected-count]").forEach(function (el) { el.textContent = n; });
  }
  rows.forEach(function (row, index) {
    row.addEventListener("click", function (event) {
      if (event.target.closest("a, input, button, label")) return;
      if (window.getSelection && String(window.getSelection())) return;  // selecting text, not opening
      mark(index);
      window.location.href = row.dataset.href;
    });
  });
  var all = document.querySelector("[data-select-all]");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input[name=ids]").forEach(function (box) { box.checked = all.checked; });
      countSelected();
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.name === "ids") countSelected();
  });
  document.addEventListener("keydown", function (event) {
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
    switch (event.key) {
      case "j": mark(current + 1); break;
      case "k": mark(current - 1); break;
      case "Enter":
        if (current < 0) return;
        window.location.href = rows[current].dataset.href;
        break;
      case "x": {
        if (current < 0) return;
        var box = rows[current].querySelector("input[name=ids]");
        if (box) { box.checked = !box.checked; countSelected(); }
        break;
      }
      case "s": {
        var start = document.getElementById("start-stream");
        if (start) start.requestSubmit();
        break;
      }
      case "u": {
        var undo = document.getElementById("undo-btn");
        if (undo) undo.form.requestSubmit();
        break;
      }
      case "/": {
        var search = document.querySelector("#queue-filters input[name=q]");
        if (search) search.focus();
        break;
      }
      default:
        return;
    }
    event.preventDefault();
  });
  countSelected();
})();
