// Trajectory page: keyboard (a accept, r reject, e editor, c/o confirm/overturn a decision awaiting review, u undo,
// j/k next/previous, ? help) and, in the
// review stream, keeping the item held while the page is open and letting it go when the page is left (not when
// the editor opens: the hold follows the work there).
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

  // A refused decision (a stale version, someone else's hold, a missing reason) comes back as the decision card
  // with the reason, under a 4xx status that htmx would otherwise not show.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status;
    if (status === 400 || status === 409) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  // A refused decision replaces the card the focus was in: the focus goes to the reason it was refused.
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!event.detail.target || event.detail.target.id !== "decision") return;
    var card = document.getElementById("decision");
    var reason = card && card.querySelector("[role=alert]");
    if (!reason) return;
    reason.setAttribute("tabindex", "-1");
    reason.focus();
  });
  function showWhyOff() {
    var reason = document.getElementById("disabled-reason");
    if (!reason) return;
    reason.setAttribute("role", "alert");
    reason.classList.remove("flash");
    void reason.offsetWidth;  // restart the animation
    reason.classList.add("flash");
  }

  var keepHold = false;
  function toEditor() {
    var edit = document.getElementById("edit-link");
    if (!edit) return false;
    keepHold = true;
    window.location.href = edit.href;
    return true;
  }
  document.addEventListener("click", function (event) {
    if (event.target.closest("#edit-link")) keepHold = true;
  });

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
      if (keepHold) return;
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
        else showWhyOff();
        break;
      case "r": {
        var reason = document.getElementById("reject-reason");
        if (reason && !reason.disabled) reason.focus();
        else showWhyOff();
        break;
      }
      case "e":
        if (!toEditor()) showWhyOff();
        break;
      case "c": {
        // The reviewer stage: confirm the decision awaiting review.
        var confirm = document.getElementById("confirm-btn");
        if (confirm && !confirm.disabled) submit("confirm-form");
        else if (confirm) showWhyOff();
        else return;
        break;
      }
      case "o": {
        var why = document.getElementById("overturn-reason");
        if (why && !why.disabled) why.focus();
        else if (why) showWhyOff();
        else return;
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
      case "s": {
        // Every state change on the page opens, or closes when all are open.
        var states = document.querySelectorAll("details.state");
        var open = Array.prototype.every.call(states, function (d) { return d.open; });
        states.forEach(function (d) { d.open = !open; });
        break;
      }
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
