(function () {
  "use strict";
  var root = document.getElementById("entries");
  var secs = {}, kids = {}, rows = {};
  Array.prototype.forEach.call(root.children, function (s) {
    var id = s.getAttribute("data-id"), p = s.getAttribute("data-parent");
    secs[id] = s;
    if (p) (kids[p] = kids[p] || []).push(id);
  });
  Array.prototype.forEach.call(document.querySelectorAll("#tree li[data-id]"), function (li) {
    rows[li.getAttribute("data-id")] = li;
  });
  // The newest branch below an entry: follow its last child down.
  function leafBelow(id) {
    var seen = {};
    while (kids[id] && !seen[id]) { seen[id] = true; id = kids[id][kids[id].length - 1]; }
    return id;
  }
  function pathTo(id) {
    var on = {};
    while (id && secs[id] && !on[id]) { on[id] = true; id = secs[id].getAttribute("data-parent"); }
    return on;
  }
  var current = null;
  function show(id, scroll) {
    if (!secs[id]) return;
    // An entry of the branch on show keeps that branch; another one shows
    // the newest branch through it.
    var keep = current !== null && !secs[id].hidden;
    var on = keep ? null : pathTo(leafBelow(id));
    Object.keys(secs).forEach(function (k) {
      if (on) secs[k].hidden = !on[k];
      secs[k].classList.toggle("target", scroll && k === id);
      if (rows[k]) { rows[k].classList.toggle("on", !secs[k].hidden); rows[k].classList.toggle("sel", k === id); }
    });
    current = id;
    var target = secs[id], fold = target.getAttribute("data-fold");
    if (fold && document.getElementById(fold)) {
      target = document.getElementById(fold);
      target.open = true;
    }
    if (scroll) target.scrollIntoView({ block: "start" });
  }
  function fromHash() {
    var h = location.hash;
    if (h.indexOf("#e-") !== 0) return null;
    try { return decodeURIComponent(h.slice(3)); } catch (e) { return null; }
  }
  document.getElementById("tree").addEventListener("click", function (ev) {
    var li = ev.target.closest ? ev.target.closest("li[data-id]") : null;
    if (!li) return;
    ev.preventDefault();
    var id = li.getAttribute("data-id");
    show(id, true);
    if (history.replaceState) history.replaceState(null, "", "#e-" + encodeURIComponent(id));
  });
  window.addEventListener("hashchange", function () {
    var id = fromHash();
    if (id !== null && id !== current) show(id, true);
  });
  document.getElementById("filter").addEventListener("input", function (ev) {
    var q = ev.target.value.toLowerCase();
    Object.keys(rows).forEach(function (k) {
      rows[k].hidden = q !== "" && rows[k].textContent.toLowerCase().indexOf(q) < 0;
    });
  });
  function setTools(open) {
    Array.prototype.forEach.call(document.querySelectorAll("details.tool"), function (d) { d.open = open; });
  }
  document.getElementById("open-tools").addEventListener("click", function () { setTools(true); });
  document.getElementById("close-tools").addEventListener("click", function () { setTools(false); });
  document.getElementById("toggle-thinking").addEventListener("click", function (ev) {
    var off = document.body.classList.toggle("no-thinking");
    ev.target.textContent = off ? "Show thinking" : "Hide thinking";
  });
  document.getElementById("show-minor").addEventListener("change", function (ev) {
    document.body.classList.toggle("all", ev.target.checked);
  });
  var start = fromHash();
  if (start !== null && secs[start]) show(start, true);
  else show(root.getAttribute("data-leaf"), false);
  document.documentElement.setAttribute("data-ready", "1");
})();
