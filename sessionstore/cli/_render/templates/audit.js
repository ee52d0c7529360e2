// Switches between views: an overlay and a generation per pane, and a second pane for
// comparing side by side. The left pane holds every view (all but one hidden); the right
// pane shows a copy of one. Message texts are kept once, in a template, and copied into a
// view's cards when it is first shown; so is a loop's section (and its timeline entry)
// that several views show the same: written in full in one view, it is copied into the
// others' references. Nothing is
// ever parsed as HTML here: views and sections are cloned nodes and texts are assigned
// with textContent.
(function () {
  "use strict";
  var texts = {};
  document.querySelectorAll("template.texts").forEach(function (template) {
    template.content.querySelectorAll("pre[data-key]").forEach(function (pre) {
      texts[pre.getAttribute("data-key")] = pre.textContent;
    });
  });

  // A copy of the section written in full, as it first looks: no ids (those are the view
  // the page opens on), nothing targeted, opened or closed as the page writes it.
  function section(number) {
    var source = library.querySelector('section.loop[data-section="' + number + '"]');
    if (!source) {
      return null;
    }
    var copy = source.cloneNode(true);
    copy.removeAttribute("id");
    copy.classList.remove("target");
    copy.querySelectorAll("[id]").forEach(function (node) {
      node.removeAttribute("id");
    });
    copy.querySelectorAll(".target").forEach(function (node) {
      node.classList.remove("target");
    });
    copy.querySelectorAll("details.expand").forEach(function (details) {
      details.open = false;
    });
    copy.querySelector("details.turns").open = copy.classList.contains("status-in-scope");
    return copy;
  }

  // A copy of the timeline entry written in full, folded (or not) as the reference is.
  function item(ref) {
    var source = library.querySelector('li.timeline-loop[data-item="' + ref.getAttribute("data-ref") + '"]');
    if (!source) {
      return null;
    }
    var copy = source.cloneNode(true);
    copy.classList.remove("target");
    copy.classList.toggle("older", ref.classList.contains("older"));
    copy.hidden = ref.hidden;
    return copy;
  }

  function fill(view) {
    view.querySelectorAll("li.timeline-ref").forEach(function (ref) {
      var copy = item(ref);
      if (copy) {
        ref.parentNode.replaceChild(copy, ref);
      }
    });
    view.querySelectorAll("section.loop-ref").forEach(function (ref) {
      var copy = section(ref.getAttribute("data-ref"));
      if (copy) {
        ref.parentNode.replaceChild(copy, ref);
      }
    });
    view.querySelectorAll("pre[data-text]").forEach(function (pre) {
      var key = pre.getAttribute("data-text");
      if (Object.prototype.hasOwnProperty.call(texts, key)) {
        pre.textContent = texts[key];
      }
      pre.removeAttribute("data-text");
      pre.setAttribute("data-key", key);
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

  function visibleView() {
    var found = null;
    library.querySelectorAll(".view").forEach(function (view) {
      if (!view.hidden) {
        found = view;
      }
    });
    return found;
  }

  // Open a loop (and a turn of it) of the view on show, and scroll to it: the targets of the
  // links #loop-N and #loop-N-turn-M, which work in any view, whatever ids it has.
  function go(loopId, turn) {
    var view = visibleView();
    if (!view) {
      return;
    }
    var section = null;
    view.querySelectorAll(".loop").forEach(function (candidate) {
      if (candidate.getAttribute("data-loop-section") === loopId) {
        section = candidate;
      }
    });
    if (!section) {
      return;
    }
    var older = section.closest("details.older-loops");
    if (older) {
      older.open = true;
    }
    section.querySelector("details.turns").open = true;
    var target = section;
    if (turn !== null) {
      section.querySelectorAll(".turn-index").forEach(function (cell) {
        if (cell.getAttribute("data-turn") === turn) {
          target = cell;
        }
      });
    }
    document.querySelectorAll(".target").forEach(function (old) {
      old.classList.remove("target");
    });
    target.classList.add("target");
    target.scrollIntoView({ block: "start" });
  }

  function followHash() {
    var match = /^#loop-(\d+)(?:-turn-(\d+))?$/.exec(window.location.hash);
    if (match) {
      go(match[1], match[2] === undefined ? null : match[2]);
    }
  }

  window.addEventListener("hashchange", followHash);

  document.addEventListener("click", function (event) {
    // A link to a loop or a turn: follow it even when the hash is already that one.
    var link = event.target.closest("a[href^='#loop-']");
    if (link) {
      event.preventDefault();
      if (window.location.hash === link.getAttribute("href")) {
        followHash();
      } else {
        window.location.hash = link.getAttribute("href");
      }
      return;
    }
    var button = event.target.closest(".show-older");
    if (button) {
      button.closest(".view").querySelectorAll(".timeline-loop.older").forEach(function (item) {
        item.hidden = false;
      });
      button.hidden = true;
      return;
    }
    // A loop of the timeline scrolls to its turns, in the view it belongs to.
    var item = event.target.closest(".timeline-loop");
    if (item) {
      window.location.hash = "#loop-" + item.getAttribute("data-loop");
      followHash();
    }
  });

  // Search: the messages of the view on show whose text holds every word typed, each a
  // link to its turn. Texts are searched in the template's copy, never as HTML.
  var search = document.querySelector("input.search");
  var results = document.querySelector(".search-results");
  var hits = results.querySelector(".search-hits");
  var count = results.querySelector(".search-count");
  var MAX_HITS = 100;
  var pending = null;

  function runSearch() {
    var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    while (hits.firstChild) {
      hits.removeChild(hits.firstChild);
    }
    var view = visibleView();
    if (!words.length || !view) {
      results.hidden = true;
      return;
    }
    var found = 0;
    var seen = {};
    view.querySelectorAll(".turn-grid pre[data-key]").forEach(function (pre) {
      var key = pre.getAttribute("data-key");
      var text = texts[key] || "";
      var lower = text.toLowerCase();
      var section = pre.closest(".loop");
      var cell = pre.closest("[data-turn]");
      if (!section || !cell) {
        return;
      }
      var place = section.getAttribute("data-loop-section") + "-" + cell.getAttribute("data-turn");
      if (seen[place + key] || !words.every(function (w) { return lower.indexOf(w) >= 0; })) {
        return;
      }
      seen[place + key] = true;
      found += 1;
      if (found > MAX_HITS) {
        return;
      }
      var at = Math.max(lower.indexOf(words[0]) - 40, 0);
      var entry = document.createElement("li");
      var link = document.createElement("a");
      link.href = "#loop-" + place.replace("-", "-turn-");
      var label = pre.parentNode.querySelector(".card-label");
      link.textContent = "loop " + section.getAttribute("data-loop-section") + " · turn " +
        cell.getAttribute("data-turn") + " · " + (label ? label.textContent : key);
      var snippet = document.createElement("span");
      snippet.className = "snippet";
      snippet.textContent = " " + (at ? "…" : "") + text.slice(at, at + 120).replace(/\s+/g, " ") + "…";
      entry.appendChild(link);
      entry.appendChild(snippet);
      hits.appendChild(entry);
    });
    count.textContent = found === 0 ? "No message of this view holds these words." :
      found + " message(s) match" + (found > MAX_HITS ? "; the first " + MAX_HITS + " are listed." : ".");
    results.hidden = false;
  }

  search.addEventListener("input", function () {
    window.clearTimeout(pending);
    pending = window.setTimeout(runSearch, 200);
  });

  show(0);
  followHash();
})();
