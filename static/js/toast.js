// The decision notice with its Undo button fades after a while (the decision stays undoable from its history).
(function () {
  document.querySelectorAll("[data-toast]").forEach(function (toast) {
    window.setTimeout(function () { toast.classList.add("gone"); }, Number(toast.dataset.timeout) || 10000);
  });
})();
