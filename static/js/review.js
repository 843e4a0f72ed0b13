// Trajectory page: keyboard (a accept, r reject, e editor, u undo, j/k next/previous, ? help) and, in the
// review stream, keeping the item held while the page is open and letting it go when the page is left.
(function () {
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function go(attr) {
    var nav = document.getElementById("review-nav");
    var url = nav && nav.dataset[attr];
    if (url) window.location.href = url;
  }
  function submit(id) {
    var form = document.getElementById(id);
    if (form) form.requestSubmit();
    return Boolean(form);
  }
  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  var bar = document.getElementById("stream-bar");
  if (bar) {
    var url = bar.dataset.renewUrl;
    var leaving = false;
    var renew = function () {
      var body = new FormData();
      body.append("action", "renew");
      fetch(url, { method: "POST", body: body, headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (state) { if (!state.held && !leaving) window.location.reload(); })
        .catch(function () {});
    };
    renew();
    window.setInterval(renew, Math.max(5, Number(bar.dataset.renewSeconds) / 3) * 1000);
    window.addEventListener("pagehide", function () {
      leaving = true;
      var body = new FormData();
      body.append("action", "release");
      body.append("csrfmiddlewaretoken", csrfToken());
      navigator.sendBeacon(url, body);
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && typing(event.target)) {
      event.target.blur();
      return;
    }
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
    var help = document.getElementById("help");
    var accept = document.getElementById("accept-btn");
    switch (event.key) {
      case "a":
        if (accept && !accept.disabled) submit("decide-accept");
        break;
      case "r": {
        var reason = document.getElementById("reject-reason");
        if (reason && !reason.disabled) reason.focus();
        break;
      }
      case "e": {
        var edit = document.getElementById("edit-link");
        if (edit) window.location.href = edit.href;
        break;
      }
      case "u": {
        var undo = document.getElementById("undo-btn");
        if (undo) undo.form.requestSubmit();
        break;
      }
      case "j":
        if (!submit("stream-next")) go("next");
        break;
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
