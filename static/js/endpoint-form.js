// The LLM endpoint form: fields that are not used are hidden. While the profile follows the environment, its base
// URL, model and key come from there; the key is typed in or named as a variable, not both.
(function () {
  var form = document.getElementById("endpoint-form");
  if (!form) return;
  function show(name, visible) {
    var field = document.getElementById("field-" + name);
    if (field) field.hidden = !visible;
  }
  function update() {
    var follows = form.elements.follows_environment && form.elements.follows_environment.checked;
    var source = form.querySelector("input[name=key_source]:checked");
    var stored = source && source.value === "stored";
    show("base_url", !follows);
    show("model", !follows);
    show("key_source", !follows);
    show("api_key", !follows && stored);
    show("api_key_env", !follows && !stored);
  }
  form.addEventListener("change", update);
  update();
})();
