// The guidelines panel beside an item: g opens and closes it (Alt+g also while typing in a field); an opened panel
// takes the focus, so its text can be read and scrolled by keyboard. The panel stays open from item to item.
(function () {
  var panel = document.getElementById("guidelines-panel");
  if (!panel || panel.dataset.bound) return;
  panel.dataset.bound = "1";
  var KEY = "simia-guidelines-open";
  try {
    if (window.localStorage.getItem(KEY) === "1") panel.open = true;
  } catch (e) { /* storage off: the panel starts folded */ }
  panel.addEventListener("toggle", function () {
    try { window.localStorage.setItem(KEY, panel.open ? "1" : "0"); } catch (e) { /* storage off */ }
  });
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  document.addEventListener("keydown", function (event) {
    if (event.key !== "g" && event.key !== "G" && event.code !== "KeyG") return;
    if (event.ctrlKey || event.metaKey) return;
    if (!event.altKey && (typing(event.target) || event.key !== "g")) return;
    event.preventDefault();
    panel.open = !panel.open;
    if (panel.open) document.getElementById("guidelines-text").focus();
    else panel.querySelector("summary").focus();
  });
})();
