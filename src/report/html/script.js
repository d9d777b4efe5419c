// align-check HTML report: filtering and sorting of the layer table, and the module tree's
// expand/collapse buttons. Everything else works without script. Reads the table's own
// cells (already escaped by the page), so no model string ever passes through script code.
(function () {
  "use strict";
  var table = document.getElementById("layer-table");
  if (!table) return;
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
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

  function wanted(r, text, o, s) {
    if (text && r.searchKey.indexOf(text) === -1) return false;
    if (o && r.ops.indexOf(o) === -1) return false;
    if (s === "fail") return r.className !== "ok";
    return !s || r.className === s;
  }

  function apply() {
    var text = q.value.trim().toLowerCase();
    var n = 0;
    rows.forEach(function (r) {
      var show = wanted(r, text, op.value, st.value);
      r.hidden = !show;
      if (show) n += 1;
    });
    shown.textContent = n === rows.length ? rows.length + " layers" : n + " of " + rows.length + " layers";
  }

  var timer = null;
  q.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(apply, 120);
  });
  op.addEventListener("change", apply);
  st.addEventListener("change", apply);

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
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        sort();
      }
    });
  });

  // A link to a row that the filter hides clears the filter first.
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.hidden) {
      q.value = "";
      op.value = "";
      st.value = "";
      apply();
      el.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", reveal);

  Array.prototype.forEach.call(document.querySelectorAll("a[data-module]"), function (a) {
    a.addEventListener("click", function () {
      q.value = a.getAttribute("data-module");
      op.value = "";
      st.value = "";
      apply();
    });
  });

  function setAll(open) {
    Array.prototype.forEach.call(document.querySelectorAll("#modules details"), function (d) {
      d.open = open;
    });
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", function () { setAll(true); });
  if (collapse) collapse.addEventListener("click", function () { setAll(false); });
})();
