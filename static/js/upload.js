// Seed upload: a file dropped on the zone becomes the form's file, and its name is shown.
(function () {
  var zone = document.querySelector("[data-dropzone]");
  if (!zone) return;
  var input = zone.querySelector("[data-file-input]");
  var label = zone.querySelector("[data-drop-label]");
  function show() {
    if (input.files.length) label.textContent = input.files[0].name + " (" + Math.ceil(input.files[0].size / 1024) + " KiB)";
  }
  ["dragenter", "dragover"].forEach(function (name) {
    zone.addEventListener(name, function (event) { event.preventDefault(); zone.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (name) {
    zone.addEventListener(name, function () { zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (event) {
    event.preventDefault();
    if (event.dataTransfer.files.length) {
      input.files = event.dataTransfer.files;
      show();
    }
  });
  input.addEventListener("change", show);
})();
