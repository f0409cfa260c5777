// llmbench dashboard: keeps the page current from /events (Server-Sent Events). The server
// sends numbers as text and every table and chart as HTML it built and escaped itself; this
// script only puts them in place (textContent, innerHTML), and when the run has ended swaps
// the page for the run's report.html (/report). No other request, no library, no network.
(function () {
  "use strict";
  var es = null;
  var finished = false;

  function apply(u) {
    var k, els, i;
    var text = u.text || {};
    for (k in text) {
      els = document.querySelectorAll('[data-k="' + k + '"]');
      for (i = 0; i < els.length; i++) {
        if (els[i].textContent !== text[k]) { els[i].textContent = text[k]; }
      }
    }
    var parts = u.html || {};
    for (k in parts) {
      els = document.querySelectorAll('[data-h="' + k + '"]');
      for (i = 0; i < els.length; i++) { els[i].innerHTML = parts[k]; }
    }
    document.body.setAttribute("data-version", String(u.version));
  }

  function showFinal() {
    if (finished) { return; }
    finished = true;
    if (es) { es.close(); }
    fetch("/report", {cache: "no-store"}).then(function (r) {
      if (!r.ok) { return null; }
      return r.text();
    }).then(function (text) {
      if (text === null) {               // no report (no run folder): the last state stays
        document.body.setAttribute("data-final", "1");
        return;
      }
      var doc = new DOMParser().parseFromString(text, "text/html");
      document.title = doc.title;
      var old = document.head.querySelectorAll("style");
      for (var i = 0; i < old.length; i++) { old[i].parentNode.removeChild(old[i]); }
      var styles = doc.head.querySelectorAll("style");
      for (var j = 0; j < styles.length; j++) {
        document.head.appendChild(document.importNode(styles[j], true));
      }
      var body = document.importNode(doc.body, true);
      body.setAttribute("data-final", "1");
      document.body.parentNode.replaceChild(body, document.body);
    });
  }

  function connect() {
    es = new EventSource("/events");
    es.addEventListener("update", function (ev) {
      var u = JSON.parse(ev.data);
      apply(u);
      if (u.final) { showFinal(); }
    });
  }

  // the stream opens once the page has loaded: an event stream opened while it loads can hold
  // its loading open for as long as the run lasts (a headless screenshot never taken)
  function start() {
    if (document.body.getAttribute("data-final") !== "1") { connect(); }
  }
  if (document.readyState === "complete") { start(); }
  else { window.addEventListener("load", start); }
})();
