// align-check HTML report: filtering and sorting of the layer table, the cap on how many rows
// it lays out at once, and the module tree's expand/collapse buttons. Everything else works
// without script. Reads the table's own cells (already escaped by the page), so no model
// string ever passes through script code.
(function () {
  "use strict";
  var table = document.getElementById("layer-table");
  if (!table) return;
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  // Laying out thousands of rows is what makes a large page slow to open, so only this many
  // are shown until the reader asks for all (the page hides the same ones before this runs).
  var limit = parseInt(table.getAttribute("data-limit"), 10) || Infinity;

  // The headings say which columns the search box and the op filter look at.
  function columns(attr) {
    return heads.map(function (th, i) { return th.hasAttribute(attr) ? i : -1; })
      .filter(function (i) { return i !== -1; });
  }
  var searched = columns("data-search");
  var opColumns = columns("data-op");
  rows.forEach(function (r) {
    var c = r.cells;
    r.searchKey = searched.map(function (i) { return c[i].textContent; }).join(" ").toLowerCase();
    r.ops = opColumns.map(function (i) { return c[i].textContent; });
  });
  var q = document.getElementById("q");
  var op = document.getElementById("op");
  var st = document.getElementById("st");
  var shown = document.getElementById("shown");
  var more = document.getElementById("more");

  function wanted(r, text, o, s) {
    if (text && r.searchKey.indexOf(text) === -1) return false;
    if (o && r.ops.indexOf(o) === -1) return false;
    if (s === "fail") return !r.classList.contains("ok");
    return !s || r.classList.contains(s);
  }

  function apply() {
    var text = q.value.trim().toLowerCase();
    var matching = 0;
    rows.forEach(function (r) {
      var show = wanted(r, text, op.value, st.value);
      if (show) matching += 1;
      r.hidden = !show || matching > limit;
    });
    var visible = Math.min(matching, limit);
    var what = matching === rows.length ? rows.length + " layers" : matching + " of " + rows.length + " layers";
    shown.textContent = visible === matching ? what : "first " + visible + " of " + what;
    more.hidden = visible === matching;
    more.textContent = "show all " + matching;
  }

  function reset() {
    q.value = "";
    op.value = "";
    st.value = "";
  }

  var timer = null;
  q.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(apply, 120);
  });
  op.addEventListener("change", apply);
  st.addEventListener("change", apply);
  more.addEventListener("click", function () {
    limit = Infinity;
    apply();
  });

  heads.forEach(function (th, col) {
    var kind = th.getAttribute("data-sort");
    if (!kind) return;
    th.tabIndex = 0;
    function sort() {
      var current = th.getAttribute("aria-sort");
      var dir;
      if (current) {
        dir = current === "ascending" ? -1 : 1;
      } else {
        dir = th.getAttribute("data-first") === "desc" ? -1 : 1;
      }
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var keyed = rows.map(function (r, i) {
        var td = r.cells[col];
        var key = kind === "num" ? parseFloat(td.getAttribute("data-v")) : td.textContent.toLowerCase();
        return { row: r, key: key, at: i };
      });
      keyed.sort(function (a, b) {
        if (a.key === b.key) return a.at - b.at;
        return a.key > b.key ? dir : -dir;
      });
      var frag = document.createDocumentFragment();
      rows = keyed.map(function (k) {
        frag.appendChild(k.row);
        return k.row;
      });
      body.appendChild(frag);
      apply();
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        sort();
      }
    });
  });

  // A link to a row that is hidden (filtered out, or past the cap) shows every row first.
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.hidden && el.parentNode === body) {
      reset();
      limit = Infinity;
      apply();
      el.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", reveal);

  Array.prototype.forEach.call(document.querySelectorAll("a[data-module]"), function (a) {
    a.addEventListener("click", function () {
      reset();
      q.value = a.getAttribute("data-module");
      apply();
    });
  });

  function setAll(open) {
    Array.prototype.forEach.call(document.querySelectorAll("#modules details"), function (d) {
      d.open = open;
    });
  }
  document.getElementById("expand-all").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse-all").addEventListener("click", function () { setAll(false); });

  // From here on the script decides which rows show; the page's own cap steps aside.
  apply();
  table.classList.add("live");
  reveal();
})();
