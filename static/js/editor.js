// The trajectory editor: add, insert, remove and reorder messages and tool calls. The page posts its blocks in
// document order, so moving a block moves the message. New blocks get keys no existing field uses.
// It also keeps the annotator's work: a draft saved on the server a moment after each change, a question before
// leaving with unsaved changes, and the hold on the item renewed while the page is open (let go when it is left,
// unless for the review page of the stream). Keys: Alt+Down / Alt+Up move to the next / previous message,
// Alt+End / Alt+Home to the last / first, Ctrl+Enter (or Cmd+Enter) saves and accepts.
(function () {
  var list = document.getElementById("editor-messages");
  var form = document.getElementById("editor");
  if (!list || !form) return;
  var serial = 0;
  function fresh(prefix) {
    serial += 1;
    return prefix + Date.now().toString(36) + serial;
  }
  function fromTemplate(id, replacements) {
    // Clone the <template>'s nodes and put the new keys into their attributes (names, values, data-key).
    var node = document.importNode(document.getElementById(id).content, true).firstElementChild;
    [node].concat(Array.prototype.slice.call(node.querySelectorAll("*"))).forEach(function (el) {
      Array.prototype.slice.call(el.attributes).forEach(function (attr) {
        var value = attr.value;
        Object.keys(replacements).forEach(function (token) { value = value.split(token).join(replacements[token]); });
        if (value !== attr.value) el.setAttribute(attr.name, value);
      });
    });
    if (window.htmx) window.htmx.process(node);
    return node;
  }
  function showRole(block) {
    var select = block.querySelector("[data-role-select]");
    block.dataset.role = select ? select.value : "";
  }
  function newMessage() {
    var key = fresh("n");
    return fromTemplate("message-template", { "__key__": key });
  }
  list.querySelectorAll(".edit-msg").forEach(showRole);

  // -- the draft, and leaving with unsaved changes
  var status = document.getElementById("draft-status");
  var dirty = form.hasAttribute("data-restored");
  var keepHold = false;
  var timer = null;
  function csrfToken() {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }
  function saveDraft() {
    timer = null;
    fetch(form.dataset.draftUrl, {
      method: "POST", body: new FormData(form), headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin",
      keepalive: true
    })
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        if (!status) return;
        if (!answer.saved) { status.textContent = answer.error; return; }
        // The server's text for the moment (simia_web.core.dates), as every page shows dates.
        var when = document.createElement("time");
        when.dateTime = answer.at;
        when.textContent = answer.shown;
        status.replaceChildren("Draft saved ", when);
      })
      .catch(function () { if (status) status.textContent = "Draft not saved (offline?)"; });
  }
  function changed() {
    dirty = true;
    if (timer) window.clearTimeout(timer);
    timer = window.setTimeout(saveDraft, 800);
  }
  form.addEventListener("input", changed);
  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-role-select]")) showRole(event.target.closest(".edit-msg"));
    if (form.contains(event.target)) changed();
  });
  // Every form of the page leads back to the editor or to the decision: nothing to ask, and the hold stays.
  document.addEventListener("submit", function () { dirty = false; keepHold = true; });
  document.addEventListener("click", function (event) {
    if (event.target.closest("a[data-keeps-hold]")) keepHold = true;
  });
  window.addEventListener("beforeunload", function (event) {
    if (!dirty) return;
    if (timer) saveDraft();
    event.preventDefault();
    event.returnValue = "";
  });

  // -- the hold on the item
  var renewUrl = form.dataset.renewUrl;
  function renew() {
    var body = new FormData();
    body.append("action", "renew");
    fetch(renewUrl, { method: "POST", body: body, headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin" })
      .then(function (response) { return response.json(); })
      .then(function (state) {
        if (!state.held && status) status.textContent = state.holder + " is reviewing this item now: saving will be refused.";
      })
      .catch(function () {});
  }
  renew();
  window.setInterval(renew, Math.max(5, Number(form.dataset.renewSeconds) / 3) * 1000);
  window.addEventListener("pagehide", function () {
    if (keepHold) return;
    var body = new FormData();
    body.append("action", "release");
    body.append("csrfmiddlewaretoken", csrfToken());
    navigator.sendBeacon(renewUrl, body);
  });

  // -- keys
  function mainField(block) {
    // A message's text, or for a tool-call turn without text its first call's arguments.
    var text = block.querySelector("textarea[name^=content-]");
    var args = block.querySelector(".call textarea");
    return args && text && !text.value.trim() ? args : text;
  }
  function moveTo(step) {
    // step: +1 / -1 from the message being edited, or Infinity / -Infinity to the last / first.
    var blocks = Array.prototype.slice.call(list.querySelectorAll(".edit-msg"));
    var current = blocks.indexOf(document.activeElement && document.activeElement.closest(".edit-msg"));
    var next = blocks[Math.max(0, Math.min(blocks.length - 1, (current < 0 ? 0 : current) + step))];
    var field = next && mainField(next);
    if (field) {
      field.focus();
      field.setSelectionRange(field.value.length, field.value.length);  // typing goes on from the end
      field.scrollIntoView({ block: "center" });
    }
  }
  var MOVES = { ArrowDown: 1, ArrowUp: -1, End: Infinity, Home: -Infinity };
  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      var save = document.getElementById("save-fix");
      if (save && !save.disabled) form.requestSubmit(save);
    } else if (event.altKey && event.key in MOVES) {
      moveTo(MOVES[event.key]);
    } else {
      return;
    }
    event.preventDefault();
  });
  var first = list.querySelector(".edit-msg");
  if (first && mainField(first)) mainField(first).focus();
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[type=button]");
    if (!button) return;
    var block = button.closest(".edit-msg");
    if (button.matches("[data-add-message]")) {
      var added = newMessage();
      list.appendChild(added);
      showRole(added);
      added.querySelector("textarea").focus();
    } else if (button.matches("[data-insert]")) {
      var inserted = newMessage();
      block.after(inserted);
      showRole(inserted);
      inserted.querySelector("textarea").focus();
    } else if (button.matches("[data-remove]")) {
      block.remove();
    } else if (button.matches("[data-move]")) {
      if (button.dataset.move === "-1" && block.previousElementSibling) {
        block.previousElementSibling.before(block);
      } else if (button.dataset.move === "1" && block.nextElementSibling) {
        block.nextElementSibling.after(block);
      }
      button.focus();
    } else if (button.matches("[data-add-call]")) {
      var call = fromTemplate("call-template", { "__key__": block.dataset.key, "__call__": fresh("c") });
      block.querySelector(".calls").appendChild(call);
      call.querySelector("input[type=text]").focus();
    } else if (button.matches("[data-remove-call]")) {
      button.closest(".call").remove();
    } else {
      return;
    }
    changed();
  });
})();
