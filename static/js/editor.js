// The trajectory editor: add, insert, remove and reorder messages and tool calls. The page posts its blocks in
// document order, so moving a block moves the message. New blocks get keys no existing field uses.
(function () {
  var list = document.getElementById("editor-messages");
  if (!list) return;
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
  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-role-select]")) showRole(event.target.closest(".edit-msg"));
  });
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
    }
  });
})();
