// Switches between views: an overlay and a generation per pane, and a second pane for
// comparing side by side. The left pane holds every view (all but one hidden); the right
// pane shows a copy of one. Message texts are kept once, in a template, and copied into a
// view's cards when it is first shown. Nothing is ever parsed as HTML here: views are
// cloned nodes and texts are assigned with textContent.
(function () {
  "use strict";
  var texts = {};
  document.querySelectorAll("template.texts").forEach(function (template) {
    template.content.querySelectorAll("pre[data-key]").forEach(function (pre) {
      texts[pre.getAttribute("data-key")] = pre.textContent;
    });
  });

  function fill(view) {
    view.querySelectorAll("pre[data-text]").forEach(function (pre) {
      var key = pre.getAttribute("data-text");
      if (Object.prototype.hasOwnProperty.call(texts, key)) {
        pre.textContent = texts[key];
      }
      pre.removeAttribute("data-text");
    });
  }

  var panes = document.querySelectorAll(".pane");
  var controls = document.querySelectorAll(".pane-controls");
  var library = panes[0];
  var compare = document.querySelector(".compare-toggle");

  function chosenView(pane) {
    var box = controls[pane];
    var overlay = box.querySelector(".overlay-select").value;
    var generations = box.querySelectorAll(".generation-control");
    var chosen = null;
    generations.forEach(function (control) {
      var active = control.getAttribute("data-overlay") === overlay;
      control.hidden = !active;
      if (active) {
        chosen = control.querySelector(".generation-select").value;
      }
    });
    return chosen;
  }

  function show(pane) {
    var chosen = chosenView(pane);
    var views = library.querySelectorAll(".view");
    if (pane === 0) {
      views.forEach(function (view) {
        view.hidden = view.getAttribute("data-view") !== chosen;
        if (!view.hidden) {
          fill(view);
        }
      });
      return;
    }
    var target = panes[1];
    while (target.firstChild) {
      target.removeChild(target.firstChild);
    }
    views.forEach(function (view) {
      if (view.getAttribute("data-view") === chosen) {
        fill(view);
        var copy = view.cloneNode(true);
        copy.hidden = false;
        target.appendChild(copy);
      }
    });
  }

  controls.forEach(function (box, pane) {
    box.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () {
        show(pane);
      });
    });
  });

  compare.addEventListener("change", function () {
    var on = compare.checked;
    controls[1].hidden = !on;
    panes[1].hidden = !on;
    document.querySelector(".panes").classList.toggle("compare", on);
    if (on) {
      show(1);
    }
  });

  // A loop of the timeline scrolls to its turns, in the view it belongs to.
  document.addEventListener("click", function (event) {
    var item = event.target.closest(".timeline-loop");
    if (!item) {
      return;
    }
    var view = item.closest(".view");
    var loopId = item.getAttribute("data-loop");
    view.querySelectorAll(".loop").forEach(function (section) {
      if (section.getAttribute("data-loop-section") === loopId) {
        section.querySelector("details.turns").open = true;
        section.scrollIntoView({ behavior: "smooth", block: "start" });
      }
    });
  });

  show(0);
})();
