// Keyboard for the reviewer's desk, on top of pages that work without it: j/k follow the
// queue's next/previous links, 0-3 score the rubric row that holds the focus, n goes to
// that row's note, ? opens the list of keys. Keys typed into a field are left alone.
document.addEventListener("keydown", function (event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  var target = event.target;
  var typing = target.closest && target.closest("input, textarea, select, [contenteditable]");
  var row = target.closest && target.closest("form.rubric-row");
  if (typing && !(row && target.tagName === "SELECT")) return;
  var link;
  if (event.key === "j" && !row) link = document.querySelector("a[rel=next]");
  if (event.key === "k" && !row) link = document.querySelector("a[rel=prev]");
  if (link) { event.preventDefault(); window.location.href = link.href; return; }
  if (event.key === "?") {
    var keys = document.getElementById("shortcuts");
    if (keys) { event.preventDefault(); keys.open = !keys.open; }
    return;
  }
  if (!row) return;
  if ("0123".indexOf(event.key) >= 0 && event.key.length === 1) {
    var select = row.querySelector("select");
    if (select && select.value !== event.key) {
      event.preventDefault();
      select.value = event.key;
      select.dispatchEvent(new Event("change", { bubbles: true }));
    }
  } else if (event.key === "n") {
    var note = row.querySelector("textarea");
    if (note) { event.preventDefault(); note.focus(); }
  }
});

// Number each change of a rubric row before htmx sends it (capture phase: first), so the
// server keeps this page's latest choice even when two quick changes' answers cross.
var changes = 0;
document.addEventListener("change", function (event) {
  var row = event.target.closest && event.target.closest("form.rubric-row");
  var seq = row && row.querySelector("input[name$='-seq']");
  if (seq) { changes += 1; seq.value = String(Date.now() * 1000 + (changes % 1000)); }
}, true);
