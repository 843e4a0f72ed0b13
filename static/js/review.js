// Keyboard shortcuts on the trajectory page: a accept, r reject, e edit, j/k next/previous, ? help.
(function () {
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function go(attr) {
    var nav = document.getElementById("review-nav");
    var url = nav && nav.dataset[attr];
    if (url) window.location.href = url;
  }
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && typing(event.target)) {
      event.target.blur();
      return;
    }
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
    var help = document.getElementById("help");
    switch (event.key) {
      case "a": {
        var accept = document.getElementById("decide-accept");
        if (accept) accept.requestSubmit();
        break;
      }
      case "r": {
        var reason = document.getElementById("reject-reason");
        if (reason) reason.focus();
        break;
      }
      case "e": {
        var edit = document.getElementById("edit");
        if (edit) {
          edit.open = true;
          var first = edit.querySelector("textarea");
          if (first) first.focus();
        }
        break;
      }
      case "j": go("next"); break;
      case "k": go("previous"); break;
      case "?":
        if (help) { help.open ? help.close() : help.showModal(); }
        break;
      default:
        return;
    }
    event.preventDefault();
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-help-toggle]")) document.getElementById("help").showModal();
  });
})();
