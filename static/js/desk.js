// Keyboard for the reviewer's desk, on top of pages that work without it (real radios that
// autosave through htmx, a Save button under <noscript>, a plain submit form).
//
// The rubric has a current row, marked and focused; on load it is the first row still to
// score, so the first digit scores it with no Tab. 0-3 score the current row and move on;
// the overall recommendation comes after the last row and takes 1-4. j/k and the arrows
// move between rows while the focus is in the rubric; outside it (Esc leaves) j/k follow
// the queue's next/previous links. n opens the note form on the current row. Ctrl+Enter
// (Cmd+Enter) submits the review once every save in flight has answered; the server then
// opens the next hand-in to score. Keys typed into a field are left alone.
(function () {
  var current = null; // the id of the current row (a row form, or the recommendation)
  var pending = 0; // htmx requests in flight
  var idle = [];
  var changes = 0;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll(".desk-rubric [data-desk-row]"));
  }
  function currentRow() { return current ? document.getElementById(current) : null; }
  function mark(row, focus) {
    rows().forEach(function (r) { r.classList.toggle("current", r === row); });
    current = row ? row.id : null;
    if (row && focus) {
      row.focus({ preventScroll: true });
      row.scrollIntoView({ block: "nearest" });
    }
  }
  function move(step) {
    var list = rows();
    if (!list.length) return;
    var at = list.indexOf(currentRow());
    var to = at < 0 ? 0 : Math.min(Math.max(at + step, 0), list.length - 1);
    mark(list[to], true);
  }
  function inRubric() {
    var active = document.activeElement;
    return !!(active && active.closest && active.closest(".desk-rubric"));
  }
  function showAnchor(form, text) {
    var out = form && form.querySelector("[data-anchor-text]");
    if (out) out.textContent = text;
  }
  function checkedAnchor(form) {
    var radio = form.querySelector("input[type=radio]:checked");
    return radio ? radio.getAttribute("data-anchor") || "" : "not scored";
  }

  // A 3 on a row whose linked checks did not all pass needs a reason: instead of a save
  // the server would refuse, open the override field and wait for the reason (Enter or
  // leaving the field saves the 3 with it).
  function needsReason(radio) {
    var form = radio.form;
    if (!form || radio.value !== "3" || form.getAttribute("data-checks-ok") !== "0") return false;
    var reason = form.querySelector(".override input");
    return !!reason && !reason.value.trim();
  }
  function askReason(form) {
    var more = form.querySelector("details.row-more");
    if (more) more.open = true;
    showAnchor(form, "A 3 here needs an override reason (not every linked check passed): type it, then Enter.");
    var reason = form.querySelector(".override input");
    if (reason) reason.focus();
  }

  // Choose level `index` of a row; true when the row is done (saved or saving).
  function choose(row, index) {
    var radio = row.querySelectorAll("input[type=radio]")[index];
    if (!radio) return false;
    if (radio.checked) return true;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    return !needsReason(radio);
  }

  function whenIdle(fn) {
    if (pending <= 0) fn(); else idle.push(fn);
  }
  function submitReview() {
    if (!document.getElementById("submit-form")) return false;
    // A field being typed in saves on change: let it go first, then wait for the answers.
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    setTimeout(function () {
      whenIdle(function () {
        // Looked up now: each save's answer replaces the submit bar (its counts).
        var form = document.getElementById("submit-form");
        if (form) form.requestSubmit();
      });
    }, 30);
    return true;
  }

  function openNote(anchor, label) {
    var form = document.getElementById("pin-form");
    if (!form) return false;
    var select = form.querySelector("select[name=anchor]");
    if (select && anchor) {
      var found = Array.prototype.some.call(select.options, function (o) { return o.value === anchor; });
      if (!found) select.add(new Option(label || anchor, anchor));
      select.value = anchor;
    }
    var body = form.querySelector("textarea");
    if (body && anchor && anchor.indexOf("row:") === 0) {
      var note = document.getElementById("row-note-" + anchor.slice(4));
      body.value = note ? note.getAttribute("data-body") || "" : "";
    }
    form.classList.add("opened");
    form.scrollIntoView({ block: "nearest" });
    if (body) body.focus();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      // In the note form it saves the note; anywhere else it submits the review.
      var noteForm = target.closest && target.closest("#pin-form");
      if (noteForm) { event.preventDefault(); noteForm.requestSubmit(); return; }
      if (submitReview()) event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var typing = target.closest && target.closest(
      "input:not([type=radio]), textarea, select, [contenteditable]"
    );
    if (event.key === "Escape") {
      if (inRubric() && document.activeElement.blur) document.activeElement.blur();
      return;
    }
    if (typing) return;
    var row = currentRow();
    if (event.key === "?") {
      var keys = document.getElementById("shortcuts");
      if (keys) { event.preventDefault(); keys.open = !keys.open; }
      return;
    }
    if (row && event.key.length === 1 && (row.getAttribute("data-keys") || "").indexOf(event.key) >= 0) {
      event.preventDefault();
      var keys4 = row.getAttribute("data-keys");
      if (choose(row, keys4.indexOf(event.key))) {
        var list = rows();
        var next = list[list.indexOf(row) + 1];
        if (next) mark(next, true); else mark(row, true);
      }
      return;
    }
    var inside = inRubric() && rows().length;
    if (inside && (event.key === "j" || event.key === "ArrowDown")) { event.preventDefault(); move(1); return; }
    if (inside && (event.key === "k" || event.key === "ArrowUp")) { event.preventDefault(); move(-1); return; }
    if (inside && event.key === "n" && row && row.id.indexOf("row-") === 0) {
      event.preventDefault();
      openNote("row:" + row.id.slice(4));
      return;
    }
    var link;
    if (event.key === "j") link = document.querySelector("a[rel=next]");
    if (event.key === "k") link = document.querySelector("a[rel=prev]");
    if (link) { event.preventDefault(); window.location.href = link.href; }
  });

  // Clicking a row (or into it) makes it the current one.
  document.addEventListener("focusin", function (event) {
    var row = event.target.closest && event.target.closest(".desk-rubric [data-desk-row]");
    if (row && row.id !== current) mark(row, false);
  });

  // "pin a note" (in the evidence) and a row's note link open the one note form in place,
  // its textarea focused; without JS their ?pin=…#pin-form address does the same.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.pin-link, a.note-link");
    if (!link) return;
    var anchor = link.getAttribute("data-pin") || new URL(link.href).searchParams.get("pin");
    if (anchor && openNote(anchor)) event.preventDefault();
  });

  // Before htmx sends a change: number it (so the server keeps this page's latest choice
  // even when two quick changes' answers cross), and hold a 3 that still needs a reason.
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("form.rubric-row");
    if (!form) return;
    if (event.target.type === "radio") {
      showAnchor(form, checkedAnchor(form));
      if (needsReason(event.target)) { event.stopPropagation(); askReason(form); return; }
    }
    var seq = form.querySelector("input[name$='-seq']");
    if (seq) { changes += 1; seq.value = String(Date.now() * 1000 + (changes % 1000)); }
  }, true);

  // Hovering a level shows what it means; leaving shows the chosen one again.
  document.addEventListener("mouseover", function (event) {
    var label = event.target.closest && event.target.closest("fieldset.levels .level");
    var radio = label && label.querySelector("input[data-anchor]");
    if (radio) showAnchor(radio.form, radio.value + ": " + radio.getAttribute("data-anchor"));
  });
  document.addEventListener("mouseout", function (event) {
    var set = event.target.closest && event.target.closest("fieldset.levels");
    if (set && !set.contains(event.relatedTarget)) {
      var form = set.closest("form");
      if (form) showAnchor(form, checkedAnchor(form));
    }
  });

  document.addEventListener("htmx:beforeRequest", function () { pending += 1; });
  document.addEventListener("htmx:afterRequest", function () {
    pending = Math.max(pending - 1, 0);
    if (pending === 0) { var run = idle; idle = []; run.forEach(function (fn) { fn(); }); }
  });
  // A swapped-in row that is the current one stays marked (and focused if the focus
  // went with the element it replaced).
  document.addEventListener("htmx:load", function (event) {
    var el = event.detail && event.detail.elt;
    if (!el || !el.id || el.id !== current) return;
    el.classList.add("current");
    if (!document.activeElement || document.activeElement === document.body) {
      el.focus({ preventScroll: true });
    }
  });

  function start() {
    var first = document.querySelector(".desk-rubric [data-desk-row][data-scored='0']");
    if (first) mark(first, false);
    // Focus without scrolling: the keys act on the rubric at once, the page stays put.
    if (first && !location.hash) first.focus({ preventScroll: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
