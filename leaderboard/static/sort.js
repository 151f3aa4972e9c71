// Client-side sorting for tables with class "sortable": click a header to sort by that
// column (ascending first, then toggles). Cells give their sort key in data-value; headers
// say data-type="number" or "text". Equal keys keep the server's rank order (stable sort on
// the row's original position). No dependencies.
(function () {
  "use strict";

  function key(row, index, type) {
    var cell = row.cells[index];
    var raw = cell ? (cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent) : "";
    if (type === "number") {
      var x = parseFloat(raw);
      return isNaN(x) ? -Infinity : x;
    }
    return raw.trim();
  }

  function compare(a, b, type) {
    if (type === "number") return a < b ? -1 : a > b ? 1 : 0;
    return a.localeCompare(b, undefined, { sensitivity: "base", numeric: true });
  }

  function sortBy(table, th) {
    var headers = Array.prototype.slice.call(th.parentNode.children);
    var index = headers.indexOf(th);
    var type = th.getAttribute("data-type") || "text";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    var sign = dir === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row) {
      return { row: row, key: key(row, index, type), pos: Number(row.getAttribute("data-pos")) };
    });
    rows.sort(function (a, b) { return sign * compare(a.key, b.key, type) || a.pos - b.pos; });
    rows.forEach(function (r) { body.appendChild(r.row); });
    headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    table.setAttribute("data-sorted-by", th.getAttribute("data-key") || String(index));
    table.setAttribute("data-sort-dir", dir);
  }

  function init(table) {
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row, i) {
      row.setAttribute("data-pos", String(i));
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () { sortBy(table, th); });
    });
    table.setAttribute("data-sort-ready", "1");
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), init);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
