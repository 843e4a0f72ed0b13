// A "select all" checkbox, <input type="checkbox" data-select-all="ids">, ticks every input named "ids".
document.addEventListener("change", function (event) {
  var name = event.target.dataset && event.target.dataset.selectAll;
  if (!name) return;
  document.querySelectorAll('input[name="' + name + '"]').forEach(function (box) {
    box.checked = event.target.checked;
  });
});
